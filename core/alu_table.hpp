// The elementwise ALU ops, one row each: everything the library knows about an op that computes
// values from values. Adding an op is adding a row here (and, for the user, a Tensor method).
//
// Why an X-macro and not a constexpr array in ops.cpp: a row holds code (the CPU evaluation, the
// gradient) and a GLSL spelling, and core must know nothing of GLSL (DESIGN.md's layer table).
// Each pass expands VKG_ALU_OPS with a macro that reads only its own columns, so core's passes
// compile the rows without ever seeing the GLSL column (its tokens are never expanded there), and
// codegen's renderer reads the GLSL column of the same row. The op's entry stays in one place.
//
// Columns, in order:
//   op       the Ops enumerator (VKG_OPS in ops.hpp takes its ALU ops from these rows).
//   arity    1, 2 or 3 sources.
//   dtypes   the operand dtypes it is defined on: Floats, Ints, Bools (or UInt64 alone). The CPU
//            device and the folder reject others; the GLSL renderer reports them.
//   result   Same (the operands' dtype) or Bool (comparisons). WHERE's operands are 1 and 2.
//   flags    Commutes: a op b == b op a. Zeroless: f(0, ..., 0) != 0, so it may not run under a
//            pad. Folds: constant operands of an integer or bool dtype fold to a constant
//            (exec_alu) through the cpu column, except where C leaves the value undefined
//            (x / 0, shifts out of range: left for the device, see alu_semantics.hpp).
//   cpu      the value, as an expression in x, y, z: the operands in the type the op computes
//            in (float for float16 and bfloat16, rounded back after the op). Used by the CPU
//            device (codegen/cpu_alu.cpp) and by constant folding (core/symbolic_alu.cpp):
//            one definition of the semantics. Intricate ones live in alu_semantics.hpp.
//   gradient an expression of g (the result's gradient), x and y (the first two sources), out
//            (the result) and a (all of them, GradArgs), giving each source's gradient:
//            grads(...); no_grad where none flows; no_rule where backward must fail.
//   bounds   the integer value-bounds rule (core/bounds.cpp); no_bounds: the dtype's range.
//   glsl     how codegen/glsl_alu.cpp spells it: infix("+"), prefix("-"), call("trunc"),
//            call_f16_via_f32("sqrt"), helper("exp2_exact") (a function in
//            codegen/glsl_helpers.cpp, for ops GLSL lacks or gets wrong), or custom (rendered
//            by a rule in glsl_alu.cpp). Bool operands and Lavapipe's +0 quirks are renderer
//            rules applied before the spelling.
//
// New rows go last: an op's number is part of the AST hashes that key on-disk caches.
#pragma once
#include <cstdint>

namespace vkg::alu {

// dtypes
inline constexpr uint8_t Floats = 1, Ints = 2, Bools = 4, UInt64 = 8;
// result
enum Result : uint8_t { Same, Bool };
// flags
inline constexpr uint8_t None = 0, Commutes = 1, Zeroless = 2, Folds = 4;

}  // namespace vkg::alu

// clang-format off
#define VKG_ALU_OPS(X)                                                                                                       \
  /* op      arity dtypes               result flags                 cpu                      gradient                                    bounds        glsl */ \
  X(EXP2,     1, Floats,               Same, Zeroless,             alu::exp2(x),            grads(g * out * std::numbers::ln2),         no_bounds,    helper("exp2_exact"))  \
  X(LOG2,     1, Floats,               Same, Zeroless,             alu::log2(x),            grads(g / (x * std::numbers::ln2)),         no_bounds,    helper("log2_exact"))  \
  X(SIN,      1, Floats,               Same, None,                 alu::sin(x),             grads(g * x.cos()),                         no_bounds,    helper("sin_exact"))   \
  X(SQRT,     1, Floats,               Same, None,                 alu::sqrt(x),            grads(g / (out * 2)),                       no_bounds,    helper("sqrt_exact"))       \
  X(RECIP,    1, Floats,               Same, Zeroless,             alu::recip(x),           grads(-g * out * out),                      no_bounds,    custom)                \
  X(NEG,      1, Floats | Ints,        Same, Folds,                alu::neg(x),             grads(-g),                                  neg_bounds,   prefix("-"))           \
  /* zero, not none: floor, ceil, round and trunc pass a zero gradient on, as torch */                                    \
  X(TRUNC,    1, Floats,               Same, None,                 alu::trunc(x),           grads(Tensor::zeros_like(g)),               no_bounds,    call("trunc"))         \
  X(ADD,      2, Floats | Ints | Bools, Same, Commutes | Folds,    alu::add(x, y),          grads(g, g),                                add_bounds,   infix("+"))            \
  X(SUB,      2, Floats | Ints,        Same, Folds,                alu::sub(x, y),          grads(g, -g),                               sub_bounds,   infix("-"))            \
  X(MUL,      2, Floats | Ints | Bools, Same, Commutes | Folds,    alu::mul(x, y),          grads(g * y, g * x),                        mul_bounds,   infix("*"))            \
  /* -x/y^2 = -(x/y)/y */                                                                                                 \
  X(FDIV,     2, Floats,               Same, Zeroless,             alu::fdiv(x, y),         grads(g / y, -g * out / y),                 no_bounds,    helper("fdiv_exact"))  \
  X(IDIV,     2, Ints,                 Same, Zeroless | Folds,     alu::idiv(x, y),         no_grad,                                    idiv_bounds,  custom)                \
  X(MOD,      2, Ints,                 Same, Zeroless | Folds,     alu::mod(x, y),          no_grad,                                    mod_bounds,   custom)                \
  X(MAX,      2, Floats | Ints | Bools, Same, Commutes | Folds,    alu::max(x, y),          max_grad(a),                                max_bounds,   custom)                \
  X(CMPLT,    2, Floats | Ints | Bools, Bool, Folds,               alu::cmplt(x, y),        no_grad,                                    cmplt_bounds, custom)                \
  X(CMPNE,    2, Floats | Ints | Bools, Bool, Commutes | Folds,    alu::cmpne(x, y),        no_grad,                                    cmpne_bounds, custom)                \
  X(XOR,      2, Ints | Bools,         Same, Commutes | Folds,     alu::bit_xor(x, y),      no_grad,                                    xor_bounds,   infix("^"))            \
  X(OR,       2, Ints | Bools,         Same, Commutes | Folds,     alu::bit_or(x, y),       no_grad,                                    or_bounds,    infix("|"))            \
  X(AND,      2, Ints | Bools,         Same, Commutes | Folds,     alu::bit_and(x, y),      no_grad,                                    and_bounds,   infix("&"))            \
  X(SHL,      2, Ints,                 Same, Folds,                alu::shl(x, y),          no_grad,                                    no_bounds,    custom)                \
  X(SHR,      2, Ints,                 Same, Folds,                alu::shr(x, y),          no_grad,                                    no_bounds,    custom)                \
  X(THREEFRY, 2, UInt64,               Same, Zeroless,             alu::threefry(x, y),     no_grad,                                    no_bounds,    helper("threefry2x32")) \
  /* x is the bool condition, widened to the operands' type */                                                            \
  X(WHERE,    3, Floats | Ints | Bools, Same, Folds,               (x ? y : z),             where_grad(a),                              where_bounds, custom)                \
  X(MULACC,   3, Floats | Ints | Bools, Same, Folds,               alu::mulacc(x, y, z),    no_rule,                                    no_bounds,    custom)                \
  /* torch.erf; d/dx erf(x) = 2/sqrt(pi) exp(-x^2) */                                                                    \
  X(ERF,      1, Floats,               Same, None,                 std::erf(x),             grads(g * (-(x * x)).exp() * (2 * std::numbers::inv_sqrtpi)), no_bounds, helper("erf_exact")) \
  /* torch.erfc = 1 - erf, computed directly: 1 - erf(x) is 0 from x = 4 on in float */                               \
  X(ERFC,     1, Floats,               Same, Zeroless,             std::erfc(x),            grads(g * (-(x * x)).exp() * (-2 * std::numbers::inv_sqrtpi)), no_bounds, helper("erfc_exact")) \
  /* C's fmod on floats (integers: MOD); exact. d/dy = -trunc(x / y), as torch */                                       \
  X(FMOD,     2, Floats,               Same, Zeroless,             alu::fmod(x, y),         grads(g, -g * (x / y).trunc()),             no_bounds,    helper("fmod_exact"))  \
  /* torch.remainder on floats: fmod moved into y's sign. d/dy = -floor(x / y), as torch */                              \
  X(REMAINDER, 2, Floats,              Same, Zeroless,             alu::remainder(x, y),    grads(g, -g * (x / y).floor()),             no_bounds,    helper("remainder_py")) \
  /* its own op, not sin(pi/2 - x): pi/2 - x rounds in float, so that cos(1e6) was 0.9396, not 0.9368 */             \
  X(COS,      1, Floats,               Same, None,                 alu::cos(x),             grads(-g * x.sin()),                        no_bounds,    helper("cos_exact"))
// clang-format on
