// The GLSL helper functions a kernel may call, each defined once per operand type it is used
// with: exact forms of ops whose GLSL built-in is inexact, undefined or missing. float16 forms
// compute in float32 and round once; vector forms call the scalar one per lane.
#include <fmt/format.h>

#include <cmath>
#include <numbers>

#include <vkgrad/codegen/glsl_syntax.hpp>
#include <vkgrad/core/error.hpp>

namespace vkg::glsl {

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

std::string log2_body(DType d) {
  if (d.scalar != Scalar::Float32) no_helper("log2_exact", d);
  // Lavapipe's log2() has an absolute error of about 1e-7 on [0.5, 2] (as Vulkan allows), dozens
  // of ulps near 1, and reads a subnormal's exponent field as is (log2(1e-40) gave -127). Here
  // a = m * 2^e with m in [sqrt(1/2), sqrt(2)) (subnormals scaled by 2^64 first); ln(m) = f + y
  // with f = m - 1 exact and y from Cephes' logf polynomial; f * log2(e) kept exact as hi + lo
  // (Dekker's product, log2(e) split offline: fma may be unfused in Vulkan, and is on
  // Lavapipe), and e added in two-sum form: within 1.1 ulp of libm everywhere (checked
  // exhaustively on the host). Specials are decided by the bits.
  return R"(uint b = floatBitsToUint(a);
  if ((b & 0x7fffffffu) > 0x7f800000u || b > 0x80000000u) return uintBitsToFloat(0x7fc00000u);
  if ((b & 0x7fffffffu) == 0u) return uintBitsToFloat(0xff800000u);
  if (b == 0x7f800000u) return a;
  int e = 0;
  if (b < 0x00800000u) {
    b = floatBitsToUint(a * 18446744073709551616.0f);
    e = -64;
  }
  e += int(b >> 23) - 127;
  float m = uintBitsToFloat((b & 0x7fffffu) | 0x3f800000u);
  if (m > 1.41421356f) {
    m *= 0.5f;
    e += 1;
  }
  float f = m - 1.0f, z = f * f;
  float p = ((((((((7.0376836292e-2f * f - 1.1514610310e-1f) * f + 1.1676998740e-1f) * f -
              1.2420140846e-1f) * f + 1.4249322787e-1f) * f - 1.6668057665e-1f) * f +
              2.0000714765e-1f) * f - 2.4999993993e-1f) * f + 3.3333331174e-1f);
  float y = p * f * z - 0.5f * z;
  precise float c = 4097.0f * f, fh = c - (c - f), fl = f - fh;
  precise float hi = f * 1.4426950216293335f;
  precise float lo = ((fh * 1.44287109375f - hi) + fh * -1.760721206665039e-4f + fl * 1.44287109375f) +
                     fl * -1.760721206665039e-4f;
  lo = lo + (f * 1.92596298909109e-8f + y * 1.4426950216293335f);
  if (e == 0) return hi + lo;
  precise float s = float(e) + hi;
  precise float t = (float(e) - s) + hi;
  return s + (t + lo);)";
}

std::string exp2_body(DType d) {
  if (d.scalar != Scalar::Float32) no_helper("exp2_exact", d);
  // Lavapipe's exp2() is up to 3 ulp off (a third of all results more than 1; Vulkan allows
  // 3 + 2|x|) and flushes results below 2^-126 to 0. Here a = n + f with f in [-1/2, 1/2];
  // 2^f = 1 + u(f) * f with Sleef's exp2f polynomial and the product kept exact as hi + lo
  // (Dekker's, as fma may be unfused); 2^n applied in steps that round once, also into the
  // subnormal range, and `precise` so that the two scale factors are not folded into one (inf):
  // within 0.87 ulp of libm (checked on the host over every fifth float).
  return R"(if ((floatBitsToUint(a) & 0x7fffffffu) > 0x7f800000u) return a;
  if (a >= 128.0f) return uintBitsToFloat(0x7f800000u);
  if (a < -151.0f) return 0.0f;
  float n = floor(a + 0.5f);
  precise float f = a - n;
  float u = 0.1535920892e-3f;
  u = u * f + 0.1339262701e-2f;
  u = u * f + 0.9618384764e-2f;
  u = u * f + 0.5550347269e-1f;
  u = u * f + 0.2402264476e+0f;
  u = u * f + 0.6931471825e+0f;
  precise float cu = 4097.0f * u, uh = cu - (cu - u), ul = u - uh;
  precise float cf = 4097.0f * f, fh = cf - (cf - f), fl = f - fh;
  precise float hi = u * f;
  precise float lo = ((uh * fh - hi) + uh * fl + ul * fh) + ul * fl;
  precise float s = 1.0f + hi;
  precise float r = s + (((1.0f - s) + hi) + lo);
  int k = int(n);
  precise float scaled = k == 128 ? r * 2.0f : k < -126 ? r * uintBitsToFloat(uint(k + 191) << 23) : r;
  precise float y = scaled * (k == 128 ? 1.70141183e38f : k < -126 ? 5.42101086e-20f : uintBitsToFloat(uint(k + 127) << 23));
  return y;)";
}

std::string fdiv_body(DType d) {
  // Vulkan allows 2.5 ulp for a / b, and Lavapipe computes x / c for a constant c as x * (1 / c)
  // (var() of 1..4 gave 1.6666667). Here a and b are scaled by powers of two to [1, 2); their
  // quotient q is corrected by the remainder ma - q * mb, computed exactly with Dekker's product
  // (not fma: Vulkan lets a driver split fma into a multiply and an add, and Lavapipe does).
  // One Newton step brings q within an ulp but can round the wrong way when the quotient lies
  // next to a midpoint between two floats (4 / 0.49999997 gave 8, not 8.000001), so the
  // remainder of the corrected q decides the last step: q moves one ulp when the remainder is
  // more than half an ulp times mb. No quotient is ever exactly a midpoint (a 25-bit odd
  // significand times mb has more than 24 bits), and the remainder and the half-ulp bound are
  // multiples of an ulp of the bound apart, so the rounded comparison is exact. Then q is scaled
  // back exactly. Zeros,
  // infinities and nan are decided by the bits, as IEEE says: Lavapipe's a / b gave tiny
  // numbers for x / +-0 and 0 for 0 / 0. Quotients outside the normal range keep the device's
  // a / b. `precise` keeps the compiler from reassociating or contracting the steps.
  if (d.scalar != Scalar::Float32 && d.scalar != Scalar::Float64) no_helper("fdiv_exact", d);
  const bool dbl = d.scalar == Scalar::Float64;
  const char* t = dbl ? "double" : "float";
  const char* split = dbl ? "134217729.0lf" : "4097.0f";  // 2^27 + 1, 2^12 + 1: Veltkamp's split
  const char* min_normal = dbl ? "2.2250738585072014e-308lf" : "1.17549435e-38f";
  const int max_exp = dbl ? 1023 : 127;
  // a = ma * 2^ea and b = mb * 2^eb with ma, mb in [1, 2) keeping the signs; k = ea - eb.
  const std::string classify = dbl ? R"(uvec2 ua = unpackDouble2x32(a), ub = unpackDouble2x32(b);
  uint xa = ua.y & 0x7fffffffu, xb = ub.y & 0x7fffffffu, sign = (ua.y ^ ub.y) & 0x80000000u;
  bool za = (xa | ua.x) == 0u, zb = (xb | ub.x) == 0u;
  bool ia = xa == 0x7ff00000u && ua.x == 0u, ib = xb == 0x7ff00000u && ub.x == 0u;
  if ((xa >= 0x7ff00000u && !ia) || (xb >= 0x7ff00000u && !ib) || (za && zb) || (ia && ib))
    return packDouble2x32(uvec2(0u, 0x7ff80000u));
  if (ia || zb) return packDouble2x32(uvec2(0u, sign | 0x7ff00000u));
  if (za || ib) return packDouble2x32(uvec2(0u, sign));
  int k = 0;
  if (xa < 0x00100000u) {
    ua = unpackDouble2x32(a * 18014398509481984.0lf);
    k -= 54;
  }
  if (xb < 0x00100000u) {
    ub = unpackDouble2x32(b * 18014398509481984.0lf);
    k += 54;
  }
  // A device that flushes subnormals made them 0: nothing to scale.
  if ((ua.y & 0x7ff00000u) == 0u || (ub.y & 0x7ff00000u) == 0u) return plain;
  k += int((ua.y >> 20) & 0x7ffu) - int((ub.y >> 20) & 0x7ffu);
  double ma = packDouble2x32(uvec2(ua.x, (ua.y & 0x800fffffu) | 0x3ff00000u));
  double mb = packDouble2x32(uvec2(ub.x, (ub.y & 0x800fffffu) | 0x3ff00000u));)"
                                   : R"(uint ua = floatBitsToUint(a), ub = floatBitsToUint(b);
  uint xa = ua & 0x7fffffffu, xb = ub & 0x7fffffffu, sign = (ua ^ ub) & 0x80000000u;
  if (xa > 0x7f800000u || xb > 0x7f800000u || (xa == 0u && xb == 0u) ||
      (xa == 0x7f800000u && xb == 0x7f800000u))
    return uintBitsToFloat(0x7fc00000u);
  if (xa == 0x7f800000u || xb == 0u) return uintBitsToFloat(sign | 0x7f800000u);
  if (xa == 0u || xb == 0x7f800000u) return uintBitsToFloat(sign);
  int k = 0;
  if (xa < 0x00800000u) {
    ua = floatBitsToUint(a * 16777216.0f);
    k -= 24;
  }
  if (xb < 0x00800000u) {
    ub = floatBitsToUint(b * 16777216.0f);
    k += 24;
  }
  // A device that flushes subnormals made them 0: nothing to scale.
  if ((ua & 0x7f800000u) == 0u || (ub & 0x7f800000u) == 0u) return plain;
  k += int((ua >> 23) & 0xffu) - int((ub >> 23) & 0xffu);
  float ma = uintBitsToFloat((ua & 0x807fffffu) | 0x3f800000u);
  float mb = uintBitsToFloat((ub & 0x807fffffu) | 0x3f800000u);)";
  // r<n> = ma - q * mb exactly (while q * mb is within 2x of ma), from Dekker's split of q.
  const auto remainder = [&](int n) {
    return fmt::format(
        "precise {0} cq{1} = {2} * q, qh{1} = cq{1} - (cq{1} - q), ql{1} = q - qh{1};\n"
        "  precise {0} p{1} = q * mb;\n"
        "  precise {0} e{1} = ((qh{1} * bh - p{1}) + qh{1} * bl + ql{1} * bh) + ql{1} * bl;\n"
        "  precise {0} r{1} = (ma - p{1}) - e{1};",
        t, n, split);
  };
  const std::string pow2 = dbl ? "packDouble2x32(uvec2(0u, uint(k + 1023) << 20))"
                               : "uintBitsToFloat(uint(k + 127) << 23)";
  return fmt::format(R"(precise {0} plain = a / b;
  {1}
  ma = abs(ma);
  mb = abs(mb);
  precise {0} cb = {2} * mb, bh = cb - (cb - mb), bl = mb - bh;
  precise {0} q = ma / mb;
  {8}
  q = q + r0 * ({0}(1) / mb);
  // q is in [0.5, 2]: the ulps above and below it.
  precise {0} up = q >= {0}(1) ? {9} : {10}, down = q > {0}(1) ? {9} : {10};
  if (q == {0}(0.5)) down *= {0}(0.5);
  {11}
  if (r1 > up * mb * {0}(0.5)) q += up;
  else if (-r1 > down * mb * {0}(0.5)) q -= down;
  if (sign != 0u) q = -q;
  if (k == {4}) {{
    q *= {0}(2);
    k = {5};
  }}
  if (k < {6} || k > {5}) return plain;
  precise {0} scaled = q * {3};
  return abs(scaled) >= {7} ? scaled : plain;)",
                     t, classify, split, pow2, max_exp + 1, max_exp, 1 - max_exp, min_normal,
                     remainder(0), dbl ? "2.220446049250313e-16lf" : "1.1920929e-07f",
                     dbl ? "1.1102230246251565e-16lf" : "5.9604645e-08f", remainder(1));
}

// float32 division's zeros, infinities and nan, decided by the bits as IEEE says; past it, a
// and b are finite and nonzero.
constexpr const char* kFdivSpecials = R"(uint ua = floatBitsToUint(a), ub = floatBitsToUint(b);
  uint xa = ua & 0x7fffffffu, xb = ub & 0x7fffffffu, sign = (ua ^ ub) & 0x80000000u;
  if (xa > 0x7f800000u || xb > 0x7f800000u || (xa == 0u && xb == 0u) ||
      (xa == 0x7f800000u && xb == 0x7f800000u))
    return uintBitsToFloat(0x7fc00000u);
  if (xa == 0x7f800000u || xb == 0u) return uintBitsToFloat(sign | 0x7f800000u);
  if (xa == 0u || xb == 0x7f800000u) return uintBitsToFloat(sign);)";

std::string fdiv_via_double_body() {
  // Correctly rounded float32 division in double, where the device has shaderFloat64: its cost
  // over a multiply is half of fdiv_body's on Lavapipe (bench_tensor's Divide_4Mi). With
  // a = A 2^i, b = B 2^j for 24-bit integers A, B, the exact quotient is never a midpoint between
  // two normal floats (between two subnormals it can be: below), and its distance from one is a
  // nonzero integer over
  // B 2^24 ulps of the quotient's binade: more than 2^-49 of the quotient. The double quotient
  // is within 2^-52 of it where the driver computes da * (1 / db) with each step rounded, and
  // within 2^-50.6 with the 2.5 ulp Vulkan allows, so it lies on the same side of every
  // midpoint, and rounding it to float rounds the exact quotient. That rounding is done on the
  // bits (the first dropped bit decides: no ties), not by float(q), whose rounding mode Vulkan
  // leaves to the driver. Zeros, infinities and nan are decided by the bits as in fdiv_body.
  // Subnormal operands enter the double from their integer bits and subnormal quotients leave
  // as integer bits (q 2^149 rounded, ties to even), so neither depends on
  // whether the device flushes float subnormals; overflow is decided against the midpoint
  // between the largest float and 2^128, which no quotient equals.
  // The kernel's Needs do not record float64 for this: glslang keeps one SignedZeroInfNanPreserve
  // execution mode per shader, the last declared, so the 64-bit one would drop float32's (the
  // fuzz test's 1 / (x * -0.0) gave +inf). The double operands here are finite and nonzero and
  // need none; glslang adds the Float64 capability, and the device enables shaderFloat64 where it
  // has it, the only place this form is chosen.
  return std::string(kFdivSpecials) + R"(
  double da = xa < 0x00800000u ? double(xa) * 1.401298464324817e-45lf : double(uintBitsToFloat(xa));
  double db = xb < 0x00800000u ? double(xb) * 1.401298464324817e-45lf : double(uintBitsToFloat(xb));
  double q = da / db;
  if (q >= 3.4028235677973366e38lf) return uintBitsToFloat(sign | 0x7f800000u);
  if (q < 1.1754943508222875e-38lf) {
    // q 2^149 rounded to the nearest integer, ties to even (5 2^-149 / 2 is 2 2^-149). With
    // a = A 2^i, b = B 2^j (A, B < 2^24) a quotient that is no tie lies at least 2^-26 from one,
    // and q 2^149 < 2^23 is within 2^-27.6 of the exact value: 2^-27 tells a tie from no tie.
    double t = q * 7.1362384635298e44lf, f = floor(t), h = t - f - 0.5lf;
    uint n = uint(f);
    n += abs(h) < 7.450580596923828e-9lf ? (n & 1u) : h > 0.0lf ? 1u : 0u;
    return uintBitsToFloat(sign | n);
  }
  // float exponent = double exponent - (1023 - 127); 23 bits of significand, then round.
  uvec2 w = unpackDouble2x32(q);
  uint f = ((((w.y >> 20) - 896u) << 23) | ((w.y & 0xfffffu) << 3) | (w.x >> 29)) + ((w.x >> 28) & 1u);
  return uintBitsToFloat(sign | f);)";
}

std::string fdiv_float_of_double_body() {
  // Where the device divides doubles exactly and rounds double to float as IEEE does
  // (GlslTarget::float_of_double_division), the double quotient of the finite nonzero operands
  // rounded by the device is the correctly rounded quotient (fdiv_via_double_body says why): half
  // the cost of that body on Lavapipe. Zeros, infinities and nan still go by the bits: the kernel
  // declares SignedZeroInfNanPreserve for float32 only (see fdiv_via_double_body), and without it
  // Lavapipe's compiler folded x / double(0.0) to 0. `precise` keeps the quotient from being
  // rewritten into an inexact form.
  return std::string(kFdivSpecials) + R"(
  precise double q = double(a) / double(b);
  return float(q);)";
}

// sin, or cos as sin one quadrant on (cos(x) = sin(x + pi/2), the quadrant added after the exact
// reduction, so no rounding of x + pi/2).
std::string sin_or_cos_body(DType d, bool cos) {
  if (d.scalar != Scalar::Float32) no_helper(cos ? "cos_exact" : "sin_exact", d);
  // Vulkan's sin() is only specified on [-pi, pi], and Lavapipe's gives -1 for sin(1e10). Here
  // |a| > pi/4 is reduced exactly (Payne-Hanek): the bits of 2/pi that matter for a's exponent,
  // times a's 24-bit mantissa in 32-bit integer words, give the quadrant and 62 bits of the
  // fraction, and times pi/2 a reduced argument r + rl good to twice float precision. Then
  // minimax polynomials on [-pi/4, pi/4] (Cephes sinf/cosf) with rl folded in: within 0.83 ulp
  // of libm (checked on the host on 40M arguments; without rl, 2.7 ulp).
  // |a| < 2^-12: sin(a) rounds to a (and keeps -0), cos(a) to 1 (1 - a^2/2 is above 1 - 2^-25).
  return std::string(R"(uint bits = floatBitsToUint(a), abits = bits & 0x7fffffffu;
  if (abits >= 0x7f800000u) return uintBitsToFloat(0x7fc00000u);
  if (abits < 0x39800000u) return )") +
         (cos ? "1.0f" : "a") + R"(;
  float r = a, rl = 0.0f, sign = 1.0f;
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
    // The fraction's top 32 bits X (top bit set): fraction = X * 2^-ex = xh + xl exactly.
    uint X = 0u;
    int ex = 0;
    if (fh != 0u) {
      int k = 31 - findMSB(fh);
      X = (fh << k) | (fl >> (32 - k));
      ex = 30 + k;
    } else if (fl != 0u) {
      int k = 31 - findMSB(fl);
      X = fl << k;
      ex = 62 + k;
    }
    float xh = ldexp(float(X & 0xffffff00u), -ex), xl = ldexp(float(X & 0xffu), -ex);
    // r + rl = (xh + xl) * pi/2 to twice float precision: pi/2 = P1 + P2, and xh * P1 exact as
    // p + err by Dekker's product (P1 split in halves offline; fma may be unfused in Vulkan).
    precise float c = 4097.0f * xh, hh = c - (c - xh), hl = xh - hh;
    precise float p = xh * 1.57079637f;
    precise float err = ((hh * 1.57080078125f - p) + hh * -4.410743713378906e-06f + hl * 1.57080078125f) +
                        hl * -4.410743713378906e-06f;
    precise float tail = err + (xl * 1.57079637f + xh * -4.37113883e-8f);
    r = p + tail;
    rl = tail - (r - p);
    if ((bits >> 31) != 0u) sign = -sign;
    r *= sign;
    rl *= sign;
    if ((bits >> 31) != 0u) q = 0u - q;
  }
  // sin(r + rl) = sin(r) + rl cos(r), cos(r + rl) = cos(r) - rl sin(r), the small terms added
  // last; 1 - z/2 in two-sum form.
  float z = r * r;
  float sn = r + (((-1.9515295891e-4f * z + 8.3321608736e-3f) * z - 1.6666654611e-1f) * z * r +
                  rl * (1.0f - 0.5f * z));
  precise float hz = 0.5f * z, w = 1.0f - hz;
  float cs = w + (((1.0f - w) - hz) + (((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z +
                                        4.166664568298827e-2f) * z * z - r * rl));
  q += )" +
         std::string(cos ? "1u" : "0u") + R"(;
  float y = (q & 1u) != 0u ? cs : sn;
  return (q & 2u) != 0u ? -y : y;)";
}

std::string sin_body(DType d) { return sin_or_cos_body(d, false); }
std::string cos_body(DType d) { return sin_or_cos_body(d, true); }

// erf(a) = a * P(a^2) for |a| < 1 with t = a^2: its Taylor series to the 23rd power (truncation
// below 1e-10).
std::string erf_taylor_poly() {
  std::string poly;
  const int terms = 12;
  for (int k = terms - 1; k >= 0; --k) {
    const double c =
        2 / std::sqrt(std::numbers::pi) * (k % 2 ? -1 : 1) / (std::tgamma(k + 1.0) * (2 * k + 1));
    poly = k == terms - 1 ? fmt::format("{:.9e}f", c) : fmt::format("{:.9e}f + t * ({})", c, poly);
  }
  return poly;
}

// erfc(a) for a >= 0.5 (or inf): Numerical Recipes' erfcc, t exp(p(t) - a^2) with
// t = 1 / (1 + a/2) (relative error below 1.2e-7). The exponent is the hard part: rounding a^2
// (49 at a = 7) costs an ulp of a^2 in the argument, which exp turns into ~|a^2| ulps of the
// result (137 ulps at a = 8.45, against libm). So a = s + (a - s) with s's low 12 bits cleared:
// s^2 is exact and a^2 = s^2 + (a - s)(a + s), the second small; exp(-s^2) = 2^-n exp(-r) with
// r = s^2 - n ln2 by Cody and Waite (n < 2^8 times ln2's 9-bit head is exact, and so is s^2 minus
// it, a multiple of s^2's ulp below 1/2). 2^-n is applied in two exact steps, the last one
// rounding once into the subnormal range. erfc underflows to 0 past 10.06.
std::string erfc_tail_body(DType d) {
  if (d.scalar != Scalar::Float32) no_helper("erfc_tail", d);
  return R"(if (a > 10.5f) return 0.0f;
  float t = 1.0f / (1.0f + 0.5f * a);
  float p = -1.26551223f + t * (1.00002368f + t * (0.37409196f + t * (0.09678418f +
            t * (-0.18628806f + t * (0.27886807f + t * (-1.13520398f + t * (1.48851587f +
            t * (-0.82215223f + t * 0.17087277f))))))));
  float s = uintBitsToFloat(floatBitsToUint(a) & 0xfffff000u);
  precise float ss = s * s;
  float n = floor(ss * 1.44269504f + 0.5f);
  precise float r = (ss - n * 0.693359375f) + n * 2.12194440e-4f;
  precise float q = (s - a) * (s + a) + p;
  precise float v = t * exp2_exact((q - r) * 1.44269504f);
  int k = int(n), k1 = k / 2;
  precise float y = v * uintBitsToFloat(uint(127 - k1) << 23);
  return y * uintBitsToFloat(uint(127 - (k - k1)) << 23);)";
}

std::string erf_body(DType d) {
  if (d.scalar != Scalar::Float32) no_helper("erf_exact", d);
  // GLSL has no erf. |a| < 1: its Taylor series (erf_taylor_poly), which keeps -0. |a| >= 1:
  // 1 - erfc_tail: erfc <= 0.16 there, so its error is a fraction of erf's ulp. nan is decided
  // by the bits.
  const std::string poly = erf_taylor_poly();
  return fmt::format(R"(uint b = floatBitsToUint(a);
  if ((b & 0x7fffffffu) > 0x7f800000u) return a;
  float x = uintBitsToFloat(b & 0x7fffffffu);
  if (x < 1.0f) {{
    float t = a * a;
    return a * ({});
  }}
  float erfc = erfc_tail(x);
  return (b >> 31) != 0u ? erfc - 1.0f : 1.0f - erfc;)",
                     poly);
}

std::string erfc_body(DType d) {
  if (d.scalar != Scalar::Float32) no_helper("erfc_exact", d);
  // |a| < 0.5: 1 - erf(a) from erf's Taylor series (erfc > 0.47 there, so erf's rounding costs
  // about an ulp). Beyond: erfc_tail(|a|), which keeps its digits down to where it underflows,
  // and erfc(a) = 2 - erfc(-a) below zero. nan is decided by the bits.
  return fmt::format(R"(uint b = floatBitsToUint(a);
  if ((b & 0x7fffffffu) > 0x7f800000u) return a;
  float x = uintBitsToFloat(b & 0x7fffffffu);
  if (x < 0.5f) {{
    float t = a * a;
    return 1.0f - a * ({});
  }}
  float erfc = erfc_tail(x);
  return (b >> 31) != 0u ? 2.0f - erfc : erfc;)",
                     erf_taylor_poly());
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

std::string fmod_f64_body() {
  // fmod_body's long division on 53-bit significands in uint64_t, 10 bits of the gap a step
  // (the kernel declares int64 arithmetic for it: glsl_renderer.cpp's collect_needs).
  return R"(uint64_t ua = doubleBitsToUint64(a), ub = doubleBitsToUint64(b);
  uint64_t sign = ua & 0x8000000000000000ul;
  uint64_t xa = ua & 0x7ffffffffffffffful, xb = ub & 0x7ffffffffffffffful;
  if (xb == 0ul || xa >= 0x7ff0000000000000ul || xb > 0x7ff0000000000000ul)
    return uint64BitsToDouble(0x7ff8000000000000ul);
  if (xa < xb) return a;
  if (xa == xb) return uint64BitsToDouble(sign);
  uint ea = uint(xa >> 52), eb = uint(xb >> 52);
  uint64_t ma = ea == 0u ? xa : (xa & 0xffffffffffffful) | 0x10000000000000ul;
  uint64_t mb = eb == 0u ? xb : (xb & 0xffffffffffffful) | 0x10000000000000ul;
  ea = max(ea, 1u);
  eb = max(eb, 1u);
  uint64_t r = ma % mb;
  for (uint gap = ea - eb; gap > 0u;) {
    uint k = min(gap, 10u);
    r = (r << k) % mb;
    gap -= k;
  }
  if (r == 0ul) return uint64BitsToDouble(sign);
  uint hi = uint(r >> 32);
  int top = hi != 0u ? findMSB(hi) + 32 : findMSB(uint(r));
  int e = int(eb) + top - 52;
  if (e >= 1)
    return uint64BitsToDouble(sign | (uint64_t(e) << 52) | ((r << uint(52 - top)) & 0xffffffffffffful));
  return uint64BitsToDouble(sign | (r << (eb - 1u)));)";
}

std::string sqrt_body(DType d) {
  if (d.scalar == Scalar::Float64) return "return sqrt(a);";
  if (d.scalar != Scalar::Float32) no_helper("sqrt_exact", d);
  // Vulkan lets sqrt be off by about 3 ulp (NVIDIA's H100: 790 of 4921 roots 1 ulp off); IEEE
  // and the CPU device round it correctly. The device's root s is moved an ulp at a time until x
  // lies between the squares of the midpoints below and above it, compared exactly in integers:
  // with x = m 2^e (m the 24-bit significand, or a subnormal's bits) and a candidate
  // c = S 2^q, x >= ((2S + 1) / 2)^2 2^2q is m 2^(e - 2q + 2) >= (2S + 1)^2, both below 2^51
  // near the root (a 64-bit compare on two words, umulExtended for the square; no shaderInt64).
  // The upper midpoint of c - 1 is c's lower one, also where c is a power of two. A square of
  // an odd number is never 4 x, so there are no ties. A negative non-zero x (-inf, and negative
  // subnormals, which a device that flushes subnormals would take as -0 and give -0) is nan by
  // its bits; +0, -0, inf and nan keep the device's sqrt. A subnormal x is scaled by 2^50
  // (exactly, from its integer bits) for the first root, so a flushing device starts near the
  // root too. With c within a few ulps of the root, the shift sh below is 24 to 27 for normal x
  // and up to ~50 for subnormals, never negative (where the right shift would drop bits).
  return R"(uint ua = floatBitsToUint(a);
  if (ua > 0x80000000u && ua <= 0xff800000u) return uintBitsToFloat(0x7fc00000u);
  if (ua - 1u >= 0x7f7fffffu) return sqrt(a);
  bool sub = ua < 0x00800000u;
  uint m = sub ? ua : (ua & 0x7fffffu) | 0x800000u;
  int e = sub ? -149 : int(ua >> 23) - 150;
  float s = sub ? sqrt(float(ua) * uintBitsToFloat(0x0e000000u)) * uintBitsToFloat(0x33000000u)
                : sqrt(a);
  uint b = floatBitsToUint(s);
  for (int step = 0; step < 8; ++step) {
    bool above[2];
    for (int k = 0; k < 2; ++k) {
      uint c = b - uint(k);
      uint twice = ((c & 0x7fffffu) | 0x800000u) * 2u + 1u;
      int sh = e - 2 * (int(c >> 23) - 150) + 2;
      uint th = sh >= 32 ? m << uint(sh - 32) : sh > 0 ? m >> uint(32 - sh) : 0u;
      uint tl = sh >= 32 ? 0u : sh >= 0 ? m << uint(sh) : m >> uint(min(-sh, 31));
      uint mh, ml;
      umulExtended(twice, twice, mh, ml);
      above[k] = th > mh || (th == mh && tl > ml);
    }
    if (above[0]) b++;
    else if (!above[1]) b--;
    else break;
  }
  return uintBitsToFloat(b);)";
}

std::string fmod_body(DType d) {
  if (d.scalar == Scalar::Float64) return fmod_f64_body();
  if (d.scalar != Scalar::Float32) no_helper("fmod_exact", d);
  // C's fmod, exact as IEEE defines it; GLSL's mod is x - y * floor(x / y), which rounds. With
  // |a| = ma * 2^ea and |b| = mb * 2^eb (24-bit integer significands, subnormals read with
  // exponent field 1 and no implicit bit), |a| mod |b| = ((ma * 2^(ea - eb)) mod mb) * 2^eb:
  // long division that brings in up to 8 bits of the exponent gap per step, so the partial
  // remainder (< mb < 2^24) shifted stays below 2^32 and uint's % is exact. The result is
  // below |b|, a multiple of b's last bit, so it is a float: encoded from its bits (normal or
  // subnormal) with a's sign. Specials as C: nan for b = 0, an infinite a or a nan; a for an
  // infinite b or |a| < |b|.
  return R"(uint ua = floatBitsToUint(a), ub = floatBitsToUint(b);
  uint sign = ua & 0x80000000u, xa = ua & 0x7fffffffu, xb = ub & 0x7fffffffu;
  if (xb == 0u || xa >= 0x7f800000u || xb > 0x7f800000u) return uintBitsToFloat(0x7fc00000u);
  if (xa < xb) return a;
  if (xa == xb) return uintBitsToFloat(sign);
  uint ea = xa >> 23, eb = xb >> 23;
  uint ma = ea == 0u ? xa : (xa & 0x7fffffu) | 0x800000u;
  uint mb = eb == 0u ? xb : (xb & 0x7fffffu) | 0x800000u;
  ea = max(ea, 1u);
  eb = max(eb, 1u);
  uint r = ma % mb;
  for (uint gap = ea - eb; gap > 0u;) {
    uint k = min(gap, 8u);
    r = (r << k) % mb;
    gap -= k;
  }
  if (r == 0u) return uintBitsToFloat(sign);
  int top = findMSB(r);
  int e = int(eb) + top - 23;
  if (e >= 1) return uintBitsToFloat(sign | (uint(e) << 23) | ((r << uint(23 - top)) & 0x7fffffu));
  return uintBitsToFloat(sign | (r << (eb - 1u)));)";
}

std::string remainder_body(DType d) {
  if (d.scalar != Scalar::Float32 && d.scalar != Scalar::Float64) no_helper("remainder_py", d);
  // torch.remainder: fmod, moved by b where nonzero with a sign other than b's (a nan stays
  // nan); the add rounds as the CPU device's does.
  return fmt::format(R"({0} r = fmod_exact(a, b);
  if (r != {1} && ((b < {1}) != (r < {1}))) r = r + b;
  return r;)",
                     type_name(d), number(d, 0));
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
