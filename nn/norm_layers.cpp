#include <vkgrad/nn/norm_layers.hpp>

#include <algorithm>

#include <vkgrad/core/error.hpp>

namespace vkg::nn {

namespace {

void add(StateDict& sd, const char* name, const std::optional<Tensor>& t) {
  if (t) sd.emplace_back(name, *t);
}

void check_channels(const Tensor& x, int64_t channels, std::string_view layer) {
  if (x.ndim() < 2 || x.shape()[1] != channels)
    throw Error(std::string(layer) + ": expects an input (N, " + std::to_string(channels) + ", *), got " +
                shape_str(x.shape()));
}

}  // namespace

RMSNorm::RMSNorm(Shape shape, std::optional<double> eps_, bool affine, std::string device)
    : normalized_shape(std::move(shape)), eps(eps_) {
  if (normalized_shape.empty()) throw Error("RMSNorm: normalized_shape must not be empty");
  if (affine) weight = Tensor::ones(normalized_shape, dtypes::default_float, device).requires_grad_();
}

Tensor RMSNorm::operator()(const Tensor& x) const {
  const size_t k = normalized_shape.size();
  if (size_t(x.ndim()) < k || !std::equal(normalized_shape.begin(), normalized_shape.end(), x.shape().end() - int64_t(k)))
    throw Error("RMSNorm: input " + shape_str(x.shape()) + " does not end in normalized_shape " +
                shape_str(normalized_shape));
  Axes axes;
  for (size_t i = 0; i < k; ++i) axes.list.push_back(-1 - int64_t(i));
  const Tensor y = x.rms_norm(axes, eps);
  return weight ? y * *weight : y;
}

StateDict RMSNorm::state_dict() const {
  StateDict sd;
  add(sd, "weight", weight);
  return sd;
}

GroupNorm::GroupNorm(int64_t groups, int64_t channels, double eps_, bool affine, std::string device)
    : num_groups(groups), num_channels(channels), eps(eps_) {
  if (groups <= 0 || channels <= 0 || channels % groups)
    throw Error("GroupNorm: num_channels " + std::to_string(channels) + " must split into num_groups " +
                std::to_string(groups) + " (both positive)");
  if (affine) {
    weight = Tensor::ones({channels}, dtypes::default_float, device).requires_grad_();
    bias = Tensor::zeros({channels}, dtypes::default_float, device).requires_grad_();
  }
}

Tensor GroupNorm::operator()(const Tensor& x) const {
  check_channels(x, num_channels, "GroupNorm");
  return x.group_norm(num_groups, weight, bias, eps);
}

StateDict GroupNorm::state_dict() const {
  StateDict sd;
  add(sd, "weight", weight);
  add(sd, "bias", bias);
  return sd;
}

InstanceNorm::InstanceNorm(int64_t features, double eps_, bool affine, std::string device)
    : num_features(features), eps(eps_) {
  if (features <= 0) throw Error("InstanceNorm: num_features must be positive, got " + std::to_string(features));
  if (affine) {
    weight = Tensor::ones({features}, dtypes::default_float, device).requires_grad_();
    bias = Tensor::zeros({features}, dtypes::default_float, device).requires_grad_();
  }
}

Tensor InstanceNorm::operator()(const Tensor& x) const {
  check_channels(x, num_features, "InstanceNorm");
  return x.instance_norm(weight, bias, eps);
}

StateDict InstanceNorm::state_dict() const {
  StateDict sd;
  add(sd, "weight", weight);
  add(sd, "bias", bias);
  return sd;
}

}  // namespace vkg::nn
