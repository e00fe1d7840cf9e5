#include <vkgrad/core/indexed_load.hpp>

#include <cassert>
#include <numeric>
#include <optional>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/gradient.hpp>

namespace vkg {

Tensor indexed_load(const Tensor& src, std::span<const Tensor> indices, std::span<const int64_t> axes) {
  assert(!indices.empty() && indices.size() == axes.size());
  std::vector<UOpPtr> sources{src.node()};
  // A 0-d constant has no buffer and no view to expand: a movement node over it does.
  if (src.node()->op == Ops::CONST) sources[0] = src.reshape(src.shape()).contiguous().node();
  std::vector<UOpPtr> index_nodes;
  for (const Tensor& i : indices) {
    index_nodes.push_back(i.dtype() == dtypes::int32 ? i.node() : i.cast(dtypes::int32).node());
    sources.push_back(index_nodes.back());
  }
  const std::vector<int64_t> along(axes.begin(), axes.end());
  const UOpPtr load = UOp::make(Ops::INDEX, src.dtype(), std::move(sources), along);
  if (!load->shape())
    throw Error("indexed load: the indices' shape does not fit the source " + shape_str(src.shape()) +
                " (internal)");
  const Shape shape = src.shape();
  return Tensor(with_custom_gradient(
      load, {src.node()},
      [index_nodes, along, shape](const Tensor& g) -> std::vector<std::optional<Tensor>> {
        std::vector<Tensor> idx;
        for (const UOpPtr& n : index_nodes) idx.emplace_back(n);
        return {one_hot_scatter_sum(g, idx, along, shape)};
      }));
}

Tensor one_hot_scatter_sum(const Tensor& values, std::span<const Tensor> indices,
                           std::span<const int64_t> axes, const Shape& shape) {
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
  const Tensor spread = hit->where(v.reshape(lifted), Tensor::full({}, 0, v.dtype(), device));
  // (o with the indexed axes summed to 1, then one axis per indexed size): each trailing axis
  // trades places with the size-1 axis it came from.
  Tensor summed = spread.sum(Axes(std::vector<int64_t>(axes.begin(), axes.end())), true);
  std::vector<int64_t> order(r + k);
  std::iota(order.begin(), order.end(), 0);
  for (size_t j = 0; j < k; ++j) std::swap(order[size_t(axes[j])], order[r + j]);
  summed = summed.permute(order).reshape(shape);
  return bools ? summed.ne(0) : summed.cast(values.dtype());
}

}  // namespace vkg
