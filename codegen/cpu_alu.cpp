#include <vkgrad/codegen/cpu_alu.hpp>

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <limits>
#include <type_traits>

#include <vkgrad/core/error.hpp>

namespace vkg::cpu {

namespace {

template <class T>
constexpr bool kHalf = std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>;
template <class T>
constexpr bool kFloat = kHalf<T> || std::is_floating_point_v<T>;
template <class T>
constexpr bool kInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// float16 and bfloat16 compute in float and round back after every op; the rest in themselves.
template <class T>
using Wide = std::conditional_t<kHalf<T>, float, T>;

[[noreturn]] void bad_op(Ops op, DType d) {
  throw Error(fmt::format("op {} does not apply to {}", op_name(op), d.name()));
}

template <class T>
bool is_nan(T x) {
  if constexpr (kFloat<T>)
    return std::isnan(Wide<T>(x));
  else
    return false;
}

// Integer results modulo 2^bits: the conversion of a 64-bit pattern to T keeps the low bits.
template <class T>
T wrap(uint64_t v) {
  return T(v);
}

template <class T>
T int_div(T a, T b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<T>)
    if (a == std::numeric_limits<T>::min() && b == T(-1)) return a;  // the one overflowing case
  return T(a / b);
}

template <class T>
T int_mod(T a, T b) {
  return wrap<T>(uint64_t(a) - uint64_t(int_div(a, b)) * uint64_t(b));
}

// Threefry-2x32 with 20 rounds: x and key are two 32-bit words each, low word first.
uint64_t threefry2x32(uint64_t x, uint64_t key) {
  static constexpr int kRot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  const uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
  const uint32_t ks[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu};
  uint32_t x0 = uint32_t(x) + ks[0], x1 = uint32_t(x >> 32) + ks[1];
  for (int i = 0; i < 5; ++i) {
    for (int r : kRot[i % 2]) {
      x0 += x1;
      x1 = std::rotl(x1, r) ^ x0;
    }
    x0 += ks[(i + 1) % 3];
    x1 += ks[(i + 2) % 3] + uint32_t(i + 1);
  }
  return uint64_t(x1) << 32 | x0;
}

template <class T>
T unary(Ops op, DType d, T x) {
  if constexpr (std::is_same_v<T, bool>) {
    bad_op(op, d);
  } else if constexpr (kInt<T>) {
    if (op == Ops::NEG) return wrap<T>(0 - uint64_t(x));
    bad_op(op, d);
  } else {
    using W = Wide<T>;
    const W a = W(x);
    switch (op) {
      case Ops::EXP2:
        return T(std::exp2(a));
      case Ops::LOG2:
        return T(std::log2(a));
      case Ops::SIN:
        return T(std::sin(a));
      case Ops::SQRT:
        return T(std::sqrt(a));
      case Ops::RECIP:
        return T(W(1) / a);
      case Ops::NEG:
        return T(-a);
      case Ops::TRUNC:
        return T(std::trunc(a));
      default:
        bad_op(op, d);
    }
  }
}

// Ops whose result has the operands' dtype.
template <class T>
T binary(Ops op, DType d, T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    switch (op) {
      case Ops::ADD:
      case Ops::OR:
      case Ops::MAX:
        return a || b;
      case Ops::MUL:
      case Ops::AND:
        return a && b;
      case Ops::XOR:
        return a != b;
      default:
        bad_op(op, d);
    }
  } else if constexpr (kInt<T>) {
    constexpr uint64_t kShiftMask = sizeof(T) * 8 - 1;  // GPUs leave larger shifts undefined
    switch (op) {
      case Ops::ADD:
        return wrap<T>(uint64_t(a) + uint64_t(b));
      case Ops::SUB:
        return wrap<T>(uint64_t(a) - uint64_t(b));
      case Ops::MUL:
        return wrap<T>(uint64_t(a) * uint64_t(b));
      case Ops::IDIV:
        return int_div(a, b);
      case Ops::MOD:
        return int_mod(a, b);
      case Ops::MAX:
        return a < b ? b : a;
      case Ops::XOR:
        return T(a ^ b);
      case Ops::OR:
        return T(a | b);
      case Ops::AND:
        return T(a & b);
      case Ops::SHL:
        return wrap<T>(uint64_t(a) << (uint64_t(b) & kShiftMask));
      case Ops::SHR:
        return T(a >> (uint64_t(b) & kShiftMask));  // arithmetic for signed T
      case Ops::THREEFRY:
        if constexpr (std::is_same_v<T, uint64_t>) return threefry2x32(a, b);
        bad_op(op, d);
      default:
        bad_op(op, d);
    }
  } else {
    using W = Wide<T>;
    const W x = W(a), y = W(b);
    switch (op) {
      case Ops::ADD:
        return T(x + y);
      case Ops::SUB:
        return T(x - y);
      case Ops::MUL:
        return T(x * y);
      case Ops::FDIV:
        return T(x / y);
      case Ops::MAX:
        return (x < y || std::isnan(y)) ? b : a;  // nan from either side wins
      default:
        bad_op(op, d);
    }
  }
}

template <class T>
bool compare(Ops op, T a, T b) {
  if (op == Ops::CMPNE) {
    if constexpr (kHalf<T>)
      return float(a) != float(b);
    else
      return a != b;  // IEEE: nan compares unequal to everything
  }
  if constexpr (kHalf<T>)
    return float(a) < float(b);
  else
    return a < b;
}

template <class T>
T mulacc(T a, T b, T c) {
  if constexpr (std::is_same_v<T, bool>)
    return (a && b) || c;
  else if constexpr (kInt<T>)
    return wrap<T>(uint64_t(a) * uint64_t(b) + uint64_t(c));
  else
    return T(Wide<T>(a) * Wide<T>(b) + Wide<T>(c));
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
  if (op == Ops::WHERE) {
    for (std::size_t i = 0; i < n; ++i) dst[i] = from_cell<bool>(s[0][i]) ? s[1][i] : s[2][i];
    return;
  }
  visit_dtype(d, [&](auto tag) {
    using T = decltype(tag);
    const OpFamily family = op_family(op);
    if (family == OpFamily::Unary) {
      for (std::size_t i = 0; i < n; ++i) dst[i] = to_cell(unary<T>(op, d, from_cell<T>(s[0][i])));
    } else if (is_comparison(op)) {
      for (std::size_t i = 0; i < n; ++i)
        dst[i] = to_cell(compare<T>(op, from_cell<T>(s[0][i]), from_cell<T>(s[1][i])));
    } else if (family == OpFamily::Binary) {
      for (std::size_t i = 0; i < n; ++i)
        dst[i] = to_cell(binary<T>(op, d, from_cell<T>(s[0][i]), from_cell<T>(s[1][i])));
    } else if (op == Ops::MULACC) {
      for (std::size_t i = 0; i < n; ++i)
        dst[i] =
            to_cell(mulacc<T>(from_cell<T>(s[0][i]), from_cell<T>(s[1][i]), from_cell<T>(s[2][i])));
    } else {
      bad_op(op, d);
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
