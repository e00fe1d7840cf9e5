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

// Whether VKG_NATIVE_FLOAT16 (`setting`, "" when unset) asks for the device's float16 arithmetic.
inline bool native_float16_asked(const std::string& setting) {
  return !(setting.empty() || setting == "0" || setting == "false" || setting == "off");
}

// `native_float16`: whether the device's own float16 arithmetic is asked (VKG_NATIVE_FLOAT16, by
// default); tests pass it so as not to set the environment that other threads read.
inline GlslTarget glsl_target_of(const vk::Capabilities& caps, bool native_float16) {
  GlslTarget t;
  // float16 is computed in float32 and rounded to float16 after every op, with integer bit
  // operations (codegen/glsl_half.cpp), on every device unless VKG_NATIVE_FLOAT16=1 asks for the
  // device's own float16 arithmetic. Why: Vulkan does not require float16 ops to round to float16
  // (NVIDIA's H100 computed h(1) / h(3) as float32's 0.333333, not 0.333252, kept 65520 finite
  // and 1e-8 nonzero through a cast to float16 and back, and gave inf for nan), while float32
  // then one rounding is exactly the correctly rounded float16 result of + - * / and sqrt, the
  // CPU device's. Native float16 needs, besides shaderFloat16, a driver that keeps inf, nan and
  // signed zeros in it: Lavapipe (Mesa 22.3) reports shaderSignedZeroInfNanPreserveFloat16 but
  // folds float16 x - x to 0 for x = inf (SpecialValues.Float16ArithmeticKeepsInfAndNan).
  const bool float16_keeps_specials =
      caps.limits.preserve_specials_float16 && caps.driver_name != "llvmpipe";
  t.float16 = caps.features.float16 && float16_keeps_specials && native_float16;
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
  // Lowered by VKG_MAX_TEXEL_ELEMENTS and VKG_MAX_SAMPLED_IMAGES (vk::lower_limits_by_env), so
  // tests reach the storage-buffer fallbacks; the queue checks against the same limits.
  t.max_texel_buffer_elements = caps.limits.max_texel_buffer_elements;
  t.max_texel_descriptors = caps.limits.max_sampled_images_per_stage;
  // Texel views start at a Buffer's offset, which is a multiple of 256 (vk/allocator.cpp), the
  // largest minTexelBufferOffsetAlignment Vulkan allows; a device that asks more gets none.
  if (caps.limits.min_texel_buffer_offset_alignment > 256) t.texel_loads = false;
  // After that: texel_loads_written never holds without texel_loads.
  // VKG_TEXEL_WRITTEN=0 keeps buffers a kernel also writes on the storage path (for comparing).
  const std::string written = vk::env_string("VKG_TEXEL_WRITTEN");
  t.texel_loads_written =
      t.texel_loads && !(written == "0" || written == "false" || written == "off");
  t.preserve_specials_float16 = float16_keeps_specials;
  t.preserve_specials_float32 = caps.limits.preserve_specials_float32;
  t.preserve_specials_float64 = caps.limits.preserve_specials_float64;
  t.exact_sqrt = caps.driver_name != "llvmpipe";
  // Not gated on denorm_preserve_float32: Lavapipe reports it false, and a host built with
  // FTZ/DAZ (-ffast-math), which its threads inherit, flushes a multiplication's subnormals too.
  t.float_of_double_division = t.float64 && caps.driver_name == "llvmpipe";
  t.denorm_preserve_float16 = caps.limits.denorm_preserve_float16;
  t.denorm_preserve_float32 = caps.limits.denorm_preserve_float32;
  t.denorm_preserve_float64 = caps.limits.denorm_preserve_float64;
  t.denorm_independence =
      caps.limits.denorm_independence == VK_SHADER_FLOAT_CONTROLS_INDEPENDENCE_ALL
          ? GlslTarget::DenormIndependence::All
      : caps.limits.denorm_independence == VK_SHADER_FLOAT_CONTROLS_INDEPENDENCE_32_BIT_ONLY
          ? GlslTarget::DenormIndependence::Bit32Only
          : GlslTarget::DenormIndependence::None;
  return t;
}

inline GlslTarget glsl_target_of(const vk::Capabilities& caps) {
  return glsl_target_of(caps, native_float16_asked(vk::env_string("VKG_NATIVE_FLOAT16")));
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
