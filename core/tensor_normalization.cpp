// Normalizations beyond layernorm and batchnorm (RMSNorm, GroupNorm, InstanceNorm), exact gelu,
// and scaled dot-product attention, all composed from existing ops (torch's formulas), so they
// fuse and differentiate like the rest.
#include <cmath>
#include <limits>
#include <numbers>

#include <vkgrad/core/binding_guard.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

namespace {

std::string desc(const Tensor& t) { return shape_str(t.shape()) + " " + t.dtype().name(); }

Tensor as_float(const Tensor& x) { return x.dtype().is_float() ? x : x.cast(dtypes::default_float); }

// weight and bias of shape (C,) applied along axis 1 of x.
Tensor per_channel_affine(const Tensor& y, const std::optional<Tensor>& weight,
                          const std::optional<Tensor>& bias, std::string_view op) {
  const int64_t c = y.shape()[1];
  Shape along(y.shape().size(), 1);
  along[1] = c;
  Tensor out = y;
  for (const auto* p : {&weight, &bias}) {
    if (!*p) continue;
    if ((*p)->shape() != Shape{c})
      throw Error(std::string(op) + ": weight and bias need shape (" + std::to_string(c) + ") for input " +
                  desc(y) + ", got " + desc(**p));
    out = p == &weight ? out * (*p)->reshape(along) : out + (*p)->reshape(along);
  }
  return out;
}

}  // namespace

// torch's F.rms_norm: x / sqrt(mean(x^2) + eps) over the axes; eps defaults to the dtype's
// machine epsilon, as torch.
Tensor Tensor::rms_norm(Axes axes, std::optional<double> eps) const {
  for (int64_t a : axes.list) normalize_axis(a, shape(), "rms_norm");
  const Tensor x = as_float(*this);
  const double e = eps ? *eps
                   : x.dtype() == dtypes::float64 ? std::numeric_limits<double>::epsilon()
                   : x.dtype() == dtypes::float16 ? 0.0009765625
                                                  : double(std::numeric_limits<float>::epsilon());
  return x * ((x * x).mean(axes, true) + e).rsqrt();
}

// torch's F.group_norm on (N, C, *): the channels in `groups` groups, each normalized over its
// channels and the spatial axes with the biased variance, then the per-channel affine.
Tensor Tensor::group_norm(int64_t groups, const std::optional<Tensor>& weight,
                          const std::optional<Tensor>& bias, double eps) const {
  if (ndim() < 2) throw Error("group_norm: needs an input (N, C, *), got " + desc(*this));
  const int64_t n = shape()[0], c = shape()[1];
  if (groups <= 0 || c % groups != 0)
    throw Error("group_norm: " + std::to_string(c) + " channels do not split into " + std::to_string(groups) +
                " groups (input " + desc(*this) + ")");
  const Tensor grouped = reshape({n, groups, -1}).layernorm({-1}, eps).reshape(shape());
  return per_channel_affine(grouped, weight, bias, "group_norm");
}

// torch's F.instance_norm without running statistics: each channel of each sample normalized
// over its spatial axes (group_norm with one channel per group).
Tensor Tensor::instance_norm(const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                             double eps) const {
  if (ndim() < 3) throw Error("instance_norm: needs an input (N, C, *) with spatial axes, got " + desc(*this));
  return group_norm(shape()[1], weight, bias, eps);
}

// "none": x/2 (1 + erf(x / sqrt 2)), torch's default; "tanh": the approximation gelu() computes.
Tensor Tensor::gelu(std::string_view approximate) const {
  if (approximate == "tanh") return gelu();
  if (approximate != "none")
    throw Error("gelu: approximate must be \"none\" or \"tanh\", got \"" + std::string(approximate) + "\"");
  const Tensor x = as_float(*this);
  return x * 0.5 * ((x * std::numbers::sqrt2 / 2).erf() + 1);
}

// torch's F.scaled_dot_product_attention: softmax(q k^T * scale + mask) v over (..., L, E) queries,
// (..., S, E) keys and (..., S, Ev) values. A bool mask keeps where true (-inf elsewhere), a float
// mask adds; is_causal keeps the lower triangle (aligned at the top left, as torch).
Tensor Tensor::scaled_dot_product_attention(const Tensor& key, const Tensor& value,
                                            const std::optional<Tensor>& attn_mask, double dropout_p,
                                            bool is_causal, std::optional<double> scale) const {
  const Tensor& query = *this;
  const std::string_view op = "scaled_dot_product_attention";
  if (query.ndim() < 2 || key.ndim() < 2 || value.ndim() < 2 || query.shape().back() != key.shape().back() ||
      key.shape()[size_t(key.ndim() - 2)] != value.shape()[size_t(value.ndim() - 2)])
    throw Error(std::string(op) + ": needs query (..., L, E), key (..., S, E) and value (..., S, Ev), got " +
                desc(query) + ", " + desc(key) + " and " + desc(value));
  if (is_causal && attn_mask)
    throw Error(std::string(op) + ": takes attn_mask or is_causal, not both");
  const int64_t l = query.shape()[size_t(query.ndim() - 2)], s = key.shape()[size_t(key.ndim() - 2)];
  const double sc = scale ? *scale : 1.0 / std::sqrt(double(query.shape().back()));
  Tensor scores = as_float(query).matmul(as_float(key).transpose(-2, -1)) * sc;
  const double inf = std::numeric_limits<double>::infinity();
  if (is_causal) {
    const Tensor keep = Tensor::ones({l, s}, dtypes::bool_, query.device()).tril();
    scores = keep.where(scores, -inf);
  } else if (attn_mask) {
    scores = attn_mask->dtype().is_bool() ? attn_mask->where(scores, -inf) : scores + *attn_mask;
  }
  if (!(dropout_p >= 0 && dropout_p <= 1))
    throw Error(std::string(op) + ": dropout_p must be in [0, 1], got " + std::to_string(dropout_p));
  // softmax(scores) v as (e v) / sum(e), e = exp(scores - max): the sum is laid out as the
  // matmul's product is, (..., L, Ev, S) summed over S, so it is a second accumulator of the
  // matmul's kernel, and the division is fused after it. Three kernels (scores, their max, the
  // rest) where softmax then matmul takes four.
  const Tensor e = (scores - scores.max(-1, true).detach()).exp();
  Tensor weights = e;
  // As torch, dropout_p applies whether or not Tensor::training is set (a module passes 0 in eval).
  if (dropout_p > 0) {
    if (e.has_symbolic_shape()) guard_drawn_shape(e.sym_shape(), std::string(op) + "'s dropout");
    const Tensor keep = Tensor::rand(e.shape(), dtypes::default_float, query.device()).ge(dropout_p);
    weights = dropout_p == 1 ? keep.where(e * 0, 0) : keep.where(e * (1 / (1 - dropout_p)), 0);
  }
  const Tensor v = as_float(value);
  Shape lifted = e.shape(), spread = e.shape();
  lifted.insert(lifted.end() - 1, 1);
  spread.insert(spread.end() - 1, v.shape().back());
  const Tensor total = e.reshape(lifted).expand(spread).sum(-1);
  return weights.matmul(v) / total;
}

}  // namespace vkg
