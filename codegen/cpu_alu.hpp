// The value semantics of the CPU reference interpreter: ALU ops, CAST and BITCAST on every dtype,
// and how elements sit in buffer bytes. This is the definition the GLSL renderer must match:
//   - ALU ops compute their row's cpu column in core/alu_table.hpp, with the semantics of
//     core/alu_semantics.hpp (integers wrap, x / 0 is 0, x % 0 is x, shift counts modulo the
//     width, MAX propagates nan), as constant folding does;
//   - float32 computes in float, float64 in double, float16 and bfloat16 in float rounded back to
//     16 bits after every op (core/half.hpp);
//   - float -> int truncates, saturating at the dtype's range, nan gives 0 (undefined on GPUs);
//   - bool lives in buffers as one byte, read as (byte != 0).
// Values are carried in Cells: the bytes of the dtype's C++ value type, zero-padded to 64 bits.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include <vkgrad/core/dtype.hpp>
#include <vkgrad/core/ops.hpp>
#include <vkgrad/core/uop.hpp>

namespace vkg::cpu {

using Cell = uint64_t;

template <class T>
T from_cell(Cell c) {
  static_assert(sizeof(T) <= sizeof(Cell));
  if constexpr (requires { T::from_bits(uint16_t{}); }) {
    return T::from_bits(uint16_t(c));  // float16_t, bfloat16_t
  } else {
    T v;
    std::memcpy(&v, &c, sizeof(T));
    return v;
  }
}

template <class T>
Cell to_cell(T v) {
  static_assert(sizeof(T) <= sizeof(Cell));
  if constexpr (requires { T::from_bits(uint16_t{}); }) {
    return v.bits;
  } else {
    Cell c = 0;
    std::memcpy(&c, &v, sizeof(T));
    return c;
  }
}

// The Cell of a CONST node's value, in the CONST's scalar dtype.
Cell const_cell(const UOp& constant);

// dst[i] = op(srcs[0][i], srcs[1][i], ...) for i < n. `operand` is the scalar dtype of the
// operands (for WHERE, of operands 1 and 2; operand 0 is bool). Comparisons write bools.
// Throws vkg::Error when the op does not apply to the dtype (exp2 of an int): a malformed program.
void eval_alu(Ops op, DType operand, std::span<const Cell* const> srcs, Cell* dst, std::size_t n);

// Value conversion and bit reinterpretation between scalar dtypes, elementwise over n cells.
void eval_cast(DType from, DType to, const Cell* src, Cell* dst, std::size_t n);
void eval_bitcast(DType from, DType to, const Cell* src, Cell* dst, std::size_t n);

// One scalar element of dtype d in buffer bytes (bool as one byte).
Cell read_element(DType d, const std::byte* at);
void write_element(DType d, Cell value, std::byte* at);

}  // namespace vkg::cpu
