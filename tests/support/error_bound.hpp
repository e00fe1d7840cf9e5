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

// Half the smallest subnormal of d: the absolute error a rounding to d may add where its result
// is subnormal (the relative bound u holds only above that).
inline double underflow_error(DType d) {
  if (d == dtypes::float16) return std::ldexp(1.0, -25);
  if (d == dtypes::bfloat16) return std::ldexp(1.0, -134);
  if (d == dtypes::float64) return std::ldexp(1.0, -1075);
  return std::ldexp(1.0, -150);
}

// cpu and vk agree element by element where |cpu - vk| <= bound(i, cpu, vk); nan and inf must
// match exactly. `what` names the bound in the failure message.
template <typename Bound>
testing::AssertionResult within_bound(const Tensor& cpu, const Tensor& vk, const Bound& bound,
                                      const std::string& what) {
  if (cpu.shape() != vk.shape() || cpu.dtype() != vk.dtype())
    return testing::AssertionFailure() << "CPU gives " << cpu << ", VK " << vk;
  const std::vector<double> a = cpu.to("CPU").cast(dtypes::float64).to_vector<double>();
  const std::vector<double> b = vk.to("CPU").cast(dtypes::float64).to_vector<double>();
  size_t bad = 0;
  std::string first;
  for (size_t i = 0; i < a.size(); ++i) {
    const bool ok = std::isfinite(a[i]) || std::isfinite(b[i])
                        ? std::abs(a[i] - b[i]) <= bound(i, a[i], b[i])
                        : (std::isnan(a[i]) && std::isnan(b[i])) || a[i] == b[i];
    if (ok) continue;
    if (bad++ < 8)
      first += "\n  [" + std::to_string(i) + "] " + std::to_string(a[i]) + " vs " +
               std::to_string(b[i]) + " (bound " + std::to_string(bound(i, a[i], b[i])) + ")";
  }
  if (!bad) return testing::AssertionSuccess();
  return testing::AssertionFailure() << bad << " of " << a.size() << " elements (CPU vs VK) "
                                     << "differ by more than " << what << ":" << first;
}

inline std::vector<double> values_of(const Tensor& t) {
  return t.to("CPU").cast(dtypes::float64).to_vector<double>();
}

// cpu and vk (the same shape) agree within 2 gamma_k of `magnitude` (the computation on absolute
// values, any float dtype, same shape) element by element; nan and inf must match exactly.
inline testing::AssertionResult within_sum_error_bound(const Tensor& cpu, const Tensor& vk,
                                                       const Tensor& magnitude, int k) {
  const double u = unit_roundoff(cpu.dtype());
  const double gamma = k * u / (1 - k * u);
  const std::vector<double> m = values_of(magnitude);
  return within_bound(
      cpu, vk, [&](size_t i, double, double) { return 2 * gamma * m[i]; },
      "2 gamma_" + std::to_string(k));
}

// The same for a sum computed in the wider `accumulated` dtype and rounded once to cpu's dtype
// (float16 and bfloat16 sums accumulate in float32 on every device, core/tensor_reduce.cpp), of
// terms rounded alike on both devices (float16 products are correctly rounded everywhere): each
// side is within gamma_k(accumulated) of `magnitude` of the exact sum of those terms (which is
// at most magnitude (1 + u)), and then within u |its result| plus the underflow error of it.
inline testing::AssertionResult within_widened_sum_error_bound(const Tensor& cpu, const Tensor& vk,
                                                               const Tensor& magnitude, int k,
                                                               DType accumulated) {
  const double ua = unit_roundoff(accumulated), u = unit_roundoff(cpu.dtype());
  const double gamma = k * ua / (1 - k * ua), eta = underflow_error(cpu.dtype());
  const std::vector<double> m = values_of(magnitude);
  return within_bound(
      cpu, vk,
      [&](size_t i, double a, double b) {
        return 2 * gamma * (1 + u) * m[i] + u * (std::abs(a) + std::abs(b)) + 2 * eta;
      },
      "2 gamma_" + std::to_string(k) + " in " + accumulated.name() + " and a rounding to " +
          cpu.dtype().name());
}

}  // namespace vkg::test
