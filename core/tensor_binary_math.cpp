// Binary elementwise functions composed from other Tensor ops, with torch's semantics: copysign,
// lerp, logaddexp and the closeness tests.
#include <numbers>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

namespace {

// Both operands in their common float dtype (integers and bools promote to the default float);
// `op` names the function in errors, also for shapes that do not broadcast.
std::pair<Tensor, Tensor> float_pair(const Tensor& a, const Tensor& b, std::string_view op) {
  if (a.device() != b.device())
    throw Error(std::string(op) + ": tensors are on different devices (" + a.device() + " and " +
                b.device() + ")");
  DType out;
  try {
    out = promote(a.dtype(), b.dtype());
  } catch (const Error&) {
    throw Error(std::string(op) + ": cannot combine " + a.dtype().name() + " and " +
                b.dtype().name());
  }
  if (!out.is_float()) out = dtypes::default_float;
  broadcast_shape(a.shape(), b.shape(), op);
  return {a.cast(out), b.cast(out)};
}

}  // namespace

// -a where the sign bits differ. torch's gradient is sign-aware too: d/da = +-1, d/db = 0.
Tensor Tensor::copysign(const Tensor& b) const {
  const auto [x, s] = float_pair(*this, b, "copysign");
  return x.signbit().ne(s.signbit()).where(-x, x);
}

// torch's two forms: start + w (end - start) for |w| < 1/2, end - (end - start)(1 - w) above,
// so that lerp is exactly end at w = 1 (the first form rounds there).
Tensor Tensor::lerp(const Tensor& end, const Tensor& weight) const {
  const auto [start, stop] = float_pair(*this, end, "lerp");
  const auto [s, w] = float_pair(start, weight, "lerp");
  const Tensor diff = stop - s;
  return w.abs().lt(0.5).where(s + w * diff, stop - diff * (1.0 - w));
}

Tensor Tensor::lerp(const Tensor& end, double weight) const {
  return lerp(end, scalar_like(weight));
}

// max(a, b) + log1p(exp(-|a - b|)). Where a and b are the same infinity, a - b is nan: the
// result is that infinity, as torch.
Tensor Tensor::logaddexp(const Tensor& b) const {
  const auto [x, y] = float_pair(*this, b, "logaddexp");
  const Tensor same_inf = x.eq(y).logical_and(x.isinf());
  const Tensor xs = same_inf.where(0.0, x), ys = same_inf.where(0.0, y);
  const Tensor r = xs.maximum(ys) + (-(xs - ys).abs()).exp().log1p();
  return same_inf.where(x, r);
}

Tensor Tensor::isclose(const Tensor& b, double rtol, double atol, bool equal_nan) const {
  if (rtol < 0 || atol < 0)
    throw Error("isclose: rtol and atol must not be negative (got " + std::to_string(rtol) +
                " and " + std::to_string(atol) + ")");
  const auto [x, y] = float_pair(*this, b, "isclose");
  const Tensor finite = x.isfinite().logical_and(y.isfinite());
  const Tensor near = (x - y).abs().le(y.abs() * rtol + atol);
  Tensor close = x.eq(y).logical_or(finite.logical_and(near));
  if (equal_nan) close = close.logical_or(x.isnan().logical_and(y.isnan()));
  return close;
}

bool Tensor::allclose(const Tensor& b, double rtol, double atol, bool equal_nan) const {
  return isclose(b, rtol, atol, equal_nan).all().item<bool>();
}

}  // namespace vkg
