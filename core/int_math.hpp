// Small integer helpers several parts of core need: hash mixing, and division that rounds down
// or up (C's / truncates toward zero, which is wrong for mask and bound arithmetic on negative
// positions).
#pragma once
#include <cstddef>
#include <cstdint>

namespace vkg {

// boost::hash_combine's mixing, widened to 64 bits.
inline size_t hash_mix(size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ull + (h << 12) + (h >> 4)); }

// floor(a / b) and ceil(a / b) for any signs, b != 0.
inline int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
inline int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

}  // namespace vkg
