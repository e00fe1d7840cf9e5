// The logical device: which physical device vkgrad runs on (VK_DEVICE, else the best by type), its
// capabilities record, the features enabled on it, its compute queue and timeline, and the
// pipeline cache its programs share.
#pragma once
#include <vulkan/vulkan.h>

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <vkgrad/vk/capabilities.hpp>
#include <vkgrad/vk/instance.hpp>
#include <vkgrad/vk/pipeline_cache.hpp>
#include <vkgrad/vk/timeline.hpp>

namespace vkg::vk {

struct PhysicalDevice {
  VkPhysicalDevice handle = VK_NULL_HANDLE;
  Capabilities caps;
};

// Every physical device the instance sees, in the loader's order (VK_DEVICE=<index> counts here).
std::vector<PhysicalDevice> list_physical_devices(const Instance& instance);

// Picks a device. `select` is "" (the best usable one: discrete > integrated > virtual > CPU, the
// first of equals), a decimal index into `devices`, or a case-insensitive substring of the name.
// Throws vkg::Error listing the devices when nothing matches or the match is not usable.
std::size_t choose_physical_device(std::span<const PhysicalDevice> devices,
                                   std::string_view select);

// The physical device behind vkgrad's n-th Vulkan device ("VK:n"): VK:0 is the one `select`
// picks (as choose_physical_device), then the other usable devices in the loader's order. With
// one usable physical device, VK:1 is that device again (a second logical device on it: what
// lets multi-device code run on one GPU or on Lavapipe). Throws vkg::Error saying which indices
// exist when `n` is past them.
std::size_t physical_device_for_index(std::span<const PhysicalDevice> devices,
                                      std::string_view select, std::size_t n);

struct DeviceOptions {
  std::string select;  // see choose_physical_device
  bool persistent_pipeline_cache = true;
  bool transfer_queue = true;  // use a copy-engine family where there is one
  // For tests: where there is no copy-engine family, copies still get a timeline of their own,
  // on the compute queue. The two-timeline path (copies that wait on kernels' points and kernels
  // that wait on copies' points) then runs on a device with one queue, as Lavapipe in CI.
  bool transfer_timeline_on_compute_queue = false;
  // Enable VK_EXT_external_memory_host where offered: copies between devices then read the other
  // device's host-visible bytes in place (vk/host_import.hpp). Off: they go through staging
  // buffers and a host memcpy, as on a device without it (what tests use to keep that path run).
  bool host_import = true;

  // select from VK_DEVICE; VKG_NO_PIPELINE_CACHE=1 keeps the pipeline cache off disk;
  // VKG_NO_TRANSFER_QUEUE=1 turns transfer_queue off; VKG_TRANSFER_QUEUE_ON_COMPUTE=1 turns
  // transfer_timeline_on_compute_queue on.
  static DeviceOptions from_env();
};

class Device {
 public:
  explicit Device(const Instance& instance) : Device(instance, DeviceOptions::from_env()) {}
  Device(const Instance& instance, const DeviceOptions& options);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  VkDevice get() const { return device_; }
  VkPhysicalDevice physical() const { return physical_; }
  const Capabilities& caps() const { return caps_; }
  uint32_t queue_family() const { return caps_.compute_family; }
  Timeline& timeline() { return *timeline_; }
  // The copy engine's queue and its timeline (queue_families.hpp), or null where the device has
  // none or VKG_NO_TRANSFER_QUEUE=1: copies then share the compute queue and its timeline.
  // With transfer_timeline_on_compute_queue, a timeline of its own on the compute queue.
  Timeline* transfer_timeline() { return transfer_timeline_.get(); }
  // Orders the host's signals of the device's bridge (a host-signalled Timeline made with it)
  // and its timelines' queries (vk/timeline.hpp), or null: only under synchronization
  // validation, the one place the stall it avoids happens (nothing else needs the extra locks
  // and host waits on the hot paths of every submit and wait).
  HostSignals* host_signals() { return host_signals_on_ ? &host_signals_ : nullptr; }
  uint32_t transfer_family() const { return uint32_t(caps_.transfer_family); }
  PipelineCache& pipeline_cache() { return *pipeline_cache_; }
  // vkCmdPushDescriptorSetKHR, or null where the device lacks VK_KHR_push_descriptor.
  PFN_vkCmdPushDescriptorSetKHR push_descriptor_set() const { return push_descriptor_set_; }
  // vkGetMemoryHostPointerPropertiesEXT, or null where VK_EXT_external_memory_host is not enabled
  // (caps().features.external_memory_host is then false).
  PFN_vkGetMemoryHostPointerPropertiesEXT host_pointer_properties() const {
    return host_pointer_properties_;
  }

 private:
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  Capabilities caps_;
  VkDevice device_ = VK_NULL_HANDLE;  // destroyed last, by ~Device
  std::mutex queue_mutex_;  // held by both timelines' submits where they share one VkQueue
  HostSignals host_signals_;
  bool host_signals_on_ = false;
  std::unique_ptr<Timeline> timeline_;
  std::unique_ptr<Timeline> transfer_timeline_;
  std::unique_ptr<PipelineCache> pipeline_cache_;
  PFN_vkCmdPushDescriptorSetKHR push_descriptor_set_ = nullptr;
  PFN_vkGetMemoryHostPointerPropertiesEXT host_pointer_properties_ = nullptr;
};

}  // namespace vkg::vk
