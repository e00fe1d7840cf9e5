// Linear quantization: QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear. Rounding is
// half to even and results saturate to the integer type's range, as ONNX specifies; a 1-D scale
// applies along `axis` (per-channel quantization).
#include <vkgrad/onnx/ops.hpp>

namespace vkg::onnx {
namespace {

// A 1-D per-axis parameter shaped to broadcast along `axis` of a rank-r tensor; 0-d ones as they
// are.
Tensor along_axis(OpContext& c, const Tensor& p, int64_t r) {
  if (p.ndim() == 0 || (p.ndim() == 1 && p.numel() == 1)) return p.reshape(Shape{});
  const int64_t axis = axis_of(c, c.attr_i("axis", 1), r);
  Shape s(size_t(r), 1);
  s[size_t(axis)] = p.numel();
  return p.reshape(s);
}

Tensor saturate(const Tensor& x, DType d) {
  return x.clip(dtypes::min_value(d), dtypes::max_value(d)).cast(d);
}

std::vector<Value> quantize(OpContext& c) {
  const Tensor x = c.in(0);
  const int64_t r = x.ndim();
  const Tensor scale = along_axis(c, c.in(1), r);
  const DType d = c.has(2) ? c.in(2).dtype() : dtypes::uint8;
  if (d != dtypes::uint8 && d != dtypes::int8) c.unsupported("quantizing to " + d.name());
  Tensor y = (x.cast(dtypes::float32) / scale.cast(dtypes::float32)).round();
  if (c.has(2)) y = y + along_axis(c, c.in(2), r).cast(dtypes::float32);
  return {saturate(y, d)};
}

std::vector<Value> dequantize(OpContext& c) {
  const Tensor x = c.in(0);
  const int64_t r = x.ndim();
  Tensor y = x.cast(dtypes::float32);
  if (c.has(2)) y = y - along_axis(c, c.in(2), r).cast(dtypes::float32);
  c.attr_i("axis", 1);
  return {y * along_axis(c, c.in(1), r).cast(dtypes::float32)};
}

// Scale and zero point from the range of x widened to include 0, mapped onto uint8.
std::vector<Value> dynamic_quantize(OpContext& c) {
  const Tensor x = c.in(0).cast(dtypes::float32);
  const Tensor hi = x.max().maximum(0.0f), lo = x.min().minimum(0.0f);
  const Tensor scale = (hi - lo) / 255.0f;
  const Tensor zp = saturate((-lo / scale).round(), dtypes::uint8);
  const Tensor y = saturate((x / scale).round() + zp.cast(dtypes::float32), dtypes::uint8);
  return {y, scale, zp};
}

}  // namespace

void add_quantize_ops(OpTable& t) {
  t["QuantizeLinear"] = quantize;
  t["DequantizeLinear"] = dequantize;
  t["DynamicQuantizeLinear"] = dynamic_quantize;
}

}  // namespace vkg::onnx
