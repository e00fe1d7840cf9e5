// The dot product of seed note 000, traced end to end. Run it as
//   DEBUG=5 NOOPT=1 ./dot
// to see the kernel AST, the linear UOps, the GLSL and the profile line; it prints 11 from one
// fused multiply-and-sum kernel.
#include <iostream>

#include <vkgrad/vkgrad.hpp>

int main() {
  using namespace vkg;
  Tensor a = Tensor({1, 2}), b = Tensor({3, 4});
  std::cout << a.dot(b).item<int>() << "\n";
}
