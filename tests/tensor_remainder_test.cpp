// fmod (C's remainder, exact) and remainder (torch's, Python's %) on floats and integers: hand
// values for every sign combination, the special values as C and torch give them, bit-exact
// agreement with the C library's fmod over magnitudes far apart (where GLSL's mod, x - y *
// floor(x / y), is wrong), and Vulkan against the CPU device on every dtype they both do.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "support/device_compare.hpp"
#include "support/error_of.hpp"

using namespace vkg;
using namespace vkg::test;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

std::vector<uint32_t> bits_of(const std::vector<float>& v) {
  std::vector<uint32_t> out;
  for (float f : v) out.push_back(std::isnan(f) ? 0x7fc00000u : std::bit_cast<uint32_t>(f));
  return out;
}

// torch.remainder as torch's CPU kernel computes it, the host reference.
float torch_remainder(float a, float b) {
  float r = std::fmod(a, b);
  if (r != 0 && ((b < 0) != (r < 0))) r += b;
  return r;
}

}  // namespace

TEST(Remainder, SignsByHand) {
  const std::vector<float> a{5.5f, -5.5f, 5.5f, -5.5f, 7.0f, -7.0f, 4.0f, -4.0f, 0.75f};
  const std::vector<float> b{2.0f, 2.0f, -2.0f, -2.0f, 7.0f, 3.5f, -2.0f, 2.0f, 0.25f};
  // fmod has the dividend's sign; remainder the divisor's; a zero keeps the dividend's sign.
  const std::vector<float> fmod{1.5f, -1.5f, 1.5f, -1.5f, 0.0f, -0.0f, 0.0f, -0.0f, 0.0f};
  const std::vector<float> rem{1.5f, 0.5f, -0.5f, -1.5f, 0.0f, -0.0f, 0.0f, -0.0f, 0.0f};
  for (const char* dev : {"CPU", "VK"}) {
    const Tensor x(a, {9}, dev), y(b, {9}, dev);
    EXPECT_EQ(bits_of(x.fmod(y).to_vector<float>()), bits_of(fmod)) << dev;
    EXPECT_EQ(bits_of(x.remainder(y).to_vector<float>()), bits_of(rem)) << dev;
  }
}

TEST(Remainder, SpecialValuesAsCAndTorch) {
  //                        y = 0  inf/y    x/inf  -x/inf   x/-inf  nan    x/nan  -0/3   -0/-3
  const std::vector<float> a{1.0f, kInf, 2.0f, -2.0f, 2.0f, kNan, 2.0f, -0.0f, -0.0f};
  const std::vector<float> b{0.0f, 3.0f, kInf, kInf, -kInf, 3.0f, kNan, 3.0f, -3.0f};
  const std::vector<float> fmod{kNan, kNan, 2.0f, -2.0f, 2.0f, kNan, kNan, -0.0f, -0.0f};
  // remainder moves a remainder whose sign differs from y's by y: -2 + inf = inf.
  const std::vector<float> rem{kNan, kNan, 2.0f, kInf, -kInf, kNan, kNan, -0.0f, -0.0f};
  for (const char* dev : {"CPU", "VK"}) {
    const Tensor x(a, {9}, dev), y(b, {9}, dev);
    EXPECT_EQ(bits_of(x.fmod(y).to_vector<float>()), bits_of(fmod)) << dev;
    EXPECT_EQ(bits_of(x.remainder(y).to_vector<float>()), bits_of(rem)) << dev;
  }
}

// Dividends up to 2^127 above their divisor, subnormals on either side: the long division must
// be exact (fmod's result is always a float). GLSL's mod formula is not, which the first pair
// shows: 1e20 mod 3 is 2, where 1e20 - 3 * floor(1e20 / 3) is 0 in float.
TEST(Remainder, FmodIsExactFarApart) {
  std::vector<float> a{1e20f, 3e38f, 1e-40f, 3e38f, 1.0f, 16777215.0f, 1e-45f, -1e30f};
  std::vector<float> b{3.0f, 1e-40f, 3e-41f, 7e-45f, 0.1f, 0.3f, 1e-45f, 0.7f};
  ASSERT_EQ(std::fmod(1e20f, 3.0f), 2.0f);
  ASSERT_NE(1e20f - 3.0f * std::floor(1e20f / 3.0f), 2.0f);
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    auto pick = [&] {
      const float mag =
          std::ldexp(1.0f + float(rng() % 8388608) / 8388608.0f, int(rng() % 270) - 149);
      return (rng() & 1) ? -mag : mag;
    };
    a.push_back(pick());
    b.push_back(pick());
  }
  std::vector<float> fmod, rem;
  for (size_t i = 0; i < a.size(); ++i) {
    fmod.push_back(std::fmod(a[i], b[i]));
    rem.push_back(torch_remainder(a[i], b[i]));
  }
  const int64_t n = int64_t(a.size());
  for (const char* dev : {"CPU", "VK"}) {
    const Tensor x(a, {n}, dev), y(b, {n}, dev);
    EXPECT_EQ(bits_of(x.fmod(y).to_vector<float>()), bits_of(fmod)) << dev;
    EXPECT_EQ(bits_of(x.remainder(y).to_vector<float>()), bits_of(rem)) << dev;
  }
}

// float64: the same long division on 53-bit significands, against the C library.
TEST(Remainder, Float64FmodIsExactFarApart) {
  std::vector<double> a{1e300, 1e-310, -5e-324, 1e20, 123456789.0},
      b{3e-300, 7e-320, 5e-324, 3.0, -0.1};
  std::mt19937_64 rng(9);
  for (int i = 0; i < 500; ++i) {
    auto pick = [&] {
      const double mag = std::ldexp(1.0 + double(rng() % (uint64_t(1) << 52)) / 4503599627370496.0,
                                    int(rng() % 2100) - 1074);
      return (rng() & 1) ? -mag : mag;
    };
    a.push_back(pick());
    b.push_back(pick());
  }
  std::vector<double> want;
  for (size_t i = 0; i < a.size(); ++i) want.push_back(std::fmod(a[i], b[i]));
  const int64_t n = int64_t(a.size());
  for (const char* dev : {"CPU", "VK"}) {
    const std::vector<double> got =
        Tensor(a, {n}, dev).fmod(Tensor(b, {n}, dev)).to_vector<double>();
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint64_t>(got[i]), std::bit_cast<uint64_t>(want[i]))
          << dev << " fmod(" << a[i] << ", " << b[i] << ")";
  }
}

// Every float dtype both devices compute in, sampled with extremes, subnormals, inf, nan and -0:
// float16 and bfloat16 compute in float32 (exact, then rounded: a remainder of two float16s is
// one).
TEST(Remainder, VulkanAgreesWithCpuDevice) {
  for (DType d : {dtypes::float16, dtypes::bfloat16, dtypes::float32, dtypes::float64}) {
    SCOPED_TRACE(d.name());
    EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) {
      return random_tensor(d, {301}, dev, 1).fmod(random_tensor(d, {301}, dev, 2));
    }));
    EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) {
      return random_tensor(d, {301}, dev, 3).remainder(random_tensor(d, {301}, dev, 4));
    }));
  }
}

// Integers: fmod is C's %, remainder Python's; both agree with the float forms on exact values,
// and x % 0 is x (this library's rule for integer division by zero).
TEST(Remainder, IntegersAsTorch) {
  for (const char* dev : {"CPU", "VK"}) {
    const Tensor x(std::vector<int32_t>{7, -7, 7, -7, 6, -6, 5, INT32_MIN}, {8}, dev);
    const Tensor y(std::vector<int32_t>{3, 3, -3, -3, 3, -3, 0, -1}, {8}, dev);
    EXPECT_EQ(x.fmod(y).to_vector<int32_t>(), (std::vector<int32_t>{1, -1, 1, -1, 0, 0, 5, 0}))
        << dev;
    EXPECT_EQ(x.remainder(y).to_vector<int32_t>(), (std::vector<int32_t>{1, 2, -2, -1, 0, 0, 5, 0}))
        << dev;
    const Tensor xf = x.cast(dtypes::float32), yf = y.cast(dtypes::float32);
    const Tensor exact = y.ne(0).logical_and(x.ne(INT32_MIN));
    EXPECT_EQ(exact.where(x.remainder(y).cast(dtypes::float32), 0).to_vector<float>(),
              exact.where(xf.remainder(yf), 0).to_vector<float>())
        << dev;
    // Unsigned: no signs to differ. Scalars promote as any binary op.
    const Tensor u(std::vector<uint8_t>{200, 7}, {2}, dev);
    EXPECT_EQ(u.remainder(Tensor(std::vector<uint8_t>{7, 200}, {2}, dev)).to_vector<uint8_t>(),
              (std::vector<uint8_t>{4, 7}));
    EXPECT_EQ(Tensor(std::vector<int64_t>{-9}, {1}, dev).remainder(4).to_vector<int64_t>(),
              (std::vector<int64_t>{3}));
    EXPECT_EQ(Tensor(std::vector<float>{-9.5f}, {1}, dev).fmod(4).to_vector<float>(),
              (std::vector<float>{-1.5f}));
  }
  EXPECT_NE(error_of([] {
              const Tensor t = Tensor::full({1}, true, dtypes::bool_);
              t.remainder(t);
            }).find("remainder: not defined for bool"),
            std::string::npos);
}

// The gradients as torch: d/dx = 1; d/dy = -trunc(x / y) for fmod, -floor(x / y) for remainder.
TEST(Remainder, GradientsByHand) {
  const Tensor x = Tensor(std::vector<double>{5.5, -5.5, 5.5}, {3}, "CPU").requires_grad_();
  const Tensor y = Tensor(std::vector<double>{2.0, 2.0, -2.0}, {3}, "CPU").requires_grad_();
  (x.fmod(y) + x.remainder(y) * 10).sum().backward();
  EXPECT_EQ(values(*x.grad()), (std::vector<double>{11, 11, 11}));
  // fmod: -trunc(2.75, -2.75, -2.75) = (-2, 2, 2); remainder: -floor(...) = (-2, 3, 3).
  EXPECT_EQ(values(*y.grad()), (std::vector<double>{-2 - 20, 2 + 30, 2 + 30}));
}
