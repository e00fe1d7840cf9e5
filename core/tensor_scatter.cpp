// Writes chosen by index tensors: scatter, scatter_add and scatter_reduce, as torch's. Each is a
// SCATTER (core/indexed_load.hpp): a copy of the target, then one kernel with one invocation per
// value that combines it into the element its index names, atomically; O(1) work per value.
// Gradients come from the SCATTER's rule (gradient.cpp) and the elementwise ops around it.
#include <cmath>
#include <vector>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/gradient.hpp>
#include <vkgrad/core/index_check.hpp>
#include <vkgrad/core/indexed_load.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

namespace {

std::string desc(const Tensor& t) { return shape_str(t.shape()) + " " + t.dtype().name(); }

// The target (0-d as 1-d), the axis, and the index and the values it takes from src (src shrunk
// to the index's shape), with the checks torch makes.
struct Placed {
  Tensor target;
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
  if (self.numel() > INT32_MAX) fail("indexes 32-bit element offsets; the tensor has more");
  const Shape& s = self.shape();
  const Shape& is = index.shape();
  if (is.size() != s.size() || src.ndim() != int(s.size()))
    fail("tensor, index and src need the same number of dimensions");
  if (s.empty()) {
    if (axis != 0 && axis != -1) fail("axis " + std::to_string(axis) + " is out of range");
    return place(op, self.reshape({1}), 0, index.reshape({1}), src.reshape({1}));
  }
  const int a = normalize_axis(axis, s, op);
  std::vector<std::pair<int64_t, int64_t>> to_index;
  for (size_t d = 0; d < s.size(); ++d) {
    if (is[d] > src.shape()[d])
      fail("index dimension " + std::to_string(d) + " is larger than src's");
    if (int(d) != a && is[d] > s[d])
      fail("index dimension " + std::to_string(d) + " is larger than the tensor's");
    to_index.emplace_back(0, is[d]);
  }
  check_index_values(index, s[size_t(a)], op,
                     "dimension " + std::to_string(a) + " of size " + std::to_string(s[size_t(a)]));
  return {self, a, index_as_int32(index, 0, s[size_t(a)]), src.shrink(to_index)};
}

Tensor scatter_into(const Tensor& dest, const Placed& p, const Tensor& values,
                    ScatterReduce combine) {
  const int64_t axes[] = {p.axis};
  return indexed_scatter(dest, values, {&p.index, 1}, axes, combine);
}

// How many values land on each element of the target (int32).
Tensor landings(const Placed& p) {
  const Tensor none = Tensor::zeros(p.target.shape(), dtypes::int32, p.target.device());
  return scatter_into(none, p, Tensor::ones(p.index.shape(), dtypes::int32, p.index.device()),
                      ScatterReduce::Sum);
}

// Where values land without self: 0 for a sum (torch's start: +0.0), else the combine's identity.
Scalarish identity(ScatterReduce reduce, DType d) {
  switch (reduce) {
    case ScatterReduce::Prod:
      return scatter_identity(ScatterCombine::Prod, d);
    case ScatterReduce::Amax:
      return scatter_identity(ScatterCombine::Max, d);
    case ScatterReduce::Amin:
      return scatter_identity(ScatterCombine::Min, d);
    case ScatterReduce::Sum:
    case ScatterReduce::Mean:
      break;
  }
  return 0;
}

}  // namespace

Tensor Tensor::scatter(int64_t axis, const Tensor& index, const Tensor& src) const {
  const Placed p = place("scatter", *this, axis, index, src);
  const Tensor& self = p.target;
  // The last position along the axis that lands on each element wins: an integer max of the
  // positions into -1s (the value of an element nothing lands on), and the value is read there.
  Shape along(p.index.shape().size(), 1);
  along[size_t(p.axis)] = p.index.shape()[size_t(p.axis)];
  const Tensor position = Tensor::arange(0, along[size_t(p.axis)], 1, device())
                              .cast(dtypes::int32)
                              .reshape(along)
                              .expand(p.index.shape());
  const Tensor none = Tensor::full(self.shape(), -1, dtypes::int32, device());
  const Tensor winner = scatter_into(none, p, position, ScatterReduce::Amax);
  // The values padded out to the target's shape off the axis, where the winner reads them.
  std::vector<std::pair<int64_t, int64_t>> pads;
  for (size_t d = 0; d < self.shape().size(); ++d)
    pads.emplace_back(0, int(d) == p.axis ? 0 : self.shape()[d] - p.index.shape()[d]);
  const int64_t axes[] = {p.axis};
  const Tensor picked = indexed_load(p.values.pad(pads, 0), {&winner, 1}, axes);
  return winner.ge(0).where(picked, self).reshape(shape());
}

Tensor Tensor::scatter(int64_t axis, const Tensor& index, Scalarish value) const {
  return scatter(axis, index, Tensor::full(index.shape(), value, dtype(), device()));
}

Tensor Tensor::scatter_add(int64_t axis, const Tensor& index, const Tensor& src) const {
  const Placed p = place("scatter_add", *this, axis, index, src);
  return scatter_into(p.target, p, p.values, ScatterReduce::Sum).reshape(shape());
}

Tensor Tensor::scatter_reduce(int64_t axis, const Tensor& index, const Tensor& src,
                              ScatterReduce reduce, bool include_self) const {
  const Placed p = place("scatter_reduce", *this, axis, index, src);
  if (dtype().is_bool())
    throw Error("scatter_reduce: needs a number dtype, got tensor " + desc(*this));
  const Tensor& self = p.target;
  const ScatterReduce combine = reduce == ScatterReduce::Mean ? ScatterReduce::Sum : reduce;
  if (include_self && reduce != ScatterReduce::Mean)
    return scatter_into(self, p, p.values, combine).reshape(shape());
  // Without self, an element values land on starts from the combine's identity instead.
  const Tensor count = landings(p);
  const Tensor landed = count.gt(0);
  const Tensor start =
      include_self
          ? self
          : landed.where(Tensor::full({}, identity(combine, dtype()), dtype(), device()), self);
  Tensor r = scatter_into(start, p, p.values, combine);
  if (!include_self && (reduce == ScatterReduce::Amax || reduce == ScatterReduce::Amin)) {
    // The identity start takes no part: were it left to the SCATTER's own gradient, it would
    // count as a tie wherever the values' extremum is that identity (all -inf for amax).
    const Tensor values = p.values;
    const std::vector<Tensor> idx{p.index};
    const std::vector<int64_t> axes{p.axis};
    r = Tensor(with_custom_gradient(
        r.node(), {start.node(), values.node()},
        [start, values, idx, axes, landed, out = r.node()](const Tensor& g) {
          return extremum_gradient(start, values, Tensor(out), idx, axes, g, landed);
        }));
  }
  if (reduce != ScatterReduce::Mean) return r.reshape(shape());
  // An element nothing lands on keeps its value: r is self there, divided by 1.
  const Tensor n = (include_self ? count + 1 : count.maximum(1)).cast(dtype());
  return (dtype().is_float() ? r / n : r.floordiv(n)).reshape(shape());
}

}  // namespace vkg
