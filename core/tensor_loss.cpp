// Losses: this tensor holds the predictions (logits where the name says so), `target` the truth.
// Each is composed of existing ops in a form whose gradient is right and finite: log-probabilities
// come from the stable log_softmax, class indices pick their log-probability by WHERE over a
// one-hot mask (never 0 * -inf), and the logits form of binary cross-entropy never takes exp of a
// positive number.
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/gradient.hpp>
#include <vkgrad/core/index_check.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

namespace {

std::string desc(const Tensor& t) { return shape_str(t.shape()) + " " + t.dtype().name(); }

Tensor as_float(const Tensor& t) {
  return t.dtype().is_float() ? t : t.cast(dtypes::default_float);
}

Tensor reduce_loss(const Tensor& per_element, Reduction reduction) {
  switch (reduction) {
    case Reduction::Mean:
      return per_element.mean();
    case Reduction::Sum:
      return per_element.sum();
    case Reduction::None:
      return per_element;
  }
  return per_element;
}

void check_smoothing(double label_smoothing, const Tensor& x, const Tensor& target,
                     std::string_view op) {
  if (!(label_smoothing >= 0.0 && label_smoothing <= 1.0))
    throw Error(std::string(op) + ": label_smoothing must be in [0, 1], got " +
                std::to_string(label_smoothing) + " (input " + desc(x) + ", target " +
                desc(target) + ")");
}

// Predictions and targets of one shape, on one device, for the elementwise losses.
void check_pair(const Tensor& x, const Tensor& target, std::string_view op) {
  if (x.device() != target.device())
    throw Error(std::string(op) + ": tensors are on different devices (" + x.device() + " and " +
                target.device() + ")");
  if (x.shape() != target.shape())
    throw Error(std::string(op) + ": input " + desc(x) + " and target " + desc(target) +
                " must have the same shape");
}

Tensor zero_like(const Tensor& t) { return Tensor::full({}, 0, t.dtype(), t.device()); }

// target == class, as a bool mask over the classes laid along `axis` of the logits' shape;
// `target` has the logits' shape without that axis.
Tensor class_mask(const Tensor& target, int64_t classes, int axis) {
  Shape along(size_t(target.ndim() + 1), 1);
  along[size_t(axis)] = classes;
  return target.unsqueeze(axis).eq(Tensor::arange(0, classes, 1, target.device()).reshape(along));
}

// torch's weighted negative log-likelihood of log-probabilities `logp` (classes along `axis`),
// smoothed by eps: per sample -(1 - eps) w[t] logp[t] - eps/C sum over classes of w logp, zero
// where the target is ignore_index; the mean divides by the counted targets' weights.
Tensor index_loss(const Tensor& logp, const Tensor& target, int axis,
                  const std::optional<Tensor>& weight, int64_t ignore_index, double eps,
                  Reduction reduction, std::string_view op) {
  const int64_t classes = logp.shape()[size_t(axis)];
  check_index_values(target, classes, op, std::to_string(classes) + " classes", ignore_index);
  Shape along(size_t(logp.ndim()), 1);
  along[size_t(axis)] = classes;
  std::optional<Tensor> w;
  if (weight) {
    if (weight->shape() != Shape{classes})
      throw Error(std::string(op) + ": weight needs shape (" + std::to_string(classes) + "), got " +
                  desc(*weight) + " for input " + desc(logp));
    w = weight->cast(logp.dtype()).reshape(along);
  }
  const Tensor zero = zero_like(logp);
  const Tensor mask = class_mask(target, classes, axis);
  const Tensor weighted = w ? logp * *w : logp;
  Tensor per = -mask.where(weighted, zero).sum(axis);
  if (eps > 0) per = per * (1 - eps) - weighted.sum(axis) * (eps / double(classes));
  const Tensor counted = target.ne(Tensor::full({}, ignore_index, target.dtype(), target.device()));
  per = counted.where(per, zero);
  if (reduction != Reduction::Mean) return reduce_loss(per, reduction);
  const Tensor total = w ? counted.where(mask.where(*w, zero).sum(axis), zero).sum()
                         : counted.sum().cast(per.dtype());
  return per.sum() / total;
}

// -sum over classes of q * log p, with q = (1 - eps) * target + eps / C.
Tensor probability_loss(const Tensor& logp, const Tensor& target, int64_t classes, int axis,
                        double eps) {
  const Tensor q = eps > 0 ? target * (1 - eps) + eps / double(classes) : target;
  return -(logp * q).sum(axis);
}

}  // namespace

// torch's cross_entropy: classes along axis 1 (axis 0 for a 1-D input). An integer target holds
// class indices (the input's shape without the class axis); a float target holds probabilities
// (the input's shape). Label smoothing mixes the target with the uniform distribution:
// (1 - eps) * target + eps / C.
Tensor Tensor::cross_entropy(const Tensor& target, Reduction reduction, double label_smoothing,
                             const std::optional<Tensor>& weight, int64_t ignore_index) const {
  check_smoothing(label_smoothing, *this, target, "cross_entropy");
  if (target.device() != device())
    throw Error("cross_entropy: tensors are on different devices (" + device() + " and " +
                target.device() + ")");
  if (ndim() < 1)
    throw Error("cross_entropy: needs at least a class axis, got input " + desc(*this));
  const int axis = ndim() == 1 ? 0 : 1;
  const int64_t classes = shape()[size_t(axis)];
  const Tensor logp = log_softmax(axis);
  const bool indices = target.dtype().is_int();
  if (!indices && !target.dtype().is_float())
    throw Error(
        "cross_entropy: the target must hold integer class indices or float probabilities, got "
        "input " +
        desc(*this) + " and target " + desc(target));
  Shape want = shape();
  if (indices) want.erase(want.begin() + axis);
  if (target.shape() != want)
    throw Error(std::string("cross_entropy: ") +
                (indices ? "integer class indices need shape " + shape_str(want) + " for input " +
                               desc(*this) + ", got target " + desc(target)
                         : "class probabilities need the input's shape, got input " + desc(*this) +
                               " and target " + desc(target)));
  if (indices)
    return index_loss(logp, target, axis, weight, ignore_index, label_smoothing, reduction,
                      "cross_entropy");
  if (weight)
    throw Error("cross_entropy: class weights take integer class indices, got target " +
                desc(target));
  return reduce_loss(probability_loss(logp, target, classes, axis, label_smoothing), reduction);
}

// torch's nll_loss: log-probabilities with classes along axis 1 (axis 0 for a 1-D input) and
// integer class indices of the input's shape without that axis.
Tensor Tensor::nll_loss(const Tensor& target, const std::optional<Tensor>& weight,
                        int64_t ignore_index, Reduction reduction) const {
  if (target.device() != device())
    throw Error("nll_loss: tensors are on different devices (" + device() + " and " +
                target.device() + ")");
  if (ndim() < 1 || !dtype().is_float())
    throw Error("nll_loss: needs float log-probabilities with a class axis, got input " +
                desc(*this));
  const int axis = ndim() == 1 ? 0 : 1;
  Shape want = shape();
  want.erase(want.begin() + axis);
  if (!target.dtype().is_int() || target.shape() != want)
    throw Error("nll_loss: needs integer class indices of shape " + shape_str(want) +
                " for input " + desc(*this) + ", got target " + desc(target));
  return index_loss(*this, target, axis, weight, ignore_index, 0.0, reduction, "nll_loss");
}

// tinygrad's sparse_categorical_crossentropy: classes along the last axis, target of the logits'
// shape without it. Targets equal to ignore_index contribute nothing, and the mean is over the
// others only.
Tensor Tensor::sparse_categorical_crossentropy(const Tensor& target, int64_t ignore_index,
                                               double label_smoothing, Reduction reduction) const {
  const std::string_view op = "sparse_categorical_crossentropy";
  check_smoothing(label_smoothing, *this, target, op);
  if (target.device() != device())
    throw Error(std::string(op) + ": tensors are on different devices (" + device() + " and " +
                target.device() + ")");
  Shape want = shape();
  if (!want.empty()) want.pop_back();
  if (ndim() < 1 || !target.dtype().is_int() || target.shape() != want)
    throw Error(std::string(op) + ": needs logits (..., C) and integer class indices of shape " +
                shape_str(want) + ", got logits " + desc(*this) + " and target " + desc(target));
  const int64_t classes = shape().back();
  check_index_values(target, classes, op, std::to_string(classes) + " classes", ignore_index);
  const Tensor logp = log_softmax(-1);
  const Tensor counted = target.ne(Tensor::full({}, ignore_index, target.dtype(), device()));
  const Tensor zero = zero_like(logp);
  const double eps = label_smoothing;
  const Tensor mask = class_mask(target, classes, ndim() - 1);
  std::optional<Tensor> loss, count;
  if (reduction != Reduction::None) {
    // Summed over the batch, the loss is one reduce over every logit, as tinygrad's: a sum over
    // the classes per sample, then over the samples, would be two kernels.
    Tensor term = mask.where(logp, zero) * (1 - eps);
    if (eps > 0) term = term + logp * (eps / double(classes));
    loss = -counted.unsqueeze(-1).where(term, zero).sum();
    if (reduction == Reduction::Mean) {
      count = counted.sum().cast(loss->dtype());
      loss = *loss / *count;
    }
  } else {
    Tensor per = mask.where(logp, zero).sum(-1) * (1 - eps);
    if (eps > 0) per = per + logp.mean(-1) * eps;
    loss = -counted.where(per, zero);
  }
  // The logits' gradient, written out. With weights w = (1 - eps) onehot + eps / C the loss of a
  // counted sample is -sum_c w_c logp_c, whose gradient is (sum_c w_c) softmax - w, and sum_c w_c
  // is 1 where the target is a class (eps where it is out of range, which only CHECK_INDICES
  // rejects). The derived gradient summed log_softmax's gradient over the classes to find that
  // sum: a reduce, one kernel more per training step (issue 9's MLP step: 18 -> 17). softmax is
  // exp(x - max) times a per-sample factor, from log_softmax's own max and sum of exps (the same
  // nodes, so the same buffers): a log per sample inside the weight gradient's reduce cost more.
  Tensor in_range = target.dtype().is_unsigned() ? target.eq(target) : target.ge(0);
  if (double(classes) <= dtypes::max_value(target.dtype()))
    in_range = in_range.logical_and(target.lt(classes));
  // The logits' node, not the Tensor: a Tensor is a handle that assign or to_ repoint, and the
  // gradient is that of the values the loss was built from.
  const UOpPtr x_node = node();
  return Tensor(with_custom_gradient(
      loss->node(), {x_node}, [=](const Tensor& g) -> std::vector<std::optional<Tensor>> {
        const Tensor x(x_node);
        const Tensor xf = as_float(x);
        const Tensor s = xf - xf.max(-1, true).detach();  // log_softmax's (core/tensor_softmax.cpp)
        // Constants in the logits' float dtype: where(double, double) makes float32 ones, which
        // would leave a float64 gradient float32-accurate.
        const auto c = [&](double v) { return logp.scalar_like(v); };
        const Tensor weights_sum = in_range.where(c(1.0), c(eps)).unsqueeze(-1);
        const Tensor w = mask.where(c(1.0 - eps + eps / double(classes)), c(eps / double(classes)));
        const Tensor scale = reduction == Reduction::None   ? g.unsqueeze(-1)
                             : reduction == Reduction::Mean ? g / *count
                                                            : g;
        // Ignored rows are selected away after scaling, not multiplied by zero: with every
        // target ignored the mean's scale is 1/0 = inf, and a nan or inf upstream gradient at an
        // ignored row (reduction none) would leak through 0 * inf = nan; torch gives zeros.
        const Tensor body = s.exp() * (weights_sum / s.exp().sum(-1, true));
        return {counted.unsqueeze(-1).where((body - w) * scale, zero).cast(x.dtype())};
      }));
}

// -(y log p + (1 - y) log(1 - p)), each log clamped to >= -100 as torch, so that p = 0 or 1 gives
// a finite loss.
Tensor Tensor::binary_crossentropy(const Tensor& target, Reduction reduction) const {
  check_pair(*this, target, "binary_crossentropy");
  const Tensor p = as_float(*this), y = target.cast(p.dtype());
  const Tensor floor = Tensor::full({}, -100, p.dtype(), device());
  const Tensor per = -(y * p.log().maximum(floor) + (1 - y) * (1 - p).log().maximum(floor));
  return reduce_loss(per, reduction);
}

// The same on logits x, stably: max(x, 0) - x*y + log(1 + exp(-|x|)). At x = 0, maximum splits
// its gradient (1/2) and |x|' is 0: the gradient is sigmoid(0) - y, as torch.
Tensor Tensor::binary_crossentropy_logits(const Tensor& target, Reduction reduction) const {
  check_pair(*this, target, "binary_crossentropy_logits");
  const Tensor x = as_float(*this), y = target.cast(x.dtype());
  const Tensor per = x.maximum(0.0) - x * y + ((-x.abs()).exp() + 1).log();
  return reduce_loss(per, reduction);
}

Tensor Tensor::mse_loss(const Tensor& target, Reduction reduction) const {
  check_pair(*this, target, "mse_loss");
  const Tensor d = as_float(*this) - target;
  return reduce_loss(d * d, reduction);
}

Tensor Tensor::l1_loss(const Tensor& target, Reduction reduction) const {
  check_pair(*this, target, "l1_loss");
  return reduce_loss((as_float(*this) - target).abs(), reduction);
}

}  // namespace vkg
