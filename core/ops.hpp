// The one op enum that every level of the IR shares: tensor-level ops, movement ops, kernel ops
// and ALU ops, as tinygrad's Ops. What is known about each op (its name, its family, whether it
// commutes) lives in a table in ops.cpp, not in switch statements.
#pragma once
#include <cstdint>
#include <string_view>

namespace vkg {

#define VKG_OPS(X)                                                                          \
  /* graph structure */                                                                     \
  X(SINK) X(NOOP) X(KERNEL)                                                                 \
  /* tensor level: buffers, devices, lazy structure */                                      \
  X(BUFFER) X(BUFFER_VIEW) X(DEVICE) X(COPY) X(CONTIGUOUS) X(DETACH) X(ASSIGN) X(EMPTY)     \
  /* movement (zero-copy, folded into ShapeTrackers) */                                     \
  X(RESHAPE) X(PERMUTE) X(EXPAND) X(PAD) X(SHRINK) X(FLIP) X(VIEW)                          \
  /* reductions: REDUCE_AXIS over tensor axes, REDUCE over kernel ranges */                 \
  X(REDUCE_AXIS) X(REDUCE)                                                                  \
  /* kernel level; SHUFFLE(x) with arg k: x as the subgroup's lane k holds it */            \
  X(DEFINE_GLOBAL) X(DEFINE_LOCAL) X(DEFINE_VAR) X(DEFINE_ACC) X(SPECIAL) X(RANGE)          \
  X(ENDRANGE) X(IF) X(ENDIF) X(BARRIER) X(INDEX) X(LOAD) X(STORE) X(BIND) X(UNROLL)         \
  X(CONTRACT) X(VECTORIZE) X(GEP) X(WMMA) X(SHUFFLE) X(CONST) X(VCONST) X(CAST) X(BITCAST) \
  /* unary ALU */                                                                           \
  X(EXP2) X(LOG2) X(SIN) X(SQRT) X(RECIP) X(NEG) X(TRUNC)                                   \
  /* binary ALU; IDIV and MOD truncate toward zero, as C does */                            \
  X(ADD) X(SUB) X(MUL) X(FDIV) X(IDIV) X(MOD) X(MAX) X(CMPLT) X(CMPNE) X(XOR) X(OR) X(AND)   \
  X(SHL) X(SHR) X(THREEFRY)                                                                 \
  /* ternary ALU */                                                                         \
  X(WHERE) X(MULACC)

enum class Ops : uint8_t {
#define VKG_OP_ENUM(name) name,
  VKG_OPS(VKG_OP_ENUM)
#undef VKG_OP_ENUM
};

inline constexpr int kOpsCount = 0
#define VKG_OP_COUNT(name) +1
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
// CMPLT and CMPNE produce bool.
bool is_comparison(Ops op);
// Ops the ShapeTracker folds: RESHAPE, PERMUTE, EXPAND, PAD, SHRINK, FLIP.
bool is_movement(Ops op);

}  // namespace vkg
