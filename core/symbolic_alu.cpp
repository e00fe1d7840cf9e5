// exec_alu: what one integer or bool ALU op computes on the device. Constant folding and eval_int
// both go through it, so a folded constant is exactly what the kernel would have computed: the
// value comes from the op's row in alu_table.hpp (alu_eval), as on the CPU device.
#include <algorithm>
#include <type_traits>

#include <vkgrad/core/alu_eval.hpp>
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

}  // namespace

bool symbolic_detail::is_binary_int_op(Ops op) {
  const AluInfo& a = alu_info(op);
  return a.arity == 2 && a.has(alu::Folds) && (a.dtypes & (alu::Ints | alu::Bools));
}

std::optional<int64_t> exec_alu(Ops op, DType result, DType operand, std::span<const int64_t> a) {
  auto need = [&](size_t n) {
    if (a.size() != n)
      throw Error("exec_alu: " + std::string(op_name(op)) + " takes " + std::to_string(n) +
                  " arguments");
  };
  if (op == Ops::CAST) {
    need(1);
    return visit_int(op, operand, [&](auto from) {
      const auto x = from_i64<decltype(from)>(a[0]);
      return visit_int(op, result, [&](auto to) {
        return std::optional<int64_t>(int64_t(static_cast<decltype(to)>(x)));
      });
    });
  }
  const AluInfo& info = alu_info(op);
  if (!info.has(alu::Folds)) not_integer(op, operand);
  need(size_t(info.arity));
  (void)result;  // an ALU op's result dtype is its operands' (bool for comparisons)
  return visit_int(op, operand, [&](auto t) -> std::optional<int64_t> {
    using T = decltype(t);
    // WHERE's condition comes as the operands' type, 1 or 0 (alu_table.hpp).
    const T x = op == Ops::WHERE ? T(a[0] != 0) : from_i64<T>(a[0]), y = info.arity > 1 ? from_i64<T>(a[1]) : x,
            z = info.arity > 2 ? from_i64<T>(a[2]) : x;
    if (alu::undefined_in_c(op == Ops::IDIV || op == Ops::MOD, op == Ops::SHL || op == Ops::SHR,
                            x, y))
      return std::nullopt;
    if (info.result == alu::Bool) return int64_t(alu_compare<T>(op, operand, x, y));
    return int64_t(alu_eval<T>(op, operand, x, y, z));
  });
}

}  // namespace vkg
