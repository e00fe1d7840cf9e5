// The CPU reference interpreter on hand-built linear programs: each test runs a kernel and checks
// the exact numbers the program form promises.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include <vkgrad/codegen/cpu_interpreter.hpp>
#include <vkgrad/core/error.hpp>

#include "support/linear_programs.hpp"

namespace vkg::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// Runs p and expects a vkg::Error whose message contains every one of `parts`.
void expect_error(const Program& p, std::vector<Bytes> buffers,
                  std::initializer_list<const char*> parts, std::vector<int64_t> vars = {}) {
  try {
    run_on_cpu(p, buffers, vars);
    ADD_FAILURE() << "no error from kernel " << p.name;
  } catch (const Error& e) {
    for (const char* part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(CpuInterpreter, ElementwiseAddFloat32) {
  const int64_t n = 100;  // not a multiple of the workgroup size of 32: the last 28 lanes are idle
  std::vector<float> a(n), b(n);
  for (int64_t i = 0; i < n; ++i) a[i] = 0.5f * float(i), b[i] = 1000.0f - float(i);
  std::vector<Bytes> bufs{Bytes(n * 4), to_bytes(a), to_bytes(b)};
  run_on_cpu(elementwise_add(dtypes::float32, n), bufs);
  const auto out = from_bytes<float>(bufs[0]);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(out[i], 1000.0f - 0.5f * float(i)) << i;
}

TEST(CpuInterpreter, ElementwiseAddInt32WrapsAround) {
  std::vector<int32_t> a{INT32_MAX, -5, INT32_MIN}, b{1, 7, -1};
  std::vector<Bytes> bufs{Bytes(12), to_bytes(a), to_bytes(b)};
  run_on_cpu(elementwise_add(dtypes::int32, 3), bufs);
  EXPECT_EQ(from_bytes<int32_t>(bufs[0]), (std::vector<int32_t>{INT32_MIN, 2, INT32_MAX}));
}

TEST(CpuInterpreter, ElementwiseAddFloat16RoundsEveryResult) {
  auto h = [](float f) { return float16_t(f); };
  // 1 + 2^-11 is a tie between 1 and 1 + 2^-10: even wins. 2048 + 1 likewise stays 2048.
  // 65504 + 16 overflows to inf.
  std::vector<float16_t> a{h(1.0f), h(2048.0f), h(65504.0f), h(0.1f)},
      b{h(0x1p-11f), h(1.0f), h(16.0f), h(0.2f)};
  std::vector<Bytes> bufs{Bytes(8), to_bytes(a), to_bytes(b)};
  run_on_cpu(elementwise_add(dtypes::float16, 4), bufs);
  const auto out = from_bytes<float16_t>(bufs[0]);
  EXPECT_EQ(float(out[0]), 1.0f);
  EXPECT_EQ(float(out[1]), 2048.0f);
  EXPECT_EQ(float(out[2]), kInf);
  EXPECT_EQ(out[3].bits, h(float(h(0.1f)) + float(h(0.2f))).bits);
}

TEST(CpuInterpreter, DotProductOfSeed000Prints11) {
  std::vector<Bytes> bufs{Bytes(4), to_bytes(std::vector<int32_t>{1, 2}),
                          to_bytes(std::vector<int32_t>{3, 4})};
  run_on_cpu(dot_product(), bufs);
  EXPECT_EQ(from_bytes<int32_t>(bufs[0])[0], 11);
}

TEST(CpuInterpreter, MaskedLoadReadsAltAndNeverTouchesMemoryOutOfBounds) {
  std::vector<Bytes> bufs{Bytes(40), to_bytes(std::vector<float>{1, 2, 3, 4, 5})};
  run_on_cpu(padded_load(), bufs);
  EXPECT_EQ(from_bytes<float>(bufs[0]),
            (std::vector<float>{-1.5f, -1.5f, -1.5f, 1, 2, 3, 4, 5, -1.5f, -1.5f}));
}

TEST(CpuInterpreter, UnmaskedOutOfBoundsLoadThrowsNamingKernelSlotAndIndex) {
  // elementwise_add over 8 elements, given 5-element inputs.
  std::vector<Bytes> bufs{Bytes(32), Bytes(20), Bytes(32)};
  expect_error(elementwise_add(dtypes::float32, 8), bufs,
               {"E_8", "load at index 5", "buffer 1", "[0, 5)"});
}

TEST(CpuInterpreter, OutOfBoundsStoreThrows) {
  std::vector<Bytes> bufs{Bytes(16), Bytes(32), Bytes(32)};
  expect_error(elementwise_add(dtypes::float32, 8), bufs, {"store at index 4", "buffer 0"});
}

TEST(CpuInterpreter, IntDivModTruncateTowardZeroOnEverySignCombination) {
  std::vector<int32_t> a{7, -7, 7, -7, 6, -6, 0, INT32_MIN, INT32_MAX, 1},
      b{2, 2, -2, -2, 3, -3, -5, -1, 10, -7};
  std::vector<Bytes> bufs{Bytes(40), Bytes(40), to_bytes(a), to_bytes(b)};
  run_on_cpu(int_div_mod(dtypes::int32, 10), bufs);
  EXPECT_EQ(from_bytes<int32_t>(bufs[0]),
            (std::vector<int32_t>{3, -3, -3, 3, 2, 2, 0, INT32_MIN, 214748364, 0}));
  EXPECT_EQ(from_bytes<int32_t>(bufs[1]), (std::vector<int32_t>{1, -1, 1, -1, 0, 0, 0, 0, 7, 1}));
}

TEST(CpuInterpreter, IntDivModOnNarrowAndWideTypes) {
  std::vector<int8_t> a{-128, -7, 100}, b{-1, 2, -3};
  std::vector<Bytes> bufs{Bytes(3), Bytes(3), to_bytes(a), to_bytes(b)};
  run_on_cpu(int_div_mod(dtypes::int8, 3), bufs);
  EXPECT_EQ(from_bytes<int8_t>(bufs[0]), (std::vector<int8_t>{-128, -3, -33}));  // -128 / -1 wraps
  EXPECT_EQ(from_bytes<int8_t>(bufs[1]), (std::vector<int8_t>{0, -1, 1}));

  std::vector<int64_t> c{-(int64_t(1) << 40) - 3, 9}, d{int64_t(1) << 20, -4};
  std::vector<Bytes> wide{Bytes(16), Bytes(16), to_bytes(c), to_bytes(d)};
  run_on_cpu(int_div_mod(dtypes::int64, 2), wide);
  EXPECT_EQ(from_bytes<int64_t>(wide[0]), (std::vector<int64_t>{-(int64_t(1) << 20), -2}));
  EXPECT_EQ(from_bytes<int64_t>(wide[1]), (std::vector<int64_t>{-3, 1}));

  std::vector<uint32_t> e{4000000000u, 7}, f{3, 2};
  std::vector<Bytes> u{Bytes(8), Bytes(8), to_bytes(e), to_bytes(f)};
  run_on_cpu(int_div_mod(dtypes::uint32, 2), u);
  EXPECT_EQ(from_bytes<uint32_t>(u[0]), (std::vector<uint32_t>{1333333333u, 3}));
  EXPECT_EQ(from_bytes<uint32_t>(u[1]), (std::vector<uint32_t>{1, 1}));
}

TEST(CpuInterpreter, BoolStorageReadsAnyNonzeroByteAsTrue) {
  std::vector<uint8_t> in{0, 1, 2, 255, 0};
  std::vector<int32_t> values{1, 2, 3, -4, 100};
  std::vector<Bytes> bufs{Bytes(5), Bytes(5), to_bytes(in), to_bytes(values)};
  run_on_cpu(bool_storage(5), bufs);
  EXPECT_EQ(from_bytes<uint8_t>(bufs[0]), (std::vector<uint8_t>{1, 0, 0, 0, 1}));
  EXPECT_EQ(from_bytes<uint8_t>(bufs[1]), (std::vector<uint8_t>{0, 0, 1, 0, 1}));
}

TEST(CpuInterpreter, WorkgroupSumThroughLocalMemoryAndBarrier) {
  const int64_t rows = 3;
  std::vector<float> in(rows * 16);
  for (size_t i = 0; i < in.size(); ++i) in[i] = 0.5f * float(i);
  std::vector<Bytes> bufs{Bytes(rows * 4), to_bytes(in)};
  run_on_cpu(workgroup_sum(rows), bufs);
  // row g sums 0.5 * (16g + k) for k < 16 = 128g + 60.
  EXPECT_EQ(from_bytes<float>(bufs[0]), (std::vector<float>{60, 188, 316}));
}

TEST(CpuInterpreter, LocalReadWithoutBarrierIsReportedAsARace) {
  Program p = workgroup_sum(1);
  std::erase_if(p.uops, [](const UOpPtr& u) { return u->op == Ops::BARRIER; });
  std::vector<Bytes> bufs{Bytes(4), Bytes(64)};
  expect_error(p, bufs, {"r_1_16", "no BARRIER between"});
}

TEST(CpuInterpreter, SubgroupShuffleReadsAnotherLanesValue) {
  std::vector<float> in(16);
  for (int i = 0; i < 16; ++i) in[size_t(i)] = float(i);
  std::vector<Bytes> bufs{Bytes(16 * 4), to_bytes(in)};
  run_on_cpu(subgroup_shuffle(2), bufs);
  const auto out = from_bytes<float>(bufs[0]);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(out[size_t(i)], 10.0f * float(i / 8 * 8 + 3) + float(i / 8 * 8 + 6));
  // A launch of 8 lanes of which only 5 run: lane 6 has returned, so reading it is an error.
  expect_error(subgroup_shuffle(2, 5), {Bytes(16 * 4), to_bytes(in)}, {"shuffle from lane 6"});
}

TEST(CpuInterpreter, Vec4LoadAddStoreAndLaneShuffle) {
  const int64_t n = 12;
  std::vector<float> a(n), b(n);
  for (int64_t i = 0; i < n; ++i) a[i] = float(i), b[i] = 100.0f * float(i);
  std::vector<Bytes> bufs{Bytes(n * 4), Bytes(n * 4), to_bytes(a), to_bytes(b)};
  run_on_cpu(vec4_add(n), bufs);
  const auto sum = from_bytes<float>(bufs[0]), rev = from_bytes<float>(bufs[1]);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(sum[i], 101.0f * float(i));
    EXPECT_EQ(rev[i], 101.0f * float(i / 4 * 4 + 3 - i % 4));
  }
}

TEST(CpuInterpreter, FloatOpsPropagateNanAndInfinity) {
  std::vector<float> a{kNan, 1.0f, kInf, -kInf, 0.0f, -0.0f},
      b{1.0f, kNan, kInf, 2.0f, -0.0f, 0.0f};
  auto run = [&](Ops op) {
    Program p = binary_op(op, dtypes::float32, 6);
    std::vector<Bytes> bufs{Bytes(is_comparison(op) ? 6 : 24), to_bytes(a), to_bytes(b)};
    run_on_cpu(p, bufs);
    return bufs[0];
  };
  const auto mx = from_bytes<float>(run(Ops::MAX));
  EXPECT_TRUE(std::isnan(mx[0]) && std::isnan(mx[1]));  // nan wins from either side
  EXPECT_EQ(mx[2], kInf);
  EXPECT_EQ(mx[3], 2.0f);
  EXPECT_EQ(from_bytes<uint8_t>(run(Ops::CMPNE)), (std::vector<uint8_t>{1, 1, 0, 1, 0, 0}));
  EXPECT_EQ(from_bytes<uint8_t>(run(Ops::CMPLT)), (std::vector<uint8_t>{0, 0, 0, 1, 0, 0}));
  const auto sum = from_bytes<float>(run(Ops::ADD));
  EXPECT_TRUE(std::isnan(sum[0]) && std::isnan(sum[1]));
  EXPECT_EQ(sum[2], kInf);
  EXPECT_EQ(sum[3], -kInf);
  EXPECT_FALSE(std::signbit(sum[4]));  // 0 + -0 = +0
}

TEST(CpuInterpreter, TranscendentalsAtTheEdges) {
  std::vector<float> x{0.0f, kInf, -kInf, kNan, -1.0f, 1e30f};
  auto run = [&](Ops op) {
    std::vector<Bytes> bufs{Bytes(24), to_bytes(x)};
    run_on_cpu(unary_op(op, dtypes::float32, 6), bufs);
    return from_bytes<float>(bufs[0]);
  };
  const auto e = run(Ops::EXP2), l = run(Ops::LOG2), s = run(Ops::SIN), q = run(Ops::SQRT),
             r = run(Ops::RECIP);
  EXPECT_EQ(e[0], 1.0f);
  EXPECT_EQ(e[1], kInf);
  EXPECT_EQ(e[2], 0.0f);
  EXPECT_TRUE(std::isnan(e[3]));
  EXPECT_EQ(l[0], -kInf);
  EXPECT_EQ(l[1], kInf);
  EXPECT_TRUE(std::isnan(l[4]));
  EXPECT_TRUE(std::isnan(s[1]));
  EXPECT_EQ(s[5], std::sin(1e30f));  // libm reduces large arguments exactly
  EXPECT_TRUE(std::isnan(q[4]));
  EXPECT_EQ(r[0], kInf);
  EXPECT_EQ(r[2], -0.0f);
}

TEST(CpuInterpreter, CastTruncatesAndSaturatesAndBitcastKeepsBits) {
  std::vector<float> x{2.9f, -2.9f, 3e9f, -3e9f, kNan, 0.5f};
  std::vector<Bytes> bufs{Bytes(24), to_bytes(x)};
  run_on_cpu(convert_op(Ops::CAST, dtypes::float32, dtypes::int32, 6), bufs);
  EXPECT_EQ(from_bytes<int32_t>(bufs[0]),
            (std::vector<int32_t>{2, -2, INT32_MAX, INT32_MIN, 0, 0}));
  run_on_cpu(convert_op(Ops::BITCAST, dtypes::float32, dtypes::uint32, 6), bufs);
  EXPECT_EQ(from_bytes<uint32_t>(bufs[0])[5], 0x3f000000u);
  bufs[0].assign(6, std::byte{7});
  run_on_cpu(convert_op(Ops::CAST, dtypes::float32, dtypes::bool_, 6), bufs);
  EXPECT_EQ(from_bytes<uint8_t>(bufs[0]),
            (std::vector<uint8_t>{1, 1, 1, 1, 1, 1}));  // nan is not 0
}

TEST(CpuInterpreter, ThreefryMatchesTheRandom123KnownAnswers) {
  std::vector<uint64_t> x{0, ~uint64_t(0), 0x85a308d3243f6a88ull},
      key{0, ~uint64_t(0), 0x0370734413198a2eull};
  std::vector<Bytes> bufs{Bytes(24), to_bytes(x), to_bytes(key)};
  run_on_cpu(binary_op(Ops::THREEFRY, dtypes::uint64, 3), bufs);
  EXPECT_EQ(
      from_bytes<uint64_t>(bufs[0]),
      (std::vector<uint64_t>{0x99ba4efe6b200159ull, 0xbb002be71cb996fcull, 0x483df7a0c4923a9cull}));
}

TEST(CpuInterpreter, VariableBoundsALoopAndIsChecked) {
  ProgramBuilder b("r_n");
  auto out = b.global(dtypes::int32, 1, true), in = b.global(dtypes::int32, 8);
  auto n = b.var("n", 1, 8);
  auto r = b.range(0, n);
  auto acc = b.acc(0, ProgramBuilder::i32(0), {r});
  auto sum = b.assign(acc, acc + b.load(in, r));
  b.end_range(r);
  b.store(out, ProgramBuilder::i32(0), sum);
  Program p = b.build({1, 1, 1}, {1, 1, 1});
  std::vector<Bytes> bufs{Bytes(4), to_bytes(std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8})};
  run_on_cpu(p, bufs, {5});
  EXPECT_EQ(from_bytes<int32_t>(bufs[0])[0], 15);
  expect_error(p, bufs, {"'n' = 9", "[1, 8]"}, {9});
}

TEST(CpuInterpreter, MalformedProgramsAreErrors) {
  Program p = dot_product();
  std::swap(p.uops[3], p.uops[6]);  // a node before one of its sources
  std::vector<Bytes> bufs{Bytes(4), Bytes(8), Bytes(8)};
  expect_error(p, bufs, {"r_2", "not defined before its use"});
  Program q = dot_product();
  std::erase_if(q.uops, [](const UOpPtr& u) { return u->op == Ops::ENDRANGE; });
  expect_error(q, bufs, {"never closed"});
  Program r = padded_load();
  r.global_size = {4, 1, 1};  // gidx0 of size 10 would never see 4..9
  expect_error(r, {Bytes(40), Bytes(20)}, {"gidx0 of size 10 exceeds the launch's 4"});
}

}  // namespace
}  // namespace vkg::test
