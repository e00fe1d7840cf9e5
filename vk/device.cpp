#include <vkgrad/vk/device.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>

#include <vkgrad/core/error.hpp>
#include <vkgrad/vk/check.hpp>
#include <vkgrad/vk/env.hpp>
#include <vkgrad/vk/feature_chain.hpp>
#include <vkgrad/vk/structure.hpp>

namespace vkg::vk {

namespace {

int type_rank(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return 4;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return 3;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return 1;
    default:
      return 0;
  }
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string device_list(std::span<const PhysicalDevice> devices) {
  std::string s;
  for (size_t i = 0; i < devices.size(); ++i)
    s += fmt::format("\n  {}: {} ({}){}", i, devices[i].caps.name,
                     device_type_name(devices[i].caps.type),
                     devices[i].caps.usable() ? "" : " [not usable]");
  return s.empty() ? "\n  (none)" : s;
}

// Whether buffers that copies read and write can be bound to imported host memory (the spec
// lets a device offer the extension and still refuse a handle type for some buffer usages).
bool host_buffers_importable(VkPhysicalDevice physical) {
  VkPhysicalDeviceExternalBufferInfo info = structure<VkPhysicalDeviceExternalBufferInfo>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_BUFFER_INFO);
  info.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  info.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
  VkExternalBufferProperties props =
      structure<VkExternalBufferProperties>(VK_STRUCTURE_TYPE_EXTERNAL_BUFFER_PROPERTIES);
  vkGetPhysicalDeviceExternalBufferProperties(physical, &info, &props);
  return props.externalMemoryProperties.externalMemoryFeatures &
         VK_EXTERNAL_MEMORY_FEATURE_IMPORTABLE_BIT;
}

}  // namespace

std::vector<PhysicalDevice> list_physical_devices(const Instance& instance) {
  std::vector<PhysicalDevice> out;
  for (VkPhysicalDevice p : instance.physical_devices()) out.push_back({p, read_capabilities(p)});
  return out;
}

std::size_t choose_physical_device(std::span<const PhysicalDevice> devices,
                                   std::string_view select) {
  if (select.empty()) {
    int best = -1;
    for (size_t i = 0; i < devices.size(); ++i)
      if (devices[i].caps.usable() &&
          (best < 0 || type_rank(devices[i].caps.type) > type_rank(devices[best].caps.type)))
        best = static_cast<int>(i);
    if (best < 0)
      throw Error(
          "no Vulkan device vkgrad can use (it needs Vulkan 1.3 with buffer device "
          "addresses, timeline semaphores and synchronization2); devices:" +
          device_list(devices));
    return static_cast<size_t>(best);
  }
  size_t index = 0;
  const char* end = select.data() + select.size();
  auto [ptr, ec] = std::from_chars(select.data(), end, index);
  const bool numeric = ec == std::errc() && ptr == end;
  std::optional<size_t> found;
  if (numeric) {
    if (index < devices.size()) found = index;
  } else {
    for (size_t i = 0; i < devices.size() && !found; ++i)
      if (lower(devices[i].caps.name).find(lower(select)) != std::string::npos) found = i;
  }
  if (!found)
    throw Error(fmt::format("VK_DEVICE={} matches no Vulkan device; devices:{}", select,
                            device_list(devices)));
  const Capabilities& c = devices[*found].caps;
  if (!c.usable()) {
    std::string why;
    for (const auto& m : c.missing) why += (why.empty() ? "" : ", ") + m;
    throw Error(fmt::format("VK_DEVICE={} picks {}, which vkgrad cannot use: it lacks {}", select,
                            c.name, why));
  }
  return *found;
}

std::size_t physical_device_for_index(std::span<const PhysicalDevice> devices,
                                      std::string_view select, std::size_t n) {
  std::vector<std::size_t> order{choose_physical_device(devices, select)};
  for (size_t i = 0; i < devices.size(); ++i)
    if (i != order[0] && devices[i].caps.usable()) order.push_back(i);
  if (order.size() == 1) order.push_back(order[0]);
  if (n >= order.size())
    throw Error(fmt::format("no Vulkan device VK:{}: this machine has VK:0 to VK:{}{}; devices:{}",
                            n, order.size() - 1,
                            devices.size() == 1 ? " (VK:1 is a second logical device on the one "
                                                  "physical device)"
                                                : "",
                            device_list(devices)));
  return order[n];
}

DeviceOptions DeviceOptions::from_env() {
  DeviceOptions o;
  o.select = env_string("VK_DEVICE");
  o.persistent_pipeline_cache = !env_flag("VKG_NO_PIPELINE_CACHE");
  o.transfer_queue = !env_flag("VKG_NO_TRANSFER_QUEUE");
  o.transfer_timeline_on_compute_queue = env_flag("VKG_TRANSFER_QUEUE_ON_COMPUTE");
  o.host_import = !env_flag("VKG_NO_HOST_IMPORT");
  return o;
}

Device::Device(const Instance& instance, const DeviceOptions& options) {
  std::vector<PhysicalDevice> devices = list_physical_devices(instance);
  const PhysicalDevice& chosen = devices[choose_physical_device(devices, options.select)];
  physical_ = chosen.handle;
  caps_ = chosen.caps;

  FeatureChain supported, enabled;
  supported.query(physical_);
  enabled.enable_used(supported);

  std::vector<const char*> extensions;
  // MoltenVK requires this extension to be enabled whenever it is offered.
  if (has_device_extension(physical_, "VK_KHR_portability_subset"))
    extensions.push_back("VK_KHR_portability_subset");
  // Kernels whose buffers fit the descriptor limits bind them by push descriptor (queue.hpp).
  if (caps_.features.push_descriptor) extensions.push_back(VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
  // Copies between devices import host memory as buffers that copies read and write.
  if (!options.host_import || !host_buffers_importable(physical_))
    caps_.features.external_memory_host = false;
  if (caps_.features.external_memory_host)
    extensions.push_back(VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue =
      structure<VkDeviceQueueCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
  queue.queueFamilyIndex = caps_.compute_family;
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;
  // A second queue on the copy engine, where there is one (queue_families.hpp).
  if (!options.transfer_queue) caps_.transfer_family = -1;
  std::vector<VkDeviceQueueCreateInfo> queues{queue};
  if (caps_.transfer_family >= 0) {
    queues.push_back(queue);
    queues.back().queueFamilyIndex = uint32_t(caps_.transfer_family);
  }

  VkDeviceCreateInfo info = structure<VkDeviceCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO);
  info.pNext = &enabled.core;
  info.queueCreateInfoCount = uint32_t(queues.size());
  info.pQueueCreateInfos = queues.data();
  info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  check(vkCreateDevice(physical_, &info, nullptr, &device_), "vkCreateDevice");

  if (caps_.features.push_descriptor)
    push_descriptor_set_ = reinterpret_cast<PFN_vkCmdPushDescriptorSetKHR>(
        vkGetDeviceProcAddr(device_, "vkCmdPushDescriptorSetKHR"));
  if (!push_descriptor_set_) caps_.limits.max_push_descriptors = 0;
  if (caps_.features.external_memory_host)
    host_pointer_properties_ = reinterpret_cast<PFN_vkGetMemoryHostPointerPropertiesEXT>(
        vkGetDeviceProcAddr(device_, "vkGetMemoryHostPointerPropertiesEXT"));
  if (!host_pointer_properties_) caps_.features.external_memory_host = false;
  host_signals_on_ = instance.sync_validation();
  try {
    VkQueue q;
    vkGetDeviceQueue(device_, caps_.compute_family, 0, &q);
    const bool shared = options.transfer_queue && caps_.transfer_family < 0 &&
                        options.transfer_timeline_on_compute_queue;
    timeline_ =
        std::make_unique<Timeline>(device_, q, shared ? &queue_mutex_ : nullptr, host_signals());
    if (shared) {
      caps_.transfer_family = int(caps_.compute_family);
      transfer_timeline_ = std::make_unique<Timeline>(device_, q, &queue_mutex_, host_signals());
    } else if (caps_.transfer_family >= 0) {
      VkQueue t;
      vkGetDeviceQueue(device_, uint32_t(caps_.transfer_family), 0, &t);
      transfer_timeline_ = std::make_unique<Timeline>(device_, t, nullptr, host_signals());
    }
    pipeline_cache_ =
        std::make_unique<PipelineCache>(device_, caps_, options.persistent_pipeline_cache);
  } catch (...) {
    transfer_timeline_.reset();
    timeline_.reset();
    vkDestroyDevice(device_, nullptr);
    throw;
  }
}

Device::~Device() {
  // Nothing may be destroyed while the GPU still uses it; a lost device has nothing to wait for.
  vkDeviceWaitIdle(device_);
  pipeline_cache_.reset();
  transfer_timeline_.reset();
  timeline_.reset();
  vkDestroyDevice(device_, nullptr);
}

}  // namespace vkg::vk
