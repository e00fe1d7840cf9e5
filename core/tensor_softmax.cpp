// The softmax family, in the stable forms: the maximum along the axis is subtracted before exp,
// so that no exp overflows. The maximum is detached: softmax does not depend on it, so its
// gradient through the max would be zero in exact arithmetic and only rounding noise (and an
// arbitrary split at ties) in floats.
#include <limits>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/gradient.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

namespace {

Tensor as_float(const Tensor& t) {
  return t.dtype().is_float() ? t : t.cast(dtypes::default_float);
}

Tensor detached(const Tensor& t) { return Tensor(UOp::make(Ops::DETACH, t.dtype(), {t.node()})); }

// x - max(x) along axis, kept broadcastable.
Tensor shifted(const Tensor& x, int64_t axis) { return x - detached(x.max(axis, true)); }

}  // namespace

Tensor Tensor::softmax(int64_t axis) const {
  normalize_axis(axis, shape(), "softmax");  // checked here, so that an error names softmax
  if (numel() == 0) return as_float(*this);  // as torch: no max to shift by, nothing to do
  const Tensor e = shifted(as_float(*this), axis).exp();
  return e / e.sum(axis, true);
}

Tensor Tensor::log_softmax(int64_t axis) const {
  normalize_axis(axis, shape(), "log_softmax");
  if (numel() == 0) return as_float(*this);
  const Tensor m = shifted(as_float(*this), axis);
  return m - m.exp().sum(axis, true).log();
}

// max + log(sum(exp(x - max))); an infinite max (all -inf, or some +inf) shifts by 0 instead, so
// that the result is -inf or +inf as in exact arithmetic, not inf - inf = nan.
Tensor Tensor::logsumexp(Axes axes, bool keepdim) const {
  const Tensor x = as_float(*this);
  if (numel() == 0) {  // torch: log(0) = -inf for every sum over no elements (of the sum's shape)
    const Tensor lse =
        Tensor::full_like(x.sum(axes, keepdim), -std::numeric_limits<double>::infinity());
    if (!x.requires_grad()) return lse;
    // torch's gradient, zeros of x's shape (full_like alone is detached: backward threw)
    const UOpPtr xn = x.node();
    return Tensor(with_custom_gradient(lse.node(), {xn}, [xn](const Tensor& g) {
      return std::vector<std::optional<Tensor>>{Tensor::zeros_like(Tensor(xn)).cast(g.dtype())};
    }));
  }
  const Tensor m = detached(x.max(axes, true));
  const Tensor inf =
      Tensor::full({}, std::numeric_limits<double>::infinity(), x.dtype(), x.device());
  const Tensor safe = m.abs().eq(inf).where(Tensor::full({}, 0, x.dtype(), x.device()), m);
  const Tensor lse = (x - safe).exp().sum(axes, true).log() + safe;
  if (keepdim) return lse;
  Shape kept;  // the reduced axes are the ones of size 1 that max made (all when none given)
  std::vector<bool> reduced(shape().size(), axes.list.empty());
  for (int64_t a : axes.list) reduced[size_t(normalize_axis(a, shape(), "logsumexp"))] = true;
  for (size_t d = 0; d < shape().size(); ++d)
    if (!reduced[d]) kept.push_back(shape()[d]);
  return lse.reshape(kept);
}

}  // namespace vkg
