#include <vkgrad/nn/layers.hpp>

#include <cmath>

#include <vkgrad/core/error.hpp>

namespace vkg::nn {

namespace {

// torch's default for Linear and Conv: kaiming_uniform(a = sqrt(5)) for the weight, which is
// uniform(+-1/sqrt(fan_in)), and uniform(+-1/sqrt(fan_in)) for the bias.
Tensor default_weight(Shape shape, const std::string& device) {
  return Tensor::kaiming_uniform(std::move(shape), std::sqrt(5.0), device).requires_grad_();
}
Tensor default_bias(int64_t n, int64_t fan_in, const std::string& device) {
  const double bound = fan_in > 0 ? 1.0 / std::sqrt(double(fan_in)) : 0.0;
  return Tensor::uniform({n}, -bound, bound, dtypes::default_float, device).requires_grad_();
}
Tensor param(Tensor t) { return t.requires_grad_(); }

void check_positive(int64_t v, std::string_view layer, std::string_view what) {
  if (v <= 0) throw Error(std::string(layer) + ": " + std::string(what) + " must be positive, got " + std::to_string(v));
}

// `shape` once every named size is positive.
Shape checked_shape(std::string_view layer, std::initializer_list<std::pair<const char*, int64_t>> sizes, Shape shape) {
  for (auto& [what, v] : sizes) check_positive(v, layer, what);
  return shape;
}

// (out, in / groups, kh, kw) for a convolution, (in, out / groups, kh, kw) for a transposed one,
// after checking the sizes.
Shape conv_weight_shape(std::string_view layer, int64_t in, int64_t out, Size2 k, int64_t groups, bool transposed) {
  check_positive(in, layer, "in_channels");
  check_positive(out, layer, "out_channels");
  check_positive(groups, layer, "groups");
  check_positive(k.h, layer, "kernel height");
  check_positive(k.w, layer, "kernel width");
  if (in % groups || out % groups)
    throw Error(std::string(layer) + ": in_channels " + std::to_string(in) + " and out_channels " +
                std::to_string(out) + " must both divide by groups " + std::to_string(groups));
  return transposed ? Shape{in, out / groups, k.h, k.w} : Shape{out, in / groups, k.h, k.w};
}

// Appends "name" -> t when t is there.
void add(StateDict& sd, const char* name, const std::optional<Tensor>& t) {
  if (t) sd.emplace_back(name, *t);
}

}  // namespace

Linear::Linear(int64_t in, int64_t out, bool has_bias, std::string device)
    : weight(default_weight(checked_shape("Linear", {{"in_features", in}, {"out_features", out}}, {out, in}), device)) {
  if (has_bias) bias = default_bias(out, in, device);
}
Tensor Linear::operator()(const Tensor& x) const { return x.linear(weight, bias); }
StateDict Linear::state_dict() const {
  StateDict sd{{"weight", weight}};
  add(sd, "bias", bias);
  return sd;
}

Conv2d::Conv2d(int64_t in, int64_t out, Size2 k, Conv2dOptions opts, bool has_bias, std::string device)
    : weight(default_weight(conv_weight_shape("Conv2d", in, out, k, opts.groups, false), device)), options(opts) {
  if (has_bias) bias = default_bias(out, in / opts.groups * k.h * k.w, device);
}
Tensor Conv2d::operator()(const Tensor& x) const { return x.conv2d(weight, bias, options); }
StateDict Conv2d::state_dict() const {
  StateDict sd{{"weight", weight}};
  add(sd, "bias", bias);
  return sd;
}

ConvTranspose2d::ConvTranspose2d(int64_t in, int64_t out, Size2 k, ConvTranspose2dOptions opts, bool has_bias,
                                 std::string device)
    : weight(default_weight(conv_weight_shape("ConvTranspose2d", in, out, k, opts.groups, true), device)),
      options(opts) {
  // torch takes the fan-in from dimension 1 of this layout: out / groups * kh * kw
  if (has_bias) bias = default_bias(out, out / opts.groups * k.h * k.w, device);
}
Tensor ConvTranspose2d::operator()(const Tensor& x) const { return x.conv_transpose2d(weight, bias, options); }
StateDict ConvTranspose2d::state_dict() const {
  StateDict sd{{"weight", weight}};
  add(sd, "bias", bias);
  return sd;
}

// The running statistics are clone()s: each layer's own buffers, which assign writes in place
// (a contiguous() of an equal constant realized by another thread at the same moment would be
// that tensor's buffer).
BatchNorm::BatchNorm(int64_t n, double eps_, double momentum_, bool affine, bool track,
                     std::string device)
    : running_mean(Tensor::zeros(checked_shape("BatchNorm", {{"num_features", n}}, {n}),
                                 dtypes::default_float, device)
                       .clone()
                       .realize()),
      running_var(Tensor::ones({n}, dtypes::default_float, device).clone().realize()),
      num_batches_tracked(Tensor::zeros({}, dtypes::int32, device).clone().realize()),
      eps(eps_),
      momentum(momentum_),
      track_running_stats(track) {
  if (affine) {
    weight = param(Tensor::ones({n}, dtypes::default_float, device));
    bias = param(Tensor::zeros({n}, dtypes::default_float, device));
  }
}

Tensor BatchNorm::operator()(const Tensor& x) const {
  const int64_t c = running_mean.numel();
  if (x.ndim() < 2 || x.shape()[1] != c)
    throw Error("BatchNorm: expected input of shape (N, " + std::to_string(c) + ", ...), got " + shape_str(x.shape()) +
                " " + x.dtype().name());
  if (Tensor::training || !track_running_stats) {
    Axes axes;
    axes.list.push_back(0);
    for (int64_t i = 2; i < x.ndim(); ++i) axes.list.push_back(i);
    const Tensor mean_kept = x.mean(axes, true);
    const Tensor mean = mean_kept.reshape({c});
    // The biased variance normalizes, as torch; the running estimate takes the unbiased one.
    // The variance centers on the mean detached, as tinygrad: its gradient through the mean is
    // -2/n * sum(x - mean) * dvar = 0 exactly, and computing that zero is a reduce over the whole
    // input in every backward pass (one kernel per layer).
    const Tensor centered = x - mean_kept.detach();
    const Tensor var = (centered * centered).mean(axes);
    if (Tensor::training && track_running_stats) {
      NoGrad no_grad;
      const int64_t n = x.numel() / std::max<int64_t>(c, 1);
      const Tensor unbiased = var.detach() * (double(n) / double(std::max<int64_t>(n - 1, 1)));
      Tensor rm = running_mean, rv = running_var;  // aliases of this layer's buffers
      rm.assign(rm * (1.0 - momentum) + mean.detach() * momentum);
      rv.assign(rv * (1.0 - momentum) + unbiased * momentum);
      Tensor count = num_batches_tracked;
      count.assign(count + 1);
    }
    return x.batchnorm(weight, bias, mean, (var + eps).rsqrt());
  }
  return x.batchnorm(weight, bias, running_mean, (running_var + eps).rsqrt());
}

StateDict BatchNorm::state_dict() const {
  StateDict sd;
  add(sd, "weight", weight);
  add(sd, "bias", bias);
  sd.emplace_back("running_mean", running_mean);
  sd.emplace_back("running_var", running_var);
  sd.emplace_back("num_batches_tracked", num_batches_tracked);
  return sd;
}

LayerNorm::LayerNorm(Shape shape, double eps_, bool affine, std::string device)
    : normalized_shape(std::move(shape)), eps(eps_) {
  if (normalized_shape.empty()) throw Error("LayerNorm: normalized_shape must not be empty");
  if (affine) {
    weight = param(Tensor::ones(normalized_shape, dtypes::default_float, device));
    bias = param(Tensor::zeros(normalized_shape, dtypes::default_float, device));
  }
}

Tensor LayerNorm::operator()(const Tensor& x) const {
  const size_t k = normalized_shape.size();
  if (size_t(x.ndim()) < k || !std::equal(normalized_shape.begin(), normalized_shape.end(), x.shape().end() - int64_t(k)))
    throw Error("LayerNorm: input " + shape_str(x.shape()) + " does not end in normalized_shape " +
                shape_str(normalized_shape));
  Axes axes;
  for (size_t i = 0; i < k; ++i) axes.list.push_back(-1 - int64_t(i));
  Tensor y = x.layernorm(axes, eps);
  if (weight) y = y * *weight;
  if (bias) y = y + *bias;
  return y;
}

StateDict LayerNorm::state_dict() const {
  StateDict sd;
  add(sd, "weight", weight);
  add(sd, "bias", bias);
  return sd;
}

Embedding::Embedding(int64_t num, int64_t dim, std::string device)
    : weight(param(Tensor::randn(checked_shape("Embedding", {{"num_embeddings", num}, {"embedding_dim", dim}}, {num, dim}),
                                 dtypes::default_float, device))) {}
Tensor Embedding::operator()(const Tensor& indices) const { return indices.embedding(weight); }
StateDict Embedding::state_dict() const { return {{"weight", weight}}; }

}  // namespace vkg::nn
