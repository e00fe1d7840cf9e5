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

// x - zero_point in float32 (exact for 8-bit values); the zero point may be per row or channel.
Tensor centered(OpContext& c, size_t x_at, size_t zp_at, int64_t zp_axis) {
  Tensor x = c.in(x_at).cast(dtypes::float32);
  if (!c.has(zp_at)) return x;
  const Tensor zp = c.in(zp_at).cast(dtypes::float32);
  if (zp.numel() == 1) return x - zp.reshape(Shape{});
  Shape s(size_t(x.ndim()), 1);
  s[size_t(axis_of(c, zp_axis, x.ndim()))] = zp.numel();
  return x - zp.reshape(s);
}

// MatMulInteger and ConvInteger: int32 results of the zero-point-shifted 8-bit operands, computed
// in float32, where every product sum below 2^24 is exact.
std::vector<Value> matmul_integer(OpContext& c) {
  return {centered(c, 0, 2, -2).matmul(centered(c, 1, 3, -1)).cast(dtypes::int32)};
}

// Requantizes a float result to y's zero point's dtype.
Tensor requantize(const Tensor& y, const Tensor& scale, const Tensor& zp) {
  return saturate((y / scale.cast(dtypes::float32)).round() + zp.cast(dtypes::float32), zp.dtype());
}

std::vector<Value> qlinear_matmul(OpContext& c) {
  Tensor a = c.in(0).cast(dtypes::float32) - c.in(2).cast(dtypes::float32);
  Tensor b = c.in(3).cast(dtypes::float32) - c.in(5).cast(dtypes::float32);
  const Tensor y = (a * c.in(1).cast(dtypes::float32)).matmul(b * c.in(4).cast(dtypes::float32));
  return {requantize(y, c.in(6), c.in(7))};
}

std::vector<Value> conv_integer(OpContext& c) {
  const Tensor x = centered(c, 0, 2, 1);
  const Tensor w = centered(c, 1, 3, 0);
  return {conv_of(c, x, w, std::nullopt)[0].tensor().round().cast(dtypes::int32)};
}

std::vector<Value> qlinear_conv(OpContext& c) {
  // inputs: x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B (int32, scale x_scale * w_scale)
  const Tensor x = (c.in(0).cast(dtypes::float32) - c.in(2).cast(dtypes::float32)) *
                   c.in(1).cast(dtypes::float32);
  Tensor ws = c.in(4).cast(dtypes::float32), wz = c.in(5).cast(dtypes::float32);
  Shape per(size_t(c.in(3).ndim()), 1);
  per[0] = ws.numel();
  if (ws.numel() > 1) ws = ws.reshape(per);
  if (wz.numel() > 1) wz = wz.reshape(per);
  const Tensor w = (c.in(3).cast(dtypes::float32) - wz) * ws;
  std::optional<Tensor> b;
  if (c.has(8))
    b = c.in(8).cast(dtypes::float32) *
        (c.in(1).cast(dtypes::float32) * c.in(4).cast(dtypes::float32)).flatten();
  const Tensor y = conv_of(c, x, w, b)[0].tensor();
  return {requantize(y, c.in(6), c.in(7))};
}

}  // namespace

void add_quantize_ops(OpTable& t) {
  t["MatMulInteger"] = matmul_integer;
  t["QLinearMatMul"] = qlinear_matmul;
  t["ConvInteger"] = conv_integer;
  t["QLinearConv"] = qlinear_conv;
  t["QuantizeLinear"] = quantize;
  t["DequantizeLinear"] = dequantize;
  t["DynamicQuantizeLinear"] = dynamic_quantize;
}

}  // namespace vkg::onnx
