// The Vulkan instance: the loader, the optional Khronos validation layer, and a debug messenger
// that records every validation message so that tests can fail on one.
#pragma once
#include <vulkan/vulkan.h>

#include <cstddef>
#include <string>
#include <vector>

namespace vkg::vk {

struct InstanceOptions {
  // Turn on VK_LAYER_KHRONOS_validation. It is an error to ask for it when it is not installed.
  bool validation = false;
  // Also turn on the layer's synchronization validation (slow; it sees copies and fills, not the
  // device-address accesses of kernels).
  bool sync_validation = false;

  // VKG_VALIDATION=1 turns validation on; VKG_VALIDATION=sync adds synchronization validation.
  static InstanceOptions from_env();
};

class Instance {
 public:
  Instance() : Instance(InstanceOptions::from_env()) {}
  explicit Instance(const InstanceOptions& options);
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  VkInstance get() const { return instance_; }
  bool validation() const { return options_.validation; }
  bool sync_validation() const { return options_.validation && options_.sync_validation; }
  std::vector<VkPhysicalDevice> physical_devices() const;

 private:
  InstanceOptions options_;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
};

// Validation messages (warnings and errors) received so far by any instance in this process.
// The count only grows; take_validation_messages() returns the texts kept since the last take.
std::size_t validation_message_count();
std::vector<std::string> take_validation_messages();

}  // namespace vkg::vk
