#include <vkgrad/nn/conv_layers.hpp>

#include <cmath>

#include <vkgrad/core/error.hpp>

namespace vkg::nn {

namespace {

const char* layer_name(int dims, bool transposed) {
  if (dims == 1) return transposed ? "ConvTranspose1d" : "Conv1d";
  return transposed ? "ConvTranspose3d" : "Conv3d";
}

// torch's initialization: kaiming_uniform(a = sqrt(5)) over the weight's fan-in (dimension 1
// times the kernel, in either layout), and uniform(+-1/sqrt(fan_in)) for the bias.
Shape weight_shape(int dims, bool transposed, int64_t in, int64_t out, std::vector<int64_t>& k, int64_t groups) {
  const char* name = layer_name(dims, transposed);
  if (k.size() == 1) k.assign(size_t(dims), k[0]);
  if (k.size() != size_t(dims))
    throw Error(std::string(name) + ": kernel_size needs 1 or " + std::to_string(dims) + " values");
  for (int64_t v : k)
    if (v <= 0) throw Error(std::string(name) + ": kernel sizes must be positive");
  if (in <= 0 || out <= 0 || groups <= 0 || in % groups || out % groups)
    throw Error(std::string(name) + ": in_channels " + std::to_string(in) + " and out_channels " + std::to_string(out) +
                " must be positive and divide by groups " + std::to_string(groups));
  Shape s = transposed ? Shape{in, out / groups} : Shape{out, in / groups};
  s.insert(s.end(), k.begin(), k.end());
  return s;
}

}  // namespace

ConvNd::ConvNd(int dims_, bool transposed_, int64_t in, int64_t out, std::vector<int64_t> k, ConvOptions opts,
               bool has_bias, const std::string& device)
    : weight(Tensor::kaiming_uniform(weight_shape(dims_, transposed_, in, out, k, opts.groups), std::sqrt(5.0), device)
                 .requires_grad_()),
      options(std::move(opts)),
      dims(dims_),
      transposed(transposed_) {
  if (has_bias) {
    int64_t fan_in = weight.shape()[1];
    for (int64_t v : k) fan_in *= v;
    const double bound = 1.0 / std::sqrt(double(fan_in));
    bias = Tensor::uniform({out}, -bound, bound, dtypes::default_float, device).requires_grad_();
  }
}

Tensor ConvNd::operator()(const Tensor& x) const {
  if (dims == 1) return transposed ? x.conv_transpose1d(weight, bias, options) : x.conv1d(weight, bias, options);
  return transposed ? x.conv_transpose3d(weight, bias, options) : x.conv3d(weight, bias, options);
}

StateDict ConvNd::state_dict() const {
  StateDict sd{{"weight", weight}};
  if (bias) sd.emplace_back("bias", *bias);
  return sd;
}

}  // namespace vkg::nn
