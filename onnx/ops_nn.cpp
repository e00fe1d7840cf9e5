// Neural-network operators: MatMul, Gemm, Einsum, Conv, ConvTranspose, pools, normalizations,
// Dropout (inference), LRN and the two losses. Spatial padding is ONNX's (begin..., end...) per
// axis or auto_pad; vkgrad's convolutions and pools pad symmetrically, so uneven padding is
// applied to the input first.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include <vkgrad/onnx/ops.hpp>

namespace vkg::onnx {
namespace {

using Pads = std::vector<std::pair<int64_t, int64_t>>;

std::vector<int64_t> spatial_attr(OpContext& c, const char* name, size_t dims, int64_t fallback) {
  auto v = c.attr_ints(name, std::vector<int64_t>(dims, fallback));
  if (v.size() != dims)
    c.fail(std::string(name) + " holds " + std::to_string(v.size()) + " values for " +
           std::to_string(dims) + " spatial axes");
  // Strides and dilations divide and multiply output sizes (SAME padding divides by the
  // stride): each is 1 or more. output_padding may be 0.
  const int64_t least = std::string_view(name) == "output_padding" ? 0 : 1;
  for (int64_t x : v)
    if (x < least)
      c.fail(std::string(name) + " holds " + std::to_string(x) + "; each must be " +
             std::to_string(least) + " or more");
  return v;
}

// x is (N, C, spatial...) and w (M, C/groups, kernel...): both of the same rank, 3 to 5.
void check_conv_ranks(OpContext& c, const Tensor& x, const Tensor& w) {
  require_rank(c, x, 3, "input X");
  if (w.ndim() != x.ndim())
    c.fail("weight W " + shape_str(w.shape()) + " must have the rank of X " + shape_str(x.shape()));
}

// The (begin, end) padding of each spatial axis: from pads, or from auto_pad (SAME_* keeps
// ceil(in / stride) outputs, the odd element at the end for SAME_UPPER).
Pads spatial_pads(OpContext& c, const Shape& in, const std::vector<int64_t>& k,
                  const std::vector<int64_t>& s, const std::vector<int64_t>& d) {
  const size_t dims = k.size();
  const std::string mode = c.attr_s("auto_pad", "NOTSET");
  Pads p(dims, {0, 0});
  if (mode == "NOTSET") {
    const auto pads = c.attr_ints("pads", std::vector<int64_t>(2 * dims, 0));
    if (pads.size() != 2 * dims)
      c.fail("pads holds " + std::to_string(pads.size()) + " values for " + std::to_string(dims) +
             " spatial axes");
    for (size_t i = 0; i < dims; ++i) p[i] = {pads[i], pads[i + dims]};
  } else if (mode == "SAME_UPPER" || mode == "SAME_LOWER") {
    c.ignore_attr("pads");
    for (size_t i = 0; i < dims; ++i) {
      const int64_t n = in[in.size() - dims + i];
      const int64_t out = (n + s[i] - 1) / s[i];
      const int64_t total = std::max<int64_t>(0, (out - 1) * s[i] + (k[i] - 1) * d[i] + 1 - n);
      const int64_t small = total / 2;
      p[i] =
          mode == "SAME_UPPER" ? std::pair{small, total - small} : std::pair{total - small, small};
    }
  } else if (mode == "VALID") {
    c.ignore_attr("pads");
  } else {
    c.unsupported("auto_pad '" + mode + "'");
  }
  return p;
}

bool symmetric(const Pads& p) {
  return std::all_of(p.begin(), p.end(), [](auto& q) { return q.first == q.second; });
}

// Pads the last p.size() axes of x by p with `value`.
Tensor pad_spatial(const Tensor& x, const Pads& p, Scalarish value) {
  Pads all(size_t(x.ndim()) - p.size(), {0, 0});
  all.insert(all.end(), p.begin(), p.end());
  return x.pad(all, value);
}

Tensor channel_param(const Tensor& p, int64_t rank) {
  Shape s(size_t(rank), 1);
  s[1] = p.numel();
  return p.reshape(s);
}

}  // namespace

// Conv of x by w (and b) with the node's attributes; ConvInteger and QLinearConv call it too.
std::vector<Value> conv_of(OpContext& c, const Tensor& input, const Tensor& w,
                           const std::optional<Tensor>& b) {
  Tensor x = input;
  check_conv_ranks(c, x, w);
  const size_t dims = size_t(x.ndim()) - 2;
  if (dims < 1 || dims > 3) c.unsupported(std::to_string(dims) + "-d convolution");
  const std::vector<int64_t> k(w.shape().begin() + 2, w.shape().end());
  auto ks = c.attr_ints("kernel_shape");
  if (ks && *ks != k)
    c.fail("kernel_shape disagrees with the weight's shape " + shape_str(w.shape()));
  const auto s = spatial_attr(c, "strides", dims, 1), d = spatial_attr(c, "dilations", dims, 1);
  const int64_t groups = c.attr_i("group", 1);
  Pads p = spatial_pads(c, x.shape(), k, s, d);
  std::vector<int64_t> sym(dims);
  if (!symmetric(p)) {
    x = pad_spatial(x, p, 0);
    std::fill(sym.begin(), sym.end(), 0);
  } else {
    for (size_t i = 0; i < dims; ++i) sym[i] = p[i].first;
  }
  if (dims == 2)
    return {x.conv2d(w, b,
                     Conv2dOptions{.stride = Size2(s[0], s[1]),
                                   .padding = Size2(sym[0], sym[1]),
                                   .dilation = Size2(d[0], d[1]),
                                   .groups = groups})};
  ConvOptions o{
      .stride = s, .padding = sym, .dilation = d, .output_padding = {0}, .groups = groups};
  return {dims == 1 ? x.conv1d(w, b, o) : x.conv3d(w, b, o)};
}

namespace {

std::vector<Value> conv(OpContext& c) { return conv_of(c, c.in(0), c.in(1), c.opt(2)); }

// ConvTranspose: the full transposed convolution, then output_padding appended and the pads cut
// from each end (pads from output_shape or auto_pad as ONNX defines them).
std::vector<Value> conv_transpose(OpContext& c) {
  const Tensor x = c.in(0), w = c.in(1);
  const auto b = c.opt(2);
  check_conv_ranks(c, x, w);
  const size_t dims = size_t(x.ndim()) - 2;
  if (dims < 1 || dims > 3) c.unsupported(std::to_string(dims) + "-d transposed convolution");
  const std::vector<int64_t> k(w.shape().begin() + 2, w.shape().end());
  c.ignore_attr("kernel_shape");
  const auto s = spatial_attr(c, "strides", dims, 1), d = spatial_attr(c, "dilations", dims, 1);
  auto op = spatial_attr(c, "output_padding", dims, 0);
  const int64_t groups = c.attr_i("group", 1);
  const std::string mode = c.attr_s("auto_pad", "NOTSET");
  Pads p(dims, {0, 0});
  const auto out_shape = c.attr_ints("output_shape");
  if (out_shape && out_shape->size() < dims)
    c.fail("output_shape holds " + std::to_string(out_shape->size()) + " values for " +
           std::to_string(dims) + " spatial axes");
  for (size_t i = 0; i < dims; ++i) {
    const int64_t n = x.shape()[2 + i];
    const int64_t full = (n - 1) * s[i] + (k[i] - 1) * d[i] + 1 + op[i];
    if (out_shape || mode == "SAME_UPPER" || mode == "SAME_LOWER") {
      const int64_t want = out_shape ? (*out_shape)[out_shape->size() - dims + i] : n * s[i];
      const int64_t total = full - want;
      const bool upper = mode != "SAME_LOWER";
      p[i] =
          upper ? std::pair{total / 2, total - total / 2} : std::pair{total - total / 2, total / 2};
    }
  }
  if (!out_shape && mode == "NOTSET") {
    const auto pads = c.attr_ints("pads", std::vector<int64_t>(2 * dims, 0));
    if (pads.size() != 2 * dims) c.fail("pads holds " + std::to_string(pads.size()) + " values");
    for (size_t i = 0; i < dims; ++i) p[i] = {pads[i], pads[i + dims]};
  } else {
    c.ignore_attr("pads");
  }
  if (mode != "NOTSET" && mode != "SAME_UPPER" && mode != "SAME_LOWER" && mode != "VALID")
    c.unsupported("auto_pad '" + mode + "'");
  Tensor y = [&] {
    if (dims == 2)
      return x.conv_transpose2d(w, std::nullopt,
                                ConvTranspose2dOptions{.stride = Size2(s[0], s[1]),
                                                       .padding = 0,
                                                       .output_padding = 0,
                                                       .dilation = Size2(d[0], d[1]),
                                                       .groups = groups});
    ConvOptions o{.stride = s,
                  .padding = std::vector<int64_t>(dims, 0),
                  .dilation = d,
                  .output_padding = std::vector<int64_t>(dims, 0),
                  .groups = groups};
    return dims == 1 ? x.conv_transpose1d(w, std::nullopt, o)
                     : x.conv_transpose3d(w, std::nullopt, o);
  }();
  Pads trim(dims);
  for (size_t i = 0; i < dims; ++i) trim[i] = {-p[i].first, op[i] - p[i].second};
  y = pad_spatial(y, trim, 0);
  if (b) y = y + channel_param(*b, y.ndim());
  return {y};
}

// MaxPool and AveragePool. Strides default to 1 (not the kernel, as torch's).
OpFn pool(bool max) {
  return [max](OpContext& c) -> std::vector<Value> {
    Tensor x = c.in(0);
    const auto ks = c.attr_ints("kernel_shape");
    if (!ks) c.fail("attribute 'kernel_shape' is required");
    const auto k = *ks;
    const size_t dims = k.size();
    if (dims < 1 || dims > 3) c.unsupported(std::to_string(dims) + "-d pooling");
    if (x.ndim() != int64_t(dims) + 2)
      c.fail("input " + shape_str(x.shape()) + " must have rank " + std::to_string(dims + 2) +
             " for a " + std::to_string(dims) + "-d kernel_shape");
    for (int64_t v : k)
      if (v < 1) c.fail("kernel_shape holds " + std::to_string(v));
    const auto s = spatial_attr(c, "strides", dims, 1), d = spatial_attr(c, "dilations", dims, 1);
    const bool ceil = c.attr_i("ceil_mode", 0) != 0;
    const bool include_pad = c.attr_i("count_include_pad", 0) != 0;
    const bool column_major = c.attr_i("storage_order", 0) != 0;
    if (column_major && k.size() != 2) c.unsupported("storage_order = 1 outside 2-d pooling");
    Pads p = spatial_pads(c, x.shape(), k, s, d);
    PoolOptions o{.kernel = k,
                  .stride = s,
                  .padding = std::vector<int64_t>(dims, 0),
                  .dilation = d,
                  .ceil_mode = ceil,
                  .count_include_pad = include_pad};
    // vkgrad pools pad evenly by at most half the kernel (torch's rule); other pads go on first.
    bool even = symmetric(p);
    for (size_t i = 0; i < dims; ++i) even = even && 2 * p[i].first <= k[i];
    if (even)
      for (size_t i = 0; i < dims; ++i) o.padding[i] = p[i].first;
    if (max) {
      if (!even) {
        if (c.node().output_size() > 1) c.unsupported("Indices with uneven pads");
        const double lowest = x.dtype().is_float() ? -std::numeric_limits<double>::infinity()
                                                   : dtypes::min_value(x.dtype());
        return {
            pad_spatial(x, p, x.dtype().is_float() ? Scalarish(lowest) : Scalarish(int64_t(lowest)))
                .max_pool(o)};
      }
      if (c.node().output_size() < 2 || c.node().output(1).empty()) return {x.max_pool(o)};
      auto [v, idx] = x.max_pool_with_indices(o);
      // ONNX's indices count over the whole tensor (N, C and the pooled axes), torch's over the
      // pooled axes: add each (n, c) plane's offset.
      int64_t plane = 1;
      for (size_t i = 0; i < dims; ++i) plane *= x.shape()[x.shape().size() - dims + i];
      const int64_t planes = x.numel() / std::max<int64_t>(plane, 1);
      Shape lead(x.shape().begin(), x.shape().end() - int64_t(dims));
      Shape ones = lead;
      ones.insert(ones.end(), dims, 1);
      const Tensor offset =
          (Tensor::arange(0, planes, 1, x.device()).cast(dtypes::int64) * plane).reshape(ones);
      Tensor i = idx.cast(dtypes::int64);
      if (column_major) {  // (h, w) counts as w * H + h
        const int64_t ih = x.shape()[x.shape().size() - 2], iw = x.shape().back();
        const Tensor wd = Tensor::full({}, iw, dtypes::int64, x.device());
        i = i.mod(wd) * ih + i.idiv(wd);
      }
      return {v, i + offset};
    }
    if (even) return {x.avg_pool(o)};
    // Uneven padding: the padded sums over the count of what each window covers.
    const Tensor sums = pad_spatial(x, p, 0).avg_pool(o);
    if (include_pad) return {sums};
    const Tensor ones = pad_spatial(Tensor::ones_like(x), p, 0).avg_pool(o);
    return {sums / ones};
  };
}

OpFn global_pool(bool max) {
  return [max](OpContext& c) -> std::vector<Value> {
    const Tensor x = c.in(0);
    std::vector<int64_t> axes;
    for (int64_t a = 2; a < x.ndim(); ++a) axes.push_back(a);
    return {max ? x.max(axes, true) : x.mean(axes, true)};
  };
}

std::vector<Value> batch_norm(OpContext& c) {
  const Tensor x = c.in(0), scale = c.in(1), bias = c.in(2), mean = c.in(3), var = c.in(4);
  const double eps = c.attr_f("epsilon", 1e-5f);
  const double momentum = c.attr_f("momentum", 0.9f);
  for (const char* old : {"spatial", "is_test", "consumed_inputs"}) c.ignore_attr(old);
  require_rank(c, x, 2, "input X");  // (N, C, ...): the parameters are per channel
  const int64_t r = x.ndim();
  const bool training = c.attr_i("training_mode", 0) != 0;
  if (!training) {
    const Tensor inv = (channel_param(var, r) + eps).rsqrt();
    return {(x - channel_param(mean, r)) * inv * channel_param(scale, r) + channel_param(bias, r)};
  }
  std::vector<int64_t> axes{0};
  for (int64_t a = 2; a < r; ++a) axes.push_back(a);
  const Tensor bm = x.mean(axes), bv = x.var(axes, false, 0);
  const Tensor y =
      (x - channel_param(bm, r)) * (channel_param(bv, r) + eps).rsqrt() * channel_param(scale, r) +
      channel_param(bias, r);
  return {y, mean * momentum + bm * (1 - momentum), var * momentum + bv * (1 - momentum)};
}

std::vector<Value> instance_norm(OpContext& c) {
  return {c.in(0).instance_norm(c.in(1), c.in(2), c.attr_f("epsilon", 1e-5f))};
}

// LayerNormalization normalizes over the axes from `axis` on; Mean and InvStdDev keep them as 1s.
std::vector<Value> layer_norm(OpContext& c) {
  const Tensor x = c.in(0);
  const int64_t axis = axis_of(c, c.attr_i("axis", -1), x.ndim());
  const double eps = c.attr_f("epsilon", 1e-5f);
  if (c.attr_i("stash_type", 1) != 1) c.unsupported("stash_type other than float32");
  std::vector<int64_t> axes;
  for (int64_t a = axis; a < x.ndim(); ++a) axes.push_back(a);
  const Tensor xf = x.cast(dtypes::float32);
  const Tensor mean = xf.mean(axes, true);
  const Tensor inv = ((xf - mean).square().mean(axes, true) + eps).rsqrt();
  Tensor y = ((xf - mean) * inv).cast(x.dtype()) * c.in(1);
  if (c.has(2)) y = y + c.in(2);
  return {y, mean, inv};
}

// LRN: x / (bias + alpha / size * (sum of squares over `size` neighbouring channels))^beta.
std::vector<Value> lrn(OpContext& c) {
  const Tensor x = c.in(0);
  require_rank(c, x, 2, "input X");  // (N, C, ...): the window runs over channels
  const int64_t size = c.attr_i("size", 1);
  if (size < 1) c.fail("size is " + std::to_string(size) + "; it must be 1 or more");
  const double alpha = c.attr_f("alpha", 1e-4f), beta = c.attr_f("beta", 0.75f),
               bias = c.attr_f("bias", 1.0f);
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  const int64_t ch = x.shape()[1];
  Pads p(size_t(x.ndim()), {0, 0});
  p[1] = {before, after};
  const Tensor sq = x.square().pad(p);
  std::optional<Tensor> sum;
  for (int64_t i = 0; i < size; ++i) {
    std::vector<std::pair<int64_t, int64_t>> range;
    for (int64_t a = 0; a < x.ndim(); ++a)
      range.push_back(a == 1 ? std::pair{i, i + ch} : std::pair{int64_t(0), x.shape()[size_t(a)]});
    const Tensor part = sq.shrink(range);
    sum = sum ? *sum + part : part;
  }
  return {x / (*sum * (alpha / double(size)) + bias).pow(beta)};
}

std::vector<Value> dropout(OpContext& c) {
  const Tensor x = c.in(0);
  c.ignore_attr("seed");
  c.ignore_attr("is_test");
  c.attr_f("ratio", 0.5f);
  const bool training = c.has(2) && c.int_in(2) != 0;
  // The ratio matters only in training (no mask otherwise): not read, so no sync, in inference.
  const double ratio = training && c.has(1) ? c.double_in(1) : 0.5;
  if (training && ratio > 0) c.unsupported("training_mode with a ratio above 0 (random masks)");
  // The mask is bool from opset 10; before, it has the input's dtype.
  return {x, Tensor::ones(x.shape(), c.opset() >= 10 ? dtypes::bool_ : x.dtype(), x.device())};
}

std::vector<Value> matmul(OpContext& c) { return {c.in(0).matmul(c.in(1))}; }

std::vector<Value> gemm(OpContext& c) {
  Tensor a = c.in(0), b = c.in(1);
  const double alpha = c.attr_f("alpha", 1.0f), beta = c.attr_f("beta", 1.0f);
  if (c.attr_i("transA", 0)) a = a.transpose();
  if (c.attr_i("transB", 0)) b = b.transpose();
  c.ignore_attr("broadcast");
  Tensor y = a.matmul(b);
  if (alpha != 1.0) y = y * alpha;
  if (c.has(2)) y = y + (beta == 1.0 ? c.in(2) : c.in(2) * beta);
  return {y};
}

std::vector<Value> einsum(OpContext& c) {
  std::string eq = c.attr_s("equation", "");
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  std::vector<Tensor> ops;
  for (size_t i = 0; i < c.num_inputs(); ++i) ops.push_back(c.in(i));
  return {Tensor::einsum(eq, ops)};
}

std::vector<Value> mean_variance_norm(OpContext& c) {
  const Tensor x = c.in(0);
  const auto axes = c.attr_ints("axes", {0, 2, 3});
  const Tensor mean = x.mean(axes, true);
  const Tensor var = (x - mean).square().mean(axes, true);
  return {(x - mean) / (var.sqrt() + 1e-9)};
}

Reduction reduction_of(OpContext& c) {
  const std::string r = c.attr_s("reduction", "mean");
  if (r == "mean") return Reduction::Mean;
  if (r == "sum") return Reduction::Sum;
  if (r == "none") return Reduction::None;
  c.fail("reduction must be mean, sum or none, not '" + r + "'");
}

// Without ignore_index every target counts: a value no class index can take.
constexpr int64_t kNoIgnore = std::numeric_limits<int32_t>::min();

std::vector<Value> nll_loss(OpContext& c) {
  return {
      c.in(0).nll_loss(c.in(1), c.opt(2), c.attr_i("ignore_index", kNoIgnore), reduction_of(c))};
}

std::vector<Value> softmax_cross_entropy(OpContext& c) {
  const Tensor logp = c.in(0).log_softmax(1);
  const Tensor loss =
      logp.nll_loss(c.in(1), c.opt(2), c.attr_i("ignore_index", kNoIgnore), reduction_of(c));
  return {loss, logp};
}

}  // namespace

void add_nn_ops(OpTable& t) {
  t["MatMul"] = matmul;
  t["Gemm"] = gemm;
  t["Einsum"] = einsum;
  t["Conv"] = conv;
  t["ConvTranspose"] = conv_transpose;
  t["MaxPool"] = pool(true);
  t["AveragePool"] = pool(false);
  t["GlobalMaxPool"] = global_pool(true);
  t["GlobalAveragePool"] = global_pool(false);
  t["BatchNormalization"] = batch_norm;
  t["InstanceNormalization"] = instance_norm;
  t["LayerNormalization"] = layer_norm;
  t["LRN"] = lrn;
  t["Dropout"] = dropout;
  t["MeanVarianceNormalization"] = mean_variance_norm;
  t["NegativeLogLikelihoodLoss"] = nll_loss;
  t["SoftmaxCrossEntropyLoss"] = softmax_cross_entropy;
}

}  // namespace vkg::onnx
