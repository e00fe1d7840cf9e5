// A forward error bound for sums of products, for comparing two devices that may add in a
// different order (a GPU's subgroups split a reduce where the CPU device walks it in order) or
// round differently within what IEEE allows for a sum. Each side's result of a chain of dot
// products of total length k is within gamma_k = k u / (1 - k u) of the same computation's value
// on absolute values (the standard bound, u the unit roundoff), so the two are within twice that.
// An ulp tolerance is no bound where terms cancel: a 24-term float32 dot product on NVIDIA
// differed from the CPU device's by ~270 ulps of its small result, well inside this bound.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <vkgrad/vkgrad.hpp>

namespace vkg::test {

inline double unit_roundoff(DType d) {
  if (d == dtypes::float16) return std::ldexp(1.0, -11);
  if (d == dtypes::bfloat16) return std::ldexp(1.0, -8);
  if (d == dtypes::float64) return std::ldexp(1.0, -53);
  return std::ldexp(1.0, -24);
}

// cpu and vk (the same shape) agree within 2 gamma_k of `magnitude` (the computation on absolute
// values, any float dtype, same shape) element by element; nan and inf must match exactly.
inline testing::AssertionResult within_sum_error_bound(const Tensor& cpu, const Tensor& vk,
                                                       const Tensor& magnitude, int k) {
  if (cpu.shape() != vk.shape() || cpu.dtype() != vk.dtype())
    return testing::AssertionFailure() << "CPU gives " << cpu << ", VK " << vk;
  const double u = unit_roundoff(cpu.dtype());
  const double gamma = k * u / (1 - k * u);
  const std::vector<double> a = cpu.to("CPU").cast(dtypes::float64).to_vector<double>();
  const std::vector<double> b = vk.to("CPU").cast(dtypes::float64).to_vector<double>();
  const std::vector<double> m = magnitude.to("CPU").cast(dtypes::float64).to_vector<double>();
  size_t bad = 0;
  std::string first;
  for (size_t i = 0; i < a.size(); ++i) {
    const bool ok = std::isfinite(a[i]) || std::isfinite(b[i])
                        ? std::abs(a[i] - b[i]) <= 2 * gamma * m[i]
                        : (std::isnan(a[i]) && std::isnan(b[i])) || a[i] == b[i];
    if (ok) continue;
    if (bad++ < 8)
      first += "\n  [" + std::to_string(i) + "] " + std::to_string(a[i]) + " vs " +
               std::to_string(b[i]) + " (bound " + std::to_string(2 * gamma * m[i]) + ")";
  }
  if (!bad) return testing::AssertionSuccess();
  return testing::AssertionFailure() << bad << " of " << a.size() << " elements (CPU vs VK) "
                                     << "differ by more than 2 gamma_" << k << ":" << first;
}

}  // namespace vkg::test
