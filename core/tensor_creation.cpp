// Tensor creation beyond the basic constructors: evenly spaced values, identity matrices and the
// *_like family, which copy another tensor's shape, dtype and device.
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

// Computed on the host in double and uploaded (as arange): half the points are counted from the
// start and half from the stop, as torch does, so both ends come out exact.
Tensor Tensor::linspace(Scalarish start, Scalarish stop, int64_t steps, DType dtype,
                        std::string device) {
  if (steps < 0) throw Error("linspace: steps must not be negative, got " + std::to_string(steps));
  const double a = start.as_double(), b = stop.as_double();
  const double step = steps > 1 ? (b - a) / double(steps - 1) : 0.0;
  std::vector<double> v(static_cast<size_t>(steps));
  for (int64_t i = 0; i < steps; ++i)
    v[size_t(i)] = i < steps / 2 ? a + step * double(i) : b - step * double(steps - 1 - i);
  if (steps == 1) v[0] = a;
  if (dtype == dtypes::float64) return Tensor(v, {steps}, std::move(device));
  // Through float32 on the device: a device without float64 can still make any other dtype.
  return Tensor(std::vector<float>(v.begin(), v.end()), {steps}, std::move(device)).cast(dtype);
}

// Movement ops over one constant, nothing uploaded: a (k, 1) column of ones padded to (k, k + 1)
// and read row-major as k*k elements puts each row's one a column further right.
Tensor Tensor::eye(int64_t n, int64_t m, DType dtype, std::string device) {
  if (m < 0) m = n;
  if (n < 0) throw Error("eye: n must not be negative, got " + std::to_string(n));
  const int64_t k = std::min(n, m);
  if (k == 0) return zeros({n, m}, dtype, std::move(device));
  const Tensor square = ones({k, 1}, dtype, device)
                            .pad({{0, 0}, {0, k}})
                            .reshape({k * (k + 1)})
                            .shrink({{0, k * k}})
                            .reshape({k, k});
  return square.pad({{0, n - k}, {0, m - k}});
}

// A tensor of symbolic size gives one of its symbolic sizes (as tinygrad's x.shape is symbolic):
// its plain values would freeze the binding, and a Jit's replays kept the captured shape
// (ones_like of a (3, n) captured at n = 5 was (3, 5) at n = 3).
Tensor Tensor::zeros_like(const Tensor& t) {
  return t.has_symbolic_shape() ? full_like(t, 0) : zeros(t.shape(), t.dtype(), t.device());
}
Tensor Tensor::ones_like(const Tensor& t) {
  return t.has_symbolic_shape() ? full_like(t, 1) : ones(t.shape(), t.dtype(), t.device());
}
Tensor Tensor::full_like(const Tensor& t, Scalarish value) {
  if (!t.has_symbolic_shape()) return full(t.shape(), value, t.dtype(), t.device());
  return full(Shape(t.shape().size(), 1), value, t.dtype(), t.device()).expand(t.sym_shape());
}
// Symbolic: zeros (an empty tensor is a buffer made now, of one binding's size).
Tensor Tensor::empty_like(const Tensor& t) {
  return t.has_symbolic_shape() ? zeros_like(t) : empty(t.shape(), t.dtype(), t.device());
}

}  // namespace vkg
