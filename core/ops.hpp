// The one op enum that every level of the IR shares: tensor-level ops, movement ops, kernel ops
// and ALU ops, as tinygrad's Ops. What is known about each op lives in tables, not in switch
// statements: names and families in ops.cpp, and for an ALU op everything (arity, dtypes, CPU
// semantics, folding, bounds, gradient, GLSL spelling) in its row of alu_table.hpp.
#pragma once
#include <cstdint>
#include <string_view>

#include <vkgrad/core/alu_table.hpp>

namespace vkg {

#define VKG_OPS(X)                                                                          \
  /* graph structure */                                                                     \
  X(SINK) X(NOOP) X(KERNEL)                                                                 \
  /* tensor level: buffers, devices, lazy structure */                                      \
  X(BUFFER) X(BUFFER_VIEW) X(DEVICE) X(COPY) X(CONTIGUOUS) X(DETACH) X(ASSIGN) X(MULTI)    \
  X(EMPTY) /* SCATTER: an indexed, combining write (core/indexed_load.hpp) */ X(SCATTER)   \
  /* movement (zero-copy, folded into ShapeTrackers) */                                     \
  X(RESHAPE) X(PERMUTE) X(EXPAND) X(PAD) X(SHRINK) X(FLIP) X(VIEW)                          \
  /* reductions: REDUCE_AXIS over tensor axes, REDUCE over kernel ranges */                 \
  X(REDUCE_AXIS) X(REDUCE)                                                                  \
  /* kernel level; SHUFFLE(x) with arg k: x as the subgroup's lane k holds it. INDEX is */ \
  /* also tensor level: an indexed load (core/indexed_load.hpp) */                          \
  X(DEFINE_GLOBAL) X(DEFINE_LOCAL) X(DEFINE_VAR) X(DEFINE_ACC) X(SPECIAL) X(RANGE)          \
  X(ENDRANGE) X(IF) X(ENDIF) X(BARRIER) X(INDEX) X(LOAD) X(STORE) X(BIND) X(UNROLL)         \
  X(CONTRACT) X(VECTORIZE) X(GEP) X(WMMA) X(SHUFFLE) X(CONST) X(VCONST) X(CAST) X(BITCAST) \
  /* the ALU ops, one row each in alu_table.hpp; IDIV and MOD truncate toward zero, as C */ \
  VKG_ALU_OPS(X)

// VKG_OPS(X) calls X(op) for every op and X(op, ...the other columns) for an ALU op, so an X
// takes (name, ...).
enum class Ops : uint8_t {
#define VKG_OP_ENUM(name, ...) name,
  VKG_OPS(VKG_OP_ENUM)
#undef VKG_OP_ENUM
};

inline constexpr int kOpsCount = 0
#define VKG_OP_COUNT(name, ...) +1
    VKG_OPS(VKG_OP_COUNT)
#undef VKG_OP_COUNT
    ;

enum class OpFamily : uint8_t { Meta, Tensor, Movement, Reduce, Kernel, Unary, Binary, Ternary };

std::string_view op_name(Ops op);
OpFamily op_family(Ops op);
// ALU ops are the unary, binary and ternary families: they compute values from values.
bool is_alu(Ops op);
// a op b == b op a (ADD, MUL, MAX, CMPNE, XOR, OR, AND).
bool is_commutative(Ops op);
// The columns of an ALU op's row in alu_table.hpp that are plain data.
struct AluInfo {
  int arity = 0;      // 0 for an op that is not ALU
  uint8_t dtypes = 0;  // alu::Floats | alu::Ints | alu::Bools | alu::UInt64
  alu::Result result = alu::Same;
  uint8_t flags = 0;  // alu::Commutes | alu::Zeroless | alu::Folds
  bool has(uint8_t flag) const { return (flags & flag) != 0; }
};
const AluInfo& alu_info(Ops op);
// CMPLT and CMPNE produce bool.
bool is_comparison(Ops op);
// Ops the ShapeTracker folds: RESHAPE, PERMUTE, EXPAND, PAD, SHRINK, FLIP.
bool is_movement(Ops op);

}  // namespace vkg
