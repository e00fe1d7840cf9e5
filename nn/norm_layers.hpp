// Normalization layers beyond BatchNorm and LayerNorm (nn/layers.hpp): RMSNorm, GroupNorm and
// InstanceNorm, with torch's parameters, defaults and state_dict names.
#pragma once
#include <optional>
#include <string>

#include <vkgrad/core/tensor.hpp>
#include <vkgrad/nn/module.hpp>

namespace vkg::nn {

// Normalizes the last normalized_shape.size() axes by their root mean square, then scales by a
// learned weight (torch.nn.RMSNorm; eps none: the dtype's epsilon).
class RMSNorm : public Module {
 public:
  explicit RMSNorm(Shape normalized_shape, std::optional<double> eps = {}, bool elementwise_affine = true,
                   std::string device = "");
  Tensor operator()(const Tensor& x) const;
  StateDict state_dict() const override;
  std::optional<Tensor> weight;
  Shape normalized_shape;
  std::optional<double> eps;
};

// torch.nn.GroupNorm on (N, C, *): num_channels split into num_groups groups, a per-channel affine.
class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true,
            std::string device = "");
  Tensor operator()(const Tensor& x) const;
  StateDict state_dict() const override;
  std::optional<Tensor> weight, bias;
  int64_t num_groups, num_channels;
  double eps;
};

// torch.nn.InstanceNorm1d/2d/3d without running statistics (torch's default,
// track_running_stats=False) and, as torch, no affine part unless asked.
class InstanceNorm : public Module {
 public:
  explicit InstanceNorm(int64_t num_features, double eps = 1e-5, bool affine = false, std::string device = "");
  Tensor operator()(const Tensor& x) const;
  StateDict state_dict() const override;
  std::optional<Tensor> weight, bias;
  int64_t num_features;
  double eps;
};
using InstanceNorm1d = InstanceNorm;
using InstanceNorm2d = InstanceNorm;
using InstanceNorm3d = InstanceNorm;

}  // namespace vkg::nn
