// Layers as torch.nn has them: same constructor arguments, the same weight layouts and default
// initializations, and state-dict names, so weights move between the two through safetensors.
#pragma once
#include <cstdint>
#include <optional>

#include <vkgrad/core/tensor.hpp>
#include <vkgrad/nn/module.hpp>

namespace vkg::nn {

// y = x W^T + b, W of shape (out, in).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, std::string device = "");
  Tensor operator()(const Tensor& x) const;
  StateDict state_dict() const override;
  Tensor weight;
  std::optional<Tensor> bias;
};

// 2-D convolution over (N, C, H, W); weight (out, in / groups, kh, kw).
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, Conv2dOptions options = {},
         bool bias = true, std::string device = "");
  Tensor operator()(const Tensor& x) const;
  StateDict state_dict() const override;
  Tensor weight;
  std::optional<Tensor> bias;
  Conv2dOptions options;
};

// Transposed 2-D convolution; weight (in, out / groups, kh, kw).
class ConvTranspose2d : public Module {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size,
                  ConvTranspose2dOptions options = {}, bool bias = true, std::string device = "");
  Tensor operator()(const Tensor& x) const;
  StateDict state_dict() const override;
  Tensor weight;
  std::optional<Tensor> bias;
  ConvTranspose2dOptions options;
};

// Batch normalization over axis 1 (BatchNorm1d on (N, C) or (N, C, L), BatchNorm2d on
// (N, C, H, W)). While Tensor::training it normalizes with the batch's statistics and moves the
// running ones toward them (lazily: realize running_mean and running_var with the training step,
// e.g. through Optimizer::step's extra tensors: buffers() lists them); otherwise it uses the
// running statistics.
class BatchNorm : public Module {
 public:
  explicit BatchNorm(int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = true,
                     bool track_running_stats = true, std::string device = "");
  Tensor operator()(const Tensor& x) const;
  StateDict state_dict() const override;
  // The running statistics and the step count.
  std::vector<Tensor> buffers() const { return {running_mean, running_var, num_batches_tracked}; }
  std::optional<Tensor> weight, bias;
  Tensor running_mean, running_var;
  // Training steps seen, as torch keeps it (int32 here: every Vulkan device has it; torch's
  // load_state_dict copies it into its int64).
  Tensor num_batches_tracked;
  double eps, momentum;
  bool track_running_stats;
};
using BatchNorm1d = BatchNorm;
using BatchNorm2d = BatchNorm;

// Normalization over the last normalized_shape.size() axes, with a learned scale and shift.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
                     std::string device = "");
  Tensor operator()(const Tensor& x) const;
  StateDict state_dict() const override;
  std::optional<Tensor> weight, bias;
  Shape normalized_shape;
  double eps;
};

// Rows of a (num_embeddings, dim) table picked by integer indices.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, std::string device = "");
  Tensor operator()(const Tensor& indices) const;
  StateDict state_dict() const override;
  Tensor weight;
};

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5) : p(p) {}
  Tensor operator()(const Tensor& x) const { return x.dropout(p); }
  StateDict state_dict() const override { return {}; }
  double p;
};

}  // namespace vkg::nn
