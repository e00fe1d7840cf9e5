// Zero-initialized Vulkan structs with their sType set:
// structure<VkFooInfo>(VK_STRUCTURE_TYPE_...). (Brace-initializing only sType trips
// -Wmissing-field-initializers on g++ 12.)
#pragma once
#include <vulkan/vulkan.h>

namespace vkg::vk {

template <class T>
constexpr T structure(VkStructureType type) {
  T s{};
  s.sType = type;
  return s;
}

}  // namespace vkg::vk
