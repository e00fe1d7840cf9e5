// Test inputs whose arithmetic is exact: small integers as floats, so sums of their products are
// the same in any order and every kernel's result must equal the reference to the bit.
#pragma once

#include <cstdint>
#include <vector>

namespace vkg::test {

// i * mul % mod - shift for i in [0, n).
inline std::vector<float> ints(int64_t n, int mul, int mod, int shift) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(i * mul % mod - shift);
  return v;
}

}  // namespace vkg::test
