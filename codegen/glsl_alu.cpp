// ALU ops as GLSL expressions: each op's glsl column in core/alu_table.hpp, after the rules that
// cut across ops (bool operands, Lavapipe's +0 quirks, guards for what Vulkan leaves undefined).
// Helpers come from glsl_helpers.cpp where GLSL has no exact operator.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>

#include <vkgrad/codegen/cpu_alu.hpp>
#include <vkgrad/codegen/glsl_syntax.hpp>
#include <vkgrad/core/error.hpp>

namespace vkg::glsl {

namespace {

[[noreturn]] void bad(Ops op, DType d) {
  throw Error(fmt::format("the GLSL renderer has no {} on {}", op_name(op), d.name()));
}

// Vector forms of the native GLSL relational functions.
std::string relational(Ops op, const std::string& a, const std::string& b) {
  return fmt::format("{}({}, {})", op == Ops::CMPLT ? "lessThan" : "notEqual", a, b);
}

std::string bool_alu(Ops op, DType d, std::span<const std::string> x) {
  if (d.count == 1) {
    switch (op) {
      case Ops::ADD:
      case Ops::OR:
      case Ops::MAX:
        return fmt::format("({}||{})", x[0], x[1]);
      case Ops::MUL:
      case Ops::AND:
        return fmt::format("({}&&{})", x[0], x[1]);
      case Ops::XOR:
      case Ops::CMPNE:
        return fmt::format("({}!={})", x[0], x[1]);
      case Ops::CMPLT:
        return fmt::format("(!{}&&{})", x[0], x[1]);
      default:
        bad(op, d);
    }
  }
  // Vectors of bool have no logical operators: go through uvecN bits.
  const std::string u = fmt::format("uvec{}", d.count);
  auto bits = [&](const char* o) {
    return fmt::format("notEqual({}({}) {} {}({}), {}(0u))", u, x[0], o, u, x[1], u);
  };
  switch (op) {
    case Ops::ADD:
    case Ops::OR:
    case Ops::MAX:
      return bits("|");
    case Ops::MUL:
    case Ops::AND:
      return bits("&");
    case Ops::XOR:
    case Ops::CMPNE:
      return relational(Ops::CMPNE, x[0], x[1]);
    case Ops::CMPLT:
      return fmt::format("lessThan({}({}), {}({}))", u, x[0], u, x[1]);
    default:
      bad(op, d);
  }
}

// The glsl column of alu_table.hpp: how each ALU op is spelled.
struct Spelling {
  enum Kind { Infix, Prefix, Call, CallF16ViaF32, Helper, Custom } kind = Custom;
  const char* text = "";
};
constexpr Spelling infix(const char* o) { return {Spelling::Infix, o}; }
constexpr Spelling prefix(const char* o) { return {Spelling::Prefix, o}; }
constexpr Spelling call(const char* f) { return {Spelling::Call, f}; }
// float16 computed in float32 and rounded once, as the CPU computes it (and glslang declares no
// Float16 capability for a float16 built-in call alone, which validation rejects).
constexpr Spelling call_f16_via_f32(const char* f) { return {Spelling::CallF16ViaF32, f}; }
constexpr Spelling helper(const char* name) { return {Spelling::Helper, name}; }
constexpr Spelling custom{};

constexpr std::array<Spelling, kOpsCount> kSpellings = [] {
  std::array<Spelling, kOpsCount> t{};
#define VKG_ALU_GLSL(op, arity, dtypes, result, flags, cpu, gradient, bounds, glsl) \
  t[size_t(Ops::op)] = glsl;
  VKG_ALU_OPS(VKG_ALU_GLSL)
#undef VKG_ALU_GLSL
  return t;
}();

// Whether the row's dtypes column admits operands of d's scalar type.
bool accepts(const AluInfo& info, DType d) {
  if (d.is_bool()) return info.dtypes & alu::Bools;
  if (d.is_float()) return info.dtypes & alu::Floats;
  return (info.dtypes & alu::Ints) || (d.scalar == Scalar::UInt64 && (info.dtypes & alu::UInt64));
}

// Every lane of u provably inside [lo, hi]: by its bounds, or lane by lane for a vector of
// constants (whose bounds may be its dtype's).
bool within(const UOpPtr& u, int64_t lo, int64_t hi) {
  if (u->op == Ops::VECTORIZE) {
    for (const UOpPtr& s : u->src)
      if (!within(s, lo, hi)) return false;
    return !u->src.empty();
  }
  if (u->op == Ops::CONST && !u->dtype.is_float())  // also a vector's splat constant
    return u->const_int() >= lo && u->const_int() <= hi;
  return u->dtype.count == 1 && u->vmin() >= lo && u->vmax() <= hi;
}
bool nonzero(const UOpPtr& u) {
  return within(u, 1, std::numeric_limits<int64_t>::max()) ||
         within(u, std::numeric_limits<int64_t>::min(), -1);
}

// The value of a scalar expression made of constants only (ALU ops, casts and bitcasts of CONSTs),
// as the CPU device computes it; none for anything that reads memory or an index, or that is
// deeper than the driver is worth following.
std::optional<cpu::Cell> constant_cell(const UOp& u, int depth = 0) {
  if (u.dtype.count != 1 || depth > 16) return std::nullopt;
  if (u.op == Ops::CONST) return cpu::const_cell(u);
  // A load that is never valid is its alt, of any dtype (float(uint8 load never valid) is a +0
  // the driver folds: elementwise fuzzer seed 801140); a where of a constant condition is the
  // side it picks, whatever the other side is.
  if (u.op == Ops::LOAD && u.src.size() >= 2 && u.src[0]->src.size() > 2) {
    const UOp& valid = *u.src[0]->src[2];
    if (valid.op == Ops::CONST && !valid.const_int()) return constant_cell(*u.src[1], depth + 1);
    return std::nullopt;
  }
  if (u.op == Ops::WHERE && u.src.size() == 3) {
    const std::optional<cpu::Cell> cond = constant_cell(*u.src[0], depth + 1);
    if (cond) return constant_cell(*u.src[*cond != 0 ? 1 : 2], depth + 1);
  }
  // An integer or bool times (or and) a constant 0 is 0, whatever the other operand: the driver
  // folds it, and float(0u * x) * y then lost y's nan and sign (ops fuzzer seed 901149: an empty
  // matmul, 0, times x, cast to float, times y).
  if ((u.op == Ops::MUL || u.op == Ops::AND) && !u.dtype.is_float() && u.src.size() == 2)
    for (const UOpPtr& s : u.src)
      if (const std::optional<cpu::Cell> c = constant_cell(*s, depth + 1); c && *c == 0)
        return cpu::Cell(0);
  const OpFamily family = op_family(u.op);
  const bool alu =
      family == OpFamily::Unary || family == OpFamily::Binary || family == OpFamily::Ternary;
  if (!alu && u.op != Ops::CAST && u.op != Ops::BITCAST) return std::nullopt;
  if (u.src.empty()) return std::nullopt;
  std::vector<cpu::Cell> args;
  for (const UOpPtr& s : u.src) {
    const std::optional<cpu::Cell> c = constant_cell(*s, depth + 1);
    if (!c) return std::nullopt;
    args.push_back(*c);
  }
  cpu::Cell out = 0;
  try {
    if (u.op == Ops::CAST)
      cpu::eval_cast(u.src[0]->dtype.base(), u.dtype.base(), &args[0], &out, 1);
    else if (u.op == Ops::BITCAST)
      cpu::eval_bitcast(u.src[0]->dtype.base(), u.dtype.base(), &args[0], &out, 1);
    else {
      std::vector<const cpu::Cell*> ptrs;
      for (const cpu::Cell& c : args) ptrs.push_back(&c);
      const DType operand = (u.op == Ops::WHERE ? u.src[1] : u.src[0])->dtype.base();
      cpu::eval_alu(u.op, operand, ptrs, &out, 1);
    }
  } catch (const Error&) {
    return std::nullopt;
  }
  return out;
}

// A float constant -0. Lavapipe's code generator subtracts one by adding its negation, a +0 that
// its lp_build_add then drops: x - (-0) gave x, -0 for x = -0 where IEEE gives +0 (the elementwise
// Jit fuzzer's seed 92000176). x - (-0) is x + 0, which add_zero computes by the bits.
bool negative_zero(const UOpPtr& u) {
  if (!u->dtype.is_float()) return false;
  if (u->op == Ops::VECTORIZE) {
    for (const UOpPtr& s : u->src)
      if (!negative_zero(s)) return false;
    return !u->src.empty();
  }
  const std::optional<cpu::Cell> v = constant_cell(*u);
  return v && *v == cpu::Cell{1} << (8 * u->dtype.scalar_size() - 1);
}

// A float constant +0. Lavapipe's code generator (gallivm's lp_build_mul, lp_build_add and
// lp_build_sub) returns 0 for x * 0, x for x + 0 and -x for 0 - x when an operand is its
// constant +0, whatever `precise` or the float controls say: wrong for an infinite or nan x
// (nan), a negative x (-0) and x = +-0 (+0). Those ops are rendered by helpers that decide the
// special cases by the bits, so the driver never sees such an operand (x - 0 = x is right).
bool positive_zero(const UOpPtr& u) {
  if (!u->dtype.is_float()) return false;
  // An expression of constants the driver folds to +0 (casts of integer constants and of loads
  // that are never valid included), before the shapes below stop at a cast or a load.
  if (const std::optional<cpu::Cell> v = constant_cell(*u); v && *v == 0) return true;
  // Also whatever the driver sees to be a constant +0: a cast of one (`float16_t(0.0f)`, or of an
  // integer 0), a load that is never valid (rendered as its alt), a where of two of them.
  const UOp* c = u.get();
  while (c->op == Ops::CAST && c->dtype.is_float() && c->src.size() == 1) c = c->src[0].get();
  // A lane of a vector load (the lowerer's unrolled_vector) is +0 wherever the load is.
  if (c->op == Ops::GEP && c->src.size() == 1 && c->src[0]->op == Ops::LOAD) c = c->src[0].get();
  if (c->op == Ops::LOAD && c->src.size() >= 2 && c->src[0]->src.size() > 2) {
    const UOp& valid = *c->src[0]->src[2];
    return valid.op == Ops::CONST && !valid.const_int() && positive_zero(c->src[1]);
  }
  // A vector of lanes that are each a +0: unrolled_vector's GEPs, or an upcast kernel's constant
  // expression copied once per lane (the driver's to fold as the scalar one).
  if (c->op == Ops::VECTORIZE) {
    for (const UOpPtr& s : c->src)
      if (!positive_zero(s)) return false;
    return !c->src.empty();
  }
  if (c->op == Ops::WHERE && c->src.size() == 3)
    return positive_zero(c->src[1]) && positive_zero(c->src[2]);
  if (c->op == Ops::CONST) return c->const_value() == 0 && !std::signbit(c->const_value());
  // Also an expression of constants that the driver folds to +0 once it has inlined the helpers:
  // `log2_exact(abs(-1.0f)) * x` became 0 for an infinite x ((-1).pow(x), fuzzer seed 70118).
  // Every float width: float16 and bfloat16 are computed in float32 there and folded the same.
  const std::optional<cpu::Cell> v = constant_cell(*u);
  return v && *v == 0;  // the bits of +0 (a Cell is zero-padded)
}

}  // namespace

std::string alu_expr(Ops op, DType out, std::span<const UOpPtr> src, std::span<const std::string> x,
                     Helpers& helpers, DType operand) {
  if (src.empty()) bad(op, out);
  const DType d = operand.scalar != Scalar::Void ? operand
                  : op == Ops::WHERE             ? src[1]->dtype
                                                 : src[0]->dtype;
  const bool vec = d.count > 1;
  if (op == Ops::WHERE)  // mix(x, y, c) takes y where c holds
    return vec ? fmt::format("mix({}, {}, {})", x[2], x[1], x[0])
               : fmt::format("({}?{}:{})", x[0], x[1], x[2]);
  const AluInfo& info = alu_info(op);
  const Spelling& spelling = kSpellings[size_t(op)];
  if (info.arity == 1) {
    if (d.is_bool() || !accepts(info, d)) bad(op, d);
    if (op == Ops::RECIP) {
      const std::string one =
          d.count == 1 ? number(d, 1) : fmt::format("{}({})", type_name(d), number(d, 1));
      return fmt::format("{}({}, {})", helpers.use("fdiv_exact", d), one, x[0]);
    }
    // SPIRV-Tools before 2024.4 (Debian's is 2023.1) folds -(a / c) into a / -c for a constant c
    // (MergeNegateMulDivArithmetic, KhronosGroup/SPIRV-Tools#5822): wrong for an unsigned
    // division (-(x / 1u) gave x / 0xff..ff, 0 or 1: Jit fuzzer seed 93000284) and for a signed
    // one by INT_MIN. It also sees through what it first removes (-((x / 3u) + 0u) gave 0 or 1),
    // so every integer negation is 0 - x, which it leaves alone.
    if (op == Ops::NEG && d.is_int())
      return fmt::format("({}-{})", vec ? fmt::format("{}(0)", type_name(d)) : int_literal(d, 0),
                         x[0]);
    switch (spelling.kind) {
      case Spelling::Prefix:
        return fmt::format("({}{})", spelling.text, x[0]);
      case Spelling::Helper:
        try {  // GLSL has no double exp2, log2 or sin to build their helpers from
          return fmt::format("{}({})", helpers.use(spelling.text, d), x[0]);
        } catch (const Error&) {
          bad(op, d);
        }
      case Spelling::CallF16ViaF32:
        if (d.scalar == Scalar::Float16)
          return fmt::format("{}({}({}({})))", type_name(d), spelling.text,
                             type_name(DType{Scalar::Float32, d.count}), x[0]);
        return fmt::format("{}({})", spelling.text, x[0]);
      case Spelling::Call:
        return fmt::format("{}({})", spelling.text, x[0]);
      default:
        bad(op, d);
    }
  }
  if (d.is_bool()) return bool_alu(op, d, x);
  if (!accepts(info, d)) bad(op, d);
  if (d.is_float() && (op == Ops::MUL || op == Ops::ADD) &&
      (positive_zero(src[0]) || positive_zero(src[1]))) {
    const std::string& other = positive_zero(src[0]) ? x[1] : x[0];
    return fmt::format("{}({})", helpers.use(op == Ops::MUL ? "mul_zero" : "add_zero", d), other);
  }
  if (d.is_float() && op == Ops::SUB && positive_zero(src[0]))
    return fmt::format("{}({})", helpers.use("zero_sub", d), x[1]);
  if (d.is_float() && op == Ops::SUB && negative_zero(src[1]))
    return fmt::format("{}({})", helpers.use("add_zero", d), x[0]);
  switch (op) {
    case Ops::CMPLT:
      return vec ? relational(op, x[0], x[1]) : fmt::format("({}<{})", x[0], x[1]);
    case Ops::CMPNE:
      // x != x is how a graph asks isnan; compilers may fold it, so ask the bits.
      if (d.is_float() && src[0] == src[1])
        return fmt::format("{}({})", helpers.use("isnan_bits", d), x[0]);
      return vec ? relational(op, x[0], x[1]) : fmt::format("({}!={})", x[0], x[1]);
    case Ops::MAX:
      if (d.is_float()) return fmt::format("{}({}, {})", helpers.use("max_nan", d), x[0], x[1]);
      // Mesa 22.3's Lavapipe evaluates an unsigned max() against the constant 0xffffffff as a
      // signed one (max(0u, 0xffffffffu) gave 0): the SPIR-V has UMax, so the fault is in the
      // driver. A compare and select in a helper (an operand is not written twice) is right.
      if (d.is_unsigned())
        return fmt::format("{}({}, {})", helpers.use("umax_select", d), x[0], x[1]);
      return fmt::format("max({}, {})", x[0], x[1]);
    case Ops::MULACC:
      return fmt::format("(({}*{})+{})", x[0], x[1], x[2]);
    // x / 0 and x % 0 are undefined in Vulkan (Lavapipe gives 0xff..ff for unsigned types):
    // a divisor that may be 0 goes through a helper that gives the CPU device's answer
    // (core/alu_semantics.hpp). Constant divisors, as in all index math, keep the plain form.
    case Ops::IDIV:
      if (!nonzero(src[1]))
        return fmt::format("{}({}, {})", helpers.use("idiv_safe", d), x[0], x[1]);
      return fmt::format("({}/{})", x[0], x[1]);
    case Ops::MOD:
      if (!nonzero(src[1]))
        return fmt::format("{}({}, {})", helpers.use("mod_safe", d), x[0], x[1]);
      if (!d.is_unsigned()) return fmt::format("{}({}, {})", helpers.use("mod_c", d), x[0], x[1]);
      return fmt::format("({}%{})", x[0], x[1]);
    // A shift count outside [0, width) is undefined in Vulkan; the CPU device and Lavapipe take
    // it modulo the width, so a count not known to be in range is masked.
    case Ops::SHL:
    case Ops::SHR: {
      const char* o = op == Ops::SHL ? "<<" : ">>";
      const int64_t mask = 8 * d.scalar_size() - 1;
      if (within(src[1], 0, mask)) return fmt::format("({}{}{})", x[0], o, x[1]);
      return fmt::format("({}{}({}&{}))", x[0], o, x[1], int_literal(d.base(), mask));
    }
    default:
      break;
  }
  switch (spelling.kind) {
    case Spelling::Infix:
      return fmt::format("({}{}{})", x[0], spelling.text, x[1]);
    case Spelling::Helper:
      return fmt::format("{}({}, {})", helpers.use(spelling.text, d), x[0], x[1]);
    default:
      bad(op, d);
  }
}

}  // namespace vkg::glsl
