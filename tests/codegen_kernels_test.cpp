// End to end: each hand-built program rendered to GLSL, compiled, run on the Vulkan device through
// the vk runtime, and compared element by element with the CPU reference interpreter; then the
// edges a real launch has (inf and nan, huge grids, many buffers, tensors over 128 MiB).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <sstream>

#include <vkgrad/codegen/glsl_renderer.hpp>
#include <vkgrad/codegen/spirv_compiler.hpp>
#include <vkgrad/core/symbolic.hpp>
#include <vkgrad/devices/vk_target.hpp>
#include <vkgrad/vk/args.hpp>
#include <vkgrad/vk/queue.hpp>
#include <vkgrad/vk/runtime.hpp>

#include "support/kernel_agree.hpp"
#include "support/linear_programs.hpp"

namespace vkg::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

TEST_F(Kernels, ElementwiseAddAgrees) {
  const int64_t n = 1000;
  std::vector<float> a(n), b(n);
  std::vector<int32_t> ia(n), ib(n);
  std::vector<float16_t> ha(n), hb(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = std::sin(float(i)) * 1000.0f, b[i] = 1.0f / float(i + 1);
    ia[i] = int32_t(i * 2654435761u), ib[i] = int32_t(i * 40503u) - 7;
    ha[i] = float16_t(a[i] / 16), hb[i] = float16_t(b[i]);
  }
  expect_agree(elementwise_add(dtypes::float32, n), {Bytes(n * 4), to_bytes(a), to_bytes(b)});
  expect_agree(elementwise_add(dtypes::int32, n), {Bytes(n * 4), to_bytes(ia), to_bytes(ib)});
  expect_agree(elementwise_add(dtypes::float16, n), {Bytes(n * 2), to_bytes(ha), to_bytes(hb)});
}

TEST_F(Kernels, DotProductOfSeed000Prints11OnTheDevice) {
  auto out = expect_agree(dot_product(), {Bytes(4), to_bytes(std::vector<int32_t>{1, 2}),
                                          to_bytes(std::vector<int32_t>{3, 4})});
  EXPECT_EQ(from_bytes<int32_t>(out[0])[0], 11);
}

TEST_F(Kernels, MaskedLoadWithOutOfBoundsRawIndexAgrees) {
  auto out = expect_agree(padded_load(), {Bytes(40), to_bytes(std::vector<float>{1, 2, 3, 4, 5})});
  EXPECT_EQ(from_bytes<float>(out[0]),
            (std::vector<float>{-1.5f, -1.5f, -1.5f, 1, 2, 3, 4, 5, -1.5f, -1.5f}));
}

// A vec4 load under one mask for its four elements (a padded conv input read four channels at a
// time): masked groups read the alt vector, the others one aligned vec4.
TEST_F(Kernels, MaskedVec4LoadAgrees) {
  const int64_t groups = 5;
  using B = ProgramBuilder;
  B b("E_masked_vec4");
  auto out = b.global(dtypes::float32, 4 * groups, true);
  auto in = b.global(dtypes::float32, 4 * groups);
  auto g = b.special("gidx0", groups);
  const DType f4 = dtypes::float32.vec(4);
  auto inside = alu(Ops::AND, g->ne(0), g->lt(4));
  auto v = b.load(in, g * 4, inside, UOp::const_(f4, -1.5), 4);
  b.store(out, g * 4, v + UOp::const_(f4, 1.0));
  const Program p = b.build({groups, 1, 1}, {1, 1, 1});
  std::vector<float> x(4 * groups);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i) * 0.25f;
  auto got = from_bytes<float>(expect_agree(p, {Bytes(4 * groups * 4), to_bytes(x)})[0]);
  for (int64_t i = 0; i < 4 * groups; ++i)
    EXPECT_EQ(got[size_t(i)], i < 4 || i >= 16 ? -0.5f : float(i) * 0.25f + 1.0f) << i;
}

TEST_F(Kernels, IntDivModWithNegativeOperandsAgree) {
  std::vector<int32_t> a, b;
  for (int32_t x : {7, -7, 6, -6, 0, 1, -1, 13, -13, INT32_MAX, INT32_MIN + 1})
    for (int32_t y : {1, -1, 2, -2, 3, -3, 5, -5, 7, -7, 1000, -1000})
      a.push_back(x), b.push_back(y);
  const int64_t n = int64_t(a.size());
  auto out = expect_agree(int_div_mod(dtypes::int32, n),
                          {Bytes(n * 4), Bytes(n * 4), to_bytes(a), to_bytes(b)});
  const auto q = from_bytes<int32_t>(out[0]), r = from_bytes<int32_t>(out[1]);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(q[i], a[i] / b[i]) << a[i] << " / " << b[i];
    EXPECT_EQ(r[i], a[i] % b[i]) << a[i] << " % " << b[i];
  }
  std::vector<int64_t> wa{-(int64_t(1) << 40) - 3, 9, -9}, wb{int64_t(1) << 20, -4, 4};
  expect_agree(int_div_mod(dtypes::int64, 3), {Bytes(24), Bytes(24), to_bytes(wa), to_bytes(wb)});
  std::vector<int8_t> na{-128, -7, 100, 7}, nb{-1, 2, -3, -2};
  expect_agree(int_div_mod(dtypes::int8, 4), {Bytes(4), Bytes(4), to_bytes(na), to_bytes(nb)});
  std::vector<uint32_t> ua{4000000000u, 7}, ub{3, 2};
  expect_agree(int_div_mod(dtypes::uint32, 2), {Bytes(8), Bytes(8), to_bytes(ua), to_bytes(ub)});
}

// x / 0 = 0, x % 0 = x and shift counts modulo the width (core/alu_semantics.hpp), on Vulkan (the
// renderer's guards; unguarded, Lavapipe gave 0xffffffff for unsigned x / 0) and the CPU device;
// constant folding computes the same through the same table where it folds, and declines the
// cases C leaves undefined (exec_alu's nullopt), leaving them to the device.
TEST_F(Kernels, DivisionByZeroAndWideShiftsAgreeWithTheCpuDeviceAndTheFolder) {
  const std::vector<int32_t> a{7, -7, 0, INT32_MIN, 5}, b{0, 0, 0, 0, 2};
  auto out =
      expect_agree(int_div_mod(dtypes::int32, 5), {Bytes(20), Bytes(20), to_bytes(a), to_bytes(b)});
  EXPECT_EQ(from_bytes<int32_t>(out[0]), (std::vector<int32_t>{0, 0, 0, 0, 2}));
  EXPECT_EQ(from_bytes<int32_t>(out[1]), (std::vector<int32_t>{7, -7, 0, INT32_MIN, 1}));
  const std::vector<uint32_t> ua{7, 0, 4000000000u}, ub{0, 0, 0};
  out = expect_agree(int_div_mod(dtypes::uint32, 3),
                     {Bytes(12), Bytes(12), to_bytes(ua), to_bytes(ub)});
  EXPECT_EQ(from_bytes<uint32_t>(out[0]), (std::vector<uint32_t>{0, 0, 0}));
  EXPECT_EQ(from_bytes<uint32_t>(out[1]), ua);
  const std::vector<int8_t> na{-128, 9}, nb{0, 0};
  expect_agree(int_div_mod(dtypes::int8, 2), {Bytes(2), Bytes(2), to_bytes(na), to_bytes(nb)});
  const std::vector<int64_t> wa{-(int64_t(1) << 40), 3}, wb{0, 0};
  expect_agree(int_div_mod(dtypes::int64, 2), {Bytes(16), Bytes(16), to_bytes(wa), to_bytes(wb)});

  const std::vector<int32_t> x{1, 1, 1, 3, -8, -8, 1 << 20}, c{5, 32, 33, -1, 40, 31, 36};
  for (Ops op : {Ops::SHL, Ops::SHR}) {
    SCOPED_TRACE(op_name(op));
    const auto got = from_bytes<int32_t>(
        expect_agree(binary_op(op, dtypes::int32, 7), {Bytes(28), to_bytes(x), to_bytes(c)})[0]);
    for (size_t i = 0; i < x.size(); ++i) {
      const int s = c[i] & 31;
      EXPECT_EQ(got[i], op == Ops::SHL ? int32_t(uint32_t(x[i]) << s) : x[i] >> s) << i;
      const auto folded =
          exec_alu(op, dtypes::int32, dtypes::int32, std::vector<int64_t>{x[i], c[i]});
      if (c[i] >= 0 && c[i] < 32)
        EXPECT_EQ(folded, got[i]) << i;
      else
        EXPECT_EQ(folded, std::nullopt) << i;
    }
  }
  const std::vector<uint8_t> bx{1, 0x80, 3}, bc{9, 15, 8};
  expect_agree(binary_op(Ops::SHL, dtypes::uint8, 3), {Bytes(3), to_bytes(bx), to_bytes(bc)});
  expect_agree(binary_op(Ops::SHR, dtypes::uint8, 3), {Bytes(3), to_bytes(bx), to_bytes(bc)});
  for (size_t i = 0; i < a.size(); ++i) {
    const auto q =
        exec_alu(Ops::IDIV, dtypes::int32, dtypes::int32, std::vector<int64_t>{a[i], b[i]});
    if (b[i] == 0)
      EXPECT_EQ(q, std::nullopt);
    else
      EXPECT_EQ(q, a[i] / b[i]);
  }
}

TEST_F(Kernels, BoolStorageAgrees) {
  auto out = expect_agree(bool_storage(5),
                          {Bytes(5), Bytes(5), to_bytes(std::vector<uint8_t>{0, 1, 2, 255, 0}),
                           to_bytes(std::vector<int32_t>{1, 2, 3, -4, 100})});
  EXPECT_EQ(from_bytes<uint8_t>(out[0]), (std::vector<uint8_t>{1, 0, 0, 0, 1}));
  EXPECT_EQ(from_bytes<uint8_t>(out[1]), (std::vector<uint8_t>{0, 0, 1, 0, 1}));
}

TEST_F(Kernels, WorkgroupSumThroughLocalMemoryAgrees) {
  const int64_t rows = 7;
  std::vector<float> in(rows * 16);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = 0.5f * float(i);
  auto out = expect_agree(workgroup_sum(rows), {Bytes(rows * 4), to_bytes(in)});
  const auto sums = from_bytes<float>(out[0]);
  for (int64_t g = 0; g < rows; ++g) EXPECT_EQ(sums[g], 128.0f * float(g) + 60.0f);
}

TEST_F(Kernels, SubgroupShuffleAgrees) {
  if (!target_.subgroup_shuffle || target_.subgroup_size != 8)
    GTEST_SKIP() << "needs 8-wide subgroups";
  std::vector<float> in(3 * 8);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = float(i);
  const auto out =
      from_bytes<float>(expect_agree(subgroup_shuffle(3), {Bytes(in.size() * 4), to_bytes(in)})[0]);
  for (std::size_t i = 0; i < in.size(); ++i)
    EXPECT_EQ(out[i], 10.0f * float(i / 8 * 8 + 3) + float(i / 8 * 8 + 6));
}

TEST_F(Kernels, Vec4LoadAddStoreAgrees) {
  const int64_t n = 64;
  std::vector<float> a(n), b(n);
  for (int64_t i = 0; i < n; ++i) a[i] = float(i), b[i] = 0.25f * float(i * i);
  expect_agree(vec4_add(n), {Bytes(n * 4), Bytes(n * 4), to_bytes(a), to_bytes(b)});
}

TEST_F(Kernels, ThreefryAgrees) {
  std::vector<uint64_t> x{0, ~uint64_t(0), 0x85a308d3243f6a88ull, 12345},
      key{0, ~uint64_t(0), 0x0370734413198a2eull, 99};
  auto out = expect_agree(binary_op(Ops::THREEFRY, dtypes::uint64, 4),
                          {Bytes(32), to_bytes(x), to_bytes(key)});
  EXPECT_EQ(from_bytes<uint64_t>(out[0])[0], 0x99ba4efe6b200159ull);
}

// Values that take every op to its edges: signed zeros, infinities, nan, subnormals, huge and
// tiny magnitudes, multiples of pi.
const std::vector<double> kEdges{0.0,  -0.0,  1.0,       -1.0,  0.5,   kInf,  -kInf,     kNan,
                                 1e30, -1e30, 3.1415927, 100.0, 1e-40, 1e6,   12345.678, 1e10,
                                 88.0, 128.0, -150.0,    2.0,   0.1,   -33.3, 6e-8};
const std::vector<double> kPairEdges{0.0,   -0.0, 1.0,  -1.0,  0.5, kInf,
                                     -kInf, kNan, 1e30, 1e-40, 3.5, -7.0};

Bytes pack_floats(DType d, const std::vector<double>& v) {
  Bytes b(v.size() * std::size_t(d.itemsize()));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (d == dtypes::float16) {
      const uint16_t h = float16_t(float(v[i])).bits;
      std::memcpy(b.data() + 2 * i, &h, 2);
    } else if (d == dtypes::float32) {
      const float f = float(v[i]);
      std::memcpy(b.data() + 4 * i, &f, 4);
    } else {
      std::memcpy(b.data() + 8 * i, &v[i], 8);
    }
  }
  return b;
}

// The error each op may have on a device against the interpreter's libm, in units in the last
// place. Vulkan allows 2.5 ulp for division and sqrt and 3 for exp2 and log2; sin is the renderer's
// own exact reduction and polynomial; everything else must match bit for bit (nan for nan).
int ulps_for(Ops op) {
  switch (op) {
    case Ops::FDIV:
    case Ops::RECIP:
    case Ops::SQRT:
      return 3;
    case Ops::EXP2:
    case Ops::LOG2:
      return 4;
    case Ops::SIN:
    case Ops::COS:
      return 2;
    case Ops::ERF:  // the renderer's own series and erfc (glsl_helpers_transcendental.cpp) against
                    // glibc's erff
      return 4;
    case Ops::ERFC:  // Numerical Recipes' erfcc with an exact square
                     // (glsl_helpers_transcendental.cpp's erfc_tail)
      return 8;
    default:
      return 0;
  }
}

class FloatEdges : public Kernels, public testing::WithParamInterface<DType> {};

TEST_P(FloatEdges, UnaryOpsAgreeOnInfNanAndEdgeValues) {
  const DType d = GetParam();
  const int64_t n = int64_t(kEdges.size());
  std::vector<Ops> ops{Ops::SQRT, Ops::RECIP, Ops::NEG, Ops::TRUNC};
  if (d != dtypes::float64)
    ops.insert(ops.end(),
               {Ops::EXP2, Ops::LOG2, Ops::SIN, Ops::COS, Ops::ERF, Ops::ERFC});  // no double ones
  for (Ops op : ops) {
    SCOPED_TRACE(op_name(op));
    expect_agree(unary_op(op, d, n), {Bytes(n * d.itemsize()), pack_floats(d, kEdges)},
                 ulps_for(op));
  }
}

TEST_P(FloatEdges, BinaryOpsAgreeOnEveryPairOfEdgeValues) {
  const DType d = GetParam();
  std::vector<double> a, b;
  for (double x : kPairEdges)
    for (double y : kPairEdges) a.push_back(x), b.push_back(y);
  const int64_t n = int64_t(a.size());
  for (Ops op : {Ops::ADD, Ops::SUB, Ops::MUL, Ops::FDIV, Ops::MAX, Ops::CMPLT, Ops::CMPNE}) {
    SCOPED_TRACE(op_name(op));
    const int64_t out = is_comparison(op) ? n : n * d.itemsize();
    expect_agree(binary_op(op, d, n), {Bytes(out), pack_floats(d, a), pack_floats(d, b)},
                 ulps_for(op));
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, FloatEdges,
                         testing::Values(dtypes::float32, dtypes::float16, dtypes::float64),
                         [](const testing::TestParamInfo<DType>& info) {
                           return info.param.name();
                         });

// Lavapipe's sin() returns -1 for sin(1e10) and sin(1e30) and is 8 ulp off at sin(128); its log2()
// gives -127 for log2(1e-40). The renderer reduces sin's argument itself and scales subnormals
// before log2, so these come out within an ulp or two of libm.
TEST_F(Kernels, SinOfLargeArgumentsAndLog2OfSubnormalsMatchLibm) {
  const std::vector<float> x{1e10f, 1e30f, -1e30f, 128.0f, 3.4e38f, -1e-40f, 8388609.0f, 1e-3f};
  const std::vector<float> y{1e-40f, 1.4e-45f, 1.1e-38f, 1e30f, 3e38f, 1.5f, 1e-3f, 0.7f};
  const int64_t n = int64_t(x.size());
  std::vector<Bytes> s{Bytes(n * 4), to_bytes(x)}, l{Bytes(n * 4), to_bytes(y)};
  run_on_vulkan(unary_op(Ops::SIN, dtypes::float32, n), s);
  run_on_vulkan(unary_op(Ops::LOG2, dtypes::float32, n), l);
  const auto sin_gpu = from_bytes<float>(s[0]), log_gpu = from_bytes<float>(l[0]);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_NEAR(sin_gpu[i], std::sin(double(x[i])), 2e-7) << "sin(" << x[i] << ")";
    EXPECT_NEAR(log_gpu[i], std::log2(double(y[i])), 2e-5) << "log2(" << y[i] << ")";
  }
}

TEST_F(Kernels, SinAgreesWithLibmAcrossEveryExponent) {
  std::vector<float> x;
  uint32_t state = 12345;
  for (uint32_t exponent = 100; exponent < 255; ++exponent)  // 2^-27 .. 2^127
    for (int k = 0; k < 24; ++k) {
      state = state * 1664525u + 1013904223u;
      x.push_back(std::bit_cast<float>((state & 0x807fffffu) | (exponent << 23)));
    }
  const int64_t n = int64_t(x.size());
  expect_agree(unary_op(Ops::SIN, dtypes::float32, n), {Bytes(n * 4), to_bytes(x)}, 2);
  expect_agree(unary_op(Ops::COS, dtypes::float32, n), {Bytes(n * 4), to_bytes(x)}, 2);
}

// cos was sin(pi/2 - x) once: pi/2 - x rounds in float, so cos(1e6) came out 0.93962 (libm 0.93675)
// and cos(1e10) as -sin(1e10). Its own op reduces x exactly and moves one quadrant on.
TEST_F(Kernels, CosOfLargeArgumentsMatchesLibm) {
  const std::vector<float> x{1e6f,        123456.7f, 3e5f, 1e10f, 1e20f,
                             1.00151e38f, -1e30f,    0.5f, 1e-5f, -0.0f};
  const int64_t n = int64_t(x.size());
  std::vector<Bytes> c{Bytes(n * 4), to_bytes(x)};
  run_on_vulkan(unary_op(Ops::COS, dtypes::float32, n), c);
  const auto cos_gpu = from_bytes<float>(c[0]);
  for (int64_t i = 0; i < n; ++i)
    EXPECT_NEAR(cos_gpu[i], std::cos(double(x[i])), 2e-7) << "cos(" << x[i] << ")";
}

// erf on both sides of the |x| = 1 switch between its series and 1 - erfc, out to where it
// rounds to +-1, and on tiny arguments: within 4 ulp of glibc's erff.
TEST_F(Kernels, ErfAgreesWithLibmAcrossItsRange) {
  std::vector<float> x;
  for (float v = -5.0f; v <= 5.0f; v += 0.01171875f) x.push_back(v);
  for (float v : {1e-30f, -1e-20f, 1e-8f, 3e-4f, 0.99999994f, 1.0f, 1.0000001f, 3.9f, 3.92f, 4.0f})
    x.push_back(v);
  const int64_t n = int64_t(x.size());
  expect_agree(unary_op(Ops::ERF, dtypes::float32, n), {Bytes(n * 4), to_bytes(x)}, 4);
}

// erfc through its tail, where it falls from 0.48 to subnormals and then 0 (past 10.06): within 8
// ulp of glibc's erfcf (6 at worst over a grid 8x finer). Rounding x^2 in the exponent lost up to
// 137 ulps there (8.2e-6 relative at x = 8.45; erfc(7) gave 4.1838169e-23, not 4.1838257e-23).
TEST_F(Kernels, ErfcKeepsItsDigitsInItsTail) {
  std::vector<float> x;
  for (float v = -10.5f; v <= 10.5f; v += 0.0107421875f) x.push_back(v);
  for (float v : {0.49999997f, 0.5f, 7.0f, 8.45305f, 9.9f, 10.06f, 10.5f, 10.500001f, 1e-30f})
    x.push_back(v);
  const int64_t n = int64_t(x.size());
  expect_agree(unary_op(Ops::ERFC, dtypes::float32, n), {Bytes(n * 4), to_bytes(x)}, 8);
}

// Lavapipe's 65535 workgroups per axis; a GPU's x axis takes 2^31 - 1, so the target rendered
// for is held to 65535 (as VKG_MAX_WORKGROUP_COUNT=65535 would do) to fold the grid on any device.
TEST_F(Kernels, MoreWorkgroupsThanOneAxisAllowsWithAPrimeElementCount) {
  for (uint32_t& count : target_.max_workgroup_count) count = std::min(count, 65535u);
  const int64_t n = 262147;  // prime: 65537 workgroups of 4, the last one three-quarters idle
  Program p = elementwise_add(dtypes::int32, n);
  p.global_size = {(n + 3) / 4, 1, 1};
  p.local_size = {4, 1, 1};
  ASSERT_GT(p.global_size[0], int64_t(target_.max_workgroup_count[0]));
  const auto [gx, gy, gz] = launch_dims(p, target_);
  EXPECT_GT(uint64_t(gy) * gz, 1u) << "the grid is folded over more than one axis";
  std::vector<int32_t> a(n), b(n);
  for (int64_t i = 0; i < n; ++i) a[i] = int32_t(i), b[i] = int32_t(3 * i + 1);
  auto out = expect_agree(p, {Bytes(n * 4), to_bytes(a), to_bytes(b)});
  const auto sum = from_bytes<int32_t>(out[0]);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(sum[i], 4 * i + 1) << i;
}

TEST_F(Kernels, FortyBufferArgumentsGoThroughTheSpilledArgumentBuffer) {
  // Vulkan guarantees only 4 storage buffers per stage (Lavapipe has 32); device addresses have
  // no such limit, and 40 addresses (320 bytes) exceed the 128 bytes of push constants.
  const int64_t n = 1000, inputs = 39;
  ProgramBuilder b("E_40_buffers");
  auto out = b.global(dtypes::float32, n, true);
  std::vector<UOpPtr> in;
  for (int k = 0; k < inputs; ++k) in.push_back(b.global(dtypes::float32, n));
  auto scale = b.var("scale", 1, 100);
  auto i = b.special("idx0", n);
  UOpPtr sum = ProgramBuilder::c(dtypes::float32, 0.0);
  for (int k = 0; k < inputs; ++k) sum = sum + b.load(in[k], i) * float(k + 1);
  b.store(out, i, sum * scale->cast(dtypes::float32));
  const Program p = b.build({(n + 63) / 64, 1, 1}, {64, 1, 1});
  ASSERT_TRUE(arg_layout(p, target_).spilled);

  std::vector<Bytes> bufs{Bytes(n * 4)};
  for (int k = 0; k < inputs; ++k) {
    std::vector<float> v(n);
    for (int64_t j = 0; j < n; ++j) v[j] = float((j + k) % 7);
    bufs.push_back(to_bytes(v));
  }
  auto result = expect_agree(p, bufs, 0, {3});
  const auto got = from_bytes<float>(result[0]);
  for (int64_t j = 0; j < n; ++j) {
    int64_t expected = 0;
    for (int k = 0; k < inputs; ++k) expected += (j + k) % 7 * (k + 1);
    ASSERT_EQ(got[j], float(3 * expected)) << j;
  }
}

TEST_F(Kernels, ATensorOver128MiBIsAddressedWhole) {
  // 40M float32 is 160 MB per buffer: past maxStorageBufferRange (128 MiB on Lavapipe), which
  // device addresses do not have. Checked against the closed form; the interpreter would be slow.
  const int64_t n = 40'000'000;
  Program p = elementwise_add(dtypes::float32, n);
  p.global_size = {n / 256, 1, 1};
  p.local_size = {256, 1, 1};
  std::vector<float> a(n), b(n);
  for (int64_t i = 0; i < n; ++i) a[i] = float(i % 1000003), b[i] = float(i / 1000003) * 0.5f;
  std::vector<Bytes> bufs{Bytes(n * 4), to_bytes(a), to_bytes(b)};
  run_on_vulkan(p, bufs);
  const auto out = from_bytes<float>(bufs[0]);
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) wrong += out[i] != a[i] + b[i];
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(out[n - 1], a[n - 1] + b[n - 1]);
}

// Vector ALU, vector bools, local vectors, swizzles, MULACC, shifts, 16-bit types, a masked
// store and an IF inside a loop, in one kernel: the paths the sample programs leave out. (float
// to int conversions stay in range: out of range they are undefined on GPUs.)
TEST_F(Kernels, VectorAndNarrowTypePathsAgree) {
  const int64_t groups = 6, n = 4 * groups;
  using B = ProgramBuilder;
  B b("E_mixed");
  auto out_f = b.global(dtypes::float32, n, true), out_i = b.global(dtypes::int32, n, true);
  auto out_b = b.global(dtypes::bool_, n, true), out_h = b.global(dtypes::float16, n, true);
  auto out_s = b.global(dtypes::int16, groups, true), out_u = b.global(dtypes::uint8, groups, true);
  auto in_f = b.global(dtypes::float32, n), in_i = b.global(dtypes::int32, n),
       in_h = b.global(dtypes::float16, n);
  auto temp = b.local(0, dtypes::float32, 8);
  auto g = b.special("gidx0", groups);
  auto i = g * 4;
  const DType f4 = dtypes::float32.vec(4), i4 = dtypes::int32.vec(4);
  auto vf = b.load(in_f, i, nullptr, nullptr, 4), vi = b.load(in_i, i, nullptr, nullptr, 4);
  auto m = vf->maximum(UOp::const_(f4, 0.5));
  auto w = vf->lt(UOp::const_(f4, -1.0))->where(vi->cast(f4), m);
  b.store(out_f, i, w);
  b.store(
      out_i, i,
      alu(Ops::XOR, alu(Ops::SHR, alu(Ops::SHL, vi, UOp::const_(i4, 3)), UOp::const_(i4, 1)), vi) %
          UOp::const_(i4, -7));
  b.store(out_b, i, alu(Ops::OR, vi->lt(UOp::const_(i4, 0)), vf->ne(vf)));
  auto vh = b.load(in_h, i, nullptr, nullptr, 4);
  b.store(out_h, i, UOp::make(Ops::MULACC, vh.get()->dtype, {vh, vh, vh->alu(Ops::RECIP)}));
  auto st = b.store(temp, B::i32(2), w);
  b.barrier({st});
  auto back = b.load(temp, B::i32(2), nullptr, nullptr, 4);
  auto hi = UOp::make(Ops::GEP, dtypes::float32.vec(2), {back}, std::vector<int64_t>{3, 0});
  auto r = b.range(0, B::i32(4));
  auto acc = b.acc(0, B::c(dtypes::int16, 0), {r});
  auto skip = b.if_(r->ne(2));
  auto lane = UOp::make(Ops::GEP, dtypes::int32, {vi}, std::vector<int64_t>{0}) + r;
  b.assign(acc, acc + lane->cast(dtypes::int16) * B::c(dtypes::int16, 3000));
  b.end_if(skip);
  b.end_range(r);
  b.store(out_s, g, acc);
  auto bytes = (g->cast(dtypes::uint8) * B::c(dtypes::uint8, 100)) +
               UOp::make(Ops::GEP, dtypes::float32, {hi}, std::vector<int64_t>{1})
                   ->cast(dtypes::int32)
                   ->cast(dtypes::uint8);
  b.store(out_u, g, bytes, g->lt(4));
  const Program p = b.build({groups, 1, 1}, {1, 1, 1});

  std::vector<float> f(n);
  std::vector<int32_t> k(n);
  std::vector<float16_t> h(n);
  for (int64_t j = 0; j < n; ++j) {
    f[j] = j % 5 == 2 ? kNan : float(j) * 0.75f - 6.0f;
    k[j] = int32_t(j * 977 - 9000);
    h[j] = float16_t(float(j) * 0.3f + 0.25f);
  }
  expect_agree(p,
               {Bytes(n * 4), Bytes(n * 4), Bytes(n), Bytes(n * 2), Bytes(groups * 2),
                Bytes(groups), to_bytes(f), to_bytes(k), to_bytes(h)},
               2);
}

}  // namespace
}  // namespace vkg::test
