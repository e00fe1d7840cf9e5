// The GLSL helpers' transcendental bodies (glsl_helpers.cpp's table): log2, exp2, sin, cos, erf
// and erfc for float32, accurate over the whole range, where Vulkan bounds the built-ins' error
// loosely or only on a small interval (and has no erf at all).
#include <fmt/format.h>

#include <cmath>
#include <numbers>

#include <vkgrad/codegen/glsl_helper_bodies.hpp>
#include <vkgrad/codegen/glsl_syntax.hpp>

namespace vkg::glsl {

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

namespace {

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

}  // namespace

std::string sin_body(DType d) { return sin_or_cos_body(d, false); }
std::string cos_body(DType d) { return sin_or_cos_body(d, true); }

namespace {

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

}  // namespace

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
}  // namespace vkg::glsl
