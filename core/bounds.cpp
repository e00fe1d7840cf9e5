#include <vkgrad/core/bounds.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>

#include <vkgrad/core/uop.hpp>

namespace vkg {

namespace {

using Range = std::pair<int64_t, int64_t>;
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

int64_t clamp_to_i64(double d) {
  if (std::isnan(d)) return 0;
  if (d >= 9.2233720368547758e18) return kMax;
  if (d <= -9.2233720368547758e18) return kMin;
  return int64_t(d);
}

}  // namespace

std::pair<int64_t, int64_t> dtype_range(DType d) {
  if (d.is_bool()) return {0, 1};
  return {clamp_to_i64(dtypes::min_value(d)), clamp_to_i64(dtypes::max_value(d))};
}

bool computes_exactly(const UOp& u) {
  const auto [lo, hi] = dtype_range(u.dtype);
  return !(u.vmin() == lo && u.vmax() == hi);
}

namespace {

// Saturating arithmetic: bounds that overflow int64 widen to the extreme instead of wrapping.
int64_t sat_add(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? (b > 0 ? kMax : kMin) : r;
}
int64_t sat_mul(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? ((a < 0) != (b < 0) ? kMin : kMax) : r;
}

// C truncating division, with kMin / -1 saturating instead of overflowing.
int64_t sat_div(int64_t a, int64_t c) { return c == -1 ? -std::max(a, kMin + 1) : a / c; }

// The value-bounds rules the bounds column of alu_table.hpp names: the bounds of an integer or
// bool op from its sources' bounds, or nullopt for the dtype's range. The result is later
// intersected with the dtype's range.
using Bounds = std::optional<Range>;
Range b(const UOp& u, size_t i) { return Range{u.src[i]->vmin(), u.src[i]->vmax()}; }

Bounds no_bounds(const UOp&) { return std::nullopt; }

Bounds add_bounds(const UOp& u) {
  return Range{sat_add(b(u, 0).first, b(u, 1).first), sat_add(b(u, 0).second, b(u, 1).second)};
}

Bounds sub_bounds(const UOp& u) {
  return Range{sat_add(b(u, 0).first, -std::max(b(u, 1).second, kMin + 1)),
               sat_add(b(u, 0).second, -std::max(b(u, 1).first, kMin + 1))};
}

Bounds neg_bounds(const UOp& u) {
  return Range{-std::max(b(u, 0).second, kMin + 1), -std::max(b(u, 0).first, kMin + 1)};
}

Bounds mul_bounds(const UOp& u) {
  const auto [a0, a1] = b(u, 0);
  const auto [c0, c1] = b(u, 1);
  const int64_t p[] = {sat_mul(a0, c0), sat_mul(a0, c1), sat_mul(a1, c0), sat_mul(a1, c1)};
  return Range{*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
}

Bounds idiv_bounds(const UOp& u) {
  const auto [a0, a1] = b(u, 0);
  const auto [c0, c1] = b(u, 1);
  if (c0 > 0 || c1 < 0) {  // a divisor of one sign: truncating division is monotone in each operand
    const int64_t q[] = {sat_div(a0, c0), sat_div(a0, c1), sat_div(a1, c0), sat_div(a1, c1)};
    return Range{*std::min_element(q, q + 4), *std::max_element(q, q + 4)};
  }
  return std::nullopt;
}

Bounds mod_bounds(const UOp& u) {
  const auto [a0, a1] = b(u, 0);
  const auto [c0, c1] = b(u, 1);
  if (c0 > 0 || c1 < 0) {  // C remainder: |r| < |c| and r has the sign of the dividend
    const int64_t m = c0 > 0 ? c1 - 1 : -std::max(c0, kMin + 1) - 1;
    if (a0 >= 0) return Range{0, std::min(a1, m)};
    if (a1 <= 0) return Range{std::max(a0, -m), 0};
    return Range{-m, m};
  }
  return std::nullopt;
}

Bounds max_bounds(const UOp& u) {
  return Range{std::max(b(u, 0).first, b(u, 1).first), std::max(b(u, 0).second, b(u, 1).second)};
}

Bounds cmplt_bounds(const UOp& u) {
  if (u.src[0]->dtype.scalar == Scalar::UInt64) return std::nullopt;  // int64 cannot hold its upper half
  if (b(u, 0).second < b(u, 1).first) return Range{1, 1};
  if (b(u, 0).first >= b(u, 1).second) return Range{0, 0};
  return Range{0, 1};
}

Bounds cmpne_bounds(const UOp& u) {
  if (u.src[0]->dtype.scalar == Scalar::UInt64) return std::nullopt;
  if (b(u, 0).second < b(u, 1).first || b(u, 0).first > b(u, 1).second) return Range{1, 1};
  if (b(u, 0).first == b(u, 0).second && b(u, 1).first == b(u, 1).second &&
      b(u, 0).first == b(u, 1).first)
    return Range{0, 0};
  return Range{0, 1};
}

Bounds where_bounds(const UOp& u) {
  if (b(u, 0).first == 1) return b(u, 1);
  if (b(u, 0).second == 0) return b(u, 2);
  return Range{std::min(b(u, 1).first, b(u, 2).first), std::max(b(u, 1).second, b(u, 2).second)};
}

Bounds and_bounds(const UOp& u) {
  if (u.dtype.is_bool()) return Range{b(u, 0).first & b(u, 1).first, b(u, 0).second & b(u, 1).second};
  if (b(u, 0).first >= 0 && b(u, 1).first >= 0) return Range{0, std::min(b(u, 0).second, b(u, 1).second)};
  return std::nullopt;
}

Bounds or_bounds(const UOp& u) {
  if (u.dtype.is_bool()) return Range{b(u, 0).first | b(u, 1).first, b(u, 0).second | b(u, 1).second};
  return std::nullopt;
}

Bounds xor_bounds(const UOp& u) {
  if (u.dtype.is_bool() && b(u, 1).first == b(u, 1).second)  // x ^ const: flips or keeps
    return b(u, 1).first ? Range{1 - b(u, 0).second, 1 - b(u, 0).first} : b(u, 0);
  return std::nullopt;
}

// The bounds rule of each ALU op, from its row.
using BoundsRule = Bounds (*)(const UOp&);
const std::array<BoundsRule, kOpsCount> kAluBounds = [] {
  std::array<BoundsRule, kOpsCount> t{};
#define VKG_ALU_BOUNDS(op, arity, dtypes, result, flags, cpu, gradient, bounds, ...) \
  t[size_t(Ops::op)] = bounds;
  VKG_ALU_OPS(VKG_ALU_BOUNDS)
#undef VKG_ALU_BOUNDS
  return t;
}();

// Bounds of an integer op; the result is later intersected with the dtype's range.
Range int_bounds(const UOp& u) {
  const auto& s = u.src;
  switch (u.op) {
    case Ops::CONST:
      return {u.const_int(), u.const_int()};
    case Ops::DEFINE_VAR:
      return {u.arg_as<VarArg>().min, u.arg_as<VarArg>().max};
    case Ops::SPECIAL:
    case Ops::RANGE:
      // The loop or launch bound is the last source: the index runs over [0, bound - 1].
      if (!s.empty()) return {0, std::max<int64_t>(0, sat_add(s.back()->vmax(), -1))};
      break;
    case Ops::BIND:
      if (!s.empty()) return b(u, 0);
      break;
    case Ops::CAST:
      if ((s[0]->dtype.is_int() && s[0]->dtype.scalar != Scalar::UInt64) || s[0]->dtype.is_bool())
        return b(u, 0);
      break;
    default:
      if (const BoundsRule rule = kAluBounds[size_t(u.op)])
        if (const Bounds r = rule(u)) return *r;
      break;
  }
  return dtype_range(u.dtype);
}

}  // namespace

std::pair<int64_t, int64_t> compute_bounds(const UOp& u) {
  if (u.dtype.scalar == Scalar::Void || u.dtype.is_ptr()) return {0, 0};  // not a value
  if (!(u.dtype.is_int() || u.dtype.is_bool())) return dtype_range(u.dtype);
  const Range r = int_bounds(u);
  const Range d = dtype_range(u.dtype);
  // A value wider than its dtype wraps on the device: keep the dtype range then. Bounds that
  // saturated at an int64 extreme may hide such a wrap in an int64 op, so they count as wide too
  // (only a leaf states its extremes exactly).
  const bool leaf = u.op == Ops::CONST || u.op == Ops::DEFINE_VAR;
  if (r.first < d.first || r.second > d.second || r.first > r.second) return d;
  if (!leaf && (r.first == kMin || r.second == kMax)) return d;
  return r;
}

}  // namespace vkg
