// ALU ops as GLSL expressions, and the helper functions for ops GLSL has no exact operator for.
#include <fmt/format.h>

#include <vkgrad/codegen/glsl_syntax.hpp>
#include <vkgrad/core/error.hpp>

namespace vkg::glsl {

namespace {

[[noreturn]] void bad(Ops op, DType d) {
  throw Error(fmt::format("the GLSL renderer has no {} on {}", op_name(op), d.name()));
}

struct HelperSpec {
  const char* name;
  int arity;
  bool returns_bool;
  // The scalar definition's body for operand type T (named `T` in the text).
  std::string (*body)(DType scalar);
  // The helpers the scalar definition calls.
  const char* calls;
};

std::string isnan_body(DType d) {
  switch (d.scalar) {
    case Scalar::Float32:  // fast math may fold x != x to false; the bits cannot be folded
      return "return (floatBitsToUint(a) & 0x7fffffffu) > 0x7f800000u;";
    case Scalar::Float16:  // converting keeps a nan a nan
      return "return isnan_bits(float(a));";
    case Scalar::Float64:
      return "uvec2 u = unpackDouble2x32(a);\n  uint hi = u.y & 0x7fffffffu;\n"
             "  return hi > 0x7ff00000u || (hi == 0x7ff00000u && u.x != 0u);";
    default: bad(Ops::CMPNE, d);
  }
}

std::string max_nan_body(DType) {
  // GLSL's max() is undefined for nan; this propagates a nan from either operand.
  return "return (a < b || isnan_bits(b)) ? b : a;";
}

std::string mod_body(DType) {
  // GLSL's % is OpSMod (sign of the divisor) and undefined for negative operands; C's remainder
  // takes the dividend's sign, and OpSDiv truncates toward zero.
  return "return a - (a / b) * b;";
}

std::string threefry_body(DType) {
  return "uint k0 = uint(a), k1 = uint(b >> 32);\n"
         "  uint ks[3] = uint[3](k0, k1, k0 ^ k1 ^ 0x1BD11BDAu);\n"
         "  uint x0 = uint(a) + ks[0], x1 = uint(a >> 32) + ks[1];\n"
         "  const int rot[8] = int[8](13, 15, 26, 6, 17, 29, 16, 24);\n"
         "  for (int i = 0; i < 5; i++) {\n"
         "    for (int j = 0; j < 4; j++) {\n"
         "      int r = rot[(i % 2) * 4 + j];\n"
         "      x0 += x1;\n"
         "      x1 = ((x1 << r) | (x1 >> (32 - r))) ^ x0;\n"
         "    }\n"
         "    x0 += ks[(i + 1) % 3];\n"
         "    x1 += ks[(i + 2) % 3] + uint(i + 1);\n"
         "  }\n"
         "  return (uint64_t(x1) << 32) | uint64_t(x0);";
}

// Helpers take `a` (and `b`): threefry2x32(a = x, b = key).
constexpr HelperSpec kHelpers[] = {
    {"isnan_bits", 1, true, isnan_body, ""},
    {"max_nan", 2, false, max_nan_body, "isnan_bits"},
    {"mod_c", 2, false, mod_body, ""},
    {"threefry2x32", 2, false, threefry_body, ""},
};

const HelperSpec& spec(const std::string& name) {
  for (const HelperSpec& h : kHelpers)
    if (name == h.name) return h;
  throw Error("no GLSL helper " + name);
}

// Vector forms of the native GLSL relational functions.
std::string relational(Ops op, const std::string& a, const std::string& b) {
  return fmt::format("{}({}, {})", op == Ops::CMPLT ? "lessThan" : "notEqual", a, b);
}

std::string bool_alu(Ops op, DType d, std::span<const std::string> x) {
  if (d.count == 1) {
    switch (op) {
      case Ops::ADD: case Ops::OR: case Ops::MAX: return fmt::format("({}||{})", x[0], x[1]);
      case Ops::MUL: case Ops::AND: return fmt::format("({}&&{})", x[0], x[1]);
      case Ops::XOR: case Ops::CMPNE: return fmt::format("({}!={})", x[0], x[1]);
      case Ops::CMPLT: return fmt::format("(!{}&&{})", x[0], x[1]);
      default: bad(op, d);
    }
  }
  // Vectors of bool have no logical operators: go through uvecN bits.
  const std::string u = fmt::format("uvec{}", d.count);
  auto bits = [&](const char* o) {
    return fmt::format("notEqual({}({}) {} {}({}), {}(0u))", u, x[0], o, u, x[1], u);
  };
  switch (op) {
    case Ops::ADD: case Ops::OR: case Ops::MAX: return bits("|");
    case Ops::MUL: case Ops::AND: return bits("&");
    case Ops::XOR: case Ops::CMPNE: return relational(Ops::CMPNE, x[0], x[1]);
    case Ops::CMPLT: return fmt::format("lessThan({}({}), {}({}))", u, x[0], u, x[1]);
    default: bad(op, d);
  }
}

const char* infix(Ops op) {
  switch (op) {
    case Ops::ADD: return "+";
    case Ops::SUB: return "-";
    case Ops::MUL: return "*";
    case Ops::FDIV: case Ops::IDIV: return "/";
    case Ops::MOD: return "%";
    case Ops::XOR: return "^";
    case Ops::OR: return "|";
    case Ops::AND: return "&";
    case Ops::SHL: return "<<";
    case Ops::SHR: return ">>";
    default: return nullptr;
  }
}

const char* function(Ops op) {
  switch (op) {
    case Ops::EXP2: return "exp2";
    case Ops::LOG2: return "log2";
    case Ops::SIN: return "sin";
    case Ops::SQRT: return "sqrt";
    case Ops::TRUNC: return "trunc";
    default: return nullptr;
  }
}

}  // namespace

std::string Helpers::use(const std::string& name, DType d) {
  const HelperSpec& s = spec(name);
  if (seen_.count({name, int(d.scalar) * 8 + d.count})) return name;
  if (d.count > 1) use(name, d.base());  // the vector form calls the scalar one per lane
  if (*s.calls) use(s.calls, d.base());
  seen_.insert({name, int(d.scalar) * 8 + d.count});
  order_.push_back({name, d});
  return name;
}

std::string Helpers::definitions() const {
  std::string out;
  for (const auto& [name, d] : order_) {
    const HelperSpec& s = spec(name);
    const std::string t = type_name(d);
    const std::string result = s.returns_bool ? type_name(DType{Scalar::Bool, d.count}) : t;
    const std::string params = s.arity == 1 ? fmt::format("{} a", t) : fmt::format("{} a, {} b", t, t);
    std::string body;
    if (d.count == 1) {
      body = s.body(d);
    } else {
      std::string lanes;
      for (int k = 0; k < d.count; ++k) {
        const char c = "xyzw"[k];
        lanes += fmt::format("{}{}(a.{}{})", k ? ", " : "", name, c, s.arity == 1 ? "" : fmt::format(", b.{}", c));
      }
      body = fmt::format("return {}({});", result, lanes);
    }
    out += fmt::format("{} {}({}) {{\n  {}\n}}\n", result, name, params, body);
  }
  return out;
}

std::string alu_expr(Ops op, DType out, std::span<const UOpPtr> src, std::span<const std::string> x,
                     Helpers& helpers) {
  if (src.empty()) bad(op, out);
  const DType d = op == Ops::WHERE ? src[1]->dtype : src[0]->dtype;
  const bool vec = d.count > 1;
  if (op == Ops::WHERE)  // mix(x, y, c) takes y where c holds
    return vec ? fmt::format("mix({}, {}, {})", x[2], x[1], x[0]) : fmt::format("({}?{}:{})", x[0], x[1], x[2]);
  if (op_family(op) == OpFamily::Unary) {
    if (d.is_bool()) bad(op, d);
    if (op == Ops::NEG) return fmt::format("(-{})", x[0]);
    if (!d.is_float()) bad(op, d);
    if (op == Ops::RECIP) return fmt::format("({}/{})", number(d.base(), 1), x[0]);
    if (const char* f = function(op)) return fmt::format("{}({})", f, x[0]);
    bad(op, d);
  }
  if (d.is_bool()) return bool_alu(op, d, x);
  switch (op) {
    case Ops::CMPLT:
      return vec ? relational(op, x[0], x[1]) : fmt::format("({}<{})", x[0], x[1]);
    case Ops::CMPNE:
      // x != x is how a graph asks isnan; compilers may fold it, so ask the bits.
      if (d.is_float() && src[0] == src[1]) return fmt::format("{}({})", helpers.use("isnan_bits", d), x[0]);
      return vec ? relational(op, x[0], x[1]) : fmt::format("({}!={})", x[0], x[1]);
    case Ops::MAX:
      if (d.is_float()) return fmt::format("{}({}, {})", helpers.use("max_nan", d), x[0], x[1]);
      return fmt::format("max({}, {})", x[0], x[1]);
    case Ops::MULACC:
      return fmt::format("(({}*{})+{})", x[0], x[1], x[2]);
    case Ops::THREEFRY:
      if (d != dtypes::uint64) bad(op, d);
      return fmt::format("{}({}, {})", helpers.use("threefry2x32", d), x[0], x[1]);
    case Ops::FDIV:
      if (!d.is_float()) bad(op, d);
      break;
    case Ops::IDIV: case Ops::XOR: case Ops::OR: case Ops::AND: case Ops::SHL: case Ops::SHR:
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
