// What one physical device can do, read once at start: its identity, the limits kernels must fit
// in, the optional features the renderer may use, and its memory. The code generator turns paths on
// and off from this record; vkgrad-info prints it.
#pragma once
#include <vulkan/vulkan.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace vkg::vk {

struct Limits {
  std::array<uint32_t, 3> max_workgroup_size{};
  uint32_t max_workgroup_invocations = 0;
  std::array<uint32_t, 3> max_workgroup_count{};
  uint32_t max_shared_memory = 0;          // bytes of workgroup-shared memory
  uint32_t max_storage_buffer_range = 0;   // the largest buffer a descriptor binds; see queue.hpp
  uint32_t max_texel_buffer_elements = 0;  // the most texels a VkBufferView may span
  uint32_t min_texel_buffer_offset_alignment = 256;  // a VkBufferView's offset, in bytes
  uint32_t max_storage_buffers_per_stage = 0;        // maxPerStageDescriptorStorageBuffers
  // Uniform texel buffers count as sampled images: the lesser of maxPerStageDescriptorSampledImages
  // and maxDescriptorSetSampledImages (the spec guarantees 16 and 96).
  uint32_t max_sampled_images_per_stage = 0;
  uint32_t max_push_descriptors = 0;  // VK_KHR_push_descriptor; 0 without it
  uint32_t max_push_constants_size = 0;
  // minImportedHostPointerAlignment (VK_EXT_external_memory_host): an imported host range's start
  // and size are multiples of it. 0 without the extension.
  VkDeviceSize min_imported_host_pointer_alignment = 0;
  uint32_t max_memory_allocation_count = 0;
  VkDeviceSize max_memory_allocation_size = 0;
  VkDeviceSize max_buffer_size = 0;
  uint32_t subgroup_size = 0;      // the default size
  uint32_t min_subgroup_size = 0;  // the range subgroup size control can pick from
  uint32_t max_subgroup_size = 0;
  float timestamp_period = 0;         // nanoseconds per timestamp tick
  uint32_t timestamp_valid_bits = 0;  // of the compute queue family; 0: no timestamps
  // shaderSignedZeroInfNanPreserveFloat16/32/64: a shader may ask that the compiler keep IEEE
  // semantics for signed zeros, infinities and nan (the SPIR-V SignedZeroInfNanPreserve mode).
  bool preserve_specials_float16 = false, preserve_specials_float32 = false,
       preserve_specials_float64 = false;
  // shaderDenormPreserveFloat16/32/64 and shaderDenormFlushToZeroFloat16/32/64: a shader may
  // ask that subnormal floats be kept (the DenormPreserve mode) or flushed to zero.
  bool denorm_preserve_float16 = false, denorm_preserve_float32 = false,
       denorm_preserve_float64 = false;
  bool denorm_flush_float16 = false, denorm_flush_float32 = false, denorm_flush_float64 = false;
  // denormBehaviorIndependence: which widths' denormal modes a shader may set apart. 32_BIT_ONLY
  // (RADV on GFX9+) ties float16's to float64's, NONE ties all three (VUID-RuntimeSpirv-
  // denormBehaviorIndependence-06289 and -06290).
  VkShaderFloatControlsIndependence denorm_independence = VK_SHADER_FLOAT_CONTROLS_INDEPENDENCE_ALL;
};

struct Features {
  bool storage_buffer_16bit = false;  // 16-bit loads and stores in storage buffers
  bool storage_buffer_8bit = false;
  bool float16 = false;  // 16-bit float arithmetic
  bool int8 = false;     // 8-bit integer arithmetic
  bool int16 = false;
  bool int64 = false;
  bool float64 = false;
  bool int64_atomics = false;
  VkSubgroupFeatureFlags subgroup_operations = 0;  // in compute shaders
  bool subgroup_extended_types = false;            // subgroup ops on 8/16/64-bit types
  bool subgroup_size_control = false;
  bool compute_full_subgroups = false;
  bool scalar_block_layout = false;
  bool vulkan_memory_model = false;
  bool integer_dot_product = false;
  bool timeline_semaphore = false;     // required
  bool buffer_device_address = false;  // required
  bool synchronization2 = false;       // required
  bool maintenance4 = false;
  bool timestamps = false;              // the compute queue can write timestamps
  bool cooperative_matrix_khr = false;  // extension present
  bool cooperative_matrix_nv = false;
  bool memory_budget = false;    // VK_EXT_memory_budget present
  bool push_descriptor = false;  // VK_KHR_push_descriptor present (enabled when it is)
  // VK_EXT_external_memory_host present: the device can copy straight out of memory another
  // device maps (vk/host_import.hpp). Enabled unless VKG_NO_HOST_IMPORT=1 (vk/device.hpp).
  bool external_memory_host = false;
};

struct MemoryHeap {
  VkDeviceSize size = 0;
  bool device_local = false;
};

struct MemoryType {
  uint32_t heap = 0;
  VkMemoryPropertyFlags flags = 0;
};

struct Capabilities {
  std::string name;
  VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  uint32_t vendor_id = 0, device_id = 0;
  uint32_t api_version = 0, driver_version = 0;
  std::string driver_name, driver_info;
  std::array<uint8_t, VK_UUID_SIZE> pipeline_cache_uuid{};
  uint32_t compute_family = 0;  // the queue family vkgrad submits to
  int transfer_family = -1;     // a copy-engine family (queue_families.hpp), or -1: none

  Limits limits;
  Features features;
  std::vector<MemoryHeap> heaps;
  std::vector<MemoryType> memory_types;
  // The host maps the memory kernels use (integrated GPUs, CPU devices): uploads and downloads are
  // plain memcpy. False on discrete GPUs, where they go through a staging buffer.
  bool unified_memory = false;

  // Why vkgrad cannot use this device ("Vulkan 1.3", "bufferDeviceAddress", ...); empty if it can.
  std::vector<std::string> missing;
  bool usable() const { return missing.empty(); }
};

// Reads the record; the limits are then lowered by the test settings (lower_limits_by_env).
Capabilities read_capabilities(VkPhysicalDevice physical);

// Settings that lower device limits, so that tests reach what a limit does at small sizes, with
// the queue and the renderer seeing the same limit: VKG_MAX_STORAGE_BUFFER_RANGE (bytes),
// VKG_MAX_TEXEL_ELEMENTS (maxTexelBufferElements), VKG_MAX_SAMPLED_IMAGES (sampled images per
// stage, which uniform texel buffers count against). Each only lowers; a value that is not a
// whole number is a vkg::Error naming the setting. Also VKG_MAX_PUSH_CONSTANTS (bytes) and
// VKG_MAX_WORKGROUP_COUNT (each axis), so that a GPU's 256 bytes and 2^31 - 1 workgroups do not
// keep tests from arguments that spill and grids folded over several axes; and
// VKG_MAX_ALLOCATION_SIZE (maxMemoryAllocationSize, bytes), so that Lavapipe, whose one allocation
// may take its whole heap, meets a GPU's heap of many allocations (an H100: 80 GB, 4 GiB each).
void lower_limits_by_env(Limits& l);

// Whether float32 subnormals may become 0 in kernels on this device: it cannot be asked to keep
// them (no shaderDenormPreserveFloat32) and is not known to keep them anyway. Results on such a
// device can differ from the CPU device's wherever a value falls below 2^-126.
bool float32_subnormals_may_flush(const Capabilities& c);

// Whether kernels may ask to keep subnormals of `bits` (16, 32, 64): the device keeps them on
// request (shaderDenormPreserveFloatN) and so does every width tied to it by
// denormBehaviorIndependence, since tied widths must be declared together or not at all.
bool denorm_preserve_declarable(const Limits& l, int bits);

// VKG_MAX_HEAP_SIZE (bytes) lowers every memory heap's size, which the allocator keeps to as a
// budget: tests reach device out-of-memory at a few GiB on an 80 GB GPU, in one process, without
// taking the memory that tests running beside them need. Only lowers; a malformed value is an
// error naming the setting.
void lower_heaps_by_env(std::vector<MemoryHeap>& heaps);

// Whether the physical device offers the device extension `name`.
bool has_device_extension(VkPhysicalDevice physical, const char* name);

// "discrete GPU", "integrated GPU", "virtual GPU", "CPU", "other".
const char* device_type_name(VkPhysicalDeviceType type);

// A multi-line, human-readable description of the record (vkgrad-info prints it).
std::string describe(const Capabilities& caps);

}  // namespace vkg::vk
