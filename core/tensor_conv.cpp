// Convolutions over 1 to 3 spatial axes, plain and transposed: conv1d/2d/3d and
// conv_transpose1d/2d/3d resolve their options to one value per spatial axis and run the one
// N-d convolution here. As tinygrad, a convolution is a pooling view of the input (movement ops
// only: no im2col copy) times the weight, summed over (cin / groups, *kernel): the forward pass is
// one fused reduce kernel. Its input gradient is a transposed convolution of the output's
// gradient (with_conv_input_gradient), its weight gradient the one derived through the view.
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/gradient.hpp>
#include <vkgrad/core/spatial_options.hpp>
#include <vkgrad/core/tensor.hpp>
#include <vkgrad/core/tensor_pool.hpp>

namespace vkg {

namespace {

using Pads = std::vector<std::pair<int64_t, int64_t>>;
using Values = std::vector<int64_t>;

// A convolution's options, one value per spatial axis.
struct ConvGeometry {
  Values stride, padding, dilation, output_padding;  // output_padding: transposed only
  int64_t groups = 1;
};

ConvGeometry resolve(const ConvOptions& o, size_t dims, std::string_view op, const Tensor& x) {
  return {per_axis(o.stride, dims, "stride", op, x), per_axis(o.padding, dims, "padding", op, x),
          per_axis(o.dilation, dims, "dilation", op, x),
          per_axis(o.output_padding, dims, "output_padding", op, x), o.groups};
}

// The checks every convolution shares: devices, ranks, and the options' signs.
void check_conv_args(const Tensor& x, const Tensor& w, const ConvGeometry& o, std::string_view op) {
  check_device(x, w, op);
  const size_t dims = o.stride.size();
  static const char* const spatial[] = {"L", "H, W", "D, H, W"};
  if (size_t(x.ndim()) != dims + 2 || size_t(w.ndim()) != dims + 2)
    throw Error(std::string(op) + ": needs a " + std::to_string(dims + 2) + "-D input (N, C, " +
                spatial[dims - 1] + ") and a " + std::to_string(dims + 2) +
                "-D weight, got input " + desc(x) + " and weight " + desc(w));
  if (o.groups <= 0)
    throw Error(std::string(op) + ": groups must be positive, got " + std::to_string(o.groups) +
                " (input " + desc(x) + ", weight " + desc(w) + ")");
  check_at_least(o.stride, 1, "stride", op, x);
  check_at_least(o.dilation, 1, "dilation", op, x);
  check_at_least(o.padding, 0, "padding", op, x);
  check_at_least(o.output_padding, 0, "output_padding", op, x);
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

// t (N, C, *spatial) stored as (N, *spatial, C), viewed back as (N, C, *spatial).
Tensor channels_last(const Tensor& t) {
  const int64_t n = t.ndim();
  std::vector<int64_t> to{0}, back{0, n - 1};
  for (int64_t a = 2; a < n; ++a) to.push_back(a);
  to.push_back(1);
  for (int64_t a = 1; a < n - 1; ++a) back.push_back(a);
  return t.permute(to).contiguous().permute(back);
}

int64_t product(const Values& v) {
  int64_t p = 1;
  for (int64_t e : v) p *= e;
  return p;
}

// The convolution every entry point ends in: x (N, G*Cin, *) padded by `spatial_pads` (before,
// after per spatial axis; negative trims), weight (Cout, Cin, *k).
Tensor convolve(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias,
                const Values& stride, const Values& dilation, int64_t groups,
                const Pads& spatial_pads, std::string_view op) {
  const size_t dims = spatial_pads.size();
  const int64_t bs = x.shape()[0], cin = w.shape()[1], cout = w.shape()[0];
  const Values k(w.shape().begin() + 2, w.shape().end());
  Pads pads{{0, 0}, {0, 0}};
  pads.insert(pads.end(), spatial_pads.begin(), spatial_pads.end());
  // Both operands channels-last in memory where the channels fill vec4s: the reduce over
  // (channel, *kernel) then reads four channels per load instruction, which Lavapipe runs as a
  // loop over the lanes (beautiful_mnist's conv2 at batch 512: forward 0.77 -> 0.48, input
  // gradient 1.09 -> 0.71 CPU s, the copies included). Not for small convolutions, where two
  // more kernel launches cost more than the loads save.
  double multiply_adds =  // in double: a product of many dimensions may pass int64
      double(bs) * double(cout) * double(cin) * double(product(k));
  for (size_t d = 0; d < dims; ++d)
    multiply_adds *=
        double((x.shape()[2 + d] + pads[2 + d].first + pads[2 + d].second) / stride[d]);
  const bool cl = takes_channels_last(cin, multiply_adds);
  const Tensor padded = pad_or_trim(cl ? channels_last(x) : x, pads);
  const Shape padded_spatial(padded.shape().begin() + 2, padded.shape().end());
  for (size_t d = 0; d < dims; ++d)
    if (padded_spatial[d] < (k[d] - 1) * dilation[d] + 1)
      throw Error(std::string(op) + ": the padded input " + values_str(padded_spatial) +
                  " is smaller than the dilated kernel (input " + desc(x) + ", weight " + desc(w) +
                  ")");
  // (bs, G*cin, *o, *k) -> (bs, G, rcout, *o, cin, *k) against the weight (1, G, rcout, *1, cin,
  // *k).
  const Tensor windows = pool(padded, k, stride, dilation);
  const Values o(windows.shape().begin() + 2, windows.shape().begin() + 2 + int64_t(dims));
  Shape xs_shape{bs, groups, cin, 1}, ws_shape{1, groups, cout / groups};
  xs_shape.insert(xs_shape.end(), o.begin(), o.end());
  xs_shape.insert(xs_shape.end(), k.begin(), k.end());
  std::vector<int64_t> order{0, 1, 3};
  for (size_t d = 0; d < dims; ++d) order.push_back(int64_t(4 + d));
  order.push_back(2);
  for (size_t d = 0; d < dims; ++d) order.push_back(int64_t(4 + dims + d));
  const Tensor xs = windows.reshape(xs_shape).permute(order);
  ws_shape.insert(ws_shape.end(), dims, 1);
  ws_shape.push_back(cin);
  ws_shape.insert(ws_shape.end(), k.begin(), k.end());
  Axes reduced;
  for (size_t d = 0; d <= dims; ++d) reduced.list.push_back(-1 - int64_t(d));
  Shape out{bs, cout};
  out.insert(out.end(), o.begin(), o.end());
  const Tensor ws = (cl ? channels_last(w) : w).reshape(ws_shape);
  Tensor ret = (xs * ws).sum(reduced).reshape(out).cast(promote(x.dtype(), w.dtype()));
  if (bias) {
    Shape along(out.size(), 1);
    along[1] = cout;
    ret = ret + bias->reshape(along);
  }
  return ret;
}

// As tinygrad: the stride dilates the input (each element followed by stride-1 zeros, by a pad
// and a reshape), the kernel is flipped with its in and out channels swapped per group, and a
// stride-1 convolution with padding (k-1)*d - p (plus output_padding after) finishes it.
Tensor convolve_transposed(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias,
                           const ConvGeometry& o, std::string_view op) {
  check_conv_args(x, weight, o, op);
  const size_t dims = o.stride.size();
  const int64_t cin = x.shape()[1], g = o.groups;
  if (weight.shape()[0] != cin || cin % g != 0)
    throw Error(std::string(op) + ": input channels " + std::to_string(cin) + " and weight " +
                desc(weight) + " do not match for " + std::to_string(g) +
                " group(s): the weight needs (Cin, Cout/groups, *kernel) with Cin divisible by "
                "groups (input " +
                desc(x) + ")");
  for (size_t d = 0; d < dims; ++d)
    if (o.output_padding[d] >= o.stride[d] && o.output_padding[d] >= o.dilation[d])
      throw Error(std::string(op) + ": output_padding " + values_str(o.output_padding) +
                  " must be smaller than the stride " + values_str(o.stride) + " or the dilation " +
                  values_str(o.dilation) + " (input " + desc(x) + ")");
  check_bias(bias, weight.shape()[1] * g, x, weight, op);
  // The sizes first: the stride's dilation below assumes every spatial axis has an element.
  for (size_t d = 0; d < dims; ++d)
    if (x.shape()[2 + d] == 0)
      throw Error(std::string(op) + ": input " + desc(x) +
                  " has a spatial axis of length 0 (weight " + desc(weight) + ")");
  Pads pads;
  Values sizes;
  for (size_t d = 0; d < dims; ++d) {
    const int64_t e = (weight.shape()[2 + d] - 1) * o.dilation[d];
    sizes.push_back((x.shape()[2 + d] - 1) * o.stride[d] - 2 * o.padding[d] + e +
                    o.output_padding[d] + 1);
    pads.emplace_back(e - o.padding[d], e - o.padding[d] + o.output_padding[d]);
  }
  for (int64_t size : sizes)
    if (size <= 0)
      throw Error(std::string(op) + ": the output would be " + values_str(sizes) + ": padding " +
                  values_str(o.padding) + " is too large (input " + desc(x) + ", weight " +
                  desc(weight) + ")");
  std::vector<int64_t> kernel_axes;
  for (size_t d = 0; d < dims; ++d) kernel_axes.push_back(int64_t(3 + d));
  const Tensor w =
      weight.unflatten(0, {g, cin / g}).transpose(1, 2).flip(kernel_axes).flatten(0, 1);
  Tensor stuffed = x;
  if (product(o.stride) > 1) {
    // (n, c, i0, i1) -> (n, c, i0, 1, i1, 1) padded to (n, c, i0, s0, i1, s1), merged and cut
    // after the last element.
    Shape wide{x.shape()[0], cin}, merged = wide;
    Pads pads{{0, 0}, {0, 0}}, keep{{0, x.shape()[0]}, {0, cin}};
    for (size_t d = 0; d < dims; ++d) {
      const int64_t n = x.shape()[2 + d], s = o.stride[d];
      wide.insert(wide.end(), {n, 1});
      pads.insert(pads.end(), {{0, 0}, {0, s - 1}});
      merged.push_back(n * s);
      keep.emplace_back(0, n * s - (s - 1));
    }
    stuffed = x.reshape(wide).pad(pads).reshape(merged).shrink(keep);
  }
  return convolve(stuffed, w, bias, Values(dims, 1), o.dilation, g, pads, op);
}

// A convolution's output whose input gradient is the transposed convolution of the output's
// gradient: one reduce over (cout / groups, *kernel) per input element. The gradient derived
// through the pooling movement ops instead writes every window's gradient out (prod(kernel) times
// the input) and sums the overlapping windows back, several times slower on every device. The
// weight's gradient stays the derived one (a reduce over batch and output positions, already
// one fused kernel).
UOpPtr with_conv_input_gradient(const Tensor& out, const Tensor& x, const Tensor& w,
                                const ConvGeometry& o, std::string_view op) {
  const size_t dims = o.stride.size();
  // The input positions past the last window: (padded size - dilated kernel) mod stride, always
  // below the stride, so the transposed convolution takes them as its output_padding.
  ConvGeometry back = o;
  bool unit_stride = true;
  double transposed_work = 1;  // the input gradient convolution's spatial positions
  for (size_t d = 0; d < dims; ++d) {
    const int64_t e = (w.shape()[2 + d] - 1) * o.dilation[d], n = x.shape()[2 + d];
    back.output_padding[d] = (n + 2 * o.padding[d] - e - 1) % o.stride[d];
    unit_stride &= o.stride[d] == 1;
    transposed_work *= double(n + e);
  }
  const UOpPtr value = out.node(), xn = x.node(), wn = w.node();
  const DType x_dtype = x.dtype();
  const std::string op_name(op);  // the lambda outlives the caller's string_view
  // convolve's choice for the transposed convolution: its input channels are this one's outputs
  // per group, its padded input larger than this one's input by the dilated kernel. Only where
  // that convolution runs (the input wants a gradient): the weight gradient alone reads the
  // output gradient faster as it is (beautiful_mnist's first layer).
  const int64_t cout_per_group = w.shape()[0] / o.groups;
  const Values k(w.shape().begin() + 2, w.shape().end());
  const bool cl_grad =
      unit_stride && x_dtype.is_float() &&
      takes_channels_last(cout_per_group, double(x.shape()[0]) * double(x.shape()[1]) *
                                              double(cout_per_group) * double(product(k)) *
                                              transposed_work) &&
      x.requires_grad();
  return with_custom_gradient(
      value, {xn, wn}, [=](const Tensor& grad) -> std::vector<std::optional<Tensor>> {
        // Both gradients read every element of the output's gradient prod(kernel) (or batch)
        // times: computed once into a buffer, not recomputed per read where it is a long
        // elementwise chain (a batchnorm's and a relu's backward, say). Channels-last where the
        // input gradient's convolution copies it so (stride 1: its input is this gradient, not a
        // dilation of it): that copy is then this buffer in order, no kernel (core/schedule.cpp),
        // and the weight gradient reads it as well.
        const Tensor g = cl_grad ? channels_last(grad) : grad.contiguous();
        const auto dw = compute_gradient(GradientRequest{value, g.node(), {wn.get()}, {}});
        std::optional<Tensor> dx;
        if (x_dtype.is_float())
          dx = convolve_transposed(g, Tensor(wn), std::nullopt, back, op_name).cast(x_dtype);
        auto it = dw.find(wn.get());
        return {dx, it == dw.end() ? std::nullopt : std::optional<Tensor>(Tensor(it->second))};
      });
}

// The convolution behind conv1d/2d/3d: checks, the forward reduce, its input gradient, the bias.
Tensor convolution(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias,
                   const ConvGeometry& o, std::string_view op) {
  check_conv_args(x, w, o, op);
  const int64_t cin = x.shape()[1], cout = w.shape()[0];
  if (cin != o.groups * w.shape()[1] || cout % o.groups != 0)
    throw Error(std::string(op) + ": input channels " + std::to_string(cin) + " and weight " +
                desc(w) + " do not match for " + std::to_string(o.groups) +
                " group(s): the weight needs (Cout, Cin/groups, *kernel) with Cout divisible by "
                "groups (input " +
                desc(x) + ")");
  check_bias(bias, cout, x, w, op);
  Pads pads;
  for (int64_t p : o.padding) pads.emplace_back(p, p);
  Tensor out = convolve(x, w, std::nullopt, o.stride, o.dilation, o.groups, pads, op);
  out = Tensor(with_conv_input_gradient(out, x, w, o, op));
  if (bias) {
    Shape along(size_t(out.ndim()), 1);
    along[1] = cout;
    out = out + bias->reshape(along);
  }
  return out;
}

ConvGeometry geometry_2d(Size2 stride, Size2 padding, Size2 dilation, Size2 output_padding,
                         int64_t groups) {
  return {{stride.h, stride.w},
          {padding.h, padding.w},
          {dilation.h, dilation.w},
          {output_padding.h, output_padding.w},
          groups};
}

}  // namespace

Tensor Tensor::conv1d(const Tensor& weight, const std::optional<Tensor>& bias,
                      ConvOptions o) const {
  return convolution(*this, weight, bias, resolve(o, 1, "conv1d", *this), "conv1d");
}

Tensor Tensor::conv2d(const Tensor& weight, const std::optional<Tensor>& bias,
                      Conv2dOptions o) const {
  return convolution(*this, weight, bias, geometry_2d(o.stride, o.padding, o.dilation, 0, o.groups),
                     "conv2d");
}

Tensor Tensor::conv3d(const Tensor& weight, const std::optional<Tensor>& bias,
                      ConvOptions o) const {
  return convolution(*this, weight, bias, resolve(o, 3, "conv3d", *this), "conv3d");
}

Tensor Tensor::conv_transpose1d(const Tensor& weight, const std::optional<Tensor>& bias,
                                ConvOptions o) const {
  return convolve_transposed(*this, weight, bias, resolve(o, 1, "conv_transpose1d", *this),
                             "conv_transpose1d");
}

Tensor Tensor::conv_transpose2d(const Tensor& weight, const std::optional<Tensor>& bias,
                                ConvTranspose2dOptions o) const {
  return convolve_transposed(
      *this, weight, bias, geometry_2d(o.stride, o.padding, o.dilation, o.output_padding, o.groups),
      "conv_transpose2d");
}

Tensor Tensor::conv_transpose3d(const Tensor& weight, const std::optional<Tensor>& bias,
                                ConvOptions o) const {
  return convolve_transposed(*this, weight, bias, resolve(o, 3, "conv_transpose3d", *this),
                             "conv_transpose3d");
}

}  // namespace vkg
