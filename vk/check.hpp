// Turns a VkResult into the vkgrad exception it means. Every Vulkan call in vk/ goes through
// check(): device loss becomes vkg::DeviceLost, memory exhaustion vkg::OutOfMemory, the rest
// vkg::Error.
#pragma once
#include <vulkan/vulkan.h>

namespace vkg::vk {

// "VK_ERROR_DEVICE_LOST" and so on; "VkResult(<n>)" for codes this header version does not name.
const char* result_name(VkResult result);

// Throws the exception for a failed call; `what` names the call ("vkQueueSubmit2").
[[noreturn]] void throw_result(VkResult result, const char* what);

// Negative results are errors and throw; non-negative ones (VK_SUCCESS, VK_TIMEOUT, VK_INCOMPLETE,
// ...) are returned for the caller to act on.
inline VkResult check(VkResult result, const char* what) {
  if (result < 0) [[unlikely]]
    throw_result(result, what);
  return result;
}

}  // namespace vkg::vk
