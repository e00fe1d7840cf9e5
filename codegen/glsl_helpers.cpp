// The GLSL helper functions a kernel may call, each defined once per operand type it is used
// with: exact forms of ops whose GLSL built-in is inexact, undefined or missing. float16 forms
// compute in float32 and round once; vector forms call the scalar one per lane.
//
// This file holds the table of helpers, their emission, and the helpers that are a few bit tests;
// the numeric bodies are in glsl_helpers_transcendental.cpp and glsl_helpers_arithmetic.cpp
// (declared in glsl_helper_bodies.hpp).
#include <fmt/format.h>

#include <cmath>

#include <vkgrad/codegen/glsl_helper_bodies.hpp>
#include <vkgrad/codegen/glsl_syntax.hpp>
#include <vkgrad/core/error.hpp>

namespace vkg::glsl {

[[noreturn]] void no_helper(const char* name, DType d) {
  throw Error(fmt::format("no GLSL helper {} for {}", name, d.name()));
}

namespace {

struct HelperSpec {
  const char* name;
  int arity;      // parameters a (and b)
  Scalar result;  // Void: the operand type
  // The scalar definition for float32 (and, where it differs, other types); float16 goes through
  // the float32 one when f16_via_f32.
  std::string (*body)(DType scalar);
  bool f16_via_f32;
  const char* calls;  // a helper the scalar definition calls on the same type, or ""
  // The float32 definition where the device computes in double (shaderFloat64), if cheaper.
  std::string (*body_float64)() = nullptr;
};

std::string isnan_body(DType d) {
  switch (d.scalar) {
    case Scalar::Float32:  // fast math may fold x != x to false; the bits cannot be folded
      return "return (floatBitsToUint(a) & 0x7fffffffu) > 0x7f800000u;";
    case Scalar::Float64:
      return "uvec2 u = unpackDouble2x32(a);\n  uint hi = u.y & 0x7fffffffu;\n"
             "  return hi > 0x7ff00000u || (hi == 0x7ff00000u && u.x != 0u);";
    default:
      no_helper("isnan_bits", d);
  }
}

std::string max_nan_body(DType) {
  // GLSL's max() is undefined for nan; this propagates a nan from either operand.
  return "return (a < b || isnan_bits(b)) ? b : a;";
}

std::string umax_select_body(DType) {
  // Unsigned max as a compare and select: see Ops::MAX in glsl_alu.cpp for the driver fault.
  return "return a < b ? b : a;";
}

// The bits of a +0 that the driver cannot prove to be a constant (no dispatch has 0 workgroups).
// Lavapipe's code generator turns x + 0, 0 - x and x * 0 into x, -x and 0 whenever an operand
// is the constant +0 (glsl_alu.cpp, positive_zero), and its compiler folds a helper below into
// one when its operand is a constant, as an accumulator is in the first iterations of an
// unrolled loop: add_zero(-0.0) of a padded row became the constant +0, and the next row's
// `+0 + (-0)` then gave -0 (ops fuzzer seed 700131, an avg_pool over -0s and a padded plane).
// A +0 a helper makes is these bits, so it stays a value and every op on it runs as IEEE says.
constexpr const char* kOpaqueZeroBits = "uint(gl_NumWorkGroups.x == 0u)";

std::string mul_zero_body(DType d) {
  // a * +0 as IEEE says, decided by the bits (see positive_zero in glsl_alu.cpp): nan for inf
  // and nan, else a zero with a's sign.
  switch (d.scalar) {
    case Scalar::Float32:
      return fmt::format(R"(uint b = floatBitsToUint(a);
  return uintBitsToFloat((b & 0x7fffffffu) >= 0x7f800000u ? 0x7fc00000u : (b & 0x80000000u) | {});)",
                         kOpaqueZeroBits);
    case Scalar::Float64:
      return fmt::format(R"(uvec2 u = unpackDouble2x32(a);
  bool special = (u.y & 0x7fffffffu) >= 0x7ff00000u;
  return packDouble2x32(special ? uvec2(0u, 0x7ff80000u) : uvec2({}, u.y & 0x80000000u));)",
                         kOpaqueZeroBits);
    default:
      no_helper("mul_zero", d);
  }
}

std::string add_zero_body(DType d) {
  // a + +0: a, except that -0 + 0 is +0.
  switch (d.scalar) {
    case Scalar::Float32:
      return fmt::format("return floatBitsToUint(a) == 0x80000000u ? uintBitsToFloat({}) : a;",
                         kOpaqueZeroBits);
    case Scalar::Float64:
      return fmt::format(
          "return unpackDouble2x32(a) == uvec2(0u, 0x80000000u) ? packDouble2x32(uvec2({}, 0u)) "
          ": a;",
          kOpaqueZeroBits);
    default:
      no_helper("add_zero", d);
  }
}

std::string zero_sub_body(DType d) {
  // +0 - a: -a, except that 0 - 0 and 0 - (-0) are +0.
  switch (d.scalar) {
    case Scalar::Float32:
      return fmt::format(
          "return (floatBitsToUint(a) & 0x7fffffffu) == 0u ? uintBitsToFloat({}) : -a;",
          kOpaqueZeroBits);
    case Scalar::Float64:
      return fmt::format(R"(uvec2 u = unpackDouble2x32(a);
  return ((u.y & 0x7fffffffu) | u.x) == 0u ? packDouble2x32(uvec2({}, 0u)) : -a;)",
                         kOpaqueZeroBits);
    default:
      no_helper("zero_sub", d);
  }
}

std::string mod_body(DType) {
  // GLSL's % is OpSMod (sign of the divisor) and undefined for negative operands; C's remainder
  // takes the dividend's sign, and OpSDiv truncates toward zero.
  return "return a - (a / b) * b;";
}

// a / b and a % b as the CPU device defines them where b is 0 (core/alu_semantics.hpp): 0 and a.
// Vulkan leaves both undefined; Lavapipe gives 0 and a for signed types, 0xff..ff for unsigned.
std::string idiv_safe_body(DType d) {
  const std::string zero = int_literal(d, 0);
  return fmt::format("return b == {0} ? {0} : a / b;", zero);
}

std::string mod_safe_body(DType d) {
  const std::string zero = int_literal(d, 0);
  if (d.is_unsigned()) return fmt::format("return b == {} ? a : a % b;", zero);
  return fmt::format("return b == {} ? a : a - (a / b) * b;", zero);  // C's sign: see mod_body
}

std::string threefry_body(DType d) {
  if (d != dtypes::uint64) no_helper("threefry2x32", d);
  return "uint k0 = uint(b), k1 = uint(b >> 32);\n"
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

// The 16-bit float conversions of emulated dtypes (glsl_half.cpp), the same integer steps as
// core/half.hpp: bfloat16 keeps the top half of a float32, rounded to nearest even, a nan made
// quiet; float16 rounds to nearest even into its normal or subnormal range, overflows to inf,
// and keeps a nan's top payload bits.
std::string bf16_bits_body(DType) {
  return R"(uint x = floatBitsToUint(a);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;
  return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;)";
}
std::string bf16_value_body(DType) { return "return uintBitsToFloat(a << 16);"; }
std::string bf16_round_body(DType) { return "return uintBitsToFloat(bf16_bits(a) << 16);"; }

std::string f16_bits_body(DType) {
  return R"(uint x = floatBitsToUint(a);
  uint sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
  int e = int((x >> 23) & 0xffu) - 112;
  if (e == 143) return sign | 0x7c00u | (mant != 0u ? 0x200u | (mant >> 13) : 0u);
  if (e >= 31) return sign | 0x7c00u;
  uint h, rest, tie;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000u;
    uint shift = uint(14 - e);
    h = mant >> shift;
    rest = mant & ((1u << shift) - 1u);
    tie = 1u << (shift - 1u);
  } else {
    h = (uint(e) << 10) | (mant >> 13);
    rest = mant & 0x1fffu;
    tie = 0x1000u;
  }
  if (rest > tie || (rest == tie && (h & 1u) != 0u)) h++;
  return sign | h;)";
}
std::string f16_value_body(DType) {
  // A subnormal float16 m * 2^-24 is a normal float32: its exponent from m's top bit.
  return R"(uint sign = (a & 0x8000u) << 16, e = (a >> 10) & 0x1fu, m = a & 0x3ffu;
  if (e == 0x1fu) return uintBitsToFloat(sign | 0x7f800000u | (m << 13));
  if (e != 0u) return uintBitsToFloat(sign | ((e + 112u) << 23) | (m << 13));
  if (m == 0u) return uintBitsToFloat(sign);
  int top = findMSB(m);
  return uintBitsToFloat(sign | (uint(top + 103) << 23) | ((m << uint(23 - top)) & 0x7fffffu));)";
}
std::string f16_round_body(DType) { return "return f16_value(f16_bits(a));"; }

// Float to integer type To: truncates toward zero, saturates at To's bounds, and gives 0 for
// nan, as the CPU device does (codegen/cpu_alu.cpp). GLSL leaves out-of-range conversions
// undefined (Lavapipe gave INT_MIN for all). The bounds 2^(bits-1) and 2^bits are exact in
// every float type that can reach them.
template <Scalar To>
std::string float_to_int_body(DType from) {
  if (from.scalar != Scalar::Float32 && from.scalar != Scalar::Float64)
    no_helper("float_to_int", from);
  const DType to{To, 1};
  const int bits = 8 * to.scalar_size();
  const bool is_signed = !to.is_unsigned();
  const char* suffix = from.scalar == Scalar::Float64 ? "lf" : "f";
  const double hi = std::ldexp(1.0, is_signed ? bits - 1 : bits);
  const int64_t max = is_signed ? int64_t((uint64_t(1) << (bits - 1)) - 1)
                                : int64_t(bits == 64 ? ~uint64_t(0) : (uint64_t(1) << bits) - 1);
  const int64_t min = is_signed ? -max - 1 : 0;
  return fmt::format(
      "if (isnan_bits(a)) return {0};\n  if (a >= {1:.1f}{2}) return {3};\n"
      "  if (a <= {4:.1f}{2}) return {5};\n  return {6}(a);",
      int_literal(to, 0), hi, suffix, int_literal(to, max), is_signed ? -hi : -1.0,
      int_literal(to, min), type_name(to));
}

// Helpers take `a` (and `b`): threefry2x32(a = x, b = key).
constexpr HelperSpec kHelpers[] = {
    {"isnan_bits", 1, Scalar::Bool, isnan_body, true, ""},
    {"max_nan", 2, Scalar::Void, max_nan_body, false, "isnan_bits"},
    {"umax_select", 2, Scalar::Void, umax_select_body, false, ""},
    {"mod_c", 2, Scalar::Void, mod_body, false, ""},
    {"idiv_safe", 2, Scalar::Void, idiv_safe_body, false, ""},
    {"mod_safe", 2, Scalar::Void, mod_safe_body, false, ""},
    {"mul_zero", 1, Scalar::Void, mul_zero_body, true, ""},
    {"add_zero", 1, Scalar::Void, add_zero_body, true, ""},
    {"zero_sub", 1, Scalar::Void, zero_sub_body, true, ""},
    {"log2_exact", 1, Scalar::Void, log2_body, true, ""},
    {"exp2_exact", 1, Scalar::Void, exp2_body, true, ""},
    {"fdiv_exact", 2, Scalar::Void, fdiv_body, true, "", fdiv_via_double_body},
    {"sin_exact", 1, Scalar::Void, sin_body, true, ""},
    {"cos_exact", 1, Scalar::Void, cos_body, true, ""},
    {"erfc_tail", 1, Scalar::Void, erfc_tail_body, true, "exp2_exact"},
    {"erf_exact", 1, Scalar::Void, erf_body, true, "erfc_tail"},
    {"erfc_exact", 1, Scalar::Void, erfc_body, true, "erfc_tail"},
    {"fmod_exact", 2, Scalar::Void, fmod_body, true, ""},
    {"sqrt_exact", 1, Scalar::Void, sqrt_body, true, ""},
    {"remainder_py", 2, Scalar::Void, remainder_body, true, "fmod_exact"},
    {"bf16_bits", 1, Scalar::UInt32, bf16_bits_body, false, ""},
    {"bf16_value", 1, Scalar::Float32, bf16_value_body, false, ""},
    {"bf16_round", 1, Scalar::Void, bf16_round_body, false, "bf16_bits"},
    {"f16_bits", 1, Scalar::UInt32, f16_bits_body, false, ""},
    {"f16_value", 1, Scalar::Float32, f16_value_body, false, ""},
    {"f16_round", 1, Scalar::Void, f16_round_body, false, "f16_bits"},
    {"threefry2x32", 2, Scalar::Void, threefry_body, false, ""},
    {"to_int8", 1, Scalar::Int8, float_to_int_body<Scalar::Int8>, true, "isnan_bits"},
    {"to_uint8", 1, Scalar::UInt8, float_to_int_body<Scalar::UInt8>, true, "isnan_bits"},
    {"to_int16", 1, Scalar::Int16, float_to_int_body<Scalar::Int16>, true, "isnan_bits"},
    {"to_uint16", 1, Scalar::UInt16, float_to_int_body<Scalar::UInt16>, true, "isnan_bits"},
    {"to_int32", 1, Scalar::Int32, float_to_int_body<Scalar::Int32>, true, "isnan_bits"},
    {"to_uint32", 1, Scalar::UInt32, float_to_int_body<Scalar::UInt32>, true, "isnan_bits"},
    {"to_int64", 1, Scalar::Int64, float_to_int_body<Scalar::Int64>, true, "isnan_bits"},
    {"to_uint64", 1, Scalar::UInt64, float_to_int_body<Scalar::UInt64>, true, "isnan_bits"},
};

const HelperSpec& spec(const std::string& name) {
  for (const HelperSpec& h : kHelpers)
    if (name == h.name) return h;
  throw Error("no GLSL helper " + name);
}

bool via_f32(const HelperSpec& s, DType d) { return s.f16_via_f32 && d.scalar == Scalar::Float16; }

std::string scalar_body(const HelperSpec& s, DType d, bool float64, bool exact_sqrt,
                        bool float_of_double_division) {
  if (!exact_sqrt && std::string_view(s.name) == "sqrt_exact") return "return sqrt(a);";
  if (float_of_double_division && std::string_view(s.name) == "fdiv_exact" &&
      d.scalar == Scalar::Float32)
    return fdiv_float_of_double_body();
  if (float64 && s.body_float64 && d.scalar == Scalar::Float32) return s.body_float64();
  if (!via_f32(s, d)) return s.body(d);
  const char* args = s.arity == 1 ? "float(a)" : "float(a), float(b)";
  return s.result != Scalar::Void ? fmt::format("return {}({});", s.name, args)
                                  : fmt::format("return float16_t({}({}));", s.name, args);
}

}  // namespace

std::string Helpers::use(const std::string& name, DType d) {
  const HelperSpec& s = spec(name);
  const std::pair<std::string, int> key{name, int(d.scalar) * 8 + d.count};
  if (seen_.count(key)) return name;
  if (d.count > 1) use(name, d.base());  // the vector form calls the scalar one per lane
  if (via_f32(s, d)) use(name, dtypes::float32);
  if (*s.calls) use(s.calls, d.base());
  if (d.count == 1)
    scalar_body(s, d, float64_, exact_sqrt_,
                float_of_double_division_);  // throws now, at the op, for a type it has no form for
  seen_.insert(key);
  order_.push_back({name, d});
  return name;
}

std::string Helpers::definitions() const {
  std::string out;
  for (const auto& [name, d] : order_) {
    const HelperSpec& s = spec(name);
    const std::string t = type_name(d);
    const std::string result = s.result != Scalar::Void ? type_name(DType{s.result, d.count}) : t;
    const std::string params =
        s.arity == 1 ? fmt::format("{} a", t) : fmt::format("{} a, {} b", t, t);
    std::string body;
    if (d.count == 1) {
      body = scalar_body(s, d, float64_, exact_sqrt_, float_of_double_division_);
    } else {
      std::string lanes;
      for (int k = 0; k < d.count; ++k) {
        const char c = "xyzw"[k];
        lanes += fmt::format("{}{}(a.{}{})", k ? ", " : "", name, c,
                             s.arity == 1 ? "" : fmt::format(", b.{}", c));
      }
      body = fmt::format("return {}({});", result, lanes);
    }
    out += fmt::format("{} {}({}) {{\n  {}\n}}\n", result, name, params, body);
  }
  return out;
}

}  // namespace vkg::glsl
