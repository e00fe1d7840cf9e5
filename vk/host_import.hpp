// Host memory that this device's queues copy out of and into directly: a range of the host's
// address space imported with VK_EXT_external_memory_host as a VkBuffer of its own. The devices
// import the host bridge this way, once each (core/host_bridge.hpp): page-aligned memory vkgrad
// allocated itself, the kind the extension promises to take (not another driver's mapped
// memory), through which copies between devices pass (devices/vk_device_copies.cpp).
#pragma once
#include <vulkan/vulkan.h>

#include <cstddef>
#include <memory>

#include <vkgrad/vk/handle.hpp>

namespace vkg::vk {

class Device;

class HostImport {
 public:
  // The bytes [p, p + bytes) as a buffer of `device`, or nullptr where it cannot import them:
  // the extension is not enabled (Capabilities::features.external_memory_host), the driver allows
  // no host-coherent memory type for them, or it refuses the import. The import covers the range
  // widened to multiples of minImportedHostPointerAlignment (the driver requires them), so the
  // pages around the bytes must stay mapped as long as it lives; only [p, p + bytes) is copied.
  // The memory must stay allocated until this is destroyed, and this must not be destroyed while
  // a submitted command still uses it.
  static std::unique_ptr<HostImport> make(Device& device, const std::byte* p, size_t bytes);

  VkBuffer handle() const { return buffer_.get(); }
  VkDeviceSize offset() const { return offset_; }  // where p lies in the buffer
  VkDeviceSize size() const { return bytes_; }     // of the range asked for, from offset()

 private:
  HostImport() = default;
  UniqueMemory memory_;
  UniqueBuffer buffer_;  // after memory_: destroyed before it
  VkDeviceSize offset_ = 0, bytes_ = 0;
};

}  // namespace vkg::vk
