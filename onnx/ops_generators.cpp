// Operators that make values: Constant, ConstantOfShape, Shape, Size, Range, EyeLike. Their
// integer results are known on the host, so the shape computations that use them never wait for
// the device.
#include <cmath>
#include <limits>

#include <vkgrad/onnx/ops.hpp>
#include <vkgrad/onnx/tensor_proto.hpp>

namespace vkg::onnx {
namespace {

constexpr size_t kHostLimit = 4096;

std::vector<Value> constant(OpContext& c) {
  const auto& dev = c.device();
  if (const auto* a = c.attr("value")) {
    ::onnx::TensorProto tp = a->t();
    auto host = host_ints_of(tp, "", kHostLimit);
    Tensor t = tensor_from_proto(tp, dev, c.where());
    if (host) return {Value(t, *host)};
    return {t};
  }
  if (auto f = c.attr_f("value_float")) return {Tensor::full({}, double(*f), dtypes::float32, dev)};
  if (auto fs = c.attr_floats("value_floats"))
    return {Tensor(*fs, Shape{int64_t(fs->size())}, dev)};
  if (auto i = c.attr_i("value_int")) return {host_value({*i}, {}, dtypes::int64, dev)};
  if (auto is = c.attr_ints("value_ints"))
    return {host_value(*is, Shape{int64_t(is->size())}, dtypes::int64, dev)};
  for (const char* name : {"sparse_value", "value_string", "value_strings"})
    if (c.has_attr(name)) c.unsupported(std::string("attribute '") + name + "'");
  c.fail("has no value attribute");
}

std::vector<Value> constant_of_shape(OpContext& c) {
  const std::vector<int64_t> shape = c.has(0) ? c.ints_in(0) : std::vector<int64_t>{};
  if (const auto* a = c.attr("value")) {
    ::onnx::TensorProto tp = a->t();
    const Tensor v = tensor_from_proto(tp, c.device(), c.where());
    if (v.numel() != 1) c.fail("value must hold one element");
    const Tensor y = v.reshape(Shape{}).expand(Shape(shape)).contiguous();
    if (auto host = host_ints_of(a->t(), "", 1); host && vkg::prod(shape) <= int64_t(kHostLimit))
      return {Value(y, std::vector<int64_t>(size_t(vkg::prod(shape)), (*host)[0]))};
    return {y};
  }
  return {Tensor::zeros(Shape(shape), dtypes::float32, c.device())};
}

std::vector<Value> shape(OpContext& c) {
  const Shape& s = c.in(0).shape();
  const int64_t r = int64_t(s.size());
  int64_t start = c.attr_i("start", 0), end = c.attr_i("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, start, r);
  std::vector<int64_t> v(s.begin() + start, s.begin() + end);
  const int64_t n = int64_t(v.size());
  return {host_value(std::move(v), Shape{n}, dtypes::int64, c.device())};
}

std::vector<Value> size(OpContext& c) {
  return {host_value({c.in(0).numel()}, {}, dtypes::int64, c.device())};
}

// Range: start + i * delta for i < max(ceil((limit - start) / delta), 0), in the inputs' dtype.
std::vector<Value> range(OpContext& c) {
  const Tensor s = c.in(0);
  const DType d = s.dtype();
  if (d.is_int()) {
    const int64_t start = c.int_in(0), limit = c.int_in(1), delta = c.int_in(2);
    if (delta == 0) c.fail("delta is 0");
    // In 128 bits: limit - start overflows int64 for far-apart ends.
    const __int128 span = __int128(limit) - start;
    const __int128 count =
        std::max<__int128>(0, (span + delta + (delta > 0 ? -1 : 1)) / __int128(delta));
    if (count > std::numeric_limits<int32_t>::max())
      c.fail("makes " + std::to_string(int64_t(count)) + " elements");
    const int64_t n = int64_t(count);
    // A short range stays known on the host (shape computations); a long one is made on the device.
    if (size_t(n) > kHostLimit)
      return {(Tensor::arange(0, n, 1, c.device()).cast(dtypes::int64) * delta + start).cast(d)};
    std::vector<int64_t> v;
    for (int64_t i = 0; i < n; ++i) v.push_back(start + i * delta);
    return {host_value(v, Shape{n}, d, c.device())};
  }
  const double start = c.double_in(0), limit = c.double_in(1), delta = c.double_in(2);
  if (delta == 0) c.fail("delta is 0");
  const double steps = std::ceil((limit - start) / delta);
  if (!(steps <= double(std::numeric_limits<int32_t>::max())))  // NaN, inf or too many
    c.fail("makes " + std::to_string(steps) + " elements");
  const int64_t n = std::max<int64_t>(0, int64_t(steps));
  return {(Tensor::arange(0, n, 1, c.device()).cast(d) * delta + start).cast(d)};
}

std::vector<Value> eye_like(OpContext& c) {
  const Tensor x = c.in(0);
  const DType d =
      c.has_attr("dtype") ? dtype_from_onnx(int32_t(c.attr_i("dtype", 1)), c.where()) : x.dtype();
  const int64_t k = c.attr_i("k", 0);
  if (x.ndim() != 2) c.fail("input must be 2-D");
  const int64_t n = x.shape()[0], m = x.shape()[1];
  const Tensor rows = Tensor::arange(0, n, 1, c.device()).reshape(Shape{n, 1});
  const Tensor cols = Tensor::arange(0, m, 1, c.device()).reshape(Shape{1, m});
  return {(cols - rows).eq(int(k)).cast(d)};
}

}  // namespace

void add_generator_ops(OpTable& t) {
  t["Constant"] = constant;
  t["ConstantOfShape"] = constant_of_shape;
  t["Shape"] = shape;
  t["Size"] = size;
  t["Range"] = range;
  t["EyeLike"] = eye_like;
}

}  // namespace vkg::onnx
