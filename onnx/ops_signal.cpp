// Window functions (HannWindow, HammingWindow, BlackmanWindow): cosine sums computed on the host
// in double, as their size is a host value. `periodic` windows have period size, symmetric ones
// size - 1.
#include <cmath>
#include <numbers>

#include <vkgrad/onnx/ops.hpp>

namespace vkg::onnx {
namespace {

OpFn window(double a0, double a1, double a2) {
  return [=](OpContext& c) -> std::vector<Value> {
    const int64_t n = c.ints_in(0).at(0);
    const bool periodic = c.attr_i("periodic", 1) != 0;
    const DType d = dtype_from_onnx(int32_t(c.attr_i("output_datatype", 1)), c.where());
    const double period = double(periodic ? n : n - 1);
    std::vector<double> w(size_t(std::max<int64_t>(n, 0)));
    for (int64_t i = 0; i < n; ++i) {
      const double t = 2 * std::numbers::pi * double(i) / period;
      w[size_t(i)] = a0 - a1 * std::cos(t) + a2 * std::cos(2 * t);
    }
    return {Tensor(w, Shape{n}, c.device()).cast(d)};
  };
}

}  // namespace

void add_signal_ops(OpTable& t) {
  t["HannWindow"] = window(0.5, 0.5, 0);
  t["HammingWindow"] = window(25.0 / 46.0, 21.0 / 46.0, 0);
  t["BlackmanWindow"] = window(0.42, 0.5, 0.08);
}

}  // namespace vkg::onnx
