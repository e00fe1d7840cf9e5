// ALU ops as GLSL expressions (helpers from glsl_helpers.cpp where GLSL has no exact operator).
#include <fmt/format.h>

#include <cmath>

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

const char* infix(Ops op) {
  switch (op) {
    case Ops::ADD:
      return "+";
    case Ops::SUB:
      return "-";
    case Ops::MUL:
      return "*";
    case Ops::FDIV:
    case Ops::IDIV:
      return "/";
    case Ops::MOD:
      return "%";
    case Ops::XOR:
      return "^";
    case Ops::OR:
      return "|";
    case Ops::AND:
      return "&";
    case Ops::SHL:
      return "<<";
    case Ops::SHR:
      return ">>";
    default:
      return nullptr;
  }
}

const char* function(Ops op) {
  switch (op) {
    case Ops::EXP2:
      return "exp2";
    case Ops::SQRT:
      return "sqrt";
    case Ops::TRUNC:
      return "trunc";
    default:
      return nullptr;
  }
}

// A float constant +0. Lavapipe's code generator (gallivm's lp_build_mul and lp_build_add)
// returns 0 for x * 0 and x for x + 0 when an operand is its constant +0, whatever `precise` or
// the float controls say: wrong for an infinite or nan x (nan), a negative x (-0) and x = -0
// (+0). Those ops are rendered so that the driver never sees such an operand.
bool positive_zero(const UOpPtr& u) {
  return u->op == Ops::CONST && u->dtype.is_float() && u->const_value() == 0 &&
         !std::signbit(u->const_value());
}

}  // namespace

std::string alu_expr(Ops op, DType out, std::span<const UOpPtr> src, std::span<const std::string> x,
                     Helpers& helpers) {
  if (src.empty()) bad(op, out);
  const DType d = op == Ops::WHERE ? src[1]->dtype : src[0]->dtype;
  const bool vec = d.count > 1;
  if (op == Ops::WHERE)  // mix(x, y, c) takes y where c holds
    return vec ? fmt::format("mix({}, {}, {})", x[2], x[1], x[0])
               : fmt::format("({}?{}:{})", x[0], x[1], x[2]);
  if (op_family(op) == OpFamily::Unary) {
    if (d.is_bool()) bad(op, d);
    if (op == Ops::NEG) return fmt::format("(-{})", x[0]);
    if (!d.is_float()) bad(op, d);
    if (op == Ops::RECIP) {
      const std::string one =
          d.count == 1 ? number(d, 1) : fmt::format("{}({})", type_name(d), number(d, 1));
      return fmt::format("{}({}, {})", helpers.use("fdiv_exact", d), one, x[0]);
    }
    // GLSL has no double exp2, log2 or sin.
    if (d.scalar == Scalar::Float64 && (op == Ops::EXP2 || op == Ops::LOG2 || op == Ops::SIN))
      bad(op, d);
    if (op == Ops::SIN) return fmt::format("{}({})", helpers.use("sin_exact", d), x[0]);
    if (op == Ops::LOG2) return fmt::format("{}({})", helpers.use("log2_exact", d), x[0]);
    if (op == Ops::EXP2) return fmt::format("{}({})", helpers.use("exp2_exact", d), x[0]);
    // float16 sqrt in float32, rounded once, as the CPU computes it (and glslang declares no
    // Float16 capability for a float16 built-in call alone, which validation rejects).
    if (op == Ops::SQRT && d.scalar == Scalar::Float16)
      return fmt::format("{}(sqrt({}({})))", type_name(d),
                         type_name(DType{Scalar::Float32, d.count}), x[0]);
    if (const char* f = function(op)) return fmt::format("{}({})", f, x[0]);
    bad(op, d);
  }
  if (d.is_bool()) return bool_alu(op, d, x);
  if (d.is_float() && (op == Ops::MUL || op == Ops::ADD) &&
      (positive_zero(src[0]) || positive_zero(src[1]))) {
    const std::string& other = positive_zero(src[0]) ? x[1] : x[0];
    if (op == Ops::MUL) return fmt::format("{}({})", helpers.use("mul_zero", d), other);
    // x + 0 is x except that -0 + 0 is +0; x - (-0) is the same sum, with no constant +0.
    const std::string negzero =
        d.count == 1 ? number(d, -0.0) : fmt::format("{}({})", type_name(d), number(d, -0.0));
    return fmt::format("({}-{})", other, negzero);
  }
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
      return fmt::format("max({}, {})", x[0], x[1]);
    case Ops::MULACC:
      return fmt::format("(({}*{})+{})", x[0], x[1], x[2]);
    case Ops::THREEFRY:  // a vector (upcast) THREEFRY calls the scalar helper per lane
      if (d.scalar != Scalar::UInt64) bad(op, d);
      return fmt::format("{}({}, {})", helpers.use("threefry2x32", d), x[0], x[1]);
    case Ops::FDIV:
      if (!d.is_float()) bad(op, d);
      return fmt::format("{}({}, {})", helpers.use("fdiv_exact", d), x[0], x[1]);
    case Ops::IDIV:
    case Ops::XOR:
    case Ops::OR:
    case Ops::AND:
    case Ops::SHL:
    case Ops::SHR:
      if (!d.is_int()) bad(op, d);
      break;
    case Ops::MOD:
      if (!d.is_int()) bad(op, d);
      if (!d.is_unsigned()) return fmt::format("{}({}, {})", helpers.use("mod_c", d), x[0], x[1]);
      break;
    default:
      break;
  }
  if (const char* o = infix(op)) return fmt::format("({}{}{})", x[0], o, x[1]);
  bad(op, d);
}

}  // namespace vkg::glsl
