// Indexing with tensors: x[{Slice{}, idx}] (advanced indexing, numpy's and torch's rules),
// nonzero and masked_select (which read a mask on the host: their shape depends on it),
// masked_fill, and setitem (x[index] = value, in place through assign). Reads are one indexed
// load (core/indexed_load.hpp). setitem with a basic index or one 1-d index tensor reads the value
// through an indexed load at each element's place in the selection (O(1) per element); other
// index tensors scatter the values to the flat positions the index selects (a one-hot form,
// O(selected) per element).
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>

#include <vkgrad/core/advanced_index.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/index_check.hpp>
#include <vkgrad/core/indexed_load.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

namespace {

std::string desc(const Tensor& t) { return shape_str(t.shape()) + " " + t.dtype().name(); }

[[noreturn]] void fail(const Tensor& x, const std::string& why) {
  throw Error("index: " + why + " (tensor " + desc(x) + ")");
}

// t with leading 1s up to `shape`'s rank, expanded to it.
Tensor broadcast(const Tensor& t, const Shape& shape) {
  Shape lifted(shape.size() - t.shape().size(), 1);
  lifted.insert(lifted.end(), t.shape().begin(), t.shape().end());
  return t.reshape(lifted).expand(shape);
}

}  // namespace

bool has_index_tensor(const std::vector<Index>& index) {
  return std::any_of(index.begin(), index.end(),
                     [](const Index& i) { return std::holds_alternative<Tensor>(i); });
}

// Numpy's rules: integers count as 0-d index tensors once a tensor is present; the basic entries
// (slices, newaxis, ellipsis) are applied first as a view, with full slices where the tensors
// are; then one indexed load reads the indexed dimensions of that view.
Tensor index_with_tensors(const Tensor& x, std::vector<Index> index) {
  const Shape& in = x.shape();
  // Bool masks stand for their nonzero() columns, one integer tensor per dimension they cover.
  std::vector<Index> expanded;
  for (Index& i : index) {
    const Tensor* t = std::get_if<Tensor>(&i);
    if (!t || !t->dtype().is_bool()) {
      expanded.push_back(std::move(i));
      continue;
    }
    if (t->ndim() == 0) fail(x, "a 0-d bool index is not supported");
    const Tensor coords = t->nonzero();
    for (int64_t d = 0; d < t->ndim(); ++d)
      expanded.push_back(
          coords.shrink({{0, coords.shape()[0]}, {d, d + 1}}).reshape({coords.shape()[0]}));
  }
  index = std::move(expanded);
  int64_t consumed = 0;
  for (const Index& i : index)
    if (!std::holds_alternative<Ellipsis>(i) && !std::holds_alternative<NewAxis>(i)) ++consumed;
  if (consumed > int64_t(in.size()))
    fail(x, "too many indices: " + std::to_string(consumed) + " for " + std::to_string(in.size()) +
                " dimensions");
  // The basic index, and per index tensor the dimension of the basic view it reads and its place
  // in the index list (to tell whether the tensors sit next to each other).
  std::vector<Index> basic;
  std::vector<Tensor> tensors;
  std::vector<int64_t> dims, places;
  int64_t out_dim = 0, in_dim = 0;
  for (size_t k = 0; k < index.size(); ++k) {
    const Index& i = index[k];
    if (std::holds_alternative<NewAxis>(i)) {
      basic.push_back(i);
      ++out_dim;
    } else if (std::holds_alternative<Ellipsis>(i)) {
      basic.push_back(i);
      out_dim += int64_t(in.size()) - consumed;
      in_dim += int64_t(in.size()) - consumed;
    } else if (const Slice* s = std::get_if<Slice>(&i)) {
      basic.push_back(*s);
      ++out_dim, ++in_dim;
    } else {
      const int64_t n = in[size_t(in_dim)];
      Tensor t = Tensor::full({}, 0, dtypes::int32, x.device());
      if (const int64_t* at = std::get_if<int64_t>(&i)) {
        if (*at < -n || *at >= n)
          fail(x, "index " + std::to_string(*at) + " is out of bounds for dimension " +
                      std::to_string(in_dim) + " of size " + std::to_string(n));
        t = Tensor::full({}, *at < 0 ? *at + n : *at, dtypes::int32, x.device());
      } else {
        t = std::get<Tensor>(i);
        if (!t.dtype().is_int())
          fail(x, "an index tensor must hold integers or bools, got " + desc(t));
        if (t.device() != x.device())
          fail(x, "the index tensor is on " + t.device() + ", the tensor on " + x.device());
        t = index_as_int32(t, -n, n);
        t = t.lt(0).where(t + int32_t(n), t);  // negative counts from the end
        check_index_values(t, n, "index",
                           "dimension " + std::to_string(in_dim) + " of size " + std::to_string(n));
      }
      basic.push_back(Slice{});
      tensors.push_back(t);
      dims.push_back(out_dim);
      places.push_back(int64_t(k));
      ++out_dim, ++in_dim;
    }
  }
  const Tensor y = x[basic];
  const Shape& ys = y.shape();
  if (y.numel() > INT32_MAX)
    fail(x, "indexes 32-bit element offsets; the tensor has more elements");
  Shape b;
  try {
    for (const Tensor& t : tensors) b = broadcast_shape(b, t.shape(), "index");
  } catch (const Error&) {
    std::string shapes;
    for (const Tensor& t : tensors) shapes += (shapes.empty() ? "" : ", ") + shape_str(t.shape());
    fail(x, "index tensors of shapes " + shapes + " do not broadcast together");
  }
  const bool adjacent = places.back() - places.front() == int64_t(places.size()) - 1;
  // The view with the indexed dimensions first, then len(b) new ones expanded to b, then the
  // rest; the indices are read along the first ones, everything else along the new and the rest.
  const size_t k = tensors.size(), m = b.size();
  std::vector<int64_t> order(dims), rest;
  for (int64_t d = 0; d < int64_t(ys.size()); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) rest.push_back(d);
  order.insert(order.end(), rest.begin(), rest.end());
  Shape lifted, spread, out, index_shape(k, 1);
  for (int64_t d : dims) lifted.push_back(ys[size_t(d)]);
  spread = lifted;
  lifted.insert(lifted.end(), m, 1);
  spread.insert(spread.end(), b.begin(), b.end());
  index_shape.insert(index_shape.end(), b.begin(), b.end());
  Shape index_lifted = index_shape;
  for (int64_t d : rest) {
    lifted.push_back(ys[size_t(d)]);
    spread.push_back(ys[size_t(d)]);
    index_shape.push_back(ys[size_t(d)]);
    index_lifted.push_back(1);
  }
  const Tensor src = y.permute(order).reshape(lifted).expand(spread);
  std::vector<Tensor> idx;
  std::vector<int64_t> axes;
  for (size_t j = 0; j < k; ++j) {
    idx.push_back(broadcast(tensors[j], b).reshape(index_lifted).expand(index_shape));
    axes.push_back(int64_t(j));
  }
  out = b;
  for (int64_t d : rest) out.push_back(ys[size_t(d)]);
  Tensor r = indexed_load(src, idx, axes).reshape(out);
  if (!adjacent || dims.front() == 0) return r;
  // Adjacent index tensors put b where the indexed dimensions were: after the `before` rest
  // dimensions that precede them.
  const int64_t before = dims.front();
  std::vector<int64_t> back;
  for (int64_t d = 0; d < before; ++d) back.push_back(int64_t(m) + d);
  for (int64_t d = 0; d < int64_t(m); ++d) back.push_back(d);
  for (int64_t d = int64_t(m) + before; d < int64_t(out.size()); ++d) back.push_back(d);
  return r.permute(back);
}

Tensor Tensor::nonzero() const {
  const std::vector<uint8_t> flags =
      (dtype().is_bool() ? *this : ne(0)).cast(dtypes::uint8).to_vector<uint8_t>();
  const Shape& s = shape();
  std::vector<int32_t> coords;
  int64_t count = 0;
  for (size_t i = 0; i < flags.size(); ++i) {
    if (!flags[i]) continue;
    ++count;
    std::vector<int32_t> at(s.size());
    int64_t rest = int64_t(i);
    for (size_t d = s.size(); d-- > 0;) {
      at[d] = int32_t(rest % s[d]);
      rest /= s[d];
    }
    coords.insert(coords.end(), at.begin(), at.end());
  }
  return Tensor(coords, {count, int64_t(s.size())}, device());
}

Tensor Tensor::masked_select(const Tensor& mask) const {
  if (!mask.dtype().is_bool())
    throw Error("masked_select: the mask must be bool, got " + desc(mask) + " (tensor " +
                desc(*this) + ")");
  if (mask.device() != device())
    throw Error("masked_select: tensor and mask are on different devices (" + device() + " and " +
                mask.device() + ")");
  Shape s;
  try {
    s = broadcast_shape(shape(), mask.shape(), "masked_select");
  } catch (const Error&) {
    throw Error("masked_select: the mask " + desc(mask) + " does not broadcast with the tensor " +
                desc(*this));
  }
  const Tensor x = broadcast(*this, s), m = broadcast(mask, s);
  if (s.empty()) return x.reshape({1})[{m.reshape({1})}];
  return x[{m}];
}

Tensor Tensor::masked_fill(const Tensor& mask, const Tensor& value) const {
  if (!mask.dtype().is_bool())
    throw Error("masked_fill: the mask must be bool, got " + desc(mask) + " (tensor " +
                desc(*this) + ")");
  if (value.ndim() != 0)
    throw Error("masked_fill: the value must be 0-d, got " + desc(value) + " (tensor " +
                desc(*this) + ")");
  try {
    if (broadcast_shape(shape(), mask.shape(), "masked_fill") != shape()) throw Error("");
  } catch (const Error&) {
    throw Error("masked_fill: the mask " + desc(mask) + " does not broadcast to the tensor " +
                desc(*this));
  }
  return broadcast(mask, shape()).where(value.cast(dtype()), *this);
}

Tensor Tensor::masked_fill(const Tensor& mask, Scalarish value) const {
  return masked_fill(mask, Tensor::full({}, value, dtype(), device()));
}

namespace {

// The coordinates a Python slice selects from range(n), in order (Python's slice.indices).
std::vector<int64_t> slice_coords(int64_t n, const Slice& s) {
  const int64_t step = s.step;
  auto resolve = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    const int64_t x = *v < 0 ? *v + n : *v;
    return step > 0 ? std::clamp<int64_t>(x, 0, n) : std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t start = resolve(s.start, step > 0 ? 0 : n - 1),
                stop = resolve(s.stop, step > 0 ? n : -1);
  std::vector<int64_t> out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    out.push_back(i);
    if ((step > 0 && i > stop - step) || (step < 0 && i < stop - step)) break;  // no overflow
  }
  return out;
}

// x with x[index] replaced by `value` (already of x[index]'s shape and x's dtype), for an index
// whose dimensions select on their own (integers, slices, ellipsis, newaxis, and at most one
// 1-d integer tensor with no integers beside it, which numpy leaves in its place): element i of
// x takes, per dimension d, the place its coordinate i_d has among dimension d's selected
// coordinates (-1 where it has none). That is a small table per dimension: computed on the host
// for integers and slices, by a scatter of positions (an integer max) on the device for a tensor
// (the last repeat wins, as in scatter). One elementwise kernel, O(1) per element, then reads the
// value there through an indexed load (`single`, a value of one element, is broadcast instead).
Tensor set_per_dimension(const Tensor& x, const std::vector<Index>& index, const Tensor& value,
                         const std::optional<Tensor>& single) {
  const Shape& in = x.shape();
  const std::string& device = x.device();
  int64_t consumed = 0;
  for (const Index& i : index)
    if (!std::holds_alternative<Ellipsis>(i) && !std::holds_alternative<NewAxis>(i)) ++consumed;
  std::vector<std::optional<Tensor>> place(in.size());  // none: taken whole, in order
  Shape kept(in);  // the value's shape per dimension of x (1 where an integer removes it)
  size_t dim = 0;
  for (const Index& i : index) {
    if (std::holds_alternative<NewAxis>(i)) continue;
    if (std::holds_alternative<Ellipsis>(i)) {
      dim += size_t(int64_t(in.size()) - consumed);
      continue;
    }
    const int64_t n = in[dim];
    if (const Tensor* t = std::get_if<Tensor>(&i)) {
      const Tensor at = index_as_int32(*t, -n, n);
      const Tensor wrapped = at.lt(0).where(at + int32_t(n), at);  // negative from the end
      const int64_t m = t->numel(), along[] = {0};
      const Tensor flat = wrapped.reshape({m});
      place[dim] = indexed_scatter(Tensor::full({n}, -1, dtypes::int32, device),
                                   Tensor::arange(0, m, 1, device).cast(dtypes::int32), {&flat, 1},
                                   along, ScatterReduce::Amax);
      kept[dim] = m;
    } else {
      const std::vector<int64_t> coords =
          std::holds_alternative<int64_t>(i)
              ? std::vector<int64_t>{std::get<int64_t>(i) < 0 ? std::get<int64_t>(i) + n
                                                              : std::get<int64_t>(i)}
              : slice_coords(n, std::get<Slice>(i));  // x[index] checked them
      std::vector<int32_t> table(size_t(n), -1);
      for (size_t j = 0; j < coords.size(); ++j) table[size_t(coords[j])] = int32_t(j);
      place[dim] = Tensor(table, {n}, device);
      kept[dim] = std::holds_alternative<int64_t>(i) ? 1 : int64_t(coords.size());
    }
    ++dim;
  }
  std::vector<Tensor> places;
  std::vector<int64_t> axes;
  std::optional<Tensor> written;
  for (size_t d = 0; d < in.size(); ++d) {
    if (!place[d]) continue;
    Shape lifted(in.size(), 1);
    lifted[d] = in[d];
    const Tensor at = place[d]->reshape(lifted).expand(in);
    written = written ? written->logical_and(at.ge(0)) : at.ge(0);
    places.push_back(at);
    axes.push_back(int64_t(d));
  }
  if (!written) return value.reshape(in);  // every element is written
  Tensor read = value;
  if (single) {
    read = single->reshape(Shape(in.size(), 1)).expand(in);
  } else {
    // The dimensions taken whole read the value at the element's own coordinate.
    for (size_t d = 0; d < in.size(); ++d)
      if (!place[d]) {
        Shape lifted(in.size(), 1);
        lifted[d] = in[d];
        places.push_back(Tensor::arange(0, in[d], 1, device).reshape(lifted).expand(in));
        axes.push_back(int64_t(d));
      }
    read = indexed_load(value.reshape(kept), places, axes);
  }
  return written->where(read, x);
}

}  // namespace

Tensor& Tensor::setitem(std::vector<Index> index, const Tensor& value) {
  const int64_t n = numel();
  if (n > INT32_MAX) fail(*this, "indexes 32-bit element offsets; the tensor has more elements");
  // x[mask] = one value, with a mask over the leading dimensions: a masked_fill, no host sync.
  if (index.size() == 1 && value.numel() == 1 && value.device() == device())
    if (const Tensor* m = std::get_if<Tensor>(&index[0]);
        m && m->dtype().is_bool() && m->ndim() <= ndim() &&
        std::equal(m->shape().begin(), m->shape().end(), shape().begin())) {
      Shape lifted = m->shape();
      lifted.resize(shape().size(), 1);
      return assign(masked_fill(m->reshape(lifted), value.reshape({}).cast(dtype())));
    }
  // Whether each dimension selects on its own (set_per_dimension): no tensor, or one 1-d integer
  // tensor and no integers (with integers numpy may move the tensor's dimension first).
  int tensors = 0;
  bool one_d = true, integers = false;
  for (const Index& i : index) {
    if (const Tensor* t = std::get_if<Tensor>(&i)) {
      ++tensors;
      one_d = one_d && t->dtype().is_int() && t->ndim() == 1;
    }
    integers = integers || std::holds_alternative<int64_t>(i);
  }
  const bool per_dimension = tensors == 0 || (tensors == 1 && one_d && !integers);
  // The flat position of every element x[index] selects, by indexing the positions themselves
  // (set_per_dimension uses only its shape, and checks of the index: nothing of it runs).
  const Tensor positions = Tensor::arange(0, n, 1, device()).reshape(shape())[index];
  const Shape& s = positions.shape();
  Shape fit;
  try {
    fit = broadcast_shape(s, value.shape(), "setitem");
  } catch (const Error&) {
    fit = {};
  }
  if (fit != s)
    throw Error("setitem: the value " + desc(value) + " does not broadcast to the indexed shape " +
                shape_str(s) + " (tensor " + desc(*this) + ")");
  if (value.device() != device())
    throw Error("setitem: tensor and value are on different devices (" + device() + " and " +
                value.device() + ")");
  if (per_dimension) {
    const Tensor v = value.cast(dtype());
    const std::optional<Tensor> single =
        v.numel() == 1 ? std::optional(v.reshape({})) : std::nullopt;
    return assign(set_per_dimension(*this, index, broadcast(v, s), single));
  }
  const int64_t k = positions.numel();
  const Tensor flat = reshape({n}).scatter(0, positions.reshape({k}),
                                           broadcast(value.cast(dtype()), s).reshape({k}));
  return assign(flat.reshape(shape()));
}

Tensor& Tensor::setitem(std::vector<Index> index, Scalarish value) {
  return setitem(std::move(index), Tensor::full({}, value, dtype(), device()));
}

}  // namespace vkg
