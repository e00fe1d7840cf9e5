#include <vkgrad/codegen/cpu_alu.hpp>

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <limits>
#include <type_traits>

#include <vkgrad/core/alu_eval.hpp>
#include <vkgrad/core/error.hpp>

namespace vkg::cpu {

namespace {

template <class T>
constexpr bool kFloat = kHalfFloat<T> || std::is_floating_point_v<T>;

// float16 and bfloat16 compute in float and round back after every op; the rest in themselves.
template <class T>
using Wide = AluWide<T>;

[[noreturn]] void bad_op(Ops op, DType d) {
  throw Error(fmt::format("op {} does not apply to {}", op_name(op), d.name()));
}

// Integer results modulo 2^bits: the conversion of a 64-bit pattern to T keeps the low bits.
template <class T>
T wrap(uint64_t v) {
  return T(v);
}

// A scalar's value on its way between two dtypes.
struct Value {
  bool is_float = false;
  bool is_unsigned = false;
  double f = 0;
  uint64_t bits = 0;  // integer two's complement pattern (or zero-extended for unsigned)
};

template <class T>
Value to_value(T x) {
  Value v;
  if constexpr (kFloat<T>) {
    v.is_float = true;
    v.f = double(Wide<T>(x));
  } else {
    v.is_unsigned = std::is_unsigned_v<T>;
    v.bits = uint64_t(x);  // sign-extends signed types
  }
  return v;
}

template <class T>
T from_value(const Value& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v.is_float ? v.f != 0.0 : v.bits != 0;
  } else if constexpr (kFloat<T>) {
    if (v.is_float) return T(Wide<T>(v.f));
    // Integers convert once, rounding to nearest; 16-bit floats via float, exact below 2^24.
    if (v.is_unsigned) return T(Wide<T>(v.bits));
    return T(Wide<T>(int64_t(v.bits)));
  } else {
    if (!v.is_float) return wrap<T>(v.bits);
    const double t = std::trunc(v.f);
    if (std::isnan(t)) return 0;
    if (t <= double(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (t >= double(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return T(t);
  }
}

}  // namespace

Cell const_cell(const UOp& c) {
  const DType d = c.dtype.base();
  return visit_dtype(d, [&](auto tag) -> Cell {
    using T = decltype(tag);
    Value v;
    if (const double* f = std::get_if<double>(&c.arg)) {
      v.is_float = true;
      v.f = *f;
    } else {
      v.bits = uint64_t(c.const_int());
    }
    return to_cell(from_value<T>(v));
  });
}

void eval_alu(Ops op, DType operand, std::span<const Cell* const> s, Cell* dst, std::size_t n) {
  const DType d = operand.base();
  const AluInfo& info = alu_info(op);
  if (info.arity == 0 || s.size() != size_t(info.arity)) bad_op(op, d);
  // The op's semantics are its row's cpu column (core/alu_table.hpp), as for constant folding.
  visit_dtype(d, [&](auto tag) {
    using T = decltype(tag);
    const int last = info.arity - 1;
    for (std::size_t i = 0; i < n; ++i) {
      // WHERE's condition is a bool cell; the table takes it as the operands' type, 1 or 0.
      const T x = op == Ops::WHERE ? T(AluWide<T>(from_cell<bool>(s[0][i])))
                                   : from_cell<T>(s[0][i]);
      const T y = from_cell<T>(s[std::min(1, last)][i]), z = from_cell<T>(s[last][i]);
      dst[i] = info.result == alu::Bool ? to_cell(alu_compare<T>(op, d, x, y))
                                        : to_cell(alu_eval<T>(op, d, x, y, z));
    }
  });
}

void eval_cast(DType from, DType to, const Cell* src, Cell* dst, std::size_t n) {
  visit_dtype(from.base(), [&](auto ftag) {
    using F = decltype(ftag);
    visit_dtype(to.base(), [&](auto ttag) {
      using T = decltype(ttag);
      for (std::size_t i = 0; i < n; ++i)
        dst[i] = to_cell(from_value<T>(to_value(from_cell<F>(src[i]))));
    });
  });
}

void eval_bitcast(DType from, DType to, const Cell* src, Cell* dst, std::size_t n) {
  if (from.base().scalar_size() != to.base().scalar_size())
    throw Error(fmt::format("BITCAST from {} to {}: sizes differ", from.name(), to.name()));
  // A Cell holds the value's bytes, so reinterpreting is copying them; bool is never bitcast.
  if (from.is_bool() || to.is_bool()) throw Error("BITCAST of bool");
  for (std::size_t i = 0; i < n; ++i) dst[i] = src[i];
}

Cell read_element(DType d, const std::byte* at) {
  if (d.is_bool()) return to_cell(*at != std::byte{0});
  Cell c = 0;
  std::memcpy(&c, at, std::size_t(d.scalar_size()));
  return c;
}

void write_element(DType d, Cell value, std::byte* at) {
  if (d.is_bool()) {
    *at = std::byte(from_cell<bool>(value) ? 1 : 0);
    return;
  }
  std::memcpy(at, &value, std::size_t(d.scalar_size()));
}

}  // namespace vkg::cpu
