// Float division is correctly rounded on Vulkan, as on the CPU device, also where it is hardest:
// quotients a hair away from the midpoint between two floats, where one correction step of an
// approximate quotient rounds the wrong way. The pairs are built the way libm test suites build
// them (Kahan's hard cases): for an odd divisor B, a dividend A with A * 2^s = M * B + d and d =
// +-1 makes A / B = (M + d / B) / 2^s, within 1/B of M / 2^s, a midpoint when M is odd and an exact
// float when M is even.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <random>

#include "support/device_compare.hpp"

using namespace vkg;
using namespace vkg::test;

namespace {

using u128 = unsigned __int128;

// x^-1 mod m for odd m and x a power of two (extended Euclid over signed 128-bit values).
u128 inverse_mod(u128 x, u128 m) {
  __int128 r0 = __int128(m), r1 = __int128(x % m), t0 = 0, t1 = 1;
  while (r1 != 0) {
    const __int128 q = r0 / r1;
    std::tie(r0, r1) = std::pair{r1, r0 - q * r1};
    std::tie(t0, t1) = std::pair{t1, t0 - q * t1};
  }
  return u128(t0 < 0 ? t0 + __int128(m) : t0);
}

// Dividend and divisor significands (integers of `bits` bits) whose quotient lies within one part
// in 2^bits of a midpoint or of a float, `n` pairs, deterministic in seed.
std::vector<std::pair<uint64_t, uint64_t>> hard_pairs(int bits, size_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  const uint64_t lo = uint64_t(1) << (bits - 1), hi = uint64_t(1) << bits;
  std::vector<std::pair<uint64_t, uint64_t>> out;
  while (out.size() < n) {
    const uint64_t b = (lo + rng() % lo) | 1;
    const int s = bits + int(rng() % 2);  // s = bits: A / B in [1, 2); bits + 1: in [1/2, 1)
    const int d = rng() % 2 ? 1 : -1;
    const u128 m = b;
    const u128 inv = inverse_mod((u128(1) << s) % m, m);
    // A = d * 2^-s mod B, then every A + jB in range.
    for (u128 a = d > 0 ? inv : (m - inv) % m; a < hi && out.size() < n; a += m) {
      if (a < lo) continue;
      const u128 num = (a << s) - u128(__int128(d));
      if (num % m != 0) continue;  // cannot happen; guards the construction
      out.emplace_back(uint64_t(a), b);
    }
  }
  return out;
}

// The pairs as values of type T with random signs and exponents that keep the quotient normal.
template <class T>
std::pair<std::vector<T>, std::vector<T>> hard_operands(size_t n, uint32_t seed) {
  constexpr int bits = std::numeric_limits<T>::digits;
  std::mt19937 rng(seed);
  std::vector<T> a, b;
  for (auto [ia, ib] : hard_pairs(bits, n, seed)) {
    const int ea = int(rng() % 40) - 20, eb = int(rng() % 40) - 20;
    a.push_back(std::ldexp(T(ia), ea - bits) * (rng() % 2 ? T(-1) : T(1)));
    b.push_back(std::ldexp(T(ib), eb - bits) * (rng() % 2 ? T(-1) : T(1)));
  }
  return {a, b};
}

}  // namespace

TEST(Division, TheCaseThatOneCorrectionStepMisroundedIsCorrectlyRounded) {
  // 4 / (0.5 - 2^-25) = 8 (1 + 2^-24 + 2^-48 + ...): just above the midpoint between 8 and its
  // successor. Vulkan gave 8 before the last-step check; the quotient rounds up.
  const float d = 0.49999997f, want = std::nextafter(8.0f, 16.0f);
  ASSERT_EQ(4.0f / d, want);  // the host agrees with the closed form
  for (const char* dev : {"CPU", "VK"}) {
    SCOPED_TRACE(dev);
    const Tensor x(std::vector<float>{4, -4, 4, -4}, {4}, dev);
    const Tensor y(std::vector<float>{d, d, -d, -d}, {4}, dev);
    EXPECT_EQ((x / y).to_vector<float>(), (std::vector<float>{want, -want, -want, want}));
    // A divisor reached through sqrt, reciprocal and square, as the bug report had it: each op
    // is correctly rounded, so the host's spelling gives the same divisor.
    const float r = 1 / std::sqrt(2.0f), viaops = 4.0f / (r * r);
    const Tensor v(std::vector<float>{2, 2}, {2}, dev);
    const Tensor q = Tensor(std::vector<float>{4, -4}, {2}, dev) / v.sqrt().reciprocal().square();
    EXPECT_EQ(q.to_vector<float>(), (std::vector<float>{viaops, -viaops}));
  }
}

TEST(Division, QuotientsNextToMidpointsAgreeWithTheCpuBitForBit) {
  constexpr size_t n = 4096;
  {
    SCOPED_TRACE("float32");
    const auto [a, b] = hard_operands<float>(n, 1);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(a[i] / b[i], float(double(a[i]) / double(b[i])));
    EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) {
      return Tensor(a, {int64_t(n)}, dev) / Tensor(b, {int64_t(n)}, dev);
    }));
    // The reciprocal takes the same path with a = 1.
    EXPECT_TRUE(cpu_vk_agree(
        [&](const std::string& dev) { return Tensor(b, {int64_t(n)}, dev).reciprocal(); }));
  }
  bool has_f64 = false;
  for (DType d : vk_dtypes()) has_f64 |= d == dtypes::float64;
  if (!has_f64) return;
  SCOPED_TRACE("float64");
  const auto [a, b] = hard_operands<double>(n, 2);
  EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) {
    return Tensor(a, {int64_t(n)}, dev) / Tensor(b, {int64_t(n)}, dev);
  }));
}

namespace {

// Pairs for the wide check: `n` of each kind, deterministic in seed. Random bits (all exponents:
// overflow, subnormal quotients and operands, zeros, infinities and nan all occur), random
// significands with nearby exponents (normal quotients), and the hard pairs above.
std::pair<std::vector<float>, std::vector<float>> wide_operands(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> a, b;
  for (size_t i = 0; i < n; ++i) {
    a.push_back(std::bit_cast<float>(uint32_t(rng())));
    b.push_back(std::bit_cast<float>(uint32_t(rng())));
  }
  for (size_t i = 0; i < n; ++i) {
    const auto near = [&] { return (rng() & 0x807fffffu) | ((100u + rng() % 56u) << 23); };
    a.push_back(std::bit_cast<float>(uint32_t(near())));
    b.push_back(std::bit_cast<float>(uint32_t(near())));
  }
  const auto [ha, hb] = hard_operands<float>(n, seed + 1);
  a.insert(a.end(), ha.begin(), ha.end());
  b.insert(b.end(), hb.begin(), hb.end());
  return {a, b};
}

}  // namespace

TEST(Division, RandomAndHardFloat32PairsMatchTheHostBitForBit) {
  // VKG_DIVISION_PAIRS scales the check (pairs of each kind; the suite runs 2^16).
  const char* env = std::getenv("VKG_DIVISION_PAIRS");
  const size_t n = env ? size_t(std::stoull(env)) : size_t(1) << 16;
  const auto [a, b] = wide_operands(n, 7);
  const int64_t len = int64_t(a.size());
  RecordProperty("pairs", std::to_string(a.size()));
  const auto vk = (Tensor(a, {len}, "VK") / Tensor(b, {len}, "VK")).to_vector<float>();
  const auto recip = Tensor(b, {len}, "VK").reciprocal().to_vector<float>();
  size_t bad = 0, bad_recip = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto same = [](float x, float y) {
      return std::isnan(x) ? std::isnan(y)
                           : std::bit_cast<uint32_t>(x) == std::bit_cast<uint32_t>(y);
    };
    if (!same(a[i] / b[i], vk[i]) && bad++ < 8)
      ADD_FAILURE() << std::hexfloat << a[i] << " / " << b[i] << ": host " << a[i] / b[i] << ", VK "
                    << vk[i];
    if (!same(1.0f / b[i], recip[i]) && bad_recip++ < 8)
      ADD_FAILURE() << std::hexfloat << "1 / " << b[i] << ": host " << 1.0f / b[i] << ", VK "
                    << recip[i];
  }
  EXPECT_EQ(bad, 0u) << "of " << a.size();
  EXPECT_EQ(bad_recip, 0u) << "of " << a.size();
  EXPECT_TRUE(cpu_vk_agree(
      [&](const std::string& dev) { return Tensor(a, {len}, dev) / Tensor(b, {len}, dev); }));
}

// A divisor the kernel compiler knows to be 0 (an unsigned byte below 0 is false): the division
// still gives IEEE's inf and nan. Lavapipe folded the double form's x / double(0.0) to 0 before
// zeros were decided by the bits first (the differential fuzzer's seed 20261333).
TEST(Division, ByABooleanTheCompilerKnowsIsFalseGivesInfinityAndNan) {
  for (const char* dev : {"CPU", "VK"}) {
    SCOPED_TRACE(dev);
    const Tensor x(std::vector<uint8_t>{0, 1, 2, 255}, {4}, dev);
    const std::vector<float> q = x.div(x.lt(Tensor::full_like(x, int64_t(0)))).to_vector<float>();
    ASSERT_EQ(q.size(), 4u);
    EXPECT_TRUE(std::isnan(q[0]));
    EXPECT_EQ(q[1], INFINITY);
    EXPECT_EQ(q[2], INFINITY);
    EXPECT_EQ(q[3], INFINITY);
  }
}
