#include <vkgrad/core/indexed_load.hpp>

#include <cassert>
#include <cmath>
#include <numeric>
#include <optional>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/gradient.hpp>

namespace vkg {

Tensor indexed_load(const Tensor& src, std::span<const Tensor> indices,
                    std::span<const int64_t> axes) {
  assert(!indices.empty() && indices.size() == axes.size());
  // Nothing to read: every index is out of range, so every element is 0.
  if (src.numel() == 0) return Tensor::full(indices[0].shape(), 0, src.dtype(), src.device());
  std::vector<UOpPtr> sources{src.node()};
  // A 0-d constant has no buffer and no view to expand: a movement node over it does.
  if (src.node()->op == Ops::CONST) sources[0] = src.reshape(src.shape()).contiguous().node();
  std::vector<UOpPtr> index_nodes;
  for (const Tensor& i : indices) {
    const int64_t n = src.shape()[size_t(axes[index_nodes.size()])];
    index_nodes.push_back(index_as_int32(i, 0, n).node());
    sources.push_back(index_nodes.back());
  }
  const std::vector<int64_t> along(axes.begin(), axes.end());
  const UOpPtr load = UOp::make(Ops::INDEX, src.dtype(), std::move(sources), along);
  if (!load->shape())
    throw Error("indexed load: the indices' shape does not fit the source " +
                shape_str(src.shape()) + " (internal)");
  const Shape shape = src.shape();
  return Tensor(with_custom_gradient(
      load, {src.node()},
      [index_nodes, along, shape](const Tensor& g) -> std::vector<std::optional<Tensor>> {
        std::vector<Tensor> idx;
        for (const UOpPtr& n : index_nodes) idx.emplace_back(n);
        return {one_hot_scatter_sum(g, idx, along, shape)};
      }));
}

Tensor index_as_int32(const Tensor& index, int64_t lo, int64_t hi) {
  const DType d = index.dtype();
  if (d.scalar_size() < 4 || d == dtypes::int32) return index.cast(dtypes::int32);  // exact
  // A widened narrower index holds the narrow values: narrow those (no 64-bit arithmetic, and
  // on Lavapipe an int32 widened to int64 compares wrongly with a constant in one kernel).
  const UOpPtr& n = index.node();
  if (n->op == Ops::CAST && n->src[0]->dtype.is_int() &&
      n->src[0]->dtype.scalar_size() < d.scalar_size())
    return index_as_int32(Tensor(n->src[0]), lo, hi);
  Tensor outside = index.ge(hi);
  if (!d.is_unsigned()) outside = outside.logical_or(index.lt(lo));
  return outside.where(Tensor::full({}, hi, d, index.device()), index).cast(dtypes::int32);
}

Tensor one_hot_scatter_sum(const Tensor& values, std::span<const Tensor> indices,
                           std::span<const int64_t> axes, const Shape& shape) {
  return one_hot_scatter(values, indices, axes, shape, ScatterReduce::Sum);
}

Tensor one_hot_scatter(const Tensor& values, std::span<const Tensor> indices,
                       std::span<const int64_t> axes, const Shape& shape, ScatterReduce reduce) {
  const Shape& o = values.shape();
  const size_t r = o.size(), k = axes.size();
  const std::string& device = values.device();
  Shape lifted = o;
  lifted.insert(lifted.end(), k, 1);
  std::optional<Tensor> hit;
  for (size_t j = 0; j < k; ++j) {
    Shape along(r + k, 1);
    along[r + j] = shape[size_t(axes[j])];
    const Tensor at =
        indices[j].reshape(lifted).eq(Tensor::arange(0, along[r + j], 1, device).reshape(along));
    hit = hit ? hit->logical_and(at) : at;
  }
  const bool bools = values.dtype().is_bool();
  const Tensor v = bools ? values.cast(dtypes::int32) : values;
  const DType d = v.dtype();
  const bool inf = d.is_float();
  const Scalarish identity =
      reduce == ScatterReduce::Sum    ? Scalarish(0)
      : reduce == ScatterReduce::Prod ? Scalarish(1)
      : reduce == ScatterReduce::Amax
          ? (inf ? Scalarish(-INFINITY) : Scalarish(int64_t(dtypes::min_value(d))))
      : reduce == ScatterReduce::Amin
          ? (inf                   ? Scalarish(INFINITY)
             : d == dtypes::uint64 ? Scalarish(int64_t(-1))  // wraps to the largest uint64
                                   : Scalarish(int64_t(dtypes::max_value(d))))
          : throw Error("one_hot_scatter: mean is no one-hot reduce (internal)");
  // Nothing lands anywhere (a reduce over no elements would be an error for max and min).
  if (values.numel() == 0) {
    const Tensor none = Tensor::full(shape, identity, d, device);
    return bools ? none.ne(0) : none.cast(values.dtype());
  }
  const Tensor spread = hit->where(v.reshape(lifted), Tensor::full({}, identity, d, device));
  // (o with the indexed axes reduced to 1, then one axis per indexed size): each trailing axis
  // trades places with the size-1 axis it came from.
  const Axes over(std::vector<int64_t>(axes.begin(), axes.end()));
  Tensor out = reduce == ScatterReduce::Sum    ? spread.sum(over, true)
               : reduce == ScatterReduce::Prod ? spread.prod(over, true)
               : reduce == ScatterReduce::Amax ? spread.max(over, true)
                                               : spread.min(over, true);
  std::vector<int64_t> order(r + k);
  std::iota(order.begin(), order.end(), 0);
  for (size_t j = 0; j < k; ++j) std::swap(order[size_t(axes[j])], order[r + j]);
  out = out.permute(order).reshape(shape);
  return bools ? out.ne(0) : out.cast(values.dtype());
}

}  // namespace vkg
