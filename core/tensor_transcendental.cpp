// The inverse trigonometric and hyperbolic functions, log1p, expm1 and log10, composed from the
// ALU ops, in forms accurate to a few ulps of the dtype over the whole range, as torch's.
//
// Three rules shape every function here:
// - No cancellation trick: shader compilers may rewrite (1 + x) - 1 as x (Mesa applies its
//   inexact algebraic rules to anything not marked precise), so where a textbook formula cancels
//   (log(1 + x) and exp(x) - 1 near 0) a Taylor series takes the small arguments instead.
// - Every branch that where drops gets an argument it is finite at (the "double where"): its
//   gradient is multiplied by 0, and 0 * inf would make the kept branch's gradient nan.
// - Odd functions keep the sign of zero (f(-0) = -0) and nan passes through.
#include <cmath>
#include <limits>
#include <numbers>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/gradient.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

namespace {

Tensor as_float(const Tensor& t) {
  return t.dtype().is_float() ? t : t.cast(dtypes::default_float);
}

bool is_double(const Tensor& x) { return x.dtype() == dtypes::float64; }

// c[0] + c[1] x + c[2] x^2 + ..., by Horner.
Tensor polynomial(const Tensor& x, const std::vector<double>& c) {
  Tensor p = x * c.back() + c[c.size() - 2];
  for (size_t i = c.size() - 2; i-- > 0;) p = p * x + c[i];
  return p;
}

// log(1 + x) for |x| <= 1/4: sum of (-1)^(n+1) x^n / n, to the term below half an ulp of the
// dtype (0.25^n / n < 2^-25 at n = 12, < 2^-54 at n = 26).
Tensor log1p_series(const Tensor& x) {
  const int terms = is_double(x) ? 26 : 12;
  std::vector<double> c;
  for (int n = 1; n <= terms; ++n) c.push_back((n % 2 ? 1.0 : -1.0) / n);
  return polynomial(x, c) * x;
}

// exp(x) - 1 for |x| <= 1/2: sum of x^n / n! (0.5^n / n! < 2^-25 at n = 10, < 2^-54 at n = 17).
Tensor expm1_series(const Tensor& x) {
  const int terms = is_double(x) ? 18 : 11;
  std::vector<double> c;
  double factorial = 1;
  for (int n = 1; n <= terms; ++n) c.push_back(1.0 / (factorial *= n));
  return polynomial(x, c) * x;
}

// r with x's sign for an odd function f with f'(0) = 1 computed as r = f(|x|): -r below 0, and
// x itself at +-0 (so f(-0) = -0, and the gradient there is 1).
Tensor odd(const Tensor& x, const Tensor& r) { return x.lt(0).where(-r, x.eq(0).where(x, r)); }

// Above this |x|, x^2 + 1 rounds to x^2 in float64 too: asinh and acosh are log(2|x|) there.
constexpr double kHuge = 268435456.0;  // 2^28

// atan(a) for a >= 0 (nan passes), Cephes' atanf (float) and atan (double): a is reduced to
// [0, tan(pi/8)] by pi/2 - atan(1/a) above tan(3 pi/8) and pi/4 + atan((a - 1)/(a + 1)) between,
// then a polynomial (float) or a rational function (double) in a^2.
Tensor atan_nonnegative(const Tensor& a) {
  const bool dbl = is_double(a);
  const Tensor big = a.gt(2.414213562373095);
  const Tensor mid = a.gt(dbl ? 0.66 : 0.4142135623730950);
  const Tensor safe_big = big.where(a, 1.0);  // -1/a is dropped where a is small: keep it finite
  const Tensor z = big.where(-safe_big.reciprocal(), mid.where((a - 1.0) / (a + 1.0), a));
  // pi/2 and pi/4 with the bits that double rounding drops added back (Cephes' MOREBITS).
  const double more = dbl ? 6.123233995736765886130e-17 : 0;
  const Tensor base = big.where(a.scalar_like(std::numbers::pi / 2 + more),
                                mid.where(a.scalar_like(std::numbers::pi / 4 + more / 2),
                                          a.scalar_like(0.0)));
  const Tensor z2 = z * z;
  if (dbl) {
    const Tensor num = polynomial(z2, {-6.485021904942025371773e1, -1.228866684490136173410e2,
                                       -7.500855792314704667340e1, -1.615753718733365076637e1,
                                       -8.750608600031904122785e-1});
    const Tensor den = polynomial(z2, {1.945506571482613964425e2, 4.853903996359136964868e2,
                                       4.328810604912902668951e2, 1.650270098316988542046e2,
                                       2.485846490142306297962e1, 1.0});
    return base + (z * (z2 * num / den) + z);
  }
  const Tensor p = polynomial(z2, {-3.33329491539e-1, 1.99777106478e-1, -1.38776856032e-1,
                                   8.05374449538e-2});
  return base + (p * z2 * z + z);
}

// copysign(c, s) for a constant c.
Tensor signed_constant(const Tensor& s, double c) {
  return s.signbit().where(s.scalar_like(-c), s.scalar_like(c));
}

}  // namespace

Tensor Tensor::log1p() const {
  const Tensor x = as_float(*this);
  const Tensor small = x.abs().le(0.25);
  const Tensor plain = (small.where(0.0, x) + 1.0).log();  // 1 + x is exact for x in [-1/2, -1/4]
  return small.where(log1p_series(small.where(x, 0.0)), plain);
}

Tensor Tensor::expm1() const {
  const Tensor x = as_float(*this);
  const Tensor small = x.abs().le(0.5);
  const Tensor plain = small.where(0.0, x).exp() - 1.0;
  return small.where(expm1_series(small.where(x, 0.0)), plain);
}

Tensor Tensor::log10() const { return as_float(*this).log2() * (std::numbers::ln2 / std::numbers::ln10); }

// Below 1: (e + e / (e + 1)) / 2 with e = expm1(x), which is (e^x - e^-x) / 2 without the
// cancellation (e and e / (e + 1) have one sign). Up to 88: (u - 1/u) / 2 with u = exp(|x|).
// Beyond, where u overflows before sinh does: t^2 / 2 with t = exp(|x| / 2).
Tensor Tensor::sinh() const {
  const Tensor x = as_float(*this), a = x.abs();
  const Tensor small = a.lt(1.0), medium = a.le(88.0);
  const Tensor e = small.where(x, 0.0).expm1();
  const Tensor u = medium.where(a, 0.0).exp(), t = (medium.where(0.0, a) * 0.5).exp();
  const Tensor large = medium.where(u * 0.5 - u.reciprocal() * 0.5, (t * 0.5) * t);
  return small.where((e + e / (e + 1.0)) * 0.5, x.lt(0).where(-large, large));
}

// (u + 1/u) / 2 with u = exp(|x|) up to 88, t^2 / 2 with t = exp(|x| / 2) beyond.
Tensor Tensor::cosh() const {
  const Tensor a = as_float(*this).abs();
  const Tensor medium = a.le(88.0);
  const Tensor u = medium.where(a, 0.0).exp(), t = (medium.where(0.0, a) * 0.5).exp();
  return medium.where(u * 0.5 + u.reciprocal() * 0.5, (t * 0.5) * t);
}

// tanh(x) = e / (e + 2) with e = expm1(2x) below 1/2 (no cancellation: e > -1), and
// 2 sigmoid(2x) - 1 above, which never overflows. The old 2 sigmoid(2x) - 1 alone gave
// tanh(1e-8) = 0.
Tensor Tensor::tanh() const {
  const Tensor x = as_float(*this);
  const Tensor small = x.abs().lt(0.5);
  const Tensor e = (small.where(x, 0.0) * 2.0).expm1();
  return small.where(e / (e + 2.0), (x * 2.0).sigmoid() * 2.0 - 1.0);
}

// log1p(a + a^2 / (1 + sqrt(1 + a^2))) = log(a + sqrt(a^2 + 1)) without losing a small a;
// log(a) + log(2) past 2^28, where a^2 + 1 is a^2.
Tensor Tensor::asinh() const {
  const Tensor x = as_float(*this), a = x.abs();
  const Tensor huge = a.gt(kHuge);
  const Tensor m = huge.where(0.0, a);
  const Tensor r = huge.where(huge.where(a, 1.0).log() + std::numbers::ln2,
                              (m + m * m / ((m * m + 1.0).sqrt() + 1.0)).log1p());
  return odd(x, r);
}

// log1p(t + sqrt(t (t + 2))) with t = x - 1 (exact for x in [1, 2]): log(x + sqrt(x^2 - 1))
// without the cancellation near 1; nan below 1.
Tensor Tensor::acosh() const {
  const Tensor x = as_float(*this);
  const Tensor huge = x.gt(kHuge);
  const Tensor below = x.lt(1.0);  // and so nan; (a huge negative x made t (t + 2) inf)
  const Tensor t = huge.logical_or(below).where(0.0, x - 1.0);
  const Tensor r = huge.where(huge.where(x, 1.0).log() + std::numbers::ln2,
                              (t + (t * (t + 2.0)).sqrt()).log1p());
  return below.where(std::numeric_limits<double>::quiet_NaN(), r);
}

// log((1 + a) / (1 - a)) / 2 = log1p(2a / (1 - a)) / 2 for a = |x|, as glibc: 1 - a is exact
// near 1, where atanh is steep (x itself near -1 would round 1 - x). inf at 1, nan past.
Tensor Tensor::atanh() const {
  const Tensor x = as_float(*this), a = x.abs();
  return odd(x, (a * 2.0 / (1.0 - a)).log1p() * 0.5);
}

Tensor Tensor::atan() const {
  const Tensor x = as_float(*this);
  return odd(x, atan_nonnegative(x.abs()));
}

// atan(x / sqrt((1 - x)(1 + x))): 1 - x is exact where x is near 1, and x = +-1 gives
// atan(+-inf) = +-pi/2.
Tensor Tensor::asin() const {
  const Tensor x = as_float(*this);
  return (x / ((1.0 - x) * (x + 1.0)).sqrt()).atan();
}

// 2 atan(sqrt((1 - x) / (1 + x))): pi at -1, 0 at 1, nan past.
Tensor Tensor::acos() const {
  const Tensor x = as_float(*this);
  return ((1.0 - x) / (x + 1.0)).sqrt().atan() * 2.0;
}

namespace {

// torch's atan2_backward, in its order of operations: g x r and g (-y) r with r = 1 / (y^2 + x^2).
// Derived from the composition below the gradient was (1, 0) at (0, 0), where torch's is nan for
// both (0 * inf), and finite at an infinite y or x, where torch's partial by the other is nan.
Tensor with_atan2_gradient(const Tensor& result, const Tensor& y, const Tensor& x) {
  if (!y.requires_grad() && !x.requires_grad()) return result;
  const UOpPtr yn = y.node(), xn = x.node();
  return Tensor(with_custom_gradient(
      result.node(), {yn, xn}, [yn, xn](const Tensor& g) -> std::vector<std::optional<Tensor>> {
        const Tensor y(yn), x(xn);
        const Tensor r = (y * y + x * x).reciprocal();
        return {g * x * r, g * -y * r};
      }));
}

}  // namespace

// C's atan2, as torch: the angle of (x, y) in [-pi, pi], with the signs of zeros and the
// infinities deciding the quadrant. Where |y| > |x| it is +-pi/2 - atan(x / y), elsewhere
// atan(y / x) moved by +-pi when x's sign bit is set; so the quotient is at most 1 in size. Its
// gradient is torch's (with_atan2_gradient).
Tensor Tensor::atan2(const Tensor& x_in) const {
  DType out;
  try {
    out = promote(dtype(), x_in.dtype());
  } catch (const Error&) {
    throw Error("atan2: cannot combine " + dtype().name() + " and " + x_in.dtype().name());
  }
  if (!out.is_float()) out = dtypes::default_float;
  const Shape s = broadcast_shape(shape(), x_in.shape(), "atan2");
  const Tensor y = cast(out).broadcast_to(s), x = x_in.cast(out).broadcast_to(s);
  const Tensor ay = y.abs(), ax = x.abs();
  const Tensor swap = ay.gt(ax);
  const Tensor both_inf = ay.isinf().logical_and(ax.isinf());
  const Tensor x_zero = x.eq(0);  // and so y too, where |y| <= |x|
  const Tensor q_swap = swap.where(x, 0.0) / swap.where(y, 1.0);
  const Tensor q_plain = swap.logical_or(x_zero).where(0.0, y) /
                         swap.logical_or(x_zero).logical_or(both_inf).where(1.0, x);
  const Tensor q = swap.where(
      q_swap, both_inf.where(signed_constant(y, 1.0) * signed_constant(x, 1.0),
                             x_zero.where(y, q_plain)));
  const Tensor a = q.atan();
  const Tensor moved = x.signbit().where(a + signed_constant(y, std::numbers::pi), a);
  return with_atan2_gradient(swap.where(signed_constant(y, std::numbers::pi / 2) - a, moved), y, x);
}

}  // namespace vkg
