// A Program is one compute kernel: its SPIR-V, the bytes of push constants it takes, and the
// compute pipeline made from them. The workgroup size is the one the SPIR-V declares. The pipeline
// is created on first use (the first dispatch), through the device's pipeline cache.
//
// Buffers reach a kernel in one of two ways (queue.hpp says why there are two): as 64-bit device
// addresses in push constants (bound_buffers == 0; the layout is one push-constant range), or as
// storage buffers at set 0, bindings 0..bound_buffers-1 of a push-descriptor set layout, which
// Queue::dispatch fills from the first bound_buffers BufferUses (or, with the bindings spelled
// out, storage buffers and texel buffer views at the bindings they name).
#pragma once
#include <vulkan/vulkan.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include <vkgrad/vk/capabilities.hpp>
#include <vkgrad/vk/handle.hpp>

namespace vkg::vk {

class Device;

// The workgroup counts of one dispatch.
struct Groups {
  uint32_t x = 1, y = 1, z = 1;

  // Enough workgroups for `count` of them in a line, folded into y (and z) when x would pass the
  // device's maxComputeWorkGroupCount[0]. A kernel recovers its linear workgroup index as
  // wg.x + wg.y * num.x + wg.z * num.x * num.y and skips indices >= count. Throws vkg::Error if
  // even the folded grid does not fit.
  static Groups cover(uint64_t count, const Limits& limits);
  uint64_t total() const { return uint64_t(x) * y * z; }
};

// The LocalSize the SPIR-V module declares for its entry point (LocalSize or LocalSizeId with a
// constant). Throws vkg::Error when `spirv` is not a SPIR-V module or declares none.
std::array<uint32_t, 3> spirv_local_size(std::span<const uint32_t> spirv);

// One descriptor of a kernel's push-descriptor set: uses[use] of a dispatch, at `binding`, as a
// storage buffer or as a uniform texel buffer viewing its 32-bit words one, two or four to a texel
// (R32_UINT, R32G32_UINT, R32G32B32A32_UINT: integer formats, so the shader gets every bit as
// stored, nan payloads and denormals included; it casts them back to its type).
enum class BindingKind : uint8_t { Storage, Texel32, Texel32x2, Texel32x4 };
struct Binding {
  uint32_t binding;
  uint32_t use;
  BindingKind kind;
};

class Program {
 public:
  // Checks the module and its workgroup size against the device; copies the SPIR-V.
  // push_constant_bytes must be a multiple of 4 and at most maxPushConstantsSize (128 on many
  // devices): larger argument lists go through Queue::spill.
  // bound_buffers must fit maxPushDescriptors and maxPerStageDescriptorStorageBuffers.
  Program(Device& device, std::string name, std::span<const uint32_t> spirv,
          uint32_t push_constant_bytes, uint32_t bound_buffers = 0);
  // The same with the descriptors spelled out: bound_buffers() is then one more than the largest
  // Binding::use. Each must fit maxPushDescriptors, the storage ones
  // maxPerStageDescriptorStorageBuffers and the texel ones the sampled images per stage.
  Program(Device& device, std::string name, std::span<const uint32_t> spirv,
          uint32_t push_constant_bytes, std::vector<Binding> bindings);
  // Waits for submitted GPU work before destroying a pipeline that may still be running.
  ~Program();
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  const std::string& name() const { return name_; }
  uint32_t push_constant_bytes() const { return push_constant_bytes_; }
  uint32_t bound_buffers() const { return bound_buffers_; }
  const std::vector<Binding>& bindings() const { return bindings_; }
  const std::array<uint32_t, 3>& local_size() const { return local_size_; }

  // The compute pipeline and its layout, created on the first call. Thread-safe.
  VkPipeline pipeline() const;
  VkPipelineLayout layout() const;
  bool created() const { return created_; }

 private:
  void create() const;

  Device& device_;
  std::string name_;
  std::vector<uint32_t> spirv_;
  uint32_t push_constant_bytes_;
  uint32_t bound_buffers_;
  std::vector<Binding> bindings_;
  std::array<uint32_t, 3> local_size_{};
  mutable std::once_flag once_;
  mutable bool created_ = false;
  mutable UniqueDescriptorSetLayout set_layout_;
  mutable UniquePipelineLayout layout_;
  mutable UniquePipeline pipeline_;
};

}  // namespace vkg::vk
