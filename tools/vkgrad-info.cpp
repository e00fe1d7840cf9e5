// vkgrad-info: prints the Vulkan devices vkgrad sees and the capabilities it read from each.
#include <cstdio>

int main() {
  std::puts("vkgrad-info: the Vulkan runtime is not built yet");
  return 0;
}
