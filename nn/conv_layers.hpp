// 1-D and 3-D convolution layers, plain and transposed (Conv2d and ConvTranspose2d are in
// nn/layers.hpp), with torch's weight layouts, initialization and state_dict names.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <vkgrad/core/tensor.hpp>
#include <vkgrad/nn/module.hpp>

namespace vkg::nn {

// weight (out, in / groups, *k), or transposed (in, out / groups, *k); kernel_size has one value
// per spatial axis or one for all.
class ConvNd : public Module {
 public:
  ConvNd(int dims, bool transposed, int64_t in_channels, int64_t out_channels, std::vector<int64_t> kernel_size,
         ConvOptions options, bool bias, const std::string& device);
  Tensor operator()(const Tensor& x) const;
  StateDict state_dict() const override;
  Tensor weight;
  std::optional<Tensor> bias;
  ConvOptions options;
  int dims;
  bool transposed;
};

struct Conv1d : ConvNd {
  Conv1d(int64_t in, int64_t out, int64_t kernel_size, ConvOptions options = {}, bool bias = true,
         const std::string& device = "")
      : ConvNd(1, false, in, out, {kernel_size}, std::move(options), bias, device) {}
};
struct Conv3d : ConvNd {
  Conv3d(int64_t in, int64_t out, std::vector<int64_t> kernel_size, ConvOptions options = {}, bool bias = true,
         const std::string& device = "")
      : ConvNd(3, false, in, out, std::move(kernel_size), std::move(options), bias, device) {}
};
struct ConvTranspose1d : ConvNd {
  ConvTranspose1d(int64_t in, int64_t out, int64_t kernel_size, ConvOptions options = {}, bool bias = true,
                  const std::string& device = "")
      : ConvNd(1, true, in, out, {kernel_size}, std::move(options), bias, device) {}
};
struct ConvTranspose3d : ConvNd {
  ConvTranspose3d(int64_t in, int64_t out, std::vector<int64_t> kernel_size, ConvOptions options = {},
                  bool bias = true, const std::string& device = "")
      : ConvNd(3, true, in, out, std::move(kernel_size), std::move(options), bias, device) {}
};

}  // namespace vkg::nn
