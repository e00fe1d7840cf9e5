// Writes chosen by index tensors: scatter, scatter_add and scatter_reduce, as torch's. Each output
// element compares every index along the axis with its own position (one_hot_scatter,
// core/indexed_load.hpp) and combines what lands on it: one fused reduce kernel, O(index size
// along the axis) per element, differentiable through the where, the reduce and the gather of the
// winning value. A real scatter (atomics, or a sort) would be O(1) per index; not yet.
#include <vector>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/index_check.hpp>
#include <vkgrad/core/indexed_load.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

namespace {

std::string desc(const Tensor& t) { return shape_str(t.shape()) + " " + t.dtype().name(); }

// Index and values brought to the target's shape on every axis but `axis` (the index padded
// with -1, which lands nowhere), with the checks torch makes.
struct Placed {
  int axis = 0;
  Tensor index, values;
};

Placed place(std::string_view op, const Tensor& self, int64_t axis, const Tensor& index,
             const Tensor& src) {
  auto fail = [&](const std::string& why) {
    throw Error(std::string(op) + ": " + why + " (tensor " + desc(self) + ", index " + desc(index) +
                ", src " + desc(src) + ")");
  };
  if (!index.dtype().is_int()) fail("the index must be an integer tensor");
  if (src.dtype() != self.dtype()) fail("src must have the tensor's dtype");
  if (index.device() != self.device() || src.device() != self.device())
    fail("tensor, index and src are on different devices");
  if (self.has_symbolic_shape() || index.has_symbolic_shape() || src.has_symbolic_shape())
    fail("symbolic shapes are not supported");
  const Shape& s = self.shape();
  const Shape& is = index.shape();
  if (is.size() != s.size() || src.ndim() != int(s.size()))
    fail("tensor, index and src need the same number of dimensions");
  if (s.empty()) {
    if (axis != 0 && axis != -1) fail("axis " + std::to_string(axis) + " is out of range");
    return place(op, self.reshape({1}), 0, index.reshape({1}), src.reshape({1}));
  }
  const int a = normalize_axis(axis, s, op);
  std::vector<std::pair<int64_t, int64_t>> to_index, pads;
  for (size_t d = 0; d < s.size(); ++d) {
    if (is[d] > src.shape()[d])
      fail("index dimension " + std::to_string(d) + " is larger than src's");
    if (int(d) != a && is[d] > s[d])
      fail("index dimension " + std::to_string(d) + " is larger than the tensor's");
    to_index.emplace_back(0, is[d]);
    pads.emplace_back(0, int(d) == a ? 0 : s[d] - is[d]);
  }
  check_index_values(index, s[size_t(a)], op,
                     "dimension " + std::to_string(a) + " of size " + std::to_string(s[size_t(a)]));
  return {a, index_as_int32(index, 0, s[size_t(a)]).pad(pads, -1),
          src.shrink(to_index).pad(pads, 0)};
}

// How many indices land on each element of `shape`.
Tensor landings(const Placed& p, const Shape& shape) {
  const int64_t along[] = {p.axis};
  return one_hot_scatter_sum(Tensor::ones_like(p.index), {&p.index, 1}, along, shape);
}

}  // namespace

Tensor Tensor::scatter(int64_t axis, const Tensor& index, const Tensor& src) const {
  const Placed p = place("scatter", *this, axis, index, src);
  const Shape target = ndim() == 0 ? Shape{1} : shape();
  // The last position along the axis that lands on each element wins: the largest position,
  // -1 (the max's identity is lower) where none lands, and the value is read from there.
  Shape along(p.index.shape().size(), 1);
  along[size_t(p.axis)] = p.index.shape()[size_t(p.axis)];
  const Tensor position =
      Tensor::arange(0, along[size_t(p.axis)], 1, device()).reshape(along).expand(p.index.shape());
  const int64_t axes[] = {p.axis};
  const Tensor winner = one_hot_scatter(position, {&p.index, 1}, axes, target, ScatterReduce::Amax);
  const Tensor picked = indexed_load(p.values, {&winner, 1}, axes);
  return winner.ge(0).where(picked, reshape(target)).reshape(shape());
}

Tensor Tensor::scatter(int64_t axis, const Tensor& index, Scalarish value) const {
  return scatter(axis, index, Tensor::full(index.shape(), value, dtype(), device()));
}

Tensor Tensor::scatter_add(int64_t axis, const Tensor& index, const Tensor& src) const {
  const Placed p = place("scatter_add", *this, axis, index, src);
  const Shape target = ndim() == 0 ? Shape{1} : shape();
  const int64_t axes[] = {p.axis};
  return (reshape(target) + one_hot_scatter_sum(p.values, {&p.index, 1}, axes, target))
      .reshape(shape());
}

Tensor Tensor::scatter_reduce(int64_t axis, const Tensor& index, const Tensor& src,
                              ScatterReduce reduce, bool include_self) const {
  const Placed p = place("scatter_reduce", *this, axis, index, src);
  if (dtype().is_bool())
    throw Error("scatter_reduce: needs a number dtype, got tensor " + desc(*this));
  const Shape target = ndim() == 0 ? Shape{1} : shape();
  const Tensor self = reshape(target);
  const int64_t axes[] = {p.axis};
  const ScatterReduce combine = reduce == ScatterReduce::Mean ? ScatterReduce::Sum : reduce;
  const Tensor r = one_hot_scatter(p.values, {&p.index, 1}, axes, target, combine);
  const Tensor landed = landings(p, target).gt(0);
  const auto combined = [&]() -> Tensor {
    switch (reduce) {
      case ScatterReduce::Sum:
        return include_self ? self + r : r;
      case ScatterReduce::Prod:
        return include_self ? self * r : r;
      case ScatterReduce::Amax:
        return include_self ? self.maximum(r) : r;
      case ScatterReduce::Amin:
        return include_self ? self.minimum(r) : r;
      case ScatterReduce::Mean:
        break;
    }
    const Tensor total = include_self ? self + r : r;
    Tensor count = landings(p, target);
    if (include_self) count = count + 1;
    count = count.maximum(1).cast(dtype());
    return dtype().is_float() ? total / count : total.floordiv(count);
  };
  const Tensor out = combined();
  return landed.where(out, self).reshape(shape());
}

}  // namespace vkg
