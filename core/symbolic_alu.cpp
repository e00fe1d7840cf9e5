// exec_alu: what one integer or bool ALU op computes on the device. Constant folding and eval_int
// both go through it, so a folded constant is exactly what the kernel would have computed.
#include <algorithm>
#include <type_traits>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/symbolic.hpp>
#include <vkgrad/core/symbolic_folds.hpp>

namespace vkg {

namespace {

[[noreturn]] void not_integer(Ops op, DType d) {
  throw Error("exec_alu: " + std::string(op_name(op)) + " on " + d.name() +
              " is not integer arithmetic");
}

// Calls f(T{}) for the C++ type T of an integer or bool dtype; throws for any other.
template <class F>
auto visit_int(Ops op, DType d, F&& f) {
  return visit_dtype(d.base(), [&](auto tag) -> std::optional<int64_t> {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>)
      return f(tag);
    else
      not_integer(op, d);
  });
}

template <class T>
constexpr T from_i64(int64_t v) {
  if constexpr (std::is_same_v<T, bool>)
    return v != 0;
  else
    return static_cast<T>(v);  // modular (C++20): an int64 holds every dtype's bit pattern
}

template <class T>
std::optional<int64_t> binary(Ops op, T x, T y) {
  using W = uint64_t;  // ring ops in unsigned 64 bits, then narrowed: wrap-around without UB
  constexpr bool is_signed = std::is_signed_v<T>;
  constexpr int bits = std::is_same_v<T, bool> ? 1 : int(8 * sizeof(T));
  switch (op) {
    case Ops::ADD:
      return int64_t(T(W(x) + W(y)));
    case Ops::SUB:
      return int64_t(T(W(x) - W(y)));
    case Ops::MUL:
      return int64_t(T(W(x) * W(y)));
    case Ops::IDIV:
      if (y == 0) return std::nullopt;
      if constexpr (is_signed)
        if (y == -1) return int64_t(T(W(0) - W(x)));  // MIN / -1 wraps to MIN
      return int64_t(T(x / y));
    case Ops::MOD:
      if (y == 0) return std::nullopt;
      if constexpr (is_signed)
        if (y == -1) return 0;
      return int64_t(T(x % y));
    case Ops::MAX:
      return int64_t(std::max(x, y));
    case Ops::CMPLT:
      return x < y;
    case Ops::CMPNE:
      return x != y;
    case Ops::AND:
      return int64_t(T(x & y));
    case Ops::OR:
      return int64_t(T(x | y));
    case Ops::XOR:
      return int64_t(T(x ^ y));
    case Ops::SHL:
    case Ops::SHR:
      if (int64_t(y) < 0 || int64_t(y) >= bits) return std::nullopt;
      if (op == Ops::SHL) return int64_t(T(W(x) << int(y)));
      return int64_t(T(x >> int(y)));  // arithmetic for signed types (C++20)
    default:
      return std::nullopt;
  }
}

}  // namespace

bool symbolic_detail::is_binary_int_op(Ops op) {
  switch (op) {
    case Ops::ADD:
    case Ops::SUB:
    case Ops::MUL:
    case Ops::IDIV:
    case Ops::MOD:
    case Ops::MAX:
    case Ops::CMPLT:
    case Ops::CMPNE:
    case Ops::AND:
    case Ops::OR:
    case Ops::XOR:
    case Ops::SHL:
    case Ops::SHR:
      return true;
    default:
      return false;
  }
}

std::optional<int64_t> exec_alu(Ops op, DType result, DType operand, std::span<const int64_t> a) {
  auto need = [&](size_t n) {
    if (a.size() != n)
      throw Error("exec_alu: " + std::string(op_name(op)) + " takes " + std::to_string(n) +
                  " arguments");
  };
  if (op == Ops::WHERE) {
    need(3);
    visit_int(op, operand, [](auto) { return std::optional<int64_t>(0); });  // rejects floats
    return a[0] ? a[1] : a[2];
  }
  if (op == Ops::CAST) {
    need(1);
    return visit_int(op, operand, [&](auto from) {
      const auto x = from_i64<decltype(from)>(a[0]);
      return visit_int(op, result, [&](auto to) {
        return std::optional<int64_t>(int64_t(static_cast<decltype(to)>(x)));
      });
    });
  }
  if (op == Ops::NEG) {
    need(1);
    return visit_int(op, operand, [&](auto t) {
      using T = decltype(t);
      return std::optional<int64_t>(int64_t(T(uint64_t(0) - uint64_t(from_i64<T>(a[0])))));
    });
  }
  if (op == Ops::MULACC) {
    need(3);
    return visit_int(op, operand, [&](auto t) {
      using T = decltype(t);
      const uint64_t x = uint64_t(from_i64<T>(a[0])), y = uint64_t(from_i64<T>(a[1])),
                     z = uint64_t(from_i64<T>(a[2]));
      return std::optional<int64_t>(int64_t(T(x * y + z)));
    });
  }
  if (!symbolic_detail::is_binary_int_op(op)) not_integer(op, operand);
  need(2);
  (void)result;  // a binary op's result dtype is its operands' (bool for comparisons)
  return visit_int(op, operand, [&](auto t) {
    using T = decltype(t);
    return binary<T>(op, from_i64<T>(a[0]), from_i64<T>(a[1]));
  });
}

}  // namespace vkg
