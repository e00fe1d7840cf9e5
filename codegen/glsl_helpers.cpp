// The GLSL helper functions a kernel may call, each defined once per operand type it is used
// with: exact forms of ops whose GLSL built-in is inexact, undefined or missing. float16 forms
// compute in float32 and round once; vector forms call the scalar one per lane.
#include <fmt/format.h>

#include <vkgrad/codegen/glsl_syntax.hpp>
#include <vkgrad/core/error.hpp>

namespace vkg::glsl {

namespace {

struct HelperSpec {
  const char* name;
  int arity;          // parameters a (and b)
  bool returns_bool;  // else the operand type
  // The scalar definition for float32 (and, where it differs, other types); float16 goes through
  // the float32 one when f16_via_f32.
  std::string (*body)(DType scalar);
  bool f16_via_f32;
  const char* calls;  // a helper the scalar definition calls on the same type, or ""
};

[[noreturn]] void no_helper(const char* name, DType d) {
  throw Error(fmt::format("no GLSL helper {} for {}", name, d.name()));
}

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

std::string mod_body(DType) {
  // GLSL's % is OpSMod (sign of the divisor) and undefined for negative operands; C's remainder
  // takes the dividend's sign, and OpSDiv truncates toward zero.
  return "return a - (a / b) * b;";
}

std::string log2_body(DType d) {
  if (d.scalar != Scalar::Float32) no_helper("log2_exact", d);
  // Lavapipe's log2() reads a subnormal's exponent field as is (log2(1e-40) gives -127, not
  // -132.9): scale subnormals into the normal range first.
  return "return (a > 0.0f && a < 1.17549435e-38f) ? log2(a * 18446744073709551616.0f) - 64.0f : "
         "log2(a);";
}

std::string sin_body(DType d) {
  if (d.scalar != Scalar::Float32) no_helper("sin_exact", d);
  // Vulkan's sin() is only specified on [-pi, pi], and Lavapipe's gives -1 for sin(1e10). Here
  // |a| > pi/4 is reduced exactly (Payne-Hanek): the bits of 2/pi that matter for a's exponent,
  // times a's 24-bit mantissa in 32-bit integer words, give the quadrant and 62 bits of the
  // fraction. Then minimax polynomials on [-pi/4, pi/4] (Cephes sinf/cosf).
  return R"(uint bits = floatBitsToUint(a), abits = bits & 0x7fffffffu;
  if (abits >= 0x7f800000u) return uintBitsToFloat(0x7fc00000u);
  if (abits < 0x39800000u) return a;  // |a| < 2^-12: sin(a) rounds to a (and keeps -0)
  float r = a, sign = 1.0f;
  uint q = 0u;
  if (abits > 0x3f490fdbu) {
    // 2/pi after 64 zero bits, so that the window below may start before its first bit.
    const uint two_over_pi[9] = uint[9](0u, 0u, 0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u,
                                        0xdb629599u, 0x3c439041u, 0xfe5163abu);
    int e = int(abits >> 23) - 150;  // |a| = m * 2^e
    uint m = (abits & 0x7fffffu) | 0x800000u;
    // Bits of 2/pi before this window only add multiples of 4 to |a| * 2/pi.
    int g = e + 62, wi = g >> 5, s = g & 31;
    uint w0 = (two_over_pi[wi] << s) | ((two_over_pi[wi + 1] >> 1) >> (31 - s));
    uint w1 = (two_over_pi[wi + 1] << s) | ((two_over_pi[wi + 2] >> 1) >> (31 - s));
    uint w2 = (two_over_pi[wi + 2] << s) | ((two_over_pi[wi + 3] >> 1) >> (31 - s));
    uint h0, l0, h1, l1, h2, l2, carry;
    umulExtended(m, w0, h0, l0);
    umulExtended(m, w1, h1, l1);
    umulExtended(m, w2, h2, l2);
    uint p1 = uaddCarry(h2, l1, carry);
    uint p2 = h1 + l0 + carry;  // |a| * 2/pi = p2 * 2^-62 + p1 * 2^-94 + ... (mod 4)
    q = p2 >> 30;
    uint fh = p2 & 0x3fffffffu, fl = p1;
    if ((fh & 0x20000000u) != 0u) {  // fraction >= 1/2: the next quadrant, r = -(1 - fraction)
      q += 1u;
      fl = ~fl + 1u;
      fh = (~fh + (fl == 0u ? 1u : 0u)) & 0x3fffffffu;
      sign = -1.0f;
    }
    float f;
    if (fh != 0u) {
      int k = 31 - findMSB(fh);
      f = ldexp(float((fh << k) | (fl >> (32 - k))), -30 - k);
    } else {
      f = ldexp(float(fl), -62);
    }
    r = fma(f, 1.57079637f, f * -4.37113883e-8f);  // f * pi/2 with pi/2 in two parts
    r = (bits >> 31) != 0u ? -sign * r : sign * r;
    if ((bits >> 31) != 0u) q = 0u - q;
  }
  float z = r * r;
  float sn = ((-1.9515295891e-4f * z + 8.3321608736e-3f) * z - 1.6666654611e-1f) * z * r + r;
  float cs = ((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z + 4.166664568298827e-2f) * z * z - 0.5f * z + 1.0f;
  float y = (q & 1u) != 0u ? cs : sn;
  return (q & 2u) != 0u ? -y : y;)";
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

// Helpers take `a` (and `b`): threefry2x32(a = x, b = key).
constexpr HelperSpec kHelpers[] = {
    {"isnan_bits", 1, true, isnan_body, true, ""},
    {"max_nan", 2, false, max_nan_body, false, "isnan_bits"},
    {"mod_c", 2, false, mod_body, false, ""},
    {"log2_exact", 1, false, log2_body, true, ""},
    {"sin_exact", 1, false, sin_body, true, ""},
    {"threefry2x32", 2, false, threefry_body, false, ""},
};

const HelperSpec& spec(const std::string& name) {
  for (const HelperSpec& h : kHelpers)
    if (name == h.name) return h;
  throw Error("no GLSL helper " + name);
}

bool via_f32(const HelperSpec& s, DType d) { return s.f16_via_f32 && d.scalar == Scalar::Float16; }

std::string scalar_body(const HelperSpec& s, DType d) {
  if (!via_f32(s, d)) return s.body(d);
  return s.returns_bool ? fmt::format("return {}(float(a));", s.name)
                        : fmt::format("return float16_t({}(float(a)));", s.name);
}

}  // namespace

std::string Helpers::use(const std::string& name, DType d) {
  const HelperSpec& s = spec(name);
  const std::pair<std::string, int> key{name, int(d.scalar) * 8 + d.count};
  if (seen_.count(key)) return name;
  if (d.count > 1) use(name, d.base());  // the vector form calls the scalar one per lane
  if (via_f32(s, d)) use(name, dtypes::float32);
  if (*s.calls) use(s.calls, d.base());
  if (d.count == 1) scalar_body(s, d);  // throws now, at the op, for a type it has no form for
  seen_.insert(key);
  order_.push_back({name, d});
  return name;
}

std::string Helpers::definitions() const {
  std::string out;
  for (const auto& [name, d] : order_) {
    const HelperSpec& s = spec(name);
    const std::string t = type_name(d);
    const std::string result = s.returns_bool ? type_name(DType{Scalar::Bool, d.count}) : t;
    const std::string params =
        s.arity == 1 ? fmt::format("{} a", t) : fmt::format("{} a, {} b", t, t);
    std::string body;
    if (d.count == 1) {
      body = scalar_body(s, d);
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
