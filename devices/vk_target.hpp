// What the GLSL renderer may assume about a Vulkan device, read off its capabilities record.
// The one place where vk/'s view of a device becomes codegen's: the VK device adapter and the
// codegen tests that run on Vulkan both use it, so they render for the same target.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include <vkgrad/codegen/glsl_launch.hpp>
#include <vkgrad/codegen/glsl_target.hpp>
#include <vkgrad/vk/capabilities.hpp>
#include <vkgrad/vk/env.hpp>
#include <vkgrad/vk/program.hpp>

namespace vkg {

// Whether kernels read their read-only operands through texel buffers (GlslTarget::texel_loads),
// from VKG_TEXEL_LOADS (`setting`, "" when unset): "0" (or false, off) never, any other value
// always, unset where the device is a CPU (Lavapipe, llvmpipe) and not elsewhere. Why: texel
// fetches cut Lavapipe's CPU time by a quarter to a third (README, "texel loads"); on GPUs their
// speed has not been measured, and storage buffers are the path GPUs are tuned for.
inline bool texel_loads_by_default(VkPhysicalDeviceType type, const std::string& setting) {
  if (setting.empty()) return type == VK_PHYSICAL_DEVICE_TYPE_CPU;
  return !(setting == "0" || setting == "false" || setting == "off");
}

inline GlslTarget glsl_target_of(const vk::Capabilities& caps) {
  GlslTarget t;
  // float16 is computed natively only where the driver keeps inf, nan and signed zeros in it;
  // elsewhere in float32, rounded to float16 after every op (codegen/glsl_half.cpp), which gives
  // the same bits. Lavapipe (Mesa 22.3) reports shaderSignedZeroInfNanPreserveFloat16 but folds
  // float16 x - x to 0 for x = inf all the same (SpecialValues.Float16ArithmeticKeepsInfAndNan).
  const bool float16_keeps_specials =
      caps.limits.preserve_specials_float16 && caps.driver_name != "llvmpipe";
  t.float16 = caps.features.float16 && float16_keeps_specials;
  t.int8 = caps.features.int8;
  t.int16 = caps.features.int16;
  t.int64 = caps.features.int64;
  t.float64 = caps.features.float64;
  t.storage_8bit = caps.features.storage_buffer_8bit;
  t.storage_16bit = caps.features.storage_buffer_16bit;
  t.int64_atomics = caps.features.int64_atomics;
  t.max_push_constants_size = caps.limits.max_push_constants_size;
  t.max_workgroup_count = caps.limits.max_workgroup_count;
  t.subgroup_size = caps.limits.subgroup_size;
  t.subgroup_shuffle = (caps.features.subgroup_operations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT) != 0;
  t.max_bound_buffers =
      std::min(caps.limits.max_push_descriptors, caps.limits.max_storage_buffers_per_stage);
  t.max_storage_buffer_range = caps.limits.max_storage_buffer_range;
  t.texel_loads = texel_loads_by_default(caps.type, vk::env_string("VKG_TEXEL_LOADS"));
  // VKG_TEXEL_WRITTEN=0 keeps buffers a kernel also writes on the storage path (for comparing).
  const std::string written = vk::env_string("VKG_TEXEL_WRITTEN");
  t.texel_loads_written =
      t.texel_loads && !(written == "0" || written == "false" || written == "off");
  // Lowered by VKG_MAX_TEXEL_ELEMENTS and VKG_MAX_SAMPLED_IMAGES (vk::lower_limits_by_env), so
  // tests reach the storage-buffer fallbacks; the queue checks against the same limits.
  t.max_texel_buffer_elements = caps.limits.max_texel_buffer_elements;
  t.max_texel_descriptors = caps.limits.max_sampled_images_per_stage;
  // Texel views start at a Buffer's offset, which is a multiple of 256 (vk/allocator.cpp), the
  // largest minTexelBufferOffsetAlignment Vulkan allows; a device that asks more gets none.
  if (caps.limits.min_texel_buffer_offset_alignment > 256) t.texel_loads = false;
  t.preserve_specials_float16 = float16_keeps_specials;
  t.preserve_specials_float32 = caps.limits.preserve_specials_float32;
  t.preserve_specials_float64 = caps.limits.preserve_specials_float64;
  return t;
}

// The push descriptors of a kernel rendered with `layout` for n buffers, for vk::Program: none
// when its buffers go by device address; else slot k at binding k, a storage buffer or its texel
// views (ArgLayout::texel).
inline std::vector<vk::Binding> bindings_of(const ArgLayout& layout, size_t n) {
  std::vector<vk::Binding> b;
  if (!layout.bound) return b;
  for (size_t slot = 0; slot < n; ++slot) {
    const uint32_t use = uint32_t(slot);
    const bool written = layout.texel_written(slot);
    if (!layout.texel_read(slot) || written) b.push_back({use, use, vk::BindingKind::Storage});
    if (!layout.texel_read(slot)) continue;
    const uint8_t views = layout.texel[slot];
    if (views & 1) b.push_back({texel_binding(n, slot, 1, written), use, vk::BindingKind::Texel32});
    if (views & 2) b.push_back({texel_binding(n, slot, 2), use, vk::BindingKind::Texel32x2});
    if (views & 4) b.push_back({texel_binding(n, slot, 4), use, vk::BindingKind::Texel32x4});
  }
  return b;
}

}  // namespace vkg
