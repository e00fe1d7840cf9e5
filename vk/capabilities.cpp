#include <vkgrad/vk/capabilities.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include <vkgrad/vk/check.hpp>
#include <vkgrad/vk/env.hpp>
#include <vkgrad/vk/feature_chain.hpp>
#include <vkgrad/vk/queue_families.hpp>
#include <vkgrad/vk/structure.hpp>

namespace vkg::vk {

namespace {

std::vector<std::string> extension_names(VkPhysicalDevice physical) {
  uint32_t n = 0;
  check(vkEnumerateDeviceExtensionProperties(physical, nullptr, &n, nullptr),
        "vkEnumerateDeviceExtensionProperties");
  std::vector<VkExtensionProperties> exts(n);
  check(vkEnumerateDeviceExtensionProperties(physical, nullptr, &n, exts.data()),
        "vkEnumerateDeviceExtensionProperties");
  std::vector<std::string> names;
  for (uint32_t i = 0; i < n; ++i) names.emplace_back(exts[i].extensionName);
  return names;
}

bool contains(const std::vector<std::string>& names, const char* name) {
  for (const auto& n : names)
    if (n == name) return true;
  return false;
}

// The compute family vkgrad submits to: one with timestamps if any, and among those a compute-only
// family (the dedicated compute engine on discrete GPUs) over a graphics one.
int pick_compute_family(const std::vector<VkQueueFamilyProperties>& families) {
  int best = -1, best_score = -1;
  for (size_t i = 0; i < families.size(); ++i) {
    const auto& f = families[i];
    if (!(f.queueFlags & VK_QUEUE_COMPUTE_BIT) || f.queueCount == 0) continue;
    int score = (f.timestampValidBits > 0 ? 2 : 0) + (f.queueFlags & VK_QUEUE_GRAPHICS_BIT ? 0 : 1);
    if (score > best_score) best = static_cast<int>(i), best_score = score;
  }
  return best;
}

std::string version_string(uint32_t v) {
  return fmt::format("{}.{}.{}", VK_API_VERSION_MAJOR(v), VK_API_VERSION_MINOR(v),
                     VK_API_VERSION_PATCH(v));
}

std::string bytes_string(VkDeviceSize b) {
  if (b >= (1ull << 30)) return fmt::format("{:.2f} GiB", double(b) / double(1ull << 30));
  if (b >= (1ull << 20)) return fmt::format("{:.1f} MiB", double(b) / double(1ull << 20));
  if (b >= (1ull << 10)) return fmt::format("{:.1f} KiB", double(b) / double(1ull << 10));
  return fmt::format("{} B", b);
}

}  // namespace

bool has_device_extension(VkPhysicalDevice physical, const char* name) {
  return contains(extension_names(physical), name);
}

const char* device_type_name(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "CPU";
    default:
      return "other";
  }
}

Capabilities read_capabilities(VkPhysicalDevice physical) {
  Capabilities caps;

  VkPhysicalDeviceVulkan11Properties p11 = structure<VkPhysicalDeviceVulkan11Properties>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES);
  VkPhysicalDeviceVulkan12Properties p12 = structure<VkPhysicalDeviceVulkan12Properties>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES);
  VkPhysicalDeviceVulkan13Properties p13 = structure<VkPhysicalDeviceVulkan13Properties>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES);
  VkPhysicalDeviceProperties2 props =
      structure<VkPhysicalDeviceProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
  VkPhysicalDevicePushDescriptorPropertiesKHR push =
      structure<VkPhysicalDevicePushDescriptorPropertiesKHR>(
          VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PUSH_DESCRIPTOR_PROPERTIES_KHR);
  VkPhysicalDeviceExternalMemoryHostPropertiesEXT host_import =
      structure<VkPhysicalDeviceExternalMemoryHostPropertiesEXT>(
          VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT);
  const auto ext = extension_names(physical);
  props.pNext = &p11;
  p11.pNext = &p12;
  // Chained first so that it stays in the chain whatever the API version.
  if (contains(ext, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME)) {
    push.pNext = props.pNext;
    props.pNext = &push;
  }
  if (contains(ext, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME)) {
    host_import.pNext = props.pNext;
    props.pNext = &host_import;
  }
  // The 1.3 struct is only defined for 1.3 devices; older ones are reported unusable below.
  VkPhysicalDeviceProperties plain;
  vkGetPhysicalDeviceProperties(physical, &plain);
  if (plain.apiVersion >= VK_API_VERSION_1_3) p12.pNext = &p13;
  vkGetPhysicalDeviceProperties2(physical, &props);
  const VkPhysicalDeviceProperties& p = props.properties;

  caps.name = p.deviceName;
  caps.type = p.deviceType;
  caps.vendor_id = p.vendorID;
  caps.device_id = p.deviceID;
  caps.api_version = p.apiVersion;
  caps.driver_version = p.driverVersion;
  caps.driver_name = p12.driverName;
  caps.driver_info = p12.driverInfo;
  std::memcpy(caps.pipeline_cache_uuid.data(), p.pipelineCacheUUID, VK_UUID_SIZE);

  Limits& l = caps.limits;
  const VkPhysicalDeviceLimits& pl = p.limits;
  for (int i = 0; i < 3; ++i) {
    l.max_workgroup_size[i] = pl.maxComputeWorkGroupSize[i];
    l.max_workgroup_count[i] = pl.maxComputeWorkGroupCount[i];
  }
  l.max_workgroup_invocations = pl.maxComputeWorkGroupInvocations;
  l.max_shared_memory = pl.maxComputeSharedMemorySize;
  l.max_storage_buffer_range = pl.maxStorageBufferRange;
  l.max_texel_buffer_elements = pl.maxTexelBufferElements;
  l.min_texel_buffer_offset_alignment = uint32_t(pl.minTexelBufferOffsetAlignment);
  l.max_storage_buffers_per_stage = pl.maxPerStageDescriptorStorageBuffers;
  l.max_sampled_images_per_stage =
      std::min(pl.maxPerStageDescriptorSampledImages, pl.maxDescriptorSetSampledImages);
  l.max_push_descriptors = push.maxPushDescriptors;
  l.max_push_constants_size = pl.maxPushConstantsSize;
  l.min_imported_host_pointer_alignment = host_import.minImportedHostPointerAlignment;
  l.max_memory_allocation_count = pl.maxMemoryAllocationCount;
  l.max_memory_allocation_size = p11.maxMemoryAllocationSize;
  l.max_buffer_size = p13.maxBufferSize ? p13.maxBufferSize : p11.maxMemoryAllocationSize;
  l.subgroup_size = p11.subgroupSize;
  l.min_subgroup_size = p13.minSubgroupSize ? p13.minSubgroupSize : p11.subgroupSize;
  l.max_subgroup_size = p13.maxSubgroupSize ? p13.maxSubgroupSize : p11.subgroupSize;
  l.timestamp_period = pl.timestampPeriod;
  l.preserve_specials_float16 = p12.shaderSignedZeroInfNanPreserveFloat16;
  l.preserve_specials_float32 = p12.shaderSignedZeroInfNanPreserveFloat32;
  l.preserve_specials_float64 = p12.shaderSignedZeroInfNanPreserveFloat64;
  l.denorm_preserve_float16 = p12.shaderDenormPreserveFloat16;
  l.denorm_preserve_float32 = p12.shaderDenormPreserveFloat32;
  l.denorm_preserve_float64 = p12.shaderDenormPreserveFloat64;
  l.denorm_flush_float16 = p12.shaderDenormFlushToZeroFloat16;
  l.denorm_flush_float32 = p12.shaderDenormFlushToZeroFloat32;
  l.denorm_flush_float64 = p12.shaderDenormFlushToZeroFloat64;
  l.denorm_independence = p12.denormBehaviorIndependence;

  uint32_t nfam = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &nfam, nullptr);
  std::vector<VkQueueFamilyProperties> families(nfam);
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &nfam, families.data());
  int family = pick_compute_family(families);
  if (family >= 0) {
    caps.compute_family = static_cast<uint32_t>(family);
    l.timestamp_valid_bits = families[family].timestampValidBits;
  }
  caps.transfer_family = choose_transfer_family(families, family);

  FeatureChain supported;
  if (plain.apiVersion >= VK_API_VERSION_1_3) supported.query(physical);
  Features& f = caps.features;
  f.storage_buffer_16bit = supported.v11.storageBuffer16BitAccess;
  f.storage_buffer_8bit = supported.v12.storageBuffer8BitAccess;
  f.float16 = supported.v12.shaderFloat16;
  f.int8 = supported.v12.shaderInt8;
  f.int16 = supported.core.features.shaderInt16;
  f.int64 = supported.core.features.shaderInt64;
  f.float64 = supported.core.features.shaderFloat64;
  f.int64_atomics = supported.v12.shaderBufferInt64Atomics;
  if (p11.subgroupSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT)
    f.subgroup_operations = p11.subgroupSupportedOperations;
  f.subgroup_extended_types = supported.v12.shaderSubgroupExtendedTypes;
  f.subgroup_size_control = supported.v13.subgroupSizeControl &&
                            (p13.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT);
  f.compute_full_subgroups = supported.v13.computeFullSubgroups;
  f.scalar_block_layout = supported.v12.scalarBlockLayout;
  f.vulkan_memory_model = supported.v12.vulkanMemoryModel;
  f.integer_dot_product = supported.v13.shaderIntegerDotProduct;
  f.timeline_semaphore = supported.v12.timelineSemaphore;
  f.buffer_device_address = supported.v12.bufferDeviceAddress;
  f.synchronization2 = supported.v13.synchronization2;
  f.maintenance4 = supported.v13.maintenance4;
  f.timestamps = l.timestamp_valid_bits > 0 && l.timestamp_period > 0;
  f.cooperative_matrix_khr = contains(ext, "VK_KHR_cooperative_matrix");
  f.cooperative_matrix_nv = contains(ext, "VK_NV_cooperative_matrix");
  f.memory_budget = contains(ext, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  f.push_descriptor = contains(ext, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
  f.external_memory_host = contains(ext, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME) &&
                           l.min_imported_host_pointer_alignment > 0;

  VkPhysicalDeviceMemoryProperties mem;
  vkGetPhysicalDeviceMemoryProperties(physical, &mem);
  for (uint32_t i = 0; i < mem.memoryHeapCount; ++i)
    caps.heaps.push_back({mem.memoryHeaps[i].size,
                          (mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0});
  for (uint32_t i = 0; i < mem.memoryTypeCount; ++i)
    caps.memory_types.push_back({mem.memoryTypes[i].heapIndex, mem.memoryTypes[i].propertyFlags});

  // Unified: not a discrete card, and the largest device-local heap is host-mappable and coherent.
  // (A discrete GPU with resizable BAR also maps its VRAM, but host reads over PCIe are slow, so it
  // keeps the staging path.)
  int largest = -1;
  for (size_t i = 0; i < caps.heaps.size(); ++i)
    if (caps.heaps[i].device_local &&
        (largest < 0 || caps.heaps[i].size > caps.heaps[largest].size))
      largest = static_cast<int>(i);
  constexpr VkMemoryPropertyFlags kMappable = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT |
                                              VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                              VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  if (caps.type != VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU && largest >= 0)
    for (const auto& t : caps.memory_types)
      if (t.heap == static_cast<uint32_t>(largest) && (t.flags & kMappable) == kMappable)
        caps.unified_memory = true;

  if (p.apiVersion < VK_API_VERSION_1_3)
    caps.missing.push_back("Vulkan 1.3 (the driver has " + version_string(p.apiVersion) + ")");
  if (family < 0) caps.missing.push_back("a compute queue");
  if (!f.buffer_device_address) caps.missing.push_back("bufferDeviceAddress");
  if (!f.timeline_semaphore) caps.missing.push_back("timelineSemaphore");
  if (!f.synchronization2) caps.missing.push_back("synchronization2");
  lower_limits_by_env(caps.limits);
  lower_heaps_by_env(caps.heaps);
  return caps;
}

void lower_limits_by_env(Limits& l) {
  // `least`: the lowest value that still works, with why; a lower one is an error naming the
  // setting here rather than a SIGFPE or a kernel's failure later.
  const auto lower = [](uint32_t& limit, const char* name, uint64_t least = 0,
                        const char* why = "") {
    if (const std::optional<uint64_t> v = env_count(name)) {
      if (*v < least)
        throw Error(
            fmt::format("{}={} is below {}, the least that works ({})", name, *v, least, why));
      limit = uint32_t(std::min<uint64_t>(limit, *v));
    }
  };
  lower(l.max_storage_buffer_range, "VKG_MAX_STORAGE_BUFFER_RANGE");
  lower(l.max_texel_buffer_elements, "VKG_MAX_TEXEL_ELEMENTS");
  lower(l.max_sampled_images_per_stage, "VKG_MAX_SAMPLED_IMAGES");
  lower(l.max_push_constants_size, "VKG_MAX_PUSH_CONSTANTS", 8,
        "a kernel whose arguments spill to a buffer pushes its 8-byte address");
  for (uint32_t& count : l.max_workgroup_count)
    lower(count, "VKG_MAX_WORKGROUP_COUNT", 1, "a launch needs one workgroup per dimension");
  if (const std::optional<uint64_t> v = env_count("VKG_MAX_ALLOCATION_SIZE"))
    l.max_memory_allocation_size = std::min<VkDeviceSize>(l.max_memory_allocation_size, *v);
}

void lower_heaps_by_env(std::vector<MemoryHeap>& heaps) {
  if (const std::optional<uint64_t> v = env_count("VKG_MAX_HEAP_SIZE"))
    for (MemoryHeap& h : heaps) h.size = std::min<VkDeviceSize>(h.size, *v);
}

bool float32_subnormals_may_flush(const Capabilities& c) {
  // Lavapipe reports no shaderDenormPreserveFloat32 but keeps subnormals all the same (LLVM on
  // the host's SSE/AVX without FTZ/DAZ); vkgrad's special-value tests check that on every run.
  return !denorm_preserve_declarable(c.limits, 32) && c.driver_name != "llvmpipe";
}

bool denorm_preserve_declarable(const Limits& l, int bits) {
  const bool keeps[3] = {l.denorm_preserve_float16, l.denorm_preserve_float32,
                         l.denorm_preserve_float64};
  const int w = bits == 16 ? 0 : bits == 32 ? 1 : 2;
  if (l.denorm_independence == VK_SHADER_FLOAT_CONTROLS_INDEPENDENCE_NONE)
    return keeps[0] && keeps[1] && keeps[2];
  if (l.denorm_independence == VK_SHADER_FLOAT_CONTROLS_INDEPENDENCE_32_BIT_ONLY && w != 1)
    return keeps[0] && keeps[2];
  return keeps[w];
}

std::string describe(const Capabilities& c) {
  const Limits& l = c.limits;
  const Features& f = c.features;
  auto yn = [](bool b) { return b ? "yes" : "no"; };
  std::string s;
  auto line = [&s](const std::string& text) { s += text + "\n"; };
  line(fmt::format("{} ({}), vendor 0x{:04x} device 0x{:04x}", c.name, device_type_name(c.type),
                   c.vendor_id, c.device_id));
  line(fmt::format("  Vulkan {}, driver {} ({})", version_string(c.api_version), c.driver_name,
                   c.driver_info));
  if (!c.usable()) {
    std::string why;
    for (const auto& m : c.missing) why += (why.empty() ? "" : ", ") + m;
    line("  NOT USABLE by vkgrad, lacks: " + why);
  }
  line(fmt::format("  compute queue family {}, timestamps {} ({} valid bits, {} ns/tick)",
                   c.compute_family, yn(f.timestamps), l.timestamp_valid_bits, l.timestamp_period));
  line("limits:");
  line(fmt::format("  workgroup size max {} x {} x {}, {} invocations", l.max_workgroup_size[0],
                   l.max_workgroup_size[1], l.max_workgroup_size[2], l.max_workgroup_invocations));
  line(fmt::format("  workgroup count max {} x {} x {}", l.max_workgroup_count[0],
                   l.max_workgroup_count[1], l.max_workgroup_count[2]));
  line(fmt::format("  shared memory {}, push constants {} B", bytes_string(l.max_shared_memory),
                   l.max_push_constants_size));
  line(fmt::format("  storage buffer range {}, buffer size {}, allocation size {}, {} allocations",
                   bytes_string(l.max_storage_buffer_range), bytes_string(l.max_buffer_size),
                   bytes_string(l.max_memory_allocation_size), l.max_memory_allocation_count));
  line(fmt::format("  subgroup size {} (min {}, max {})", l.subgroup_size, l.min_subgroup_size,
                   l.max_subgroup_size));
  line(fmt::format("  storage buffers per stage {}, push descriptors {}",
                   l.max_storage_buffers_per_stage, l.max_push_descriptors));
  line("features:");
  line(
      fmt::format("  storage 16-bit {}, 8-bit {}; arithmetic float16 {}, int8 {}, int16 {}, "
                  "int64 {}, float64 {}, int64 atomics {}",
                  yn(f.storage_buffer_16bit), yn(f.storage_buffer_8bit), yn(f.float16), yn(f.int8),
                  yn(f.int16), yn(f.int64), yn(f.float64), yn(f.int64_atomics)));
  std::string ops;
  static constexpr std::pair<VkSubgroupFeatureFlagBits, const char*> kOps[] = {
      {VK_SUBGROUP_FEATURE_BASIC_BIT, "basic"},
      {VK_SUBGROUP_FEATURE_VOTE_BIT, "vote"},
      {VK_SUBGROUP_FEATURE_ARITHMETIC_BIT, "arithmetic"},
      {VK_SUBGROUP_FEATURE_BALLOT_BIT, "ballot"},
      {VK_SUBGROUP_FEATURE_SHUFFLE_BIT, "shuffle"},
      {VK_SUBGROUP_FEATURE_SHUFFLE_RELATIVE_BIT, "shuffle_relative"},
      {VK_SUBGROUP_FEATURE_CLUSTERED_BIT, "clustered"},
      {VK_SUBGROUP_FEATURE_QUAD_BIT, "quad"}};
  for (const auto& [bit, name] : kOps)
    if (f.subgroup_operations & bit) ops += (ops.empty() ? "" : " ") + std::string(name);
  line(fmt::format("  subgroup ops [{}], extended types {}, size control {}, full subgroups {}",
                   ops, yn(f.subgroup_extended_types), yn(f.subgroup_size_control),
                   yn(f.compute_full_subgroups)));
  line(
      fmt::format("  timeline semaphores {}, buffer device address {}, synchronization2 {}, "
                  "scalar layout {}, memory model {}, integer dot {}",
                  yn(f.timeline_semaphore), yn(f.buffer_device_address), yn(f.synchronization2),
                  yn(f.scalar_block_layout), yn(f.vulkan_memory_model), yn(f.integer_dot_product)));
  line(fmt::format("  cooperative matrix KHR {}, NV {}; memory budget {}",
                   yn(f.cooperative_matrix_khr), yn(f.cooperative_matrix_nv), yn(f.memory_budget)));
  line(fmt::format("  external memory host {} (alignment {})", yn(f.external_memory_host),
                   c.limits.min_imported_host_pointer_alignment));
  line(fmt::format(
      "float controls (float16/32/64): keep subnormals {}/{}/{}, may flush them {}/{}/{}, "
      "keep inf, nan and -0 {}/{}/{}",
      yn(l.denorm_preserve_float16), yn(l.denorm_preserve_float32), yn(l.denorm_preserve_float64),
      yn(l.denorm_flush_float16), yn(l.denorm_flush_float32), yn(l.denorm_flush_float64),
      yn(l.preserve_specials_float16), yn(l.preserve_specials_float32),
      yn(l.preserve_specials_float64)));
  line(fmt::format("  denormal modes set apart for {}",
                   l.denorm_independence == VK_SHADER_FLOAT_CONTROLS_INDEPENDENCE_ALL
                       ? "every width"
                   : l.denorm_independence == VK_SHADER_FLOAT_CONTROLS_INDEPENDENCE_32_BIT_ONLY
                       ? "float32 only (float16 and float64 together)"
                       : "no width (all together)"));
  if (float32_subnormals_may_flush(c))
    line("  float32 subnormals may be flushed to zero: the device cannot be asked to keep them");
  // A width the device keeps on its own but cannot declare, for a tied width that it cannot keep.
  for (int bits : {16, 64})
    if ((bits == 16 ? l.denorm_preserve_float16 : l.denorm_preserve_float64) &&
        !denorm_preserve_declarable(l, bits))
      line(
          fmt::format("  float{} subnormals may be flushed to zero: its denormal mode is tied to "
                      "a width whose subnormals the device cannot keep",
                      bits));
  line(fmt::format("memory ({}):", c.unified_memory ? "unified, host maps device memory"
                                                    : "separate, staging for transfers"));
  for (size_t i = 0; i < c.heaps.size(); ++i)
    line(fmt::format("  heap {}: {}{}", i, bytes_string(c.heaps[i].size),
                     c.heaps[i].device_local ? " device-local" : ""));
  for (size_t i = 0; i < c.memory_types.size(); ++i) {
    const auto fl = c.memory_types[i].flags;
    std::string flags;
    if (fl & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) flags += " device-local";
    if (fl & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) flags += " host-visible";
    if (fl & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) flags += " host-coherent";
    if (fl & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) flags += " host-cached";
    line(fmt::format("  type {}: heap {}{}", i, c.memory_types[i].heap, flags));
  }
  return s;
}

}  // namespace vkg::vk
