// How the renderer pins float numerics that a driver may otherwise choose: subnormals kept
// (DenormPreserve), no fma contraction, correctly rounded sqrt. These are checked on the SPIR-V
// module, since Lavapipe keeps subnormals, never contracts and rounds sqrt correctly anyway:
// the devices that do not (NVIDIA's H100 flushed float32 subnormals, fused a * b + c and gave
// sqrt 1 ulp off) are not in CI.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <vkgrad/codegen/glsl_renderer.hpp>
#include <vkgrad/codegen/spirv_compiler.hpp>
#include <vkgrad/devices/vk_target.hpp>

#include "support/kernel_agree.hpp"
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

// spirv-val (Debian's spirv-tools, which scripts/deps.sh installs) accepts the module. Missing,
// it fails rather than skips: the float-controls checks would otherwise pass unchecked.
testing::AssertionResult spirv_valid(const std::vector<uint32_t>& m, const std::string& name) {
  if (std::system("spirv-val --version > /dev/null 2>&1") != 0)
    return testing::AssertionFailure() << "spirv-val is not installed (Debian's spirv-tools)";
  const std::string file = testing::TempDir() + name + ".spv";
  FILE* f = std::fopen(file.c_str(), "wb");
  if (!f) return testing::AssertionFailure() << "cannot write " << file;
  std::fwrite(m.data(), 4, m.size(), f);
  std::fclose(f);
  const int rc = std::system(("spirv-val --target-env vulkan1.3 " + file).c_str());
  std::remove(file.c_str());
  if (rc == 0) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "spirv-val rejects " << name;
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

// Vulkan's denormBehaviorIndependence: with 32_BIT_ONLY (RADV on GFX9+) float16's and float64's
// denormal modes must be the same, with NONE all three (VUID-RuntimeSpirv-
// denormBehaviorIndependence-06289, -06290). A tied width is declared along with the one the
// kernel computes in where the device keeps it, and none of the group where it does not.
TEST(FloatControls, TiedWidthsAskToKeepSubnormalsTogetherOrNotAtAll) {
  using I = GlslTarget::DenormIndependence;
  auto widths = [](DType d, I independence, int cannot_keep = 0) {
    GlslTarget t = GlslTarget::everything();  // native float16
    t.denorm_independence = independence;
    if (cannot_keep == 16) t.denorm_preserve_float16 = false;
    if (cannot_keep == 32) t.denorm_preserve_float32 = false;
    if (cannot_keep == 64) t.denorm_preserve_float64 = false;
    const auto m = module_of(elementwise_add(d, 64), t);
    EXPECT_TRUE(spirv_valid(m, "denorm_independence"));
    return mode_widths(m, kDenormPreserve);
  };
  using W = std::vector<uint32_t>;
  // Independent: each width the kernel computes in.
  EXPECT_EQ(widths(dtypes::float64, I::All), (W{32, 64}));
  EXPECT_EQ(widths(dtypes::float16, I::All), (W{16, 32}));
  EXPECT_EQ(widths(dtypes::float64, I::All, 16), (W{32, 64}));
  // 32_BIT_ONLY: float16 and float64 together.
  EXPECT_EQ(widths(dtypes::float32, I::Bit32Only), (W{32}));
  EXPECT_EQ(widths(dtypes::float64, I::Bit32Only), (W{16, 32, 64}));
  EXPECT_EQ(widths(dtypes::float16, I::Bit32Only), (W{16, 32, 64}));
  EXPECT_EQ(widths(dtypes::float64, I::Bit32Only, 16), (W{32}));
  EXPECT_EQ(widths(dtypes::float16, I::Bit32Only, 64), (W{32}));
  EXPECT_EQ(widths(dtypes::float64, I::Bit32Only, 32), (W{16, 64}));
  // NONE: all three or none, float32 kernels too.
  EXPECT_EQ(widths(dtypes::float32, I::None), (W{16, 32, 64}));
  EXPECT_EQ(widths(dtypes::float64, I::None), (W{16, 32, 64}));
  EXPECT_EQ(widths(dtypes::float32, I::None, 64), W{});
  EXPECT_EQ(widths(dtypes::float16, I::None, 32), W{});

  // The capabilities record carries the property to the target, and says which widths may flush.
  vk::Capabilities caps;
  caps.limits.denorm_preserve_float32 = caps.limits.denorm_preserve_float64 = true;
  caps.limits.denorm_independence = VK_SHADER_FLOAT_CONTROLS_INDEPENDENCE_32_BIT_ONLY;
  EXPECT_EQ(glsl_target_of(caps, false).denorm_independence, I::Bit32Only);
  EXPECT_TRUE(vk::denorm_preserve_declarable(caps.limits, 32));
  EXPECT_FALSE(vk::denorm_preserve_declarable(caps.limits, 64));
  EXPECT_NE(vk::describe(caps).find("float64 subnormals may be flushed"), std::string::npos)
      << vk::describe(caps);
  caps.limits.denorm_independence = VK_SHADER_FLOAT_CONTROLS_INDEPENDENCE_NONE;
  EXPECT_EQ(glsl_target_of(caps, false).denorm_independence, I::None);
  EXPECT_TRUE(vk::float32_subnormals_may_flush(caps));
  caps.limits.denorm_preserve_float16 = true;
  EXPECT_FALSE(vk::float32_subnormals_may_flush(caps));
  caps.limits.denorm_independence = VK_SHADER_FLOAT_CONTROLS_INDEPENDENCE_ALL;
  EXPECT_EQ(glsl_target_of(caps, false).denorm_independence, I::All);
}

// out[i] = a[i] * b[i] + c[i] - a[i]: the shape a driver fuses into an fma.
Program multiply_add(DType d, int64_t n) {
  test::ProgramBuilder b("E_mad_" + std::to_string(n));
  auto out = b.global(d, n, true), x = b.global(d, n), y = b.global(d, n), z = b.global(d, n);
  auto i = b.special("gidx0", n);
  auto a = b.load(x, i);
  b.store(out, i, a * b.load(y, i) + b.load(z, i) - a);
  return b.build({n, 1, 1}, {1, 1, 1});
}

// NVIDIA's H100 fused a * b + c (1 ulp from the CPU device, which rounds the product): every float
// add, subtract and multiply in the module is NoContraction, once, and the module stays valid.
TEST(FloatControls, NoFloatArithmeticMayBeContracted) {
  // float16 natively (GlslTarget::everything()): also DenormPreserve 16 and 32 pass spirv-val.
  for (DType d : {dtypes::float32, dtypes::float64, dtypes::bfloat16, dtypes::float16}) {
    SCOPED_TRACE(d.name());
    const auto m = module_of(multiply_add(d, 64));
    std::vector<uint32_t> arithmetic, no_contraction;
    for (const auto& ins : instructions(m)) {
      const uint32_t op = ins[0] & 0xffffu;
      if (op == 129 || op == 131 || op == 133 || op == 142) arithmetic.push_back(ins[2]);
      if (op == 71 && ins.size() == 3 && ins[2] == 42) no_contraction.push_back(ins[1]);
    }
    EXPECT_GE(arithmetic.size(), 3u);
    std::sort(arithmetic.begin(), arithmetic.end());
    std::sort(no_contraction.begin(), no_contraction.end());
    EXPECT_EQ(std::adjacent_find(no_contraction.begin(), no_contraction.end()),
              no_contraction.end());
    EXPECT_TRUE(std::includes(no_contraction.begin(), no_contraction.end(), arithmetic.begin(),
                              arithmetic.end()));
    EXPECT_TRUE(spirv_valid(m, "float_controls_" + d.name()));
  }
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
  const GlslTarget t = glsl_target_of(caps, false);
  EXPECT_FALSE(t.float16);
  EXPECT_TRUE(t.storage_16bit);
  EXPECT_TRUE(t.denorm_preserve_float32);
  const std::string glsl = render_glsl(binary_op(Ops::MUL, dtypes::float16, 4), t);
  EXPECT_NE(glsl.find("f16_round("), std::string::npos) << glsl;
  EXPECT_EQ(glsl.find("float16_t("), std::string::npos) << glsl;
  EXPECT_FALSE(native_float16_asked(""));
  EXPECT_FALSE(native_float16_asked("0"));
  EXPECT_TRUE(native_float16_asked("1"));
  EXPECT_TRUE(glsl_target_of(caps, true).float16);
  caps.driver_name = "llvmpipe";  // folds float16 x - x to 0 for x = inf: never native
  EXPECT_FALSE(glsl_target_of(caps, true).float16);
}

// sqrt_exact moves the device's root to the correctly rounded one. Lavapipe's root is already
// right, so here the kernel's first root is pushed off by -3..+3 ulps, lane by lane, as a
// device within Vulkan's allowance might give it, and the result must still be std::sqrt's, bit
// for bit, over binade edges, subnormals and random floats.
class SqrtExact : public test::Kernels {};

TEST_F(SqrtExact, ARootOffByUpToThreeUlpsIsMovedToTheCorrectlyRoundedOne) {
  target_.exact_sqrt = true;  // Lavapipe's own kernels skip it: its sqrt is IEEE's
  std::vector<float> x;
  for (uint32_t bits :
       {0x1u, 0x2u, 0x3u, 0x7fffffu, 0x800000u, 0x800001u, 0x3f800000u, 0x3f800001u, 0x3f7fffffu,
        0x40000000u, 0x407fffffu, 0x7f7fffffu, 0x7f7ffffeu, 0x00400000u, 0x4b000000u}) {
    float f;
    std::memcpy(&f, &bits, 4);
    x.push_back(f);
  }
  std::mt19937 rng(7);
  while (x.size() < 4096) {
    uint32_t bits = rng() & 0x7fffffffu;
    if (bits - 1u >= 0x7f7fffffu) continue;
    float f;
    std::memcpy(&f, &bits, 4);
    x.push_back(f);
  }
  for (int i = 0; i < 64; ++i) x.push_back(float(i) * float(i));  // exact roots
  // Negatives are nan, also subnormal ones on a device that flushes them (simulated below),
  // which would otherwise take them as -0 and give -0; -0 stays -0.
  for (uint32_t bits : {0x80000001u, 0x80011111u, 0x807fffffu, 0x80800000u, 0xbf800000u,
                        0xff7fffffu, 0xff800000u, 0x80000000u}) {
    float f;
    std::memcpy(&f, &bits, 4);
    x.push_back(f);
  }
  const Program p = test::unary_op(Ops::SQRT, dtypes::float32, int64_t(x.size()));
  std::string glsl = render_glsl(p, target_);
  const std::string first = "uint b = floatBitsToUint(s);";
  ASSERT_NE(glsl.find(first), std::string::npos) << glsl;
  glsl.replace(glsl.find(first), first.size(),
               "uint b = floatBitsToUint(s) + uint(int(gl_GlobalInvocationID.x % 7u) - 3);");
  // The device's sqrt as a device without DenormPreserve may give it: subnormals flushed first.
  const std::string device_sqrt = "sqrt(a)";
  for (size_t at = glsl.find(device_sqrt); at != std::string::npos;
       at = glsl.find(device_sqrt, at + 1))
    glsl.replace(at, device_sqrt.size(),
                 "sqrt((floatBitsToUint(a) & 0x7f800000u) == 0u ? "
                 "uintBitsToFloat(floatBitsToUint(a) & 0x80000000u) : a)");
  ASSERT_NE(glsl.find("0x7f800000u) == 0u"), std::string::npos) << glsl;
  SpirvCompileOptions options;
  options.disk_cache = false;
  options.name = p.name;
  const std::vector<uint32_t> spirv = compile_glsl(glsl, options);
  const ArgLayout layout = arg_layout(p, target_);
  vk::Program kernel(rt_.device, p.name, spirv, layout.push_constant_bytes,
                     bindings_of(layout, p.buffers.size()));
  const size_t bytes = x.size() * 4;
  vk::Buffer out = rt_.allocator.allocate(bytes), in = rt_.allocator.allocate(bytes);
  test::Bytes input(bytes);
  std::memcpy(input.data(), x.data(), bytes);
  rt_.transfer.upload(in, input);
  vk::Queue queue(rt_.device, rt_.allocator);
  const std::vector<uint64_t> addresses{out.address(), in.address()};
  const std::vector<int64_t> vars;
  std::vector<std::byte> args = pack_args(p, layout, addresses, vars);
  ASSERT_FALSE(layout.spilled);
  const auto [gx, gy, gz] = launch_dims(p, target_);
  queue.dispatch(kernel, vk::Groups{gx, gy, gz}, args,
                 {{&out, vk::Access::ReadWrite}, {&in, vk::Access::Read}});
  queue.finish();
  test::Bytes result(bytes);
  rt_.transfer.download(out, result);
  int wrong = 0;
  for (size_t i = 0; i < x.size() && wrong < 10; ++i) {
    float got, want = std::sqrt(x[i]);
    std::memcpy(&got, result.data() + 4 * i, 4);
    if (std::isnan(want) ? !std::isnan(got) : std::memcmp(&got, &want, 4) != 0) {
      ++wrong;
      ADD_FAILURE() << "sqrt(" << x[i] << ") = " << got << ", want " << want << " (lane " << i
                    << ")";
    }
  }
}

}  // namespace
}  // namespace vkg
