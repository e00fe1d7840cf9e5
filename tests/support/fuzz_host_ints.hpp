// Integer references on the host for the elementwise fuzzer (tests/tensor_differential_fuzz_test
// .cpp): each op's documented integer semantics (tensor.hpp, core/alu_semantics.hpp) computed in
// int64 from the realized operands, so that a composition both devices share and get wrong (a
// floordiv, remainder, shift or minimum built from other ops in core/tensor_math.cpp) still fails.
//   - every dtype wraps at its width; idiv and mod truncate toward zero, MIN / -1 is MIN, x / 0
//     is 0 and x % 0 is x;
//   - floordiv and remainder as Python's // and %, wrapping (MIN // -1 is MIN); no value is
//     documented for a zero divisor there, so a program with one has no reference;
//   - shifts by a tensor: torch's rule outside [0, width) (lshift 0, rshift the sign fill);
//   - pow by squaring, wrapping; a negative exponent gives the truncated 1 / x^|e|.
// Only for the dtypes whose values a double holds exactly (not the 64-bit integers).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "support/fuzz_host_ops.hpp"

namespace vkg::fuzz {

// x (an integer value of some dtype) as int64's bits.
inline int64_t as_i64(double x) { return int64_t(x); }

// The value of binary op `name` on integers x, y of dtype d (both operands d; for shifts y may
// have any integer dtype). nullopt: no reference (an op not listed, or a zero divisor where
// nothing is documented).
inline std::optional<double> host_int_binary(const std::string& name, double xd, double yd,
                                             DType d) {
  const int64_t x = as_i64(xd), y = as_i64(yd);
  const uint64_t ux = uint64_t(x), uy = uint64_t(y);
  const int64_t width = d.scalar_size() * 8;
  const bool is_signed = !d.is_unsigned();
  auto idiv = [&]() -> int64_t { return y == 0 ? 0 : x / y; };  // int64 holds MIN32 / -1
  if (name == "add") return wrap_to(ux + uy, d);
  if (name == "sub") return wrap_to(ux - uy, d);
  if (name == "mul") return wrap_to(ux * uy, d);
  if (name == "idiv") return wrap_to(uint64_t(idiv()), d);
  if (name == "mod" || name == "fmod") return wrap_to(ux - uint64_t(idiv()) * uy, d);
  if (name == "floordiv" || name == "remainder") {
    if (y == 0) return std::nullopt;
    int64_t q = x / y;
    if (x % y != 0 && ((x < 0) != (y < 0))) --q;
    return name == "floordiv" ? wrap_to(uint64_t(q), d) : wrap_to(ux - uint64_t(q) * uy, d);
  }
  if (name == "div") return double(float(xd) / float(yd));  // true division in float32
  if (name == "maximum") return double(std::max(x, y));
  if (name == "minimum") return double(std::min(x, y));
  if (name == "bitwise_and") return wrap_to(ux & uy, d);
  if (name == "bitwise_or") return wrap_to(ux | uy, d);
  if (name == "bitwise_xor") return wrap_to(ux ^ uy, d);
  if (name == "lshift") return y >= 0 && y < width ? wrap_to(ux << y, d) : 0.0;
  if (name == "rshift")  // x is sign-extended in int64: >> is arithmetic for signed dtypes
    return y >= 0 && y < width ? wrap_to(uint64_t(x >> y), d) : (is_signed && x < 0 ? -1.0 : 0.0);
  if (name == "lt") return double(x < y);
  if (name == "le") return double(x <= y);
  if (name == "eq") return double(x == y);
  if (name == "ne") return double(x != y);
  if (name == "gt") return double(x > y);
  if (name == "ge") return double(x >= y);
  if (name == "logical_or") return double(x != 0 || y != 0);
  if (name == "logical_and") return double(x != 0 && y != 0);
  if (name == "logical_xor") return double((x != 0) != (y != 0));
  if (name == "pow") {
    if (is_signed && y < 0) return x == 1 ? 1.0 : x == -1 ? (y % 2 ? -1.0 : 1.0) : 0.0;
    uint64_t r = 1, b = ux, e = uy;
    for (; e; e >>= 1, b *= b)
      if (e & 1) r *= b;
    return wrap_to(r, d);
  }
  return std::nullopt;
}

// Unary op `name` on an integer x of dtype d, the result in d (abs(MIN) and -MIN are MIN).
inline std::optional<double> host_int_unary(const std::string& name, double xd, DType d) {
  const int64_t x = as_i64(xd);
  const uint64_t ux = uint64_t(x);
  if (name == "operator-") return wrap_to(0 - ux, d);
  if (name == "abs") return wrap_to(x < 0 ? 0 - ux : ux, d);
  if (name == "sign") return double(x > 0) - double(x < 0);
  if (name == "square") return wrap_to(ux * ux, d);
  if (name == "relu") return double(std::max<int64_t>(x, 0));
  if (name == "bitwise_not") return wrap_to(~ux, d);
  if (name == "logical_not") return double(x == 0);
  if (name == "trunc" || name == "floor" || name == "ceil" || name == "round") return xd;
  return std::nullopt;
}

// A HostFn of a binary integer op over broadcast operands, by host_map's rules (the caller's
// broadcasting map, passed in: it lives in the fuzzer's file).
using HostMap = std::function<HostArray(const std::vector<HostArray>&, DType,
                                        const std::function<double(const std::vector<double>&)>&)>;

inline HostFn host_int_binary_fn(const std::string& name, DType out, HostMap map) {
  return [name, out, map](const std::vector<HostArray>& in) -> std::optional<HostArray> {
    const DType d = in[0].dtype;
    bool defined = true;
    HostArray r = map(in, out, [&](const std::vector<double>& x) {
      const std::optional<double> v = host_int_binary(name, x[0], x[1], d);
      if (!v) defined = false;
      return v.value_or(0.0);
    });
    if (!defined) return std::nullopt;
    return r;
  };
}

inline HostFn host_int_unary_fn(const std::string& name, DType out, HostMap map) {
  return [name, out, map](const std::vector<HostArray>& in) -> std::optional<HostArray> {
    const DType d = in[0].dtype;
    bool defined = true;
    HostArray r = map(in, out, [&](const std::vector<double>& x) {
      const std::optional<double> v = host_int_unary(name, x[0], d);
      if (!v) defined = false;
      return v.value_or(0.0);
    });
    if (!defined) return std::nullopt;
    return r;
  };
}

}  // namespace vkg::fuzz
