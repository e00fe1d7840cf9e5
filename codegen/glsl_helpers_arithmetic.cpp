// The GLSL helpers' correctly rounded arithmetic (glsl_helpers.cpp's table): float32 division,
// square root, C's fmod and torch's remainder, exact as IEEE and the CPU device define them
// where Vulkan allows the device's operators an error of a few ulps.
#include <fmt/format.h>

#include <vkgrad/codegen/glsl_helper_bodies.hpp>
#include <vkgrad/codegen/glsl_syntax.hpp>

namespace vkg::glsl {

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

namespace {

// float32 division's zeros, infinities and nan, decided by the bits as IEEE says; past it, a
// and b are finite and nonzero.
constexpr const char* kFdivSpecials = R"(uint ua = floatBitsToUint(a), ub = floatBitsToUint(b);
  uint xa = ua & 0x7fffffffu, xb = ub & 0x7fffffffu, sign = (ua ^ ub) & 0x80000000u;
  if (xa > 0x7f800000u || xb > 0x7f800000u || (xa == 0u && xb == 0u) ||
      (xa == 0x7f800000u && xb == 0x7f800000u))
    return uintBitsToFloat(0x7fc00000u);
  if (xa == 0x7f800000u || xb == 0u) return uintBitsToFloat(sign | 0x7f800000u);
  if (xa == 0u || xb == 0x7f800000u) return uintBitsToFloat(sign);)";

}  // namespace

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

namespace {

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

}  // namespace

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
}  // namespace vkg::glsl
