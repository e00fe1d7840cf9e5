// Evaluating an ALU op on scalars by its row in alu_table.hpp: the one path by which the CPU
// device (codegen/cpu_alu.cpp) and constant folding (core/symbolic_alu.cpp) compute a value.
#pragma once
#include <cmath>
#include <string>
#include <type_traits>

#include <vkgrad/core/alu_semantics.hpp>
#include <vkgrad/core/dtype.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/half.hpp>
#include <vkgrad/core/ops.hpp>

namespace vkg {

template <class T>
constexpr bool kHalfFloat = std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>;

// The type an op computes in for operands of C++ type T: float for the 16-bit floats (rounded
// back to T after every op), T itself for the rest.
template <class T>
using AluWide = std::conditional_t<kHalfFloat<T>, float, T>;

// Whether an op whose dtypes column is `mask` applies to operands of C++ type T.
template <class T>
constexpr bool alu_accepts(uint8_t mask) {
  if constexpr (std::is_same_v<T, bool>)
    return mask & alu::Bools;
  else if constexpr (std::is_integral_v<T>)
    return (mask & alu::Ints) || (std::is_same_v<T, uint64_t> && (mask & alu::UInt64));
  else
    return mask & alu::Floats;
}

[[noreturn]] inline void alu_not_applicable(Ops op, DType d) {
  throw Error("op " + std::string(op_name(op)) + " does not apply to " + d.name());
}

// op(a, b, c) for an op whose result has the operands' dtype; unused operands are ignored (pass
// a). For WHERE, a is the condition converted to T (1 or 0). Throws vkg::Error where the op does
// not apply to d (exp2 of an int) or yields a bool.
template <class T>
T alu_eval(Ops op, DType d, T a, T b, T c) {
  using namespace alu;
  using W = AluWide<T>;
  [[maybe_unused]] const W x = W(a), y = W(b), z = W(c);
  switch (op) {
#define VKG_ALU_EVAL(op_, arity, dtypes, result, flags, cpu, gradient, bounds, glsl) \
  case Ops::op_:                                                                     \
    if constexpr (result == Same && alu_accepts<T>(dtypes)) return T(cpu);          \
    break;
    VKG_ALU_OPS(VKG_ALU_EVAL)
#undef VKG_ALU_EVAL
    default:
      break;
  }
  alu_not_applicable(op, d);
}

// op(a, b) for an op whose result is bool (the comparisons).
template <class T>
bool alu_compare(Ops op, DType d, T a, T b) {
  using namespace alu;
  using W = AluWide<T>;
  [[maybe_unused]] const W x = W(a), y = W(b), z = W(a);
  switch (op) {
#define VKG_ALU_COMPARE(op_, arity, dtypes, result, flags, cpu, gradient, bounds, glsl) \
  case Ops::op_:                                                                        \
    if constexpr (result == Bool && alu_accepts<T>(dtypes)) return cpu;                \
    break;
    VKG_ALU_OPS(VKG_ALU_COMPARE)
#undef VKG_ALU_COMPARE
    default:
      break;
  }
  alu_not_applicable(op, d);
}

}  // namespace vkg
