// nn functional ops: linear, convolutions, pooling, normalizations, embedding. As tinygrad, a
// convolution is a pooling view of the input (movement ops only: no im2col copy) times the weight,
// summed over (cin/groups, ky, kx): the forward pass is one fused reduce kernel, and its gradient
// is that of the movement ops, a multiply and a sum.
#include <cmath>
#include <limits>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/gradient.hpp>
#include <vkgrad/core/index_check.hpp>
#include <vkgrad/core/int_math.hpp>
#include <vkgrad/core/tensor.hpp>
#include <vkgrad/core/tensor_pool.hpp>

namespace vkg {

namespace {

using Pads = std::vector<std::pair<int64_t, int64_t>>;

std::string desc(const Tensor& t) { return shape_str(t.shape()) + " " + t.dtype().name(); }

std::string size2_str(Size2 s) {
  return "(" + std::to_string(s.h) + ", " + std::to_string(s.w) + ")";
}

void check_device(const Tensor& a, const Tensor& b, std::string_view op) {
  if (a.device() != b.device())
    throw Error(std::string(op) + ": tensors are on different devices (" + a.device() + " and " +
                b.device() + ")");
}

// Pads (positive) or trims (negative) each dimension: a convolution transpose's implicit padding
// can be negative.
Tensor pad_or_trim(const Tensor& x, const Pads& pads) {
  Pads grow, trim;
  for (size_t d = 0; d < pads.size(); ++d) {
    const auto [b, a] = pads[d];
    grow.emplace_back(std::max<int64_t>(b, 0), std::max<int64_t>(a, 0));
  }
  const Tensor grown = x.pad(grow);
  for (size_t d = 0; d < pads.size(); ++d) {
    const auto [b, a] = pads[d];
    const int64_t n = grown.shape()[d];
    trim.emplace_back(std::max<int64_t>(-b, 0), n - std::max<int64_t>(-a, 0));
  }
  return grown.shrink(trim);
}

// Whether convolve lays both operands out channels-last (see there): the input channels of a
// group fill vec4s and the convolution is big enough to pay for two more kernels.
bool takes_channels_last(int64_t cin_per_group, double multiply_adds) {
  return cin_per_group % 4 == 0 && multiply_adds >= double(1 << 22);
}

// The convolution both conv2d and conv_transpose2d end in; `pads` are (before, after) per
// spatial dimension and may be negative (a trim).
Tensor convolve(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias, Size2 stride,
                Size2 dilation, int64_t groups, const Pads& spatial_pads, std::string_view op) {
  const int64_t bs = x.shape()[0], cin = w.shape()[1], cout = w.shape()[0];
  const int64_t kh = w.shape()[2], kw = w.shape()[3];
  Pads pads{{0, 0}, {0, 0}, spatial_pads[0], spatial_pads[1]};
  // Both operands channels-last (NHWC) in memory where the channels fill vec4s: the reduce over
  // (channel, ky, kx) then reads four channels per load instruction, which Lavapipe runs as a
  // loop over the lanes (beautiful_mnist's conv2 at batch 512: forward 0.77 -> 0.48, input
  // gradient 1.09 -> 0.71 CPU s, the copies included). Not for small convolutions, where two
  // more kernel launches cost more than the loads save.
  const int64_t rows = (x.shape()[2] + pads[2].first + pads[2].second) / stride.h;
  const int64_t columns = (x.shape()[3] + pads[3].first + pads[3].second) / stride.w;
  const double multiply_adds =  // in double: a product of six dimensions may pass int64
      double(bs) * double(cout) * double(cin) * double(kh * kw) * double(rows) * double(columns);
  const bool channels_last = takes_channels_last(cin, multiply_adds);
  const Tensor xl = channels_last ? x.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2}) : x;
  const Tensor wl = channels_last ? w.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2}) : w;
  const Tensor padded = pad_or_trim(xl, pads);
  const int64_t ph = padded.shape()[2], pw = padded.shape()[3];
  if (ph < (kh - 1) * dilation.h + 1 || pw < (kw - 1) * dilation.w + 1)
    throw Error(std::string(op) + ": the padded input (" + std::to_string(ph) + ", " +
                std::to_string(pw) + ") is smaller than the dilated kernel (input " + desc(x) +
                ", weight " + desc(w) + ")");
  // (bs, groups*cin, oy, ox, kh, kw) -> (bs, groups, rcout, oy, ox, cin, kh, kw) by broadcasting.
  const Tensor windows = pool(padded, {kh, kw}, {stride.h, stride.w}, {dilation.h, dilation.w});
  const int64_t oy = windows.shape()[2], ox = windows.shape()[3], rcout = cout / groups;
  const Tensor xs =
      windows.reshape({bs, groups, cin, 1, oy, ox, kh, kw}).permute({0, 1, 3, 4, 5, 2, 6, 7});
  const Tensor ws = wl.reshape({1, groups, rcout, 1, 1, cin, kh, kw});
  const DType out = promote(x.dtype(), w.dtype());
  Tensor ret = (xs * ws).sum({-1, -2, -3}).reshape({bs, cout, oy, ox}).cast(out);
  if (bias) ret = ret + bias->reshape({1, cout, 1, 1});
  return ret;
}

void check_bias(const std::optional<Tensor>& bias, int64_t channels, const Tensor& x,
                const Tensor& w, std::string_view op) {
  if (!bias) return;
  check_device(x, *bias, op);
  if (bias->shape() != Shape{channels})
    throw Error(std::string(op) + ": bias " + desc(*bias) + " must have shape (" +
                std::to_string(channels) + ",) (input " + desc(x) + ", weight " + desc(w) + ")");
}

void check_positive(Size2 v, std::string_view what, std::string_view op, const Tensor& x) {
  if (v.h <= 0 || v.w <= 0)
    throw Error(std::string(op) + ": " + std::string(what) + " " + size2_str(v) +
                " must be positive (input " + desc(x) + ")");
}

void check_not_negative(Size2 v, std::string_view what, std::string_view op, const Tensor& x) {
  if (v.h < 0 || v.w < 0)
    throw Error(std::string(op) + ": " + std::string(what) + " " + size2_str(v) +
                " must not be negative (input " + desc(x) + ")");
}

// The (N, C, H, W) and weight checks conv2d and conv_transpose2d share.
void check_conv_args(const Tensor& x, const Tensor& w, int64_t groups, std::string_view op) {
  check_device(x, w, op);
  if (x.ndim() != 4 || w.ndim() != 4)
    throw Error(std::string(op) + ": needs a 4-D input (N, C, H, W) and a 4-D weight, got input " +
                desc(x) + " and weight " + desc(w));
  if (groups <= 0)
    throw Error(std::string(op) + ": groups must be positive, got " + std::to_string(groups) +
                " (input " + desc(x) + ", weight " + desc(w) + ")");
}

}  // namespace

Tensor Tensor::linear(const Tensor& weight, const std::optional<Tensor>& bias) const {
  check_device(*this, weight, "linear");
  if (weight.ndim() != 2 || ndim() < 1 || shape().back() != weight.shape()[1])
    throw Error("linear: weight " + desc(weight) +
                " must be (out, in) with in equal to the input's last dimension (input " +
                desc(*this) + ")");
  check_bias(bias, weight.shape()[0], *this, weight, "linear");
  if (has_symbolic_shape() || weight.has_symbolic_shape()) {
    const Tensor y = dot(weight.transpose());
    return bias ? y + *bias : y;
  }
  // dot()'s product with the weight as it is stored, (..., 1, in) * (out, in) summed over in:
  // the same kernel, and the weight's gradient is a reduce in the weight's own layout. Through
  // dot(weight.transpose()) it came out transposed, and the optimizer's elementwise updates read
  // it with a stride (an MLP's Adam step on Lavapipe: 3 kernels over the 784x128 weight).
  Shape xs = shape();
  xs.insert(xs.end() - 1, 1);
  const Tensor y = (reshape(xs) * weight).sum(-1).cast(promote(dtype(), weight.dtype()));
  return bias ? y + *bias : y;
}

namespace {

// A convolution's output whose input gradient is the transposed convolution of the output's
// gradient: one reduce over (cout / groups, kh, kw) per input element. The gradient derived
// through the pooling movement ops instead writes every window's gradient out (kh * kw times the
// input) and sums the overlapping windows back, several times slower on every device. The
// weight's gradient stays the derived one (a reduce over batch and output positions, already
// one fused kernel).
UOpPtr with_conv_input_gradient(const Tensor& out, const Tensor& x, const Tensor& w,
                                Conv2dOptions o) {
  // The input rows and columns past the last window: (padded size - dilated kernel) mod stride,
  // always below the stride, so the transposed convolution takes them as its output_padding.
  const int64_t kh = w.shape()[2], kw = w.shape()[3];
  const Size2 extra{(x.shape()[2] + 2 * o.padding.h - (kh - 1) * o.dilation.h - 1) % o.stride.h,
                    (x.shape()[3] + 2 * o.padding.w - (kw - 1) * o.dilation.w - 1) % o.stride.w};
  const UOpPtr value = out.node(), xn = x.node(), wn = w.node();
  const DType x_dtype = x.dtype();
  // convolve's choice for conv_transpose2d's convolution: its input channels are this one's
  // outputs per group, its padded input (eh, ew) larger than this one's input. Only where that
  // convolution runs (the input wants a gradient): the weight gradient alone reads the output
  // gradient faster as it is (beautiful_mnist's first layer).
  const int64_t eh = (kh - 1) * o.dilation.h, ew = (kw - 1) * o.dilation.w;
  const int64_t cout_per_group = w.shape()[0] / o.groups;
  const bool cl_grad =
      o.stride.h == 1 && o.stride.w == 1 && x_dtype.is_float() &&
      takes_channels_last(cout_per_group, double(x.shape()[0]) * double(x.shape()[1]) *
                                              double(cout_per_group) * double(kh * kw) *
                                              double(x.shape()[2] + eh) *
                                              double(x.shape()[3] + ew)) &&
      x.requires_grad();
  return with_custom_gradient(
      value, {xn, wn}, [=](const Tensor& grad) -> std::vector<std::optional<Tensor>> {
        // Both gradients read every element of the output's gradient kh * kw (or batch) times:
        // computed once into a buffer, not recomputed per read where it is a long elementwise chain
        // (a batchnorm's and a relu's backward, say).
        // Channels-last where the input gradient's convolution copies it so (stride 1: its input
        // is this gradient, not a dilation of it): that copy is then this buffer in order, no
        // kernel (core/schedule.cpp), and the weight gradient reads it as well.
        const Tensor g = cl_grad ? grad.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2})
                                 : grad.contiguous();
        const auto dw = compute_gradient(GradientRequest{value, g.node(), {wn.get()}, {}});
        std::optional<Tensor> dx;
        if (x_dtype.is_float())
          dx = g.conv_transpose2d(Tensor(wn), std::nullopt,
                                  {.stride = o.stride,
                                   .padding = o.padding,
                                   .output_padding = extra,
                                   .dilation = o.dilation,
                                   .groups = o.groups})
                   .cast(x_dtype);
        auto it = dw.find(wn.get());
        return {dx, it == dw.end() ? std::nullopt : std::optional<Tensor>(Tensor(it->second))};
      });
}

}  // namespace

Tensor Tensor::conv2d(const Tensor& weight, const std::optional<Tensor>& bias,
                      Conv2dOptions o) const {
  check_conv_args(*this, weight, o.groups, "conv2d");
  const int64_t cin = shape()[1], cout = weight.shape()[0];
  if (cin != o.groups * weight.shape()[1] || cout % o.groups != 0)
    throw Error("conv2d: input channels " + std::to_string(cin) + " and weight " + desc(weight) +
                " do not match for " + std::to_string(o.groups) +
                " group(s): the weight needs (Cout, Cin/groups, KH, KW) with Cout divisible "
                "by groups (input " +
                desc(*this) + ")");
  check_positive(o.stride, "stride", "conv2d", *this);
  check_positive(o.dilation, "dilation", "conv2d", *this);
  check_not_negative(o.padding, "padding", "conv2d", *this);
  check_bias(bias, cout, *this, weight, "conv2d");
  Tensor out = convolve(*this, weight, std::nullopt, o.stride, o.dilation, o.groups,
                        {{o.padding.h, o.padding.h}, {o.padding.w, o.padding.w}}, "conv2d");
  out = Tensor(with_conv_input_gradient(out, *this, weight, o));
  if (bias) out = out + bias->reshape({1, cout, 1, 1});
  return out;
}

// As tinygrad: the stride dilates the input (each element followed by stride-1 zeros, by a pad
// and a reshape), the kernel is flipped with its in and out channels swapped per group, and a
// stride-1 convolution with padding (k-1)*d - p (plus output_padding after) finishes it.
Tensor Tensor::conv_transpose2d(const Tensor& weight, const std::optional<Tensor>& bias,
                                ConvTranspose2dOptions o) const {
  check_conv_args(*this, weight, o.groups, "conv_transpose2d");
  const int64_t cin = shape()[1], g = o.groups;
  if (weight.shape()[0] != cin || cin % g != 0)
    throw Error("conv_transpose2d: input channels " + std::to_string(cin) + " and weight " +
                desc(weight) + " do not match for " + std::to_string(g) +
                " group(s): the weight needs (Cin, Cout/groups, KH, KW) with Cin divisible by "
                "groups (input " +
                desc(*this) + ")");
  check_positive(o.stride, "stride", "conv_transpose2d", *this);
  check_positive(o.dilation, "dilation", "conv_transpose2d", *this);
  check_not_negative(o.padding, "padding", "conv_transpose2d", *this);
  check_not_negative(o.output_padding, "output_padding", "conv_transpose2d", *this);
  if ((o.output_padding.h >= o.stride.h && o.output_padding.h >= o.dilation.h) ||
      (o.output_padding.w >= o.stride.w && o.output_padding.w >= o.dilation.w))
    throw Error("conv_transpose2d: output_padding " + size2_str(o.output_padding) +
                " must be smaller than the stride " + size2_str(o.stride) + " or the dilation " +
                size2_str(o.dilation) + " (input " + desc(*this) + ")");
  const int64_t cout = weight.shape()[1] * g, kh = weight.shape()[2], kw = weight.shape()[3];
  check_bias(bias, cout, *this, weight, "conv_transpose2d");
  const Tensor w = weight.unflatten(0, {g, cin / g}).transpose(1, 2).flip({3, 4}).flatten(0, 1);
  Tensor x = *this;
  if (o.stride.h > 1 || o.stride.w > 1) {
    const int64_t n = shape()[0], h = shape()[2], wd = shape()[3];
    x = x.reshape({n, cin, h, 1, wd, 1})
            .pad({{0, 0}, {0, 0}, {0, 0}, {0, o.stride.h - 1}, {0, 0}, {0, o.stride.w - 1}})
            .reshape({n, cin, h * o.stride.h, wd * o.stride.w})
            .shrink({{0, n},
                     {0, cin},
                     {0, h * o.stride.h - (o.stride.h - 1)},
                     {0, wd * o.stride.w - (o.stride.w - 1)}});
  }
  const int64_t eh = (kh - 1) * o.dilation.h, ew = (kw - 1) * o.dilation.w;
  const int64_t out_h =
      (shape()[2] - 1) * o.stride.h - 2 * o.padding.h + eh + o.output_padding.h + 1;
  const int64_t out_w =
      (shape()[3] - 1) * o.stride.w - 2 * o.padding.w + ew + o.output_padding.w + 1;
  if (out_h <= 0 || out_w <= 0)
    throw Error("conv_transpose2d: the output would be (" + std::to_string(out_h) + ", " +
                std::to_string(out_w) + "): padding " + size2_str(o.padding) +
                " is too large (input " + desc(*this) + ", weight " + desc(weight) + ")");
  return convolve(x, w, bias, 1, o.dilation, g,
                  {{eh - o.padding.h, eh - o.padding.h + o.output_padding.h},
                   {ew - o.padding.w, ew - o.padding.w + o.output_padding.w}},
                  "conv_transpose2d");
}

namespace {

// The windows of a pooling op: the input padded with `fill` on both sides, pooled over the last
// two dimensions to (..., oy, ox, kh, kw).
Tensor pool2d_windows(const Tensor& x, const Pool2dOptions& o, Scalarish fill,
                      std::string_view op) {
  if (x.ndim() != 3 && x.ndim() != 4)
    throw Error(std::string(op) + ": needs a 3-D (C, H, W) or 4-D (N, C, H, W) input, got " +
                desc(x));
  const Size2 stride = o.stride.value_or(o.kernel);
  check_positive(o.kernel, "kernel", op, x);
  check_positive(stride, "stride", op, x);
  check_positive(o.dilation, "dilation", op, x);
  check_not_negative(o.padding, "padding", op, x);
  if (o.padding.h * 2 > o.kernel.h || o.padding.w * 2 > o.kernel.w)
    throw Error(std::string(op) + ": padding " + size2_str(o.padding) +
                " must be at most half the kernel " + size2_str(o.kernel) + " (input " + desc(x) +
                ")");
  const int64_t h = x.shape()[size_t(x.ndim() - 2)] + 2 * o.padding.h;
  const int64_t w = x.shape()[size_t(x.ndim() - 1)] + 2 * o.padding.w;
  if (h < (o.kernel.h - 1) * o.dilation.h + 1 || w < (o.kernel.w - 1) * o.dilation.w + 1)
    throw Error(std::string(op) + ": the kernel " + size2_str(o.kernel) + " with dilation " +
                size2_str(o.dilation) + " is larger than the padded input (" + std::to_string(h) +
                ", " + std::to_string(w) + ") (input " + desc(x) + ")");
  Pads pads(size_t(x.ndim() - 2), {0, 0});
  pads.emplace_back(o.padding.h, o.padding.h);
  pads.emplace_back(o.padding.w, o.padding.w);
  return pool(x.pad(pads, fill), {o.kernel.h, o.kernel.w}, {stride.h, stride.w},
              {o.dilation.h, o.dilation.w});
}

}  // namespace

Tensor Tensor::max_pool2d(Pool2dOptions o) const {
  // Padding never wins the max: -inf for floats, the smallest value for integers.
  const Scalarish fill = dtype().is_float() ? Scalarish(-std::numeric_limits<double>::infinity())
                                            : Scalarish(int64_t(dtypes::min_value(dtype())));
  const Tensor windows = pool2d_windows(*this, o, fill, "max_pool2d");
  const Tensor out = windows.max({-2, -1});
  if (!dtype().is_float()) return out;
  // The derived gradient would split among ties; torch sends it to the first maximum of each
  // window, which a running count of hits finds (a nan is the maximum where there is one).
  const UOpPtr wn = windows.node(), on = out.node();
  return Tensor(with_custom_gradient(
      on, {wn}, [wn, on](const Tensor& g) -> std::vector<std::optional<Tensor>> {
        const Tensor w(wn);
        const Shape& s = w.shape();
        Shape flat(s.begin(), s.end() - 2), one = flat;
        flat.push_back(s[s.size() - 2] * s.back());
        one.push_back(1);
        const Tensor x = w.reshape(flat);
        const Tensor hit = x.eq(Tensor(on).reshape(one)).logical_or(x.isnan());
        const Tensor first = hit.logical_and(hit.cast(dtypes::int32).cumsum(-1).eq(1));
        return {first.where(g.reshape(one).expand(flat), 0).reshape(s)};
      }));
}

Tensor Tensor::avg_pool2d(Pool2dOptions o) const {
  return pool2d_windows(*this, o, 0, "avg_pool2d").mean({-2, -1});
}

Tensor Tensor::layernorm(Axes axes, double eps) const {
  for (int64_t a : axes.list) normalize_axis(a, shape(), "layernorm");  // errors name layernorm
  const Tensor x = dtype().is_float() ? *this : cast(dtypes::default_float);
  const Tensor centered = x - x.mean(axes, true);
  const Tensor variance = (centered * centered).mean(axes, true);
  return centered * (variance + eps).sqrt().reciprocal();
}

Tensor Tensor::batchnorm(const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                         const Tensor& mean, const Tensor& invstd, int64_t axis) const {
  const int a = normalize_axis(axis, shape(), "batchnorm");
  const int64_t c = shape()[size_t(a)];
  Shape along(shape().size(), 1);
  along[size_t(a)] = c;
  auto check = [&](const Tensor& t, std::string_view name) {
    check_device(*this, t, "batchnorm");
    if (t.shape() != Shape{c})
      throw Error("batchnorm: " + std::string(name) + " " + desc(t) + " must have shape (" +
                  std::to_string(c) + ",), the size of axis " + std::to_string(axis) +
                  " of the input " + desc(*this));
    return t.reshape(along);
  };
  Tensor x = *this - check(mean, "mean");
  if (weight) x = x * check(*weight, "weight");
  x = x * check(invstd, "invstd");
  return bias ? x + check(*bias, "bias") : x;
}

// Sliding windows over the last k.size() dimensions: (..., i0, i1) becomes (..., o0, o1, k0, k1)
// where out[..., y, x, ky, kx] = in[..., y*s0 + ky*d0, x*s1 + kx*d1], from movement ops alone
// (tinygrad's _pool). Windows that do not overlap (k <= s, no dilation) are a reshape and a
// shrink. Overlapping ones tile the input, view the tiles with a row length one element longer
// (i*f + d) so that row ky starts ky*d elements further in, and shrink the strides away; the
// index math that results folds to y*s + ky*d in the symbolic engine.
Tensor pool(const Tensor& x, const std::vector<int64_t>& k, const std::vector<int64_t>& s,
            const std::vector<int64_t>& dil) {
  const size_t nk = k.size(), lead = size_t(x.ndim()) - nk;
  const Shape in(x.shape().end() - int64_t(nk), x.shape().end());
  Shape noop(x.shape().begin(), x.shape().begin() + int64_t(lead));
  std::vector<int64_t> o(nk);
  for (size_t j = 0; j < nk; ++j) o[j] = ceil_div(in[j] - dil[j] * (k[j] - 1), s[j]);
  using Pads = std::vector<std::pair<int64_t, int64_t>>;
  auto ranges_of = [&](const Shape& shape) {
    Pads r;
    for (int64_t d : shape) r.emplace_back(0, d);
    return r;
  };
  std::vector<int64_t> order(lead);
  for (size_t j = 0; j < lead; ++j) order[j] = int64_t(j);
  bool overlapping = false;
  for (size_t j = 0; j < nk; ++j) overlapping |= k[j] > s[j] || dil[j] != 1;
  if (overlapping) {
    std::vector<int64_t> f(nk), row(nk), reps(lead, 1);
    for (size_t j = 0; j < nk; ++j) {
      f[j] = 1 + (o[j] * s[j] > in[j] - dil[j] * (k[j] - 1) ? 1 : 0);  // room to shrink the strides
      row[j] = in[j] * f[j] + dil[j];
      reps.push_back(ceil_div(k[j] * row[j], in[j]));
    }
    Tensor t = x.repeat(reps);
    Pads r = ranges_of(noop);
    Shape sh = noop;
    for (size_t j = 0; j < nk; ++j) {
      r.emplace_back(0, k[j] * row[j]);
      sh.insert(sh.end(), {k[j], row[j]});
    }
    t = t.shrink(r).reshape(sh);
    r = ranges_of(noop), sh = noop;
    for (size_t j = 0; j < nk; ++j) {
      r.insert(r.end(), {{0, k[j]}, {0, o[j] * s[j]}});
      sh.insert(sh.end(), {k[j], o[j], s[j]});
    }
    t = t.shrink(r).reshape(sh);
    r = ranges_of(noop), sh = noop;
    for (size_t j = 0; j < nk; ++j) {
      r.insert(r.end(), {{0, k[j]}, {0, o[j]}, {0, 1}});
      sh.insert(sh.end(), {k[j], o[j]});
    }
    t = t.shrink(r).reshape(sh);
    for (size_t j = 0; j < nk; ++j) order.push_back(int64_t(lead + 2 * j + 1));
    for (size_t j = 0; j < nk; ++j) order.push_back(int64_t(lead + 2 * j));
    return t.permute(order);
  }
  Pads pads(lead, {0, 0}), r = ranges_of(noop);
  Shape sh = noop;
  for (size_t j = 0; j < nk; ++j) {
    pads.emplace_back(0, std::max<int64_t>(0, o[j] * s[j] - in[j]));
    r.emplace_back(0, o[j] * s[j]);
    sh.insert(sh.end(), {o[j], s[j]});
  }
  Tensor t = x.pad(pads).shrink(r).reshape(sh);
  r = ranges_of(noop);
  for (size_t j = 0; j < nk; ++j) r.insert(r.end(), {{0, o[j]}, {0, k[j]}});
  t = t.shrink(r);
  for (size_t j = 0; j < nk; ++j) order.push_back(int64_t(lead + 2 * j));
  for (size_t j = 0; j < nk; ++j) order.push_back(int64_t(lead + 2 * j + 1));
  return t.permute(order);
}

}  // namespace vkg
