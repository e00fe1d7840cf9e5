// Elementwise math composed from the ALU ops: rounding, activations, predicates, integer
// division and powers, bitwise and logical ops, and the scalar forms of comparisons and where.
// Everything here is built from other Tensor ops, so it fuses and differentiates as they do; the
// forms are chosen to stay finite where a textbook formula overflows (sigmoid, tanh, softplus).
#include <cmath>
#include <limits>
#include <numbers>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/gradient.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

namespace {

std::string describe(const Tensor& t) { return t.dtype().name() + " " + shape_str(t.shape()); }

Tensor as_float(const Tensor& t) {
  return t.dtype().is_float() ? t : t.cast(dtypes::default_float);
}

// Bitwise ops take integers or bools (the result's dtype), never floats.
void check_bitwise(const Tensor& a, const Tensor& b, std::string_view op) {
  DType out;
  try {
    out = promote(a.dtype(), b.dtype());
  } catch (const Error&) {
    throw Error(std::string(op) + ": cannot combine " + describe(a) + " and " + describe(b));
  }
  if (out.is_float())
    throw Error(std::string(op) + ": needs integer or bool tensors, got " + describe(a) + " and " +
                describe(b));
}

DType literal_dtype(Scalarish v) {
  switch (v.kind()) {
    case ScalarKind::Bool:
      return dtypes::bool_;
    case ScalarKind::Int:
      return dtypes::default_int;
    case ScalarKind::Float:
      return dtypes::default_float;
  }
  return dtypes::default_float;
}

// log(1 + e) for e in [0, 1] without losing a small e to the rounding of 1 + e: below 0.1 a
// Taylor series (its first dropped term, e^8 / 8, is under 2e-8 of e), above it the plain log.
// The shader compiler may rewrite (1 + e) - 1 as e, so no cancellation trick is safe here.
Tensor log1p_unit(const Tensor& e) {
  Tensor series = e * (1.0 / 7) - 1.0 / 6;
  for (double c : {1.0 / 5, -1.0 / 4, 1.0 / 3, -1.0 / 2, 1.0}) series = series * e + c;
  return e.lt(0.1).where(series * e, (e + 1.0).log());
}

}  // namespace

// ---- rounding and simple unary ops ----

Tensor Tensor::rsqrt() const { return sqrt().reciprocal(); }
Tensor Tensor::tan() const { return sin() / cos(); }
Tensor Tensor::square() const { return *this * *this; }

// sign(nan) is nan (x * 0 would carry it, but makes sign(inf) nan too).
Tensor Tensor::sign() const {
  if (dtype().is_bool()) return *this;
  const Tensor zero = scalar_like(0);
  const Tensor s = ne(zero).where(lt(zero).where(scalar_like(-1), scalar_like(1)), zero);
  return dtype().is_float() ? isnan().where(*this, s) : s;
}

Tensor Tensor::trunc() const {
  if (!dtype().is_float()) return *this;
  return Tensor(UOp::make(Ops::TRUNC, dtype(), {node()}));
}

Tensor Tensor::floor() const {
  if (!dtype().is_float()) return *this;
  const Tensor t = trunc();
  return t.gt(*this).where(t - 1, t);
}

Tensor Tensor::ceil() const {
  if (!dtype().is_float()) return *this;
  const Tensor t = trunc();
  return t.lt(*this).where(t + 1, t);
}

// Half to even from exact pieces: t = trunc(x) and d = x - t are exact in floating point, so no
// x + 0.5 rounding (wrong past 2^23) is needed. A tie moves away from t only when t is odd.
Tensor Tensor::round() const {
  if (!dtype().is_float()) return *this;
  const Tensor t = trunc(), d = *this - t, ad = d.abs();
  const Tensor t_odd = (t - (t * 0.5).trunc() * 2.0).ne(0.0);
  const Tensor away = ad.gt(0.5).logical_or(ad.eq(0.5).logical_and(t_odd));
  return away.where(t + d.sign(), t);
}

// ---- activations ----

// The slope's branch at 0 too, so leaky_relu'(0) is the slope, as torch.
Tensor Tensor::leaky_relu(double negative_slope) const {
  return gt(0).where(*this, *this * negative_slope);
}

// expm1 of x where x <= 0, else of 0: the branch that where drops never overflows, so its
// gradient stays finite; at 0 the expm1's branch is taken whole, so elu'(0) is alpha, as torch.
// (expm1, not exp - 1: elu(-1e-8) is -1e-8, not 0.)
Tensor Tensor::elu(double alpha) const {
  const Tensor x = as_float(*this);
  return x.gt(0).where(x, x.gt(0).where(0.0, x).expm1() * alpha);
}

Tensor Tensor::gelu() const {
  const Tensor x = as_float(*this);
  return x * 0.5 * (((x + x * x * x * 0.044715) * std::sqrt(2.0 / std::numbers::pi)).tanh() + 1.0);
}

Tensor Tensor::silu() const { return as_float(*this) * sigmoid(); }

// With e = exp(-|x|) in [0, 1]: 1 / (1 + e) for x >= 0, e / (1 + e) below. Nothing overflows in
// either branch, so neither the value (sigmoid(-inf) = 0, sigmoid(inf) = 1) nor a gradient
// derived through the where (1 / (1 + exp(-x)) has inf * 0 in it for x < -88) sees inf.
Tensor Tensor::sigmoid() const {
  const Tensor x = as_float(*this);
  const Tensor e = (x.abs() * (-1.0 / std::numbers::ln2)).exp2();
  const Tensor r = (e + 1.0).reciprocal();
  return x.ge(0).where(r, e * r);
}

// (max(bx, 0) + log(1 + exp(-|bx|))) / b: the exp never overflows, and a large x gives x. At 0
// maximum splits its gradient (1/2) and |x|' is 0, so softplus'(0) = 1/2 = sigmoid(0), as torch.
Tensor Tensor::softplus(double beta) const {
  const Tensor bx = as_float(*this) * beta;
  return (bx.maximum(0.0) + log1p_unit((-bx.abs()).exp())) * (1.0 / beta);
}

// relu6, hardtanh and hardsigmoid take the constant's branch at their corners, so their
// gradient there is 0, as torch's hardtanh_backward ((x > lo) and (x < hi)); nan passes.
Tensor Tensor::hardtanh(double lo, double hi) const {
  const Tensor x = as_float(*this);
  return x.le(lo).where(x.scalar_like(lo), x.ge(hi).where(x.scalar_like(hi), x));
}
Tensor Tensor::relu6() const { return hardtanh(0.0, 6.0); }
Tensor Tensor::hardsigmoid() const {
  const Tensor x = as_float(*this);
  return x.le(-3.0).where(x.scalar_like(0.0), x.ge(3.0).where(x.scalar_like(1.0), x / 6.0 + 0.5));
}
// -softplus(-x): finite for every finite x (log(sigmoid(x)) is -inf below -88).
Tensor Tensor::logsigmoid() const { return -(-as_float(*this)).softplus(); }
Tensor Tensor::softsign() const {
  const Tensor x = as_float(*this);
  return x / (x.abs() + 1.0);
}
Tensor Tensor::mish() const {
  const Tensor x = as_float(*this);
  return x * x.softplus().tanh();
}
// scale * elu(x, alpha) with torch's constants (Klambauer et al.).
Tensor Tensor::selu() const {
  return elu(1.6732632423543772848170429916717) * 1.0507009873554804934193349852946;
}
// x above 0, alpha * expm1(x / alpha) at and below: celu'(0) = 1, as torch.
Tensor Tensor::celu(double alpha) const {
  if (alpha == 0) throw Error("celu: alpha must not be 0");
  const Tensor x = as_float(*this);
  return x.gt(0).where(x, (x.gt(0).where(0.0, x) * (1.0 / alpha)).expm1() * alpha);
}

Tensor Tensor::hardswish() const {
  const Tensor x = as_float(*this);
  return x * ((x + 3.0).clip(0.0, 6.0) *
              (1.0 / 6.0));  // 6 * (1/6) rounds to 1: hardswish(x) = x past 3
}

// By where rather than maximum/minimum: at a bound the gradient is 1 (maximum would split it),
// as torch's clamp; nan stays nan; lo > hi gives hi everywhere, as torch.
Tensor Tensor::clip(Scalarish lo, Scalarish hi) const {
  const Tensor low = lt(lo).where(scalar_like(lo), *this);
  return low.gt(hi).where(low.scalar_like(hi), low);
}

// ---- predicates ----

Tensor Tensor::isnan() const { return ne(*this); }

// The sign bit, read as the sign of the same bits as a signed integer: true for negative
// numbers, -0 and a nan with its sign bit set, as torch. (1 / x < 0 would also find -0, but
// costs an exact division per element.)
Tensor Tensor::signbit() const {
  if (dtype().is_bool()) return Tensor::full(shape(), false, dtypes::bool_, device());
  if (!dtype().is_float()) return lt(0);
  const DType bits = dtype().itemsize() == 2   ? dtypes::int16
                     : dtype().itemsize() == 4 ? dtypes::int32
                                               : dtypes::int64;
  return bitcast(bits).lt(0);
}

Tensor Tensor::isinf() const {
  if (!dtype().is_float()) return Tensor::full(shape(), false, dtypes::bool_, device());
  return abs().eq(std::numeric_limits<double>::infinity());
}

// |x| < inf is false for inf and nan. (Not x - x == 0: shader compilers fold x - x to 0.)
Tensor Tensor::isfinite() const {
  if (!dtype().is_float()) return Tensor::full(shape(), true, dtypes::bool_, device());
  return abs().lt(std::numeric_limits<double>::infinity());
}

// ---- division and powers ----

// Python's //: rounds down. For integers, C's truncating quotient moves down by one when there is
// a remainder and the operands' signs differ.
Tensor Tensor::floordiv(const Tensor& b) const {
  DType out;
  try {
    out = promote(dtype(), b.dtype());
  } catch (const Error&) {
    throw Error("floordiv: cannot combine " + describe(*this) + " and " + describe(b));
  }
  if (out.is_bool())
    throw Error("floordiv: not defined for bool tensors, got " + describe(*this) + " and " +
                describe(b));
  if (out.is_float()) return div(b).floor();
  const Tensor q = idiv(b);
  if (out.is_unsigned()) return q;
  const Tensor zero = Tensor::full({}, 0, out, device());
  const Tensor inexact = (q * b).ne(*this).logical_and(lt(zero).ne(b.lt(zero)));
  return inexact.where(q - 1, q);
}

Tensor Tensor::fmod(const Tensor& b) const {
  const DType out = promote(dtype(), b.dtype());
  if (out.is_bool())
    throw Error("fmod: not defined for bool tensors, got " + describe(*this) + " and " +
                describe(b));
  if (out.is_int()) return mod(b);
  return binary(Ops::FMOD, b, "fmod");
}
Tensor Tensor::fmod(Scalarish b) const { return fmod(scalar_like(b)); }

// Integers: C's remainder moved by b where it is nonzero and its sign differs from b's (Python's
// %); unsigned ones have no signs to differ.
Tensor Tensor::remainder(const Tensor& b) const {
  const DType out = promote(dtype(), b.dtype());
  if (out.is_bool())
    throw Error("remainder: not defined for bool tensors, got " + describe(*this) + " and " +
                describe(b));
  if (out.is_float()) return binary(Ops::REMAINDER, b, "remainder");
  const Tensor r = mod(b);
  if (out.is_unsigned()) return r;
  const Tensor zero = Tensor::full({}, 0, out, device());
  return r.ne(zero).logical_and(r.lt(zero).ne(b.lt(zero))).where(r + b.cast(out), r);
}
Tensor Tensor::remainder(Scalarish b) const { return remainder(scalar_like(b)); }

namespace {

// Integer powers by squaring over every bit of the exponent: exact (wrapping as the dtype does).
// Negative exponents give the truncated 1 / base^|e|: 1 for base 1, +-1 for base -1, else 0.
Tensor int_pow(const Tensor& base, const Tensor& e) {
  const Tensor one = Tensor::ones_like(base);
  Tensor result = one, b = base, bits = e;
  const int width = e.dtype().scalar_size() * 8 - (e.dtype().is_unsigned() ? 0 : 1);
  for (int i = 0; i < width; ++i) {
    result = bits.bitwise_and(Tensor::full({}, 1, bits.dtype(), bits.device()))
                 .ne(0)
                 .where(result * b, result);
    if (i + 1 < width) b = b * b, bits = bits.rshift(1);
  }
  if (e.dtype().is_unsigned()) return result;
  const Tensor odd = e.bitwise_and(Tensor::full({}, 1, e.dtype(), e.device())).ne(0);
  const Tensor negative_power =
      base.eq(1).where(one, base.eq(-1).where(odd.where(-one, one), one * 0));
  return e.lt(0).where(negative_power, result);
}

}  // namespace

namespace {

// torch's gradients of b^x (pow_backward_self, pow_backward_exponent), written out: derived from
// the composition above they are wrong where its special cases pick a constant (d/dx b^x at
// b = 1 gave 0, not x; d/dx b^x at x = 0 gave 0, not log b) and nan where 2^(x log2 |b|) meets
// b = 0 (d/db b^2 at 0 is 0, d/db b^0.5 at 0 is inf). d/db is 0 where x = 0; d/dx is 0 where
// b = 0 and x >= 0, and nan for a negative base (log b), as torch.
Tensor with_pow_gradient(const Tensor& result, const Tensor& b, const Tensor& x) {
  if (!b.requires_grad() && !x.requires_grad()) return result;
  const UOpPtr bn = b.node(), xn = x.node(), rn = result.node();
  return Tensor(with_custom_gradient(
      rn, {bn, xn}, [bn, xn, rn](const Tensor& g) -> std::vector<std::optional<Tensor>> {
        const Tensor base(bn), exponent(xn), out(rn);
        const Tensor zero = out.scalar_like(0.0);
        const Tensor db = exponent.eq(0.0).where(zero, g * exponent * base.pow(exponent - 1.0));
        const Tensor dx =
            base.eq(0.0).logical_and(exponent.ge(0.0)).where(zero, g * out * base.log());
        return {db, dx};
      }));
}

}  // namespace

// Floats: 2^(e log2 |b|) with the sign of a negative base from an integer exponent's parity, nan
// for a finite negative base and a fractional exponent, and x^0 = 1 and 1^x = 1 for every x (nan
// included), as torch and C's pow (C11 F.10.4.4): an infinite exponent is even, (-1)^+-inf is 1,
// and -0 and -inf are negative bases ((-0)^-1 = -inf, (-inf)^0.5 = inf). Its gradient is torch's
// (with_pow_gradient).
Tensor Tensor::pow(const Tensor& e) const {
  DType out;
  try {
    out = promote(dtype(), e.dtype());
  } catch (const Error&) {
    throw Error("pow: cannot combine " + describe(*this) + " and " + describe(e));
  }
  if (out.is_bool())
    throw Error("pow: not defined for bool tensors, got " + describe(*this) + " and " +
                describe(e));
  const Shape s = broadcast_shape(shape(), e.shape(), "pow");
  if (out.is_int()) return int_pow(cast(out).broadcast_to(s), e.cast(out).broadcast_to(s));
  const Tensor b = cast(out).broadcast_to(s), x = e.cast(out).broadcast_to(s);
  const Tensor magnitude = (b.abs().log2() * x).exp2();
  const Tensor is_int = x.trunc().eq(x);  // inf too
  const Tensor half = x * 0.5;
  const Tensor odd = is_int.logical_and(half.trunc().ne(half));  // inf is even
  const Tensor fractional_of_negative =
      b.lt(0.0).logical_and(b.isfinite()).logical_and(is_int.logical_not());
  const Tensor signed_ = b.signbit().logical_and(odd).where(
      -magnitude, fractional_of_negative.where(
                      // a constant: nan * magnitude would send nan back to magnitude
                      b.scalar_like(std::numeric_limits<double>::quiet_NaN()), magnitude));
  // 1^x, x^0 and (-1)^+-inf (whose magnitude is 2^(0 * inf), nan) are 1.
  const Tensor one = x.eq(0.0).logical_or(b.eq(1.0)).logical_or(b.eq(-1.0).logical_and(x.isinf()));
  return with_pow_gradient(one.where(b.scalar_like(1.0), signed_), b, x);
}

// A whole exponent is computed by multiplying (exact, and right for negative bases: pow(x, 2) is
// x*x); others go through the tensor form.
Tensor Tensor::pow(Scalarish e) const {
  const double v = e.as_double();
  const bool whole = v == std::trunc(v) && std::abs(v) <= 64;
  if (dtype().is_bool() && e.kind() != ScalarKind::Float)
    return pow(Tensor::full({}, e, dtypes::int32, device()));
  if (!whole || (!dtype().is_float() && e.kind() == ScalarKind::Float)) return pow(scalar_like(e));
  if (v < 0 && !dtype().is_float())
    throw Error("pow: integer tensor " + describe(*this) + " to the negative power " +
                std::to_string(int64_t(v)));
  int64_t n = int64_t(std::abs(v));
  if (n == 0 &&
      requires_grad()) {  // 1, with torch's zero gradient (not none: x stays in the graph)
    const UOpPtr x = node();
    return Tensor(with_custom_gradient(ones_like(*this).node(), {x}, [x](const Tensor& g) {
      return std::vector<std::optional<Tensor>>{Tensor::zeros_like(g).cast(Tensor(x).dtype())};
    }));
  }
  Tensor result = ones_like(*this), b = *this;
  bool first = true;
  for (; n > 0; n >>= 1) {
    if (n & 1) result = first ? b : result * b, first = false;
    if (n > 1) b = b * b;
  }
  if (v >= 0) return result;
  const Tensor inverse = result.reciprocal();
  if (!requires_grad()) return inverse;
  // torch's gradient, v x^(v-1): through the reciprocal it was nan at x = 0 (torch: -inf for
  // x^-2 at 0, +inf at -0) and at x = inf (torch: -0).
  const UOpPtr x = node();
  return Tensor(with_custom_gradient(inverse.node(), {x}, [x, v](const Tensor& g) {
    return std::vector<std::optional<Tensor>>{g * (Tensor(x).pow(v - 1.0) * v)};
  }));
}

Tensor Tensor::maximum(Scalarish b) const { return maximum(scalar_like(b)); }
Tensor Tensor::minimum(Scalarish b) const { return minimum(scalar_like(b)); }

// ---- bitwise and logical ----

Tensor Tensor::bitwise_and(const Tensor& b) const {
  check_bitwise(*this, b, "bitwise_and");
  return binary(Ops::AND, b, "bitwise_and");
}
Tensor Tensor::bitwise_or(const Tensor& b) const {
  check_bitwise(*this, b, "bitwise_or");
  return binary(Ops::OR, b, "bitwise_or");
}
Tensor Tensor::bitwise_xor(const Tensor& b) const {
  check_bitwise(*this, b, "bitwise_xor");
  return binary(Ops::XOR, b, "bitwise_xor");
}
// x ^ all-ones: -1 in a signed dtype, the largest value in an unsigned one.
Tensor Tensor::bitwise_not() const {
  if (dtype().is_float())
    throw Error("bitwise_not: needs an integer or bool tensor, got " + describe(*this));
  if (dtype().is_bool()) return logical_not();
  return bitwise_xor(Tensor::full({}, -1, dtype(), device()));  // the constant wraps to the width
}

Tensor Tensor::logical_and(const Tensor& b) const {
  return cast(dtypes::bool_).binary(Ops::AND, b.cast(dtypes::bool_), "logical_and");
}
Tensor Tensor::logical_or(const Tensor& b) const {
  return cast(dtypes::bool_).binary(Ops::OR, b.cast(dtypes::bool_), "logical_or");
}
Tensor Tensor::logical_xor(const Tensor& b) const {
  return cast(dtypes::bool_).binary(Ops::XOR, b.cast(dtypes::bool_), "logical_xor");
}

namespace {

// Devices leave shifts by the width or more undefined: refused here. rshift of a signed value is
// arithmetic (rounds down), as Python's >>.
Tensor shift(const Tensor& x, Ops op, int64_t bits, std::string_view name) {
  if (!x.dtype().is_int())
    throw Error(std::string(name) + ": needs an integer tensor, got " + describe(x));
  const int width = x.dtype().scalar_size() * 8;
  if (bits < 0 || bits >= width)
    throw Error(std::string(name) + ": shift by " + std::to_string(bits) + " is outside [0, " +
                std::to_string(width) + ") for " + describe(x));
  const Tensor amount = Tensor::full(x.shape(), bits, x.dtype(), x.device());
  return Tensor(UOp::make(op, x.dtype(), {x.node(), amount.node()}));
}

}  // namespace

Tensor Tensor::lshift(int64_t bits) const { return shift(*this, Ops::SHL, bits, "lshift"); }
Tensor Tensor::rshift(int64_t bits) const { return shift(*this, Ops::SHR, bits, "rshift"); }

namespace {

// Shifts by a tensor of amounts, torch's rule for amounts outside [0, width): a left shift gives
// 0, a right shift the sign fill (0 or -1). In range, the device's shift, whose amount the
// renderer masks to the width, so out-of-range lanes compute something defined before the where.
Tensor shift_by(const Tensor& x, const Tensor& bits, Ops op, std::string_view name) {
  if (!x.dtype().is_int() || !bits.dtype().is_int())
    throw Error(std::string(name) + ": needs integer tensors, got " + describe(x) + " and " +
                describe(bits));
  if (x.device() != bits.device())
    throw Error(std::string(name) + ": tensors are on different devices (" + x.device() + " and " +
                bits.device() + ")");
  const int64_t width = x.dtype().scalar_size() * 8;
  const Shape s = broadcast_shape(x.shape(), bits.shape(), name);
  const Tensor xs = x.expand(s), amount = bits.expand(s);
  // Compared in the amount's own dtype, which holds every width (up to 64).
  const Tensor in_range =
      amount.ge(Tensor::zeros({}, amount.dtype(), x.device()))
          .logical_and(amount.lt(Tensor::full({}, width, amount.dtype(), x.device())));
  const Tensor safe =
      in_range.where(amount, Tensor::zeros({}, amount.dtype(), x.device())).cast(x.dtype());
  const Tensor shifted(UOp::make(op, x.dtype(), {xs.node(), safe.node()}));
  const Tensor zero = Tensor::zeros({}, x.dtype(), x.device());
  const Tensor outside = op == Ops::SHL || x.dtype().is_unsigned()
                             ? zero
                             : xs.lt(zero).where(Tensor::full({}, -1, x.dtype(), x.device()), zero);
  return in_range.where(shifted, outside);
}

}  // namespace

Tensor Tensor::lshift(const Tensor& bits) const {
  return shift_by(*this, bits, Ops::SHL, "lshift");
}
Tensor Tensor::rshift(const Tensor& bits) const {
  return shift_by(*this, bits, Ops::SHR, "rshift");
}

// ---- comparisons and where with scalars ----

Tensor Tensor::lt(Scalarish b) const { return lt(scalar_like(b)); }
Tensor Tensor::gt(Scalarish b) const { return gt(scalar_like(b)); }
Tensor Tensor::le(Scalarish b) const { return le(scalar_like(b)); }
Tensor Tensor::ge(Scalarish b) const { return ge(scalar_like(b)); }
Tensor Tensor::eq(Scalarish b) const { return eq(scalar_like(b)); }
Tensor Tensor::ne(Scalarish b) const { return ne(scalar_like(b)); }

Tensor Tensor::where(const Tensor& a, Scalarish b) const { return where(a, a.scalar_like(b)); }
Tensor Tensor::where(Scalarish a, const Tensor& b) const { return where(b.scalar_like(a), b); }
Tensor Tensor::where(Scalarish a, Scalarish b) const {
  const DType d = promote(literal_dtype(a), literal_dtype(b));
  return where(Tensor::full({}, a, d, device()), Tensor::full({}, b, d, device()));
}

Tensor operator<(const Tensor& a, const Tensor& b) { return a.lt(b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return a.gt(b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return a.le(b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return a.ge(b); }
Tensor operator<(const Tensor& a, Scalarish b) { return a.lt(b); }
Tensor operator>(const Tensor& a, Scalarish b) { return a.gt(b); }
Tensor operator<=(const Tensor& a, Scalarish b) { return a.le(b); }
Tensor operator>=(const Tensor& a, Scalarish b) { return a.ge(b); }
Tensor operator&(const Tensor& a, const Tensor& b) { return a.bitwise_and(b); }
Tensor operator|(const Tensor& a, const Tensor& b) { return a.bitwise_or(b); }
Tensor operator^(const Tensor& a, const Tensor& b) { return a.bitwise_xor(b); }
Tensor operator~(const Tensor& a) { return a.bitwise_not(); }

}  // namespace vkg
