// Special values (inf, nan, signed zero, out-of-range) through the ops users call: Vulkan agrees
// with the CPU reference device bit for bit on them, and both give what torch gives.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "support/device_compare.hpp"

using namespace vkg;
using namespace vkg::test;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// The same float in every bit that matters: nan matches any nan, and -0 differs from +0.
testing::AssertionResult same_float(float want, float got) {
  if (std::isnan(want) && std::isnan(got)) return testing::AssertionSuccess();
  if (std::bit_cast<uint32_t>(want) == std::bit_cast<uint32_t>(got))
    return testing::AssertionSuccess();
  return testing::AssertionFailure() << "want " << want << (std::signbit(want) ? " (sign set)" : "")
                                     << ", got " << got << (std::signbit(got) ? " (sign set)" : "");
}

// make(device) on CPU and VK: both must equal `want` element by element.
template <class Make>
void expect_on_both(Make&& make, const std::vector<float>& want) {
  for (const char* dev : {"CPU", "VK"}) {
    const std::vector<float> got = make(std::string(dev)).template to_vector<float>();
    ASSERT_EQ(got.size(), want.size()) << dev;
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_TRUE(same_float(want[i], got[i])) << dev << " element " << i;
  }
}

Tensor floats(std::vector<float> v, const std::string& dev) {
  const int64_t n = int64_t(v.size());
  return Tensor(v, {n}, dev);
}

}  // namespace

TEST(SpecialValues, DivisionByZeroIsIeeeOnEveryDevice) {
  const std::vector<float> x = {1, -1, 0, -0.0f, kInf, kNan, 3};
  // By a tensor of +0 and of -0.
  expect_on_both(
      [&](const std::string& d) { return floats(x, d) / Tensor::zeros({7}, dtypes::float32, d); },
      {kInf, -kInf, kNan, kNan, kInf, kNan, kInf});
  expect_on_both(
      [&](const std::string& d) { return floats(x, d) / floats(std::vector<float>(7, -0.0f), d); },
      {-kInf, kInf, kNan, kNan, -kInf, kNan, -kInf});
  // By a constant zero, which the compiler sees.
  expect_on_both([&](const std::string& d) { return floats(x, d) / 0.0f; },
                 {kInf, -kInf, kNan, kNan, kInf, kNan, kInf});
  expect_on_both([&](const std::string& d) { return floats(x, d) / -0.0f; },
                 {-kInf, kInf, kNan, kNan, -kInf, kNan, -kInf});
  // 0/0 through an integer-to-float division.
  expect_on_both(
      [&](const std::string& d) {
        return Tensor(std::vector<int>{0, 1, -1}, {3}, d) /
               Tensor(std::vector<int>{0, 0, 0}, {3}, d);
      },
      {kNan, kInf, -kInf});
}

TEST(SpecialValues, ReciprocalKeepsTheSignOfZero) {
  expect_on_both(
      [&](const std::string& d) {
        return floats({0.0f, -0.0f, kInf, -kInf, kNan}, d).reciprocal();
      },
      {kInf, -kInf, 0.0f, -0.0f, kNan});
}

TEST(SpecialValues, CompilerRewritesKeepInfNanAndSignedZero) {
  // sqrt of a negative is nan, and squaring keeps it.
  expect_on_both(
      [&](const std::string& d) {
        return floats({-1, -4, 4}, d).sqrt().square();
      },
      {kNan, kNan, 4});
  // (x * 1e38) * 10 with x = 0 is 0: the compiler must not fold it to x * inf.
  expect_on_both(
      [&](const std::string& d) {
        return (floats({0, -0.0f, 1}, d) * 1e38f) * 10.0f;
      },
      {0, -0.0f, kInf});
  // x - x is nan for inf, x * 0 is nan for inf and -0 for a negative x.
  expect_on_both(
      [&](const std::string& d) {
        const Tensor t = floats({kInf, 1, -2}, d);
        return t - t;
      },
      {kNan, 0, 0});
  expect_on_both(
      [&](const std::string& d) {
        return floats({kInf, 1, -2}, d) * 0.0f;
      },
      {kNan, 0, -0.0f});
  // A constant +0 operand: x + 0 is +0 for x = -0, 0 - x is +0 for x = +-0.
  expect_on_both(
      [&](const std::string& d) {
        return floats({-0.0f, 0.0f, 1}, d) + 0.0f;
      },
      {0, 0, 1});
  expect_on_both(
      [&](const std::string& d) {
        return 0.0f - floats({-0.0f, 0.0f, 1}, d);
      },
      {0, 0, -1});
  // x - (-0) is x + 0: +0 for x = -0 (Lavapipe gave -0, subtracting by adding the negation and
  // dropping that +0; the elementwise Jit fuzzer's seed 92000176). float16 the same.
  expect_on_both(
      [&](const std::string& d) {
        const Tensor t = floats({-0.0f, 0.0f, -2, kInf}, d);
        return t - Tensor::full_like(t, -0.0);
      },
      {0, 0, -2, kInf});
  expect_on_both(
      [&](const std::string& d) {
        const Tensor t = floats({-0.0f, 0.0f, -2, kInf}, d).cast(dtypes::float16);
        return (t - Tensor::full_like(t, -0.0)).cast(dtypes::float32);
      },
      {0, 0, -2, kInf});
  // x + 0 keeps -0 only as -0 + -0.
  expect_on_both(
      [&](const std::string& d) {
        return floats({-0.0f, -0.0f}, d) + floats({0.0f, -0.0f}, d);
      },
      {0, -0.0f});
}

// A zero that reaches the kernel as a cast of a constant (float16(0.0f), float(0) from an int or
// bool) is a constant +0 operand too: Lavapipe folded `float16_t(0.0f) * x` to 0 for x = inf and
// nan. Found by the differential fuzzer: the matmul of an empty float16 sum (its float32 zero
// cast to float16) with a row holding nan.
TEST(SpecialValues, ACastConstantZeroOperandKeepsInfNanAndSignedZero) {
  for (DType zero_from : {dtypes::float32, dtypes::int32, dtypes::bool_})
    for (DType d : {dtypes::float16, dtypes::bfloat16, dtypes::float32}) {
      SCOPED_TRACE(zero_from.name() + " zero as " + d.name());
      expect_on_both(
          [&](const std::string& dev) {
            const Tensor zero = Tensor::zeros({3}, zero_from, dev).cast(d);
            return (zero * floats({kInf, kNan, -6.5f}, dev).cast(d)).cast(dtypes::float32);
          },
          {kNan, kNan, -0.0f});
      expect_on_both(
          [&](const std::string& dev) {
            const Tensor zero = Tensor::zeros({3}, zero_from, dev).cast(d);
            return (zero + floats({-0.0f, kNan, -6.5f}, dev).cast(d)).cast(dtypes::float32);
          },
          {0.0f, kNan, -6.5f});
    }
  expect_on_both(
      [&](const std::string& dev) {
        const Tensor empty_sum = Tensor::zeros({1, 0}, dtypes::float16, dev).sum(1, true);
        return empty_sum.matmul(floats({kNan, -6.5f}, dev).cast(dtypes::float16).reshape({1, 2}))
            .cast(dtypes::float32);
      },
      {kNan, -0.0f});
}

// An operand that is an expression of constants only (log2 of |-1|, a difference of two
// constants) is folded by the driver after it inlines the helpers; one that folds to +0 is a +0
// operand as a CONST is: Lavapipe gave 0 for log2(|-1|) * inf (fuzzer seed 70118, (-1).pow(x)).
TEST(SpecialValues, AConstantExpressionThatIsZeroKeepsInfNanAndSignedZero) {
  expect_on_both(
      [&](const std::string& dev) {
        const Tensor x = floats({kInf, -kInf, kNan, -6.5f}, dev);
        return Tensor::full_like(x, -1.0).abs().log2() * x;
      },
      {kNan, kNan, kNan, -0.0f});
  for (DType d : {dtypes::float32, dtypes::float64}) {  // (the GLSL has no float64 log2)
    SCOPED_TRACE(d.name());
    expect_on_both(
        [&](const std::string& dev) {
          const Tensor x = floats({-0.0f, kNan, -6.5f}, dev).cast(d);
          const Tensor zero = Tensor::full_like(x, 3.0) - Tensor::full_like(x, 3.0);
          return (x + zero).cast(dtypes::float32);
        },
        {0.0f, kNan, -6.5f});
  }
}

// And in the 16-bit floats (which the driver folds as it does float32).
TEST(SpecialValues, AHalfConstantExpressionThatIsZeroKeepsInfNanAndSignedZero) {
  for (DType d : {dtypes::float16, dtypes::bfloat16}) {
    SCOPED_TRACE(d.name());
    expect_on_both(
        [&](const std::string& dev) {
          const Tensor x = floats({kInf, -kInf, kNan, -6.5f, -0.0f}, dev).cast(d);
          return (Tensor::full_like(x, -1.0).abs().log2() * x).cast(dtypes::float32);
        },
        {kNan, kNan, kNan, -0.0f, -0.0f});
    expect_on_both(
        [&](const std::string& dev) {
          const Tensor x = floats({-0.0f, kNan, kInf, -6.5f}, dev).cast(d);
          const Tensor zero = Tensor::full_like(x, 3.0) - Tensor::full_like(x, 3.0);
          return (x + zero).cast(dtypes::float32);
        },
        {0.0f, kNan, kInf, -6.5f});
  }
}

// x < x and x != x of bools and integers are false, and false as a number is a +0 operand:
// Lavapipe folded bool `!a && a` to false and then 0 * v to +0 where v < 0 gives -0 (fuzzer seed
// 111980: x.logical_not().lt(itself).ceil() * v, then a matmul).
TEST(SpecialValues, ACompareOfAValueWithItselfIsAConstantZeroOperand) {
  const std::vector<float> want = {-0.0f, kNan, kNan, -0.0f, 0.0f};
  for (DType d : {dtypes::float32, dtypes::bfloat16}) {
    SCOPED_TRACE(d.name());
    auto v = [&](const std::string& dev) {
      return floats({-6.5f, kInf, kNan, -0.0f, 2.0f}, dev).cast(d);
    };
    expect_on_both(
        [&](const std::string& dev) {
          const Tensor b = floats({0, 1, kNan, -2, 0}, dev).logical_not();
          return (b.lt(b).ceil() * v(dev)).cast(dtypes::float32);
        },
        want);
    expect_on_both(
        [&](const std::string& dev) {
          const Tensor b = floats({0, 1, kNan, -2, 0}, dev).logical_not();
          return (b.ne(b).cast(d) * v(dev)).cast(dtypes::float32);
        },
        want);
    expect_on_both(
        [&](const std::string& dev) {
          const Tensor i = floats({-3, 7, 0, 1, 2}, dev).cast(dtypes::int32);
          return (i.lt(i).cast(d) * v(dev)).cast(dtypes::float32);
        },
        want);
  }
  // With the compare folded the kernel reads nothing of its input, which is still declared (as
  // int64_t or uint8_t, whose storage extensions it then needs: fuzzer seeds 20261167, 20261248).
  for (DType d : {dtypes::int64, dtypes::uint8})
    expect_on_both(
        [&](const std::string& dev) {
          Tensor i = floats({3, 7, 0}, dev).cast(d);
          i.realize();
          return i.le(i).cast(dtypes::float32) + i.lt(i).cast(dtypes::float32);
        },
        {1, 1, 1});
  expect_on_both(
      [&](const std::string& dev) {  // the fuzzer's program, reduced
        const Tensor b = floats({0, 1, kNan, -2}, dev).reshape({1, 4}).logical_not();
        const Tensor w = floats({-6.5f, -1, -3, -2}, dev).cast(dtypes::bfloat16).reshape({1, 4});
        const Tensor col = floats({1, 2, 0.5f, 4}, dev).cast(dtypes::bfloat16).reshape({4, 1});
        return (b.lt(b).ceil() * w).matmul(col).cast(dtypes::float32);
      },
      {-0.0f});
}

// The same in a kernel that is upcast (4096 elements: vec4 lanes): the constant operand is then a
// VECTORIZE of four copies of the expression, which is a +0 operand as each copy is.
TEST(SpecialValues, AnUpcastConstantExpressionThatIsZeroKeepsInfNanAndSignedZero) {
  const std::vector<float> pattern = {kInf, -kInf, kNan, -6.5f, 0.0f, -0.0f, 3.0f};
  std::vector<float> x(4096), want(4096);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = pattern[i % pattern.size()];
    want[i] = 0.0f * x[i];  // log2(|-1|) = +0
  }
  expect_on_both(
      [&](const std::string& dev) {
        const Tensor t = floats(x, dev);
        return Tensor::full_like(t, -1.0).abs().log2() * t;
      },
      want);
}

// float16 arithmetic keeps inf and nan as float32 does: Lavapipe folded float16 `x - x` and
// `-x + x` to 0 for x = inf although the kernel declares SignedZeroInfNanPreserve for 16 bits,
// so there float16 is computed in float32 (devices/vk_target.hpp). Found by the differential
// fuzzer: cat(-x + x, y) of float16 with inf in x.
TEST(SpecialValues, Float16ArithmeticKeepsInfAndNan) {
  auto halves = [](const std::string& dev) {
    Tensor x = floats({kInf, -kInf, kNan, -6.5f, 0}, dev).cast(dtypes::float16);
    return x.realize();
  };
  expect_on_both(
      [&](const std::string& dev) {
        const Tensor x = halves(dev);
        return (x - x).cast(dtypes::float32);
      },
      {kNan, kNan, kNan, 0, 0});
  expect_on_both(
      [&](const std::string& dev) {
        const Tensor x = halves(dev);
        return (-x + x).cast(dtypes::float32);
      },
      {kNan, kNan, kNan, 0, 0});
  expect_on_both(
      [&](const std::string& dev) {
        const Tensor x = halves(dev);
        return (x * 2 - x).cast(dtypes::float32);
      },
      {kNan, kNan, kNan, -6.5f, 0});
}

// A padded (masked) element is +0 in a product or a sum: 0 * inf is nan and -0 + 0 is +0 there
// too. Lavapipe unrolls a short reduce loop, where the mask of an iteration becomes a constant,
// and then folded 0.0 * x to 0 and acc + 0.0 to acc: the row of zero padding times a column
// holding inf came out finite. Found by the differential fuzzer (pad, flip, matmul).
TEST(SpecialValues, PaddedElementsInProductsAndSumsKeepNanAndSignedZero) {
  auto padded_rows = [](const std::string& dev) {  // [[0, 0, 2.5, 1.5], [0, 0, 0, 0]]
    return floats({1.5f, 2.5f}, dev).reshape({1, 2}).pad({{0, 1}, {0, 2}}).flip({1});
  };
  expect_on_both(
      [&](const std::string& dev) {
        return padded_rows(dev).matmul(floats({kInf, 1, 1, 1}, dev).reshape({4, 1})).reshape({2});
      },
      {kNan, kNan});
  // 0 * 2.9 + 0 * 0.6 + 0 * -1.8 + 0 * -4.5 = +0 (from -0, the sum's start).
  expect_on_both(
      [&](const std::string& dev) {
        return padded_rows(dev)
            .matmul(floats({2.9f, 0.6f, -1.8f, -4.5f}, dev).reshape({4, 1}))
            .reshape({2});
      },
      {2.5f * -1.8f + 1.5f * -4.5f, 0});
  // -0 + 0 + 0 = +0.
  expect_on_both(
      [&](const std::string& dev) {
        return floats({-0.0f}, dev).pad({{0, 2}}).sum();
      },
      {0});
  // A padded convolution with an inf weight: the windows over the padding give nan.
  EXPECT_TRUE(cpu_vk_agree([](const std::string& dev) {
    const Tensor x = Tensor::ones({1, 1, 2, 2}, dtypes::float32, dev);
    const Tensor w = floats({kInf, 1, 1, 1}, dev).reshape({1, 1, 2, 2});
    return x.conv2d(w, {}, {.padding = 1});
  }));
}

// The same where the padded value is a sum of two loads under the pad's mask (a fused bias plus a
// partial sum): Lavapipe folded (0 + 0) * w to 0 and acc + 0 to acc in the unrolled loop, so a
// row of padding summed to -0 (fuzzer seed 20565: a conv3d of a padded conv3d).
TEST(SpecialValues, APaddedSumOfTwoLoadsInAProductKeepsNanAndSignedZero) {
  auto padded_sum = [](const std::string& dev) {  // [[0, 0, 3.5, 3.5], [0, 0, 0, 0]]
    const Tensor a = floats({1.5f, 2.5f}, dev).reshape({1, 2}).realize();
    const Tensor b = floats({2.0f, 1.0f}, dev).reshape({1, 2}).realize();
    return (a + b).pad({{0, 1}, {2, 0}});
  };
  expect_on_both(
      [&](const std::string& dev) {
        return padded_sum(dev)
            .matmul(floats({2.9f, 0.6f, -1.8f, -4.5f}, dev).reshape({4, 1}))
            .reshape({2});
      },
      {3.5f * -1.8f + 3.5f * -4.5f, 0});
  expect_on_both(
      [&](const std::string& dev) {
        return padded_sum(dev).matmul(floats({kInf, 1, 1, 1}, dev).reshape({4, 1})).reshape({2});
      },
      {kNan, kNan});
}

// A padded element before -0s: -0 (the sum's start) + 0 = +0, and +0 + -0 = +0 after it (IEEE;
// torch's avg_pool sums from +0 alike). Lavapipe unrolled the loop, folded add_zero(-0.0) of the
// padded iteration to the constant +0, and then `+0 + x` to x: the sum came out -0 (ops fuzzer
// seed 700131: avg_pool with count_include_pad=false over a padded plane and three -0s).
TEST(SpecialValues, APaddingBeforeNegativeZerosSumsToPositiveZero) {
  expect_on_both(
      [&](const std::string& d) {
        return floats({-0.0f, -0.0f, -0.0f}, d).pad({{1, 0}}).sum();
      },
      {0});
  expect_on_both(
      [&](const std::string& d) {
        return floats({-0.0f, -0.0f, -0.0f}, d).reshape({1, 3}).pad({{1, 0}, {0, 0}}).sum();
      },
      {0});
  expect_on_both(
      [&](const std::string& d) {
        return floats({-0.0f, -0.0f, -0.0f}, d)
            .reshape({1, 1, 3})
            .avg_pool({.kernel = {2, 3}, .padding = {1, 0}, .count_include_pad = false})
            .reshape({1});
      },
      {0});
  // The same in float64 (its own helper).
  for (const char* d : {"CPU", "VK"}) {
    const double got =
        Tensor(std::vector<double>{-0.0, -0.0, -0.0}, {3}, d).pad({{1, 0}}).sum().item<double>();
    EXPECT_EQ(got, 0.0) << d;
    EXPECT_FALSE(std::signbit(got)) << d;
  }
}

// A +0 the driver folds together from the program's constants after unrolling (a padded element
// of a cat: pad +0 plus the cat's other piece's +0, squared) times inf is nan: Lavapipe gave 0
// (symbolic fuzzer seed 2000512). Every float +0 constant is now opaque to the driver.
TEST(SpecialValues, AFoldedZeroOfAPaddedCatTimesInfIsNan) {
  expect_on_both(
      [&](const std::string& d) {
        const Tensor a = floats({1, 2}, d).reshape({1, 2}), b = floats({3, 4}, d).reshape({1, 2});
        return Tensor::cat(std::vector<Tensor>{a, b}, 0)
            .pad({{0, 0}, {1, 0}})
            .square()
            .matmul(floats({kInf, 1, 1}, d).reshape({3, 1}))
            .reshape({2});
      },
      {kNan, kNan});
}

// A pad's positions are +0 whatever op it is fused after: min is -max(-x), and a float NEG under
// a pad turned the pad's +0 into -0 (found by the differential fuzzer: x.min().pad(...), fused
// -0, realized first +0). A float NEG is now computed before the pad (core/schedule.cpp).
TEST(SpecialValues, PadsOfANegationAreZeroNotNegativeZero) {
  expect_on_both(
      [&](const std::string& d) {
        return floats({3, -2}, d).min({0}, true).pad({{1, 1}});
      },
      {0, -2, 0});
  expect_on_both(
      [&](const std::string& d) {
        return (-floats({3, -2}, d)).pad({{1, 0}});
      },
      {0, -3, 2});
  // An integer negation maps 0 to 0 and may still run under the pad.
  for (const char* d : {"CPU", "VK"})
    EXPECT_EQ((-Tensor(std::vector<int>{3, -2}, {2}, d)).pad({{1, 0}}).to_vector<int>(),
              (std::vector<int>{0, -3, 2}))
        << d;
}

TEST(SpecialValues, ElementwiseOpsAgreeWithTheCpuOnSpecialValues) {
  // Every pair of special operands through the common binary ops and unary ops.
  const std::vector<float> s = {0, -0.0f, 1, -1, kInf, -kInf, kNan, 1e-40f, 3e38f};
  const int64_t n = int64_t(s.size());
  std::vector<float> a, b;
  for (float x : s)
    for (float y : s) a.push_back(x), b.push_back(y);
  auto pair = [&](const std::string& d) {
    return std::pair{Tensor(a, {n * n}, d), Tensor(b, {n * n}, d)};
  };
  EXPECT_TRUE(cpu_vk_agree([&](const std::string& d) {
    auto [x, y] = pair(d);
    return x / y;
  }));
  EXPECT_TRUE(cpu_vk_agree([&](const std::string& d) {
    auto [x, y] = pair(d);
    return x * y;
  }));
  EXPECT_TRUE(cpu_vk_agree([&](const std::string& d) {
    auto [x, y] = pair(d);
    return x + y;
  }));
  EXPECT_TRUE(cpu_vk_agree([&](const std::string& d) {
    auto [x, y] = pair(d);
    return x - y;
  }));
  EXPECT_TRUE(cpu_vk_agree([&](const std::string& d) {
    auto [x, y] = pair(d);
    return x.maximum(y);
  }));
  EXPECT_TRUE(cpu_vk_agree([&](const std::string& d) {
    auto [x, y] = pair(d);
    return (x * y) / y;
  }));
  EXPECT_TRUE(
      cpu_vk_agree([&](const std::string& d) { return Tensor(s, {n}, d).sqrt().square(); }));
  EXPECT_TRUE(cpu_vk_agree([&](const std::string& d) { return Tensor(s, {n}, d).reciprocal(); }));
  EXPECT_TRUE(cpu_vk_agree([&](const std::string& d) { return -Tensor(s, {n}, d) * 0.0f; }));
}

TEST(SpecialValues, ReluPropagatesNan) {
  expect_on_both(
      [&](const std::string& d) {
        return floats({kNan, -1, 2, -kInf, kInf}, d).relu();
      },
      {kNan, 0, 2, 0, kInf});
}

// A float sum starts from -0.0, the exact identity of addition, so a sum of -0.0s is -0.0 (as
// numpy's np.sum([-0.0])). From +0.0 the CPU gave +0.0 while Lavapipe, folding the first
// `acc + x` of an unrolled one-trip loop to `x`, gave -0.0 (found by the differential fuzzer:
// x.mean over a size-1 axis, and a matmul over k = 1). An empty sum is still +0.0.
TEST(SpecialValues, SumsOfNegativeZerosAreNegativeZero) {
  expect_on_both(
      [&](const std::string& d) {
        return floats({-0.0f, 1, -0.0f, 0}, d).reshape({4, 1}).sum(1);
      },
      {-0.0f, 1, -0.0f, 0});
  expect_on_both(
      [&](const std::string& d) {
        return floats({-0.0f, 1, -0.0f, 0}, d).reshape({4, 1}).mean(1);
      },
      {-0.0f, 1, -0.0f, 0});
  expect_on_both(
      [&](const std::string& d) {
        return floats({-0.0f, -0.0f, -0.0f, 0}, d).reshape({2, 2}).sum(1);
      },
      {-0.0f, 0});
  // (-1 x 0) + (2 x -0) over k = 2 and (-1 x 0) over k = 1.
  expect_on_both(
      [&](const std::string& d) {
        return floats({-1, 2}, d).reshape({1, 2}).matmul(floats({0, -0.0f}, d));
      },
      {-0.0f});
  expect_on_both(
      [&](const std::string& d) {
        return floats({-1}, d).reshape({1, 1}).matmul(floats({0}, d));
      },
      {-0.0f});
  expect_on_both(
      [&](const std::string& d) {
        return Tensor::zeros({2, 0}, dtypes::float32, d).sum(1);
      },
      {0, 0});
}

TEST(SpecialValues, CumsumPastOneBlockKeepsInfAndNanWhereTheyBegin) {
  // torch: the running sum is finite before the first inf, inf after it; nan after a nan.
  for (const char* dev : {"CPU", "VK"}) {
    std::vector<float> x(1000, 1.0f);
    x[600] = kInf;
    const std::vector<float> got = Tensor(x, {1000}, dev).cumsum(0).to_vector<float>();
    EXPECT_EQ(got[599], 600.0f) << dev;
    EXPECT_EQ(got[100], 101.0f) << dev;
    EXPECT_EQ(got[700], kInf) << dev;
    EXPECT_EQ(got[999], kInf) << dev;
    x[600] = kNan;
    const std::vector<float> with_nan = Tensor(x, {1000}, dev).cumsum(0).to_vector<float>();
    EXPECT_EQ(with_nan[599], 600.0f) << dev;
    EXPECT_TRUE(std::isnan(with_nan[600])) << dev;
    EXPECT_TRUE(std::isnan(with_nan[999])) << dev;
  }
}

TEST(SpecialValues, VarAndStdOfTooFewElementsAreNanOrInfAsTorch) {
  // torch.var(tensor([3.])) = nan; var over a size-1 axis is nan per row.
  expect_on_both([&](const std::string& d) { return floats({3}, d).var(); }, {kNan});
  expect_on_both([&](const std::string& d) { return floats({3}, d).std(); }, {kNan});
  expect_on_both(
      [&](const std::string& d) {
        return Tensor(std::vector<float>{1, 2}, {2, 1}, d).var(1);
      },
      {kNan, kNan});
  // correction >= n divides by max(0, n - correction) = 0: inf for a spread, nan for none.
  expect_on_both([&](const std::string& d) { return floats({1, 2}, d).var({}, false, 2); }, {kInf});
  expect_on_both([&](const std::string& d) { return floats({1, 2}, d).var({}, false, 5); }, {kInf});
  expect_on_both([&](const std::string& d) { return floats({2, 2}, d).var({}, false, 2); }, {kNan});
}

// Documented rule (Tensor::cast): float to integer truncates toward zero and saturates at the
// integer type's bounds; nan becomes 0 (as Rust's `as` and WebAssembly's trunc_sat).
TEST(SpecialValues, FloatToIntCastSaturatesAndMapsNanToZero) {
  const std::vector<float> x = {kNan, kInf, -kInf, 3e9f, -3e9f, 2.9f, -2.9f, -0.0f, 2147483520.0f};
  for (const char* dev : {"CPU", "VK"}) {
    const std::vector<int32_t> got = floats(x, dev).cast(dtypes::int32).to_vector<int32_t>();
    const std::vector<int32_t> want = {0, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN,
                                       2, -2,        0,         2147483520};
    EXPECT_EQ(got, want) << dev;
    const std::vector<uint8_t> bytes =
        floats({kNan, 300, -5, 255.5f, kInf}, dev).cast(dtypes::uint8).to_vector<uint8_t>();
    EXPECT_EQ(bytes, (std::vector<uint8_t>{0, 255, 0, 255, 255})) << dev;
  }
  EXPECT_TRUE(cpu_vk_agree([](const std::string& d) {
    return (random_tensor(dtypes::float32, {4096}, d, 7) * 1e10f).cast(dtypes::int64);
  }));
  EXPECT_TRUE(cpu_vk_agree([](const std::string& d) {
    return (random_tensor(dtypes::float32, {4096}, d, 8) * 100.0f).cast(dtypes::int16);
  }));
}

// glslang kept only the last SignedZeroInfNanPreserve a kernel declared, so a kernel computing
// in float32 that also holds a float64 value (here the cast) lost it for float32, and Lavapipe
// folded (x * -0.0).reciprocal() to +inf. codegen/spirv_execution_modes.cpp puts it back.
TEST(SpecialValues, Float32MathInAKernelThatAlsoUsesFloat64KeepsSignedZero) {
  for (const std::string dev : {"CPU", "VK"}) {
    const Tensor x(std::vector<float>{2.f, -3.f, 0.f}, {3}, dev);
    const std::vector<double> got =
        (x * -0.0f).reciprocal().cast(dtypes::float64).to_vector<double>();
    ASSERT_EQ(got.size(), 3u);
    EXPECT_EQ(got[0], -std::numeric_limits<double>::infinity()) << dev;
    EXPECT_EQ(got[1], std::numeric_limits<double>::infinity()) << dev;
    EXPECT_TRUE(std::isnan(got[2]) || std::isinf(got[2])) << dev;
  }
  EXPECT_TRUE(cpu_vk_agree([](const std::string& d) {
    const Tensor x(std::vector<float>{2.f, -3.f, 0.f, 1e-30f, -1e30f}, {5}, d);
    return ((x * -0.0f).reciprocal() + (x * 1e30f) * 1e10f).cast(dtypes::float64) + 0.5;
  }));
}

// -(x / c) of integers by a constant c: the shader optimizer of SPIRV-Tools 2023.1 folds it into
// x / -c (KhronosGroup/SPIRV-Tools#5822), which for unsigned types divides by 2^w - c: 0 or 1 on
// VK. Found by the Jit fuzzer (seed 93000284): the argmax of -(a uint64 scatter_reduce's mean, a
// division by a count of 1) was 39 on VK, 45 on CPU. Signed, c = INT_MIN is its own negation.
TEST(SpecialValues, ANegatedIntegerQuotientByAConstantIsNotFoldedIntoTheDivisor) {
  const uint64_t big = std::numeric_limits<uint64_t>::max();
  const std::vector<uint64_t> x64{37, 1, big, 5};
  const std::vector<uint32_t> x32{37, 1, 0xffffffffu, 5};
  const int32_t lowest = std::numeric_limits<int32_t>::min();
  for (const char* dev : {"CPU", "VK"}) {
    const Tensor u64(x64, {4}, dev), u32(x32, {4}, dev);
    EXPECT_EQ((-u64.idiv(Tensor::full({4}, 3, dtypes::uint64, dev))).to_vector<uint64_t>(),
              (std::vector<uint64_t>{0 - uint64_t(12), 0, 0 - big / 3, big}))
        << dev;
    EXPECT_EQ((-u32.idiv(Tensor::full({4}, 1, dtypes::uint32, dev))).to_vector<uint32_t>(),
              (std::vector<uint32_t>{0u - 37u, 0xffffffffu, 1u, 0u - 5u}))
        << dev;
    // In a reduce, as the fuzzer found it: the largest of the negations is -1's, 2^64 - 1.
    EXPECT_EQ((-u64.idiv(Tensor::full({4}, 1, dtypes::uint64, dev))).max().item<uint64_t>(), big)
        << dev;
    const Tensor s(std::vector<int32_t>{lowest, 2, -7, 1}, {4}, dev);
    EXPECT_EQ((-s.idiv(Tensor::full({4}, lowest, dtypes::int32, dev))).to_vector<int32_t>(),
              (std::vector<int32_t>{-1, 0, 0, 0}))
        << dev;
    // ... nor through an addition of 0 that the shader optimizer removes first (review of the
    // fix: -((x / 3u) + 0u) gave 0 or 1).
    EXPECT_EQ((-(u32.idiv(Tensor::full({4}, 3, dtypes::uint32, dev)) + Tensor::zeros_like(u32)))
                  .to_vector<uint32_t>(),
              (std::vector<uint32_t>{0u - 12u, 0u, 0u - 0x55555555u, 0u - 1u}))
        << dev;
    EXPECT_EQ((-(s.idiv(Tensor::full({4}, lowest, dtypes::int32, dev)) + Tensor::zeros_like(s)))
                  .to_vector<int32_t>(),
              (std::vector<int32_t>{-1, 0, 0, 0}))
        << dev;
  }
}
