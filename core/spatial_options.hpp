// Options given once per spatial axis (stride, padding, dilation, kernel) and how the
// convolutions' and pools' errors print them and their input (core/tensor_conv.cpp,
// core/tensor_pool_nd.cpp); the device and bias checks the convolutions share with linear
// (core/tensor_nn.cpp).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

// "(1, 1, 8) float32": a tensor as the errors name it.
inline std::string desc(const Tensor& t) { return shape_str(t.shape()) + " " + t.dtype().name(); }

// "(a, b, c)": one value per spatial axis, as the errors print them.
inline std::string values_str(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + ")";
}

// One value per spatial axis of `x`'s op: a single value is used for all of them.
inline std::vector<int64_t> per_axis(const std::vector<int64_t>& v, size_t dims,
                                     std::string_view what, std::string_view op, const Tensor& x) {
  if (v.size() != 1 && v.size() != dims)
    throw Error(std::string(op) + ": " + std::string(what) + " needs 1 or " + std::to_string(dims) +
                " values, got " + std::to_string(v.size()) + " (input " + desc(x) + ")");
  return v.size() == 1 ? std::vector<int64_t>(dims, v[0]) : v;
}

// Every value of `v` (one per spatial axis) at least `low`: 1 for kernel, stride and dilation
// ("must be positive"), 0 for paddings ("must not be negative").
inline void check_at_least(const std::vector<int64_t>& v, int64_t low, std::string_view what,
                           std::string_view op, const Tensor& x) {
  for (int64_t e : v)
    if (e < low)
      throw Error(std::string(op) + ": " + std::string(what) + " " + values_str(v) +
                  (low ? " must be positive" : " must not be negative") + " (input " + desc(x) +
                  ")");
}

inline void check_device(const Tensor& a, const Tensor& b, std::string_view op) {
  if (a.device() != b.device())
    throw Error(std::string(op) + ": tensors are on different devices (" + a.device() + " and " +
                b.device() + ")");
}

// A bias, where there is one, is on x's device and holds one value per output channel.
inline void check_bias(const std::optional<Tensor>& bias, int64_t channels, const Tensor& x,
                       const Tensor& w, std::string_view op) {
  if (!bias) return;
  check_device(x, *bias, op);
  if (bias->shape() != Shape{channels})
    throw Error(std::string(op) + ": bias " + desc(*bias) + " must have shape (" +
                std::to_string(channels) + ",) (input " + desc(x) + ", weight " + desc(w) + ")");
}

}  // namespace vkg
