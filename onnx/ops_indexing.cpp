// Indexing by tuples and sequences: GatherND and ScatterND (the last axis of indices addresses
// the leading axes of data), ReverseSequence and MaxUnpool. Each is one indexed load or one
// scatter over a reshaped view; negative indices count from the end.
#include <vkgrad/onnx/ops.hpp>

namespace vkg::onnx {
namespace {

Tensor wrap(const Tensor& idx, int64_t n) {
  return idx.lt(0).where(idx + Tensor::full({}, n, idx.dtype(), idx.device()), idx);
}

std::vector<Value> gather_nd(OpContext& c) {
  const Tensor x = c.in(0), idx = c.in(1);
  const int64_t b = c.attr_i("batch_dims", 0);
  require_rank(c, idx, 1, "indices");  // its last axis is the index tuple
  const int64_t k = idx.shape().back();
  if (b < 0 || b >= idx.ndim() || b + k > x.ndim())
    c.fail("batch_dims and the index depth do not fit the data");
  int64_t batch = 1;
  Shape out(x.shape().begin(), x.shape().begin() + b);
  for (int64_t d = 0; d < b; ++d) batch *= x.shape()[size_t(d)];
  Shape xs{batch}, is{batch};
  xs.insert(xs.end(), x.shape().begin() + b, x.shape().end());
  is.insert(is.end(), idx.shape().begin() + b, idx.shape().end());
  const Tensor x2 = x.reshape(xs), i2 = idx.reshape(is);
  Shape bshape(size_t(i2.ndim() - 1), 1);
  bshape[0] = batch;
  std::vector<Index> index{
      Tensor::arange(0, batch, 1, x.device()).cast(idx.dtype()).reshape(bshape)};
  for (int64_t j = 0; j < k; ++j)
    index.push_back(wrap(i2[{ellipsis, j}], x.shape()[size_t(b + j)]));
  out.insert(out.end(), idx.shape().begin() + b, idx.shape().end() - 1);
  out.insert(out.end(), x.shape().begin() + b + k, x.shape().end());
  return {x2[index].reshape(out)};
}

std::vector<Value> scatter_nd(OpContext& c) {
  const Tensor x = c.in(0), idx = c.in(1), upd = c.in(2);
  require_rank(c, idx, 1, "indices");  // its last axis is the index tuple
  const int64_t k = idx.shape().back();
  if (k < 1 || k > x.ndim())
    c.fail("indices address " + std::to_string(k) + " axes of a rank " + std::to_string(x.ndim()) +
           " tensor");
  int64_t lead = 1, rest = 1;
  for (int64_t d = 0; d < x.ndim(); ++d) (d < k ? lead : rest) *= x.shape()[size_t(d)];
  const Tensor i64 = idx.cast(dtypes::int64);
  std::optional<Tensor> lin;
  int64_t stride = 1;
  for (int64_t j = k - 1; j >= 0; --j) {
    const Tensor term = wrap(i64[{ellipsis, j}], x.shape()[size_t(j)]) * stride;
    lin = lin ? *lin + term : term;
    stride *= x.shape()[size_t(j)];
  }
  const int64_t m = idx.numel() / std::max<int64_t>(k, 1);
  const Tensor index = lin->reshape(Shape{m, 1}).expand(Shape{m, rest});
  const Tensor x2 = x.reshape(Shape{lead, rest}), u2 = upd.reshape(Shape{m, rest});
  const std::string red = c.attr_s("reduction", "none");
  Tensor y = [&] {
    if (red == "none") return x2.scatter(0, index, u2);
    if (red == "add") return x2.scatter_reduce(0, index, u2, ScatterReduce::Sum, true);
    if (red == "mul") return x2.scatter_reduce(0, index, u2, ScatterReduce::Prod, true);
    if (red == "max") return x2.scatter_reduce(0, index, u2, ScatterReduce::Amax, true);
    if (red == "min") return x2.scatter_reduce(0, index, u2, ScatterReduce::Amin, true);
    c.unsupported("reduction '" + red + "'");
  }();
  return {y.reshape(x.shape())};
}

// out[t, b] = in[len[b] - 1 - t, b] for t < len[b], in[t, b] after.
std::vector<Value> reverse_sequence(OpContext& c) {
  const Tensor x = c.in(0);
  const int64_t r = x.ndim();
  const int64_t ta = axis_of(c, c.attr_i("time_axis", 0), r),
                ba = axis_of(c, c.attr_i("batch_axis", 1), r);
  Shape ts(size_t(r), 1), bs(size_t(r), 1);
  ts[size_t(ta)] = x.shape()[size_t(ta)];
  bs[size_t(ba)] = x.shape()[size_t(ba)];
  const Tensor t = Tensor::arange(0, ts[size_t(ta)], 1, x.device()).cast(dtypes::int64).reshape(ts);
  const Tensor len = c.in(1).cast(dtypes::int64).reshape(bs);
  const Tensor idx = t.lt(len).where(len - 1 - t, t).expand(x.shape());
  return {x.gather(ta, idx)};
}

// MaxUnpool: X's values at the positions MaxPool's indices name (over the whole output tensor).
std::vector<Value> max_unpool(OpContext& c) {
  const Tensor x = c.in(0), idx = c.in(1);
  const auto k = c.attr_ints("kernel_shape", {});
  const size_t dims = k.size();
  const auto s = c.attr_ints("strides", std::vector<int64_t>(dims, 1));
  const auto p = c.attr_ints("pads", std::vector<int64_t>(2 * dims, 0));
  if (dims < 1 || s.size() != dims || p.size() != 2 * dims || x.ndim() != int64_t(dims) + 2)
    c.fail("kernel_shape (" + std::to_string(dims) + " values), strides (" +
           std::to_string(s.size()) + "), pads (" + std::to_string(p.size()) +
           ") and the input's rank " + std::to_string(x.ndim()) + " do not agree");
  // The indices count over the default output; a larger output_shape pads it at the ends.
  Shape out(x.shape().begin(), x.shape().end() - int64_t(dims));
  for (size_t i = 0; i < dims; ++i)
    out.push_back((x.shape()[x.shape().size() - dims + i] - 1) * s[i] + k[i] - p[i] - p[i + dims]);
  const Tensor flat = Tensor::zeros(Shape{vkg::prod(out)}, x.dtype(), x.device());
  Tensor y = flat.scatter(0, idx.flatten(), x.flatten()).reshape(out);
  if (c.has(2)) {
    const Shape want = c.ints_in(2);
    if (want.size() != out.size()) c.fail("output_shape has rank " + std::to_string(want.size()));
    std::vector<std::pair<int64_t, int64_t>> pad;
    for (size_t i = 0; i < out.size(); ++i) pad.push_back({0, want[i] - out[i]});
    y = y.pad(pad);
  }
  return {y};
}

}  // namespace

void add_indexing_ops(OpTable& t) {
  t["GatherND"] = gather_nd;
  t["ScatterND"] = scatter_nd;
  t["ReverseSequence"] = reverse_sequence;
  t["MaxUnpool"] = max_unpool;
}

}  // namespace vkg::onnx
