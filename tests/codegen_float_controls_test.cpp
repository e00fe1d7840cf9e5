// How the renderer pins float numerics that a driver may otherwise choose: subnormals kept
// (DenormPreserve), no fma contraction, correctly rounded sqrt. These are checked on the SPIR-V
// module, since Lavapipe keeps subnormals, never contracts and rounds sqrt correctly anyway:
// the devices that do not (NVIDIA's H100 flushed float32 subnormals, fused a * b + c and gave
// sqrt 1 ulp off) are not in CI.
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

#include <vkgrad/codegen/glsl_renderer.hpp>
#include <vkgrad/codegen/spirv_compiler.hpp>
#include <vkgrad/devices/vk_target.hpp>

#include "support/linear_programs.hpp"

namespace vkg {
namespace {

using test::binary_op;
using test::elementwise_add;

std::vector<uint32_t> module_of(const Program& p, const GlslTarget& t = GlslTarget::everything()) {
  SpirvCompileOptions o;
  o.disk_cache = false;
  o.name = p.name;
  const std::string glsl = render_glsl(p, t);
  std::vector<uint32_t> words;
  EXPECT_NO_THROW(words = compile_glsl(glsl, o)) << glsl;
  return words;
}

// Each instruction of a module as (opcode, words).
std::vector<std::vector<uint32_t>> instructions(const std::vector<uint32_t>& m) {
  std::vector<std::vector<uint32_t>> out;
  for (size_t i = 5; i < m.size();) {
    const uint32_t n = m[i] >> 16;
    if (n == 0 || i + n > m.size()) {
      ADD_FAILURE() << "not a module";
      break;
    }
    out.emplace_back(m.begin() + std::ptrdiff_t(i), m.begin() + std::ptrdiff_t(i + n));
    i += n;
  }
  return out;
}

constexpr uint32_t kOpExecutionMode = 16, kDenormPreserve = 4459, kSignedZeroInfNanPreserve = 4461;

// The widths of `mode` among the module's OpExecutionModes, sorted.
std::vector<uint32_t> mode_widths(const std::vector<uint32_t>& m, uint32_t mode) {
  std::vector<uint32_t> widths;
  for (const auto& ins : instructions(m))
    if ((ins[0] & 0xffffu) == kOpExecutionMode && ins.size() == 4 && ins[2] == mode)
      widths.push_back(ins[3]);
  std::sort(widths.begin(), widths.end());
  return widths;
}

// NVIDIA flushed float32 subnormals to zero (1e-40 + 0 gave 0) where the kernel did not ask to
// keep them: a device with shaderDenormPreserveFloatN is asked, for every width it computes in,
// and the widths survive glslang's keeping one mode per id.
TEST(FloatControls, KernelsAskToKeepSubnormalsForEachWidthTheyComputeIn) {
  const auto f32 = module_of(elementwise_add(dtypes::float32, 64));
  EXPECT_EQ(mode_widths(f32, kDenormPreserve), (std::vector<uint32_t>{32}));
  const auto f64 = module_of(elementwise_add(dtypes::float64, 64));
  EXPECT_EQ(mode_widths(f64, kDenormPreserve), (std::vector<uint32_t>{32, 64}));
  EXPECT_EQ(mode_widths(f64, kSignedZeroInfNanPreserve), (std::vector<uint32_t>{32, 64}));
  GlslTarget native16 = GlslTarget::everything();
  const auto f16 = module_of(elementwise_add(dtypes::float16, 64), native16);
  EXPECT_EQ(mode_widths(f16, kDenormPreserve), (std::vector<uint32_t>{16, 32}));

  // A device that cannot keep them is not asked (the mode would be invalid there).
  GlslTarget flushing = GlslTarget::everything();
  flushing.denorm_preserve_float32 = false;
  EXPECT_TRUE(
      mode_widths(module_of(elementwise_add(dtypes::float32, 64), flushing), kDenormPreserve)
          .empty());
  // bfloat16 is float32 in registers: its subnormals are float32's.
  const auto bf16 = module_of(elementwise_add(dtypes::bfloat16, 64));
  EXPECT_EQ(mode_widths(bf16, kDenormPreserve), (std::vector<uint32_t>{32}));
}

// NVIDIA's H100 computed float16 ops in float32 without rounding (h(1) / h(3) gave 0.333333),
// which Vulkan allows: a device with shaderFloat16 that keeps inf and nan (as that one reports)
// still gets float32 arithmetic rounded to float16 by integer helpers after every op, unless
// VKG_NATIVE_FLOAT16=1 asks for its own.
TEST(FloatControls, Float16IsRoundedByTheKernelUnlessNativeArithmeticIsAsked) {
  vk::Capabilities caps;
  caps.driver_name = "NVIDIA";
  caps.features.float16 = caps.features.storage_buffer_16bit = true;
  caps.limits.preserve_specials_float16 = caps.limits.preserve_specials_float32 = true;
  caps.limits.denorm_preserve_float32 = true;
  caps.limits.max_workgroup_count = {65535, 65535, 65535};
  caps.limits.max_push_constants_size = 128;
  caps.limits.subgroup_size = 32;
  ASSERT_EQ(std::getenv("VKG_NATIVE_FLOAT16"), nullptr);
  const GlslTarget t = glsl_target_of(caps);
  EXPECT_FALSE(t.float16);
  EXPECT_TRUE(t.storage_16bit);
  EXPECT_TRUE(t.denorm_preserve_float32);
  const std::string glsl = render_glsl(binary_op(Ops::MUL, dtypes::float16, 4), t);
  EXPECT_NE(glsl.find("f16_round("), std::string::npos) << glsl;
  EXPECT_EQ(glsl.find("float16_t("), std::string::npos) << glsl;
  EXPECT_FALSE(native_float16_asked(""));
  EXPECT_FALSE(native_float16_asked("0"));
  EXPECT_TRUE(native_float16_asked("1"));
  ::setenv("VKG_NATIVE_FLOAT16", "1", 1);
  EXPECT_TRUE(glsl_target_of(caps).float16);
  caps.driver_name = "llvmpipe";  // folds float16 x - x to 0 for x = inf: never native
  EXPECT_FALSE(glsl_target_of(caps).float16);
  ::unsetenv("VKG_NATIVE_FLOAT16");
}

}  // namespace
}  // namespace vkg
