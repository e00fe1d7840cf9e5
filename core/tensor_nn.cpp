// nn functional ops that are not convolutions or pools (core/tensor_conv.cpp,
// core/tensor_pool_nd.cpp): linear, layernorm, batchnorm.
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/spatial_options.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

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

}  // namespace vkg
