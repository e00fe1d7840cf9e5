// Inputs and a tolerance check shared by the symbolic-shape tests (tensor_symbolic_test,
// tensor_symbolic_jit_test).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace vkg::test {

// Distinct, smallish values: element k of input `seed`.
inline std::vector<float> values(int64_t n, int seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) v[size_t(k)] = float(((k * 7 + seed * 5) % 13) - 6) / 4.0f;
  return v;
}

inline void expect_near(const std::vector<float>& got, const std::vector<float>& want,
                        const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t k = 0; k < got.size(); ++k)
    if (!std::isnan(want[k]) || !std::isnan(got[k]))  // nan agrees with nan (a mean of nothing)
      EXPECT_NEAR(got[k], want[k], 1e-5f * (1 + std::fabs(want[k]))) << what << " at " << k;
}

}  // namespace vkg::test
