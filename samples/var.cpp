// Variance takes two kernels: the mean is a reduce whose result is broadcast back over the
// reduced axis, so it is computed first (seed note 001). Run with DEBUG=2 to see both.
#include <iostream>
#include <vector>

#include <vkgrad/vkgrad.hpp>

int main() {
  using namespace vkg;
  Tensor x(std::vector<float>{1, 2, 3, 4}, {4});
  std::cout.precision(8);
  std::cout << x.var().item<float>() << "\n";
}
