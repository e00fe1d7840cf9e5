// Numerics checks at the Tensor level: build the same computation on the CPU reference device and
// on Vulkan, and compare the elements (exact for integers and bools, within a number of units in
// the last place for floats, nan matching any nan). Also sample data per dtype with the values
// drivers get wrong (extremes, -0, subnormals, inf, nan).
//
//   EXPECT_TRUE(cpu_vk_agree([](const std::string& dev) {
//     return Tensor(std::vector<float>{1, 2}, {2}, dev).exp2();
//   }));
#pragma once
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <vkgrad/vkgrad.hpp>

namespace vkg::test {

// The dtypes the Vulkan device computes in (bfloat16 in float32: tensor_half_emulation_test).
inline std::vector<DType> vk_dtypes() {
  return {dtypes::bool_,    dtypes::int8,    dtypes::uint8,  dtypes::int16,  dtypes::uint16,
          dtypes::int32,    dtypes::uint32,  dtypes::int64,  dtypes::uint64, dtypes::float16,
          dtypes::bfloat16, dtypes::float32, dtypes::float64};
}

// An element as a double (integers above 2^53 lose bits: use raw bytes to compare those).
inline double element(DType d, const std::byte* at) {
  return visit_dtype(d, [&](auto tag) -> double {
    using T = decltype(tag);
    T v;
    std::memcpy(&v, at, sizeof(T));
    if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>)
      return double(float(v));
    else
      return double(v);
  });
}

inline bool is_nan_bits(DType d, const std::byte* at) {
  return d.is_float() && std::isnan(element(d, at));
}

// Distance in units in the last place between two floats of dtype d (0 for equal values, +0 and
// -0 included); nan is equal to nan and infinitely far from anything else.
inline uint64_t ulps(DType d, const std::byte* a, const std::byte* b) {
  const bool na = is_nan_bits(d, a), nb = is_nan_bits(d, b);
  if (na || nb) return na && nb ? 0 : UINT64_MAX;
  const int size = d.scalar_size();
  auto ordered = [&](const std::byte* p) -> int64_t {
    uint64_t bits = 0;
    std::memcpy(&bits, p, size_t(size));
    const uint64_t sign = uint64_t(1) << (8 * size - 1);
    const int64_t mag = int64_t(bits & (sign - 1));
    return (bits & sign) ? -mag : mag;
  };
  const int64_t x = ordered(a), y = ordered(b);
  return x > y ? uint64_t(x - y) : uint64_t(y - x);
}

inline std::string element_str(DType d, const std::byte* at) {
  if (d.is_float()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", element(d, at));
    return buf;
  }
  if (d == dtypes::uint64) {
    uint64_t v;
    std::memcpy(&v, at, 8);
    return std::to_string(v);
  }
  if (d == dtypes::int64) {
    int64_t v;
    std::memcpy(&v, at, 8);
    return std::to_string(v);
  }
  return std::to_string(int64_t(element(d, at)));
}

// Element by element: integers and bools exactly, floats within max_ulps. Names the first few
// elements that differ.
inline testing::AssertionResult same_elements(DType d, const std::vector<std::byte>& want,
                                              const std::vector<std::byte>& got,
                                              uint64_t max_ulps = 0) {
  if (want.size() != got.size())
    return testing::AssertionFailure()
           << "sizes differ: " << want.size() << " and " << got.size() << " bytes";
  const size_t size = size_t(d.scalar_size()), n = want.size() / size;
  size_t bad = 0;
  std::string first;
  for (size_t i = 0; i < n; ++i) {
    const std::byte* a = want.data() + i * size;
    const std::byte* b = got.data() + i * size;
    const bool ok = d.is_float()  ? ulps(d, a, b) <= max_ulps
                    : d.is_bool() ? (a[0] != std::byte{0}) == (b[0] != std::byte{0})
                                  : std::memcmp(a, b, size) == 0;
    if (ok) continue;
    if (bad++ < 8)
      first += "\n  [" + std::to_string(i) + "] " + element_str(d, a) + " vs " + element_str(d, b);
  }
  if (!bad) return testing::AssertionSuccess();
  return testing::AssertionFailure() << bad << " of " << n << " " << d.name()
                                     << " elements differ (max " << max_ulps << " ulps):" << first;
}

// Builds `make(device)` on CPU and on VK and compares the results (dtype and shape too).
template <class Make>
testing::AssertionResult cpu_vk_agree(Make&& make, uint64_t max_ulps = 0) {
  const Tensor cpu = make(std::string("CPU")), vk = make(std::string("VK"));
  if (cpu.dtype() != vk.dtype() || cpu.shape() != vk.shape())
    return testing::AssertionFailure() << "CPU gives " << cpu << ", VK " << vk;
  return same_elements(cpu.dtype(), cpu.bytes(), vk.bytes(), max_ulps) << " (" << vk << ")";
}

// n elements of dtype d as raw bytes: mostly small values, with the type's extremes and, for
// floats, -0, subnormals, inf and nan mixed in (unless `finite`). Deterministic in seed.
inline std::vector<std::byte> sample_bytes(DType d, size_t n, uint32_t seed, bool finite = false) {
  std::mt19937 rng(seed);
  std::vector<std::byte> out(n * size_t(d.scalar_size()));
  visit_dtype(d, [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < n; ++i) {
      T v{};
      const uint32_t pick = rng() % 16;
      if constexpr (std::is_same_v<T, bool>) {
        v = (rng() & 1) != 0;
      } else if constexpr (std::is_integral_v<T>) {
        if (pick == 0)
          v = std::numeric_limits<T>::min();
        else if (pick == 1)
          v = std::numeric_limits<T>::max();
        else if (pick == 2)
          v = T(std::numeric_limits<T>::max() / 3);
        else
          v = T(int64_t(rng() % 41) - (std::is_signed_v<T> ? 20 : 0));
      } else {
        using F = std::conditional_t<std::is_same_v<T, double>, double, float>;
        // Huge and tiny (subnormal) for the type: float16 holds neither 3e38 nor 1e-40.
        const F big = std::is_same_v<T, float16_t> ? F(60000)
                      : std::is_same_v<T, double>  ? F(1e300)
                                                   : F(3e38);
        const F tiny = std::is_same_v<T, float16_t> ? F(1e-7)
                       : std::is_same_v<T, double>  ? F(1e-310)
                                                    : F(1e-40);
        const F inf = std::numeric_limits<F>::infinity(), sign = (rng() & 1) ? F(1) : F(-1);
        const F edge[] = {inf,     -inf,       std::numeric_limits<F>::quiet_NaN(),
                          F(-0.0), sign * big, sign * tiny};
        const F f = !finite && pick < 6 ? edge[pick]
                                        : F(std::uniform_real_distribution<double>(-8, 8)(rng));
        if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>)
          v = T(float(f));
        else
          v = T(f);
      }
      std::memcpy(out.data() + i * sizeof(T), &v, sizeof(T));
    }
  });
  return out;
}

// A tensor of `shape` on `device` holding sample_bytes(d, ...).
inline Tensor random_tensor(DType d, Shape shape, const std::string& device, uint32_t seed,
                            bool finite = false) {
  const size_t n = size_t(prod(shape));
  return Tensor(sample_bytes(d, n, seed, finite), n, d, std::move(shape), device);
}

// The elements of t as doubles (for closed-form checks).
inline std::vector<double> values(const Tensor& t) {
  const std::vector<std::byte> raw = t.bytes();
  const size_t size = size_t(t.dtype().scalar_size());
  std::vector<double> out(raw.size() / size);
  for (size_t i = 0; i < out.size(); ++i) out[i] = element(t.dtype(), raw.data() + i * size);
  return out;
}

}  // namespace vkg::test
