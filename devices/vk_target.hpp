// What the GLSL renderer may assume about a Vulkan device, read off its capabilities record.
// The one place where vk/'s view of a device becomes codegen's: the VK device adapter and the
// codegen tests that run on Vulkan both use it, so they render for the same target.
#pragma once
#include <algorithm>

#include <vkgrad/codegen/glsl_target.hpp>
#include <vkgrad/vk/capabilities.hpp>

namespace vkg {

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
  t.preserve_specials_float16 = float16_keeps_specials;
  t.preserve_specials_float32 = caps.limits.preserve_specials_float32;
  t.preserve_specials_float64 = caps.limits.preserve_specials_float64;
  return t;
}

}  // namespace vkg
