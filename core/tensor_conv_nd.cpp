// Convolutions in 1 and 3 spatial dimensions, plain and transposed. 1-D runs through conv2d's
// tuned path on an (N, C, 1, L) view, so it gets its fast input gradient and layouts; 3-D is the
// same construction as conv2d in N dimensions (a pooling view of the input times the weight,
// summed over channels and kernel positions), with the gradient derived through the movement ops.
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/tensor.hpp>
#include <vkgrad/core/tensor_pool.hpp>

namespace vkg {

namespace {

using Pads = std::vector<std::pair<int64_t, int64_t>>;

std::string desc(const Tensor& t) { return shape_str(t.shape()) + " " + t.dtype().name(); }

// One value per spatial axis: a single value is used for all of them.
std::vector<int64_t> per_axis(const std::vector<int64_t>& v, size_t dims, std::string_view what,
                              std::string_view op, int64_t low) {
  if (v.size() != 1 && v.size() != dims)
    throw Error(std::string(op) + ": " + std::string(what) + " needs 1 or " + std::to_string(dims) +
                " values, got " + std::to_string(v.size()));
  std::vector<int64_t> out = v.size() == 1 ? std::vector<int64_t>(dims, v[0]) : v;
  for (int64_t x : out)
    if (x < low)
      throw Error(std::string(op) + ": " + std::string(what) + " must be " + (low ? "positive" : "non-negative") +
                  ", got " + std::to_string(x));
  return out;
}

struct Resolved {
  std::vector<int64_t> stride, padding, dilation, output_padding;
};

Resolved resolve(const ConvOptions& o, size_t dims, std::string_view op) {
  return {per_axis(o.stride, dims, "stride", op, 1), per_axis(o.padding, dims, "padding", op, 0),
          per_axis(o.dilation, dims, "dilation", op, 1), per_axis(o.output_padding, dims, "output_padding", op, 0)};
}

void check_shapes(const Tensor& x, const Tensor& w, size_t dims, int64_t groups, std::string_view op) {
  if (x.device() != w.device())
    throw Error(std::string(op) + ": tensors are on different devices (" + x.device() + " and " + w.device() + ")");
  if (size_t(x.ndim()) != dims + 2 || size_t(w.ndim()) != dims + 2)
    throw Error(std::string(op) + ": needs a " + std::to_string(dims + 2) + "-D input (N, C, ...) and weight, got input " +
                desc(x) + " and weight " + desc(w));
  if (groups <= 0)
    throw Error(std::string(op) + ": groups must be positive, got " + std::to_string(groups));
}

// The N-d convolution: x (N, G*Cin, *) padded by `pads` (negative trims), weight (Cout, Cin, *k).
Tensor convolve_nd(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias,
                   const std::vector<int64_t>& stride, const std::vector<int64_t>& dilation, int64_t groups,
                   const Pads& spatial, std::string_view op) {
  const size_t dims = spatial.size();
  const int64_t bs = x.shape()[0], cin = w.shape()[1], cout = w.shape()[0];
  if (x.shape()[1] != groups * cin || cout % groups != 0)
    throw Error(std::string(op) + ": input channels " + std::to_string(x.shape()[1]) + " and weight " + desc(w) +
                " do not match for " + std::to_string(groups) + " group(s) (input " + desc(x) + ")");
  if (bias && bias->shape() != Shape{cout})
    throw Error(std::string(op) + ": bias " + desc(*bias) + " must have shape (" + std::to_string(cout) + ",)");
  Pads pads{{0, 0}, {0, 0}};
  pads.insert(pads.end(), spatial.begin(), spatial.end());
  const Tensor padded = x.pad(pads);
  std::vector<int64_t> k;
  for (size_t d = 0; d < dims; ++d) {
    k.push_back(w.shape()[d + 2]);
    if (padded.shape()[d + 2] < (k[d] - 1) * dilation[d] + 1)
      throw Error(std::string(op) + ": the padded input " + shape_str(padded.shape()) +
                  " is smaller than the dilated kernel (input " + desc(x) + ", weight " + desc(w) + ")");
  }
  // (bs, G*cin, *o, *k) -> (bs, G, rcout, *o, cin, *k) against the weight (1, G, rcout, *1, cin, *k).
  const Tensor windows = pool(padded, k, stride, dilation);
  Shape o(windows.shape().begin() + 2, windows.shape().begin() + 2 + int64_t(dims));
  Shape xs_shape{bs, groups, cin, 1}, ws_shape{1, groups, cout / groups};
  xs_shape.insert(xs_shape.end(), o.begin(), o.end());
  xs_shape.insert(xs_shape.end(), k.begin(), k.end());
  std::vector<int64_t> order{0, 1, 3};
  for (size_t d = 0; d < dims; ++d) order.push_back(int64_t(4 + d));
  order.push_back(2);
  for (size_t d = 0; d < dims; ++d) order.push_back(int64_t(4 + dims + d));
  const Tensor xs = windows.reshape(xs_shape).permute(order);
  for (size_t d = 0; d < dims; ++d) ws_shape.push_back(1);
  ws_shape.push_back(cin);
  ws_shape.insert(ws_shape.end(), k.begin(), k.end());
  Axes reduced;
  for (size_t d = 0; d <= dims; ++d) reduced.list.push_back(-1 - int64_t(d));
  Shape out{bs, cout};
  out.insert(out.end(), o.begin(), o.end());
  Tensor ret = (xs * w.reshape(ws_shape)).sum(reduced).reshape(out).cast(promote(x.dtype(), w.dtype()));
  if (bias) {
    Shape along(out.size(), 1);
    along[1] = cout;
    ret = ret + bias->reshape(along);
  }
  return ret;
}

// As conv_transpose2d: the stride dilates the input (zeros between elements), the kernel is
// flipped with its in and out channels swapped per group, and a stride-1 convolution padded by
// (k-1)*d - p before and that plus output_padding after finishes it.
Tensor transpose_nd(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias, const ConvOptions& opts,
                    size_t dims, std::string_view op) {
  check_shapes(x, weight, dims, opts.groups, op);
  const Resolved o = resolve(opts, dims, op);
  const int64_t cin = x.shape()[1], g = opts.groups;
  if (weight.shape()[0] != cin || cin % g != 0)
    throw Error(std::string(op) + ": input channels " + std::to_string(cin) + " and weight " + desc(weight) +
                " do not match for " + std::to_string(g) + " group(s): the weight needs (Cin, Cout/groups, ...)");
  for (size_t d = 0; d < dims; ++d)
    if (o.output_padding[d] >= o.stride[d] && o.output_padding[d] >= o.dilation[d])
      throw Error(std::string(op) + ": output_padding must be smaller than the stride or the dilation");
  std::vector<int64_t> spatial_axes;
  for (size_t d = 0; d < dims; ++d) spatial_axes.push_back(int64_t(3 + d));
  const Tensor w = weight.unflatten(0, {g, cin / g}).transpose(1, 2).flip(spatial_axes).flatten(0, 1);
  Tensor stuffed = x;
  for (size_t d = 0; d < dims; ++d) {
    const int64_t s = o.stride[d];
    if (s == 1) continue;
    const int axis = int(2 + d);
    const int64_t n = stuffed.shape()[size_t(axis)];
    Shape wide = stuffed.shape();
    wide.insert(wide.begin() + axis + 1, 1);
    Pads pads(wide.size(), {0, 0});
    pads[size_t(axis + 1)] = {0, s - 1};
    Shape merged = stuffed.shape();
    merged[size_t(axis)] = n * s;
    Pads keep;
    for (int64_t e : merged) keep.emplace_back(0, e);
    keep[size_t(axis)] = {0, n * s - (s - 1)};
    stuffed = stuffed.reshape(wide).pad(pads).reshape(merged).shrink(keep);
  }
  Pads pads;
  for (size_t d = 0; d < dims; ++d) {
    const int64_t e = (weight.shape()[2 + d] - 1) * o.dilation[d];
    const int64_t size = (x.shape()[2 + d] - 1) * o.stride[d] - 2 * o.padding[d] + e + o.output_padding[d] + 1;
    if (size <= 0)
      throw Error(std::string(op) + ": the output would have size " + std::to_string(size) + " along axis " +
                  std::to_string(2 + d) + " (input " + desc(x) + ", weight " + desc(weight) + ")");
    pads.emplace_back(e - o.padding[d], e - o.padding[d] + o.output_padding[d]);
  }
  if (bias && bias->shape() != Shape{weight.shape()[1] * g})
    throw Error(std::string(op) + ": bias " + desc(*bias) + " must have shape (" +
                std::to_string(weight.shape()[1] * g) + ",)");
  return convolve_nd(stuffed, w, bias, std::vector<int64_t>(dims, 1), o.dilation, g, pads, op);
}

}  // namespace

Tensor Tensor::conv1d(const Tensor& weight, const std::optional<Tensor>& bias, ConvOptions opts) const {
  check_shapes(*this, weight, 1, opts.groups, "conv1d");
  const Resolved o = resolve(opts, 1, "conv1d");
  Conv2dOptions two;
  two.stride = Size2(1, o.stride[0]);
  two.padding = Size2(0, o.padding[0]);
  two.dilation = Size2(1, o.dilation[0]);
  two.groups = opts.groups;
  return unsqueeze(2).conv2d(weight.unsqueeze(2), bias, two).squeeze(2);
}

Tensor Tensor::conv3d(const Tensor& weight, const std::optional<Tensor>& bias, ConvOptions opts) const {
  check_shapes(*this, weight, 3, opts.groups, "conv3d");
  const Resolved o = resolve(opts, 3, "conv3d");
  Pads pads;
  for (int64_t p : o.padding) pads.emplace_back(p, p);
  return convolve_nd(*this, weight, bias, o.stride, o.dilation, opts.groups, pads, "conv3d");
}

Tensor Tensor::conv_transpose1d(const Tensor& weight, const std::optional<Tensor>& bias, ConvOptions opts) const {
  check_shapes(*this, weight, 1, opts.groups, "conv_transpose1d");
  const Resolved o = resolve(opts, 1, "conv_transpose1d");
  ConvTranspose2dOptions two;
  two.stride = Size2(1, o.stride[0]);
  two.padding = Size2(0, o.padding[0]);
  two.dilation = Size2(1, o.dilation[0]);
  two.output_padding = Size2(0, o.output_padding[0]);
  two.groups = opts.groups;
  return unsqueeze(2).conv_transpose2d(weight.unsqueeze(2), bias, two).squeeze(2);
}

Tensor Tensor::conv_transpose3d(const Tensor& weight, const std::optional<Tensor>& bias, ConvOptions opts) const {
  return transpose_nd(*this, weight, bias, opts, 3, "conv_transpose3d");
}

}  // namespace vkg
