#include <vkgrad/vk/check.hpp>

#include <string>

#include <vkgrad/core/error.hpp>

namespace vkg::vk {

const char* result_name(VkResult result) {
  switch (result) {
#define VKG_RESULT(name) \
  case name:             \
    return #name;
    VKG_RESULT(VK_SUCCESS)
    VKG_RESULT(VK_NOT_READY)
    VKG_RESULT(VK_TIMEOUT)
    VKG_RESULT(VK_EVENT_SET)
    VKG_RESULT(VK_EVENT_RESET)
    VKG_RESULT(VK_INCOMPLETE)
    VKG_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
    VKG_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    VKG_RESULT(VK_ERROR_INITIALIZATION_FAILED)
    VKG_RESULT(VK_ERROR_DEVICE_LOST)
    VKG_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
    VKG_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
    VKG_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
    VKG_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
    VKG_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
    VKG_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
    VKG_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
    VKG_RESULT(VK_ERROR_FRAGMENTED_POOL)
    VKG_RESULT(VK_ERROR_UNKNOWN)
    VKG_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
    VKG_RESULT(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    VKG_RESULT(VK_ERROR_FRAGMENTATION)
    VKG_RESULT(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    VKG_RESULT(VK_PIPELINE_COMPILE_REQUIRED)
#undef VKG_RESULT
    default:
      break;
  }
  thread_local std::string unknown;
  unknown = "VkResult(" + std::to_string(static_cast<int>(result)) + ")";
  return unknown.c_str();
}

void throw_result(VkResult result, const char* what) {
  std::string msg = std::string(what) + " failed: " + result_name(result);
  switch (result) {
    case VK_ERROR_DEVICE_LOST:
      throw DeviceLost(msg + " (the driver lost the device: a crash, a reset or a hung kernel)");
    case VK_ERROR_OUT_OF_HOST_MEMORY:
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_OUT_OF_POOL_MEMORY:
    case VK_ERROR_FRAGMENTATION:
    case VK_ERROR_TOO_MANY_OBJECTS:
      throw OutOfMemory(msg);
    default:
      throw Error(msg);
  }
}

}  // namespace vkg::vk
