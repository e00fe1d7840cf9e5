// The multi-device dot product of seed note 001 ("多 GPU 训练"): [1,2,3,4] and [5,6,7,8] split
// over two Vulkan devices (on one GPU, or on Lavapipe, VK:1 is a second logical device on it).
// Each device multiplies and sums its half; the two partial sums are copied across and added
// (an all-reduce); reading the result gathers it. Run it as
//   DEBUG=2 ./shard_dot
// to see the kernels on VK and VK:1 and the copies between them; it prints 70.
#include <iostream>

#include <vkgrad/vkgrad.hpp>

int main() {
  using namespace vkg;
  const std::vector<std::string> devices = {"VK", "VK:1"};
  Tensor a = Tensor({1.0f, 2.0f, 3.0f, 4.0f}).shard(devices, 0);
  Tensor b = Tensor({5.0f, 6.0f, 7.0f, 8.0f}).shard(devices, 0);
  std::cout << a.dot(b).item<float>() << "\n";
}
