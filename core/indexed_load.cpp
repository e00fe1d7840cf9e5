#include <vkgrad/core/indexed_load.hpp>

#include <cassert>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <optional>

#include <vkgrad/core/device.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/gradient.hpp>
#include <vkgrad/core/multi.hpp>
#include <vkgrad/core/scatter_combine.hpp>

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
        return {indexed_scatter(Tensor::zeros(shape, g.dtype(), g.device()), g, idx, along,
                                ScatterReduce::Sum)};
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

namespace {

// What a SCATTER node's arg holds: the combine, then the indexed axes.
std::vector<int64_t> scatter_arg(ScatterReduce reduce, std::span<const int64_t> axes) {
  const ScatterCombine combine = reduce == ScatterReduce::Sum    ? ScatterCombine::Sum
                                 : reduce == ScatterReduce::Prod ? ScatterCombine::Prod
                                 : reduce == ScatterReduce::Amax ? ScatterCombine::Max
                                                                 : ScatterCombine::Min;
  std::vector<int64_t> arg{int64_t(combine)};
  arg.insert(arg.end(), axes.begin(), axes.end());
  return arg;
}

// t (of dest's shape) read where each value of a SCATTER went: t shrunk to the values' extent on
// the axes not indexed, then loaded at the indices.
Tensor at_indices(const Tensor& t, const Shape& values_shape, std::span<const Tensor> indices,
                  std::span<const int64_t> axes) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (size_t d = 0; d < values_shape.size(); ++d) ranges.emplace_back(0, values_shape[d]);
  for (int64_t a : axes) ranges[size_t(a)] = {0, t.shape()[size_t(a)]};
  return indexed_load(t.shrink(ranges), indices, axes);
}

// dest plus the values summed where they land, as a one-hot reduce: each value is compared with
// every position along the indexed axes, O(values x those sizes), with no atomics. For a device
// that cannot combine into 64-bit elements atomically.
Tensor one_hot_sum_into(const Tensor& dest, const Tensor& values, std::span<const Tensor> indices,
                        std::span<const int64_t> axes) {
  const Shape& o = values.shape();
  const size_t r = o.size(), k = axes.size();
  Shape lifted = o;
  lifted.insert(lifted.end(), k, 1);
  std::optional<Tensor> hit;
  for (size_t j = 0; j < k; ++j) {
    Shape along(r + k, 1);
    along[r + j] = dest.shape()[size_t(axes[j])];
    const Tensor positions =
        Tensor::arange(0, along[r + j], 1, dest.device()).cast(dtypes::int32).reshape(along);
    // An index outside the axis matches no position: it adds nothing, as the scatter writes
    // nothing.
    const Tensor at = indices[j].reshape(lifted).eq(positions);
    hit = hit ? hit->logical_and(at) : at;
  }
  const Tensor spread = hit->where(values.reshape(lifted), values.scalar_like(0));
  // (o with the indexed axes reduced to 1, then one axis per indexed size): each trailing axis
  // trades places with the size-1 axis it came from; the axes not indexed pad out to dest's.
  Tensor sum = spread.sum(Axes(std::vector<int64_t>(axes.begin(), axes.end())), true);
  std::vector<int64_t> order(r + k);
  std::iota(order.begin(), order.end(), 0);
  for (size_t j = 0; j < k; ++j) std::swap(order[size_t(axes[j])], order[r + j]);
  Shape landed = o;
  for (int64_t a : axes) landed[size_t(a)] = dest.shape()[size_t(a)];
  sum = sum.permute(order).reshape(landed);
  std::vector<std::pair<int64_t, int64_t>> pads;
  for (size_t d = 0; d < r; ++d) pads.emplace_back(0, dest.shape()[d] - landed[d]);
  return dest + sum.pad(pads, 0);
}

// Whether the device, or every device of a sharded tensor, has 64-bit atomics.
bool atomics_64bit_on(const std::string& devices) {
  for (const std::string& d : split_devices(devices))
    if (!device(d).atomics_64bit()) return false;
  return true;
}

}  // namespace

Tensor indexed_scatter(const Tensor& dest, const Tensor& values, std::span<const Tensor> indices,
                       std::span<const int64_t> axes, ScatterReduce combine) {
  assert(!indices.empty() && indices.size() == axes.size() && combine != ScatterReduce::Mean);
  assert(values.dtype() == dest.dtype() && values.ndim() == dest.ndim());
  if (values.numel() == 0 || dest.numel() == 0) return dest;  // nothing lands
  const DType d = dest.dtype();
  // No atomics below 32 bits: combine in the widening (an integer sum or product wraps the same
  // way mod 2^8 or 2^16; bool's sum, product, max and min are or, and, or and and).
  if (d.is_bool() || d.scalar_size() < 4) {
    const DType wide = d.is_float() ? dtypes::float32 : dtypes::int32;
    const Tensor r = indexed_scatter(dest.cast(wide), values.cast(wide), indices, axes, combine);
    return d.is_bool() ? r.ne(0) : r.cast(d);
  }
  // 64-bit combines need the device's 64-bit atomics; without them a sum (the backward of every
  // indexed read, scatter_add) takes the one-hot form. Prod, max and min have none and fail in
  // the renderer with an error naming the feature (a float64 one needs a 64-bit compare-and-swap).
  if (d.scalar_size() == 8 && combine == ScatterReduce::Sum && !atomics_64bit_on(dest.device())) {
    std::vector<Tensor> idx;
    for (size_t j = 0; j < indices.size(); ++j)
      idx.push_back(index_as_int32(indices[j], 0, dest.shape()[size_t(axes[j])]));
    return one_hot_sum_into(dest, values, idx, axes);
  }
  std::vector<UOpPtr> src{dest.clone().node(), values.node()};
  for (size_t j = 0; j < indices.size(); ++j)
    src.push_back(index_as_int32(indices[j], 0, dest.shape()[size_t(axes[j])]).node());
  const UOpPtr out = UOp::make(Ops::SCATTER, d, std::move(src), scatter_arg(combine, axes));
  if (!out->shape())
    throw Error("indexed scatter: values " + shape_str(values.shape()) + " do not fit " +
                shape_str(dest.shape()) + " (internal)");
  return Tensor(out);
}

Scalarish scatter_identity(ScatterCombine combine, DType d) {
  // A bool sum (scatter_add) and max are an or, a product and min an and.
  if (d.is_bool() && combine != ScatterCombine::Assign)
    return Scalarish(combine == ScatterCombine::Prod || combine == ScatterCombine::Min);
  const int bits = 8 * d.scalar_size();
  // The integer range in int64 (uint64's highest, 2^64 - 1, wraps to -1 and back).
  const int64_t lowest = d.is_unsigned() ? 0 : bits == 64 ? INT64_MIN : -(int64_t(1) << (bits - 1));
  const int64_t highest = d.is_unsigned() ? (bits == 64 ? -1 : (int64_t(1) << bits) - 1)
                          : bits == 64    ? INT64_MAX
                                          : (int64_t(1) << (bits - 1)) - 1;
  switch (combine) {
    case ScatterCombine::Sum:
      return d.is_float() ? Scalarish(-0.0) : Scalarish(0);  // -0.0 + -0.0 stays -0.0
    case ScatterCombine::Prod:
      return d.is_float() ? Scalarish(1.0) : Scalarish(1);
    case ScatterCombine::Max:
      return d.is_float() ? Scalarish(-INFINITY) : Scalarish(lowest);
    case ScatterCombine::Min:
      return d.is_float() ? Scalarish(INFINITY) : Scalarish(highest);
    case ScatterCombine::Assign:
      break;
  }
  throw Error("scatter: an assigning scatter has no identity (internal)");
}

Tensor scatter_combined(const Tensor& a, const Tensor& b, ScatterCombine combine) {
  switch (combine) {
    case ScatterCombine::Sum:
      return a + b;
    case ScatterCombine::Prod:
      return a * b;
    case ScatterCombine::Max:
    case ScatterCombine::Min: {
      if (!a.dtype().is_float())
        return combine == ScatterCombine::Max ? a.maximum(b) : a.minimum(b);
      // MAX keeps its first operand of two equal ones; two zeros of either sign combine by
      // adding instead (+0.0 unless both are -0.0), negated around it for the minimum.
      const Tensor x = combine == ScatterCombine::Max ? a : -a;
      const Tensor y = combine == ScatterCombine::Max ? b : -b;
      const Tensor m = x.eq(0).logical_and(y.eq(0)).where(x + y, x.maximum(y));
      return combine == ScatterCombine::Max ? m : -m;
    }
    case ScatterCombine::Assign:
      break;
  }
  throw Error("scatter: assigning scatters do not combine (internal)");
}

std::vector<std::optional<Tensor>> extremum_gradient(const Tensor& dest, const Tensor& values,
                                                     const Tensor& out,
                                                     std::span<const Tensor> indices,
                                                     std::span<const int64_t> axes, const Tensor& g,
                                                     const std::optional<Tensor>& dest_left_out) {
  auto gathered = [&](const Tensor& t) { return at_indices(t, values.shape(), indices, axes); };
  const Tensor zero = g.scalar_like(0);
  // Split evenly among everything equal to the result, as torch: dest's own value included, except
  // where it takes no part (torch counts an excluded self that equals the result too, and so
  // gives its values too little; here an excluded dest never shares). A nan result equals
  // nothing: its share is g / 0 and every input there gets 0 * inf = nan, as torch's.
  Tensor dest_won = dest.eq(out);
  if (dest_left_out) dest_won = dest_won.logical_and(dest_left_out->logical_not());
  const Tensor value_won = values.eq(gathered(out));
  const Tensor ties = indexed_scatter(dest_won.cast(g.dtype()), value_won.cast(g.dtype()), indices,
                                      axes, ScatterReduce::Sum);
  const Tensor share = g / ties;
  Tensor grad_dest = dest_won.cast(g.dtype()) * share;
  if (dest_left_out) grad_dest = dest_left_out->where(zero, grad_dest);
  return {grad_dest, value_won.cast(g.dtype()) * gathered(share)};
}

std::vector<std::optional<Tensor>> scatter_gradient(const UOp& n, const Tensor& g) {
  const auto& arg = n.arg_as<std::vector<int64_t>>();
  const auto combine = ScatterCombine(arg.at(0));
  const std::vector<int64_t> axes(arg.begin() + 1, arg.end());
  // src[0] is the copy the kernel combines into, in place: what it held first is its source.
  assert(n.src[0]->op == Ops::CONTIGUOUS);
  const Tensor dest(n.src[0]->src[0]), values(n.src[1]), out(n.ptr());
  std::vector<Tensor> idx;
  for (size_t i = 2; i < n.src.size(); ++i) idx.emplace_back(n.src[i]);
  const Shape& o = values.shape();
  auto gathered = [&](const Tensor& t) { return at_indices(t, o, idx, axes); };
  auto scatter = [&](const Tensor& into, const Tensor& v, ScatterReduce c) {
    return indexed_scatter(into, v, idx, axes, c);
  };
  const Tensor zero = g.scalar_like(0), one = g.scalar_like(1);
  switch (combine) {
    case ScatterCombine::Sum:
      return {g, gathered(g)};
    case ScatterCombine::Max:
    case ScatterCombine::Min:
      return extremum_gradient(dest, values, out, idx, axes, g, std::nullopt);
    case ScatterCombine::Prod: {
      // torch's: the product of the others, computed without dividing where a factor is 0.
      const Tensor dest_zero = dest.eq(0), value_zero = values.eq(0);
      const Tensor dest_safe = dest_zero.where(one, dest);
      const Tensor grad_dest = g * scatter(dest_safe, values, ScatterReduce::Prod) / dest_safe;
      const Tensor zeros_there = gathered(
          scatter(Tensor::zeros_like(dest), value_zero.cast(g.dtype()), ScatterReduce::Sum));
      const Tensor lone_zero = value_zero.logical_and(zeros_there.eq(1));
      const Tensor without = scatter(dest, lone_zero.where(one, values), ScatterReduce::Prod);
      const Tensor grad_values =
          lone_zero.where(gathered(g * without), gathered(g * out) / value_zero.where(one, values));
      return {grad_dest, grad_values};
    }
    case ScatterCombine::Assign:
      break;
  }
  throw Error("indexed scatter: no gradient for a plain store (internal)");
}

}  // namespace vkg
