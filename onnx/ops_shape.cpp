// Movement and indexing operators: Reshape, Transpose, Concat, Split, Slice, Gather*, Squeeze,
// Unsqueeze, Flatten, Expand, Tile, Pad, DepthToSpace, Trilu, Scatter*, OneHot, NonZero, Compress.
// Shapes, axes and pads come from attributes or (in later opsets) from inputs read on the host;
// integer values known on the host flow through the ops that shape computations use.
#include <algorithm>
#include <limits>
#include <numeric>

#include <vkgrad/onnx/ops.hpp>

namespace vkg::onnx {
namespace {

// Negative indices count from the end of an axis of size n.
Tensor wrap_index(const Tensor& idx, int64_t n) {
  return idx.lt(0).where(idx + Tensor::full({}, n, idx.dtype(), idx.device()), idx);
}

std::vector<int64_t> axes_list(OpContext& c, std::vector<int64_t> axes, int64_t rank) {
  for (auto& a : axes) a = axis_of(c, a, rank);
  return axes;
}

std::vector<Value> reshape(OpContext& c) {
  const Value& x = c.value(0);
  std::vector<int64_t> shape = c.opset() >= 5 ? c.ints_in(1) : c.attr_ints("shape", {});
  const bool allowzero = c.attr_i("allowzero", 0) != 0;
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 0 && !allowzero) {
      if (int64_t(i) >= x.tensor().ndim())
        c.fail("shape holds 0 at " + std::to_string(i) + ", past the input's rank");
      shape[i] = x.tensor().shape()[i];
    }
  Tensor y = x.tensor().reshape(Shape(shape));
  if (x.host) return {Value(y, *x.host)};
  return {y};
}

std::vector<Value> transpose(OpContext& c) {
  const Tensor x = c.in(0);
  std::vector<int64_t> perm(size_t(x.ndim()));
  std::iota(perm.rbegin(), perm.rend(), 0);
  perm = c.attr_ints("perm", perm);
  return {x.permute(perm)};
}

std::vector<Value> concat(OpContext& c) {
  const int64_t rank = c.in(0).ndim();
  auto a = c.attr_i("axis");
  if (!a && c.opset() < 4) a = 1;  // optional, 1 by default, before opset 4
  if (!a) c.fail("attribute 'axis' is required");
  const int64_t axis = axis_of(c, *a, rank);
  std::vector<Tensor> parts;
  bool host = rank == 1;
  std::vector<int64_t> values;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    if (!c.has(i)) continue;
    parts.push_back(c.in(i));
    host = host && c.value(i).host.has_value();
    if (host) values.insert(values.end(), c.value(i).host->begin(), c.value(i).host->end());
  }
  Tensor y = Tensor::cat(parts, axis);
  if (host) return {Value(y, values)};
  return {y};
}

std::vector<Value> split(OpContext& c) {
  const Tensor x = c.in(0);
  const int64_t axis = axis_of(c, c.attr_i("axis", 0), x.ndim());
  const int64_t n = x.shape()[size_t(axis)];
  std::vector<int64_t> sizes;
  if (c.opset() >= 13) {
    if (c.has(1)) sizes = c.ints_in(1);
  } else {
    sizes = c.attr_ints("split", {});
  }
  if (sizes.empty()) {
    const int64_t parts = c.node().output_size();
    if (parts < 1) c.fail("has no outputs and no split sizes");
    if (n % parts)
      c.fail("axis of size " + std::to_string(n) + " does not split into " + std::to_string(parts) +
             " equal parts");
    sizes.assign(size_t(parts), n / parts);
  }
  std::vector<Value> out;
  for (Tensor& t : x.split(sizes, axis)) out.emplace_back(t);
  return out;
}

// The positions a Slice visits along an axis of size `dim`, clamped as numpy does.
struct Range1 {
  int64_t start, stop, step, count;
};
Range1 clamp_slice(int64_t start, int64_t stop, int64_t step, int64_t dim) {
  if (start < 0) start += dim;
  if (stop < 0) stop += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    stop = std::clamp<int64_t>(stop, 0, dim);
  } else {
    start = std::clamp<int64_t>(start, -1, dim - 1);
    stop = std::clamp<int64_t>(stop, -1, dim - 1);
  }
  int64_t count =
      step > 0 ? (stop - start + step - 1) / step : (start - stop + (-step) - 1) / (-step);
  return {start, stop, step, std::max<int64_t>(count, 0)};
}

std::vector<Value> slice(OpContext& c) {
  const Value& xv = c.value(0);
  const Tensor& x = xv.tensor();
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.opset() >= 10) {
    starts = c.ints_in(1);
    ends = c.ints_in(2);
    if (c.has(3)) axes = c.ints_in(3);
    if (c.has(4)) steps = c.ints_in(4);
  } else {
    starts = c.attr_ints("starts", {});
    ends = c.attr_ints("ends", {});
    axes = c.attr_ints("axes", {});
  }
  if (axes.empty()) {
    axes.resize(starts.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    c.fail("starts, ends, axes and steps differ in length");
  std::vector<Index> index(size_t(x.ndim()), Slice{});
  std::vector<Range1> ranges(size_t(x.ndim()));
  for (int64_t d = 0; d < x.ndim(); ++d)
    ranges[size_t(d)] = {0, x.shape()[size_t(d)], 1, x.shape()[size_t(d)]};
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t a = axis_of(c, axes[i], x.ndim());
    if (steps[i] == 0) c.fail("a step is 0");
    const Range1 r = clamp_slice(starts[i], ends[i], steps[i], x.shape()[size_t(a)]);
    ranges[size_t(a)] = r;
    if (r.count == 0)
      index[size_t(a)] = Slice{0, 0, 1};
    else
      index[size_t(a)] =
          Slice{r.start, r.step < 0 && r.stop < 0 ? std::nullopt : std::optional<int64_t>(r.stop),
                r.step};
  }
  Tensor y = x[index];
  if (xv.host && x.ndim() == 1) {
    std::vector<int64_t> v;
    const Range1& r = ranges[0];
    for (int64_t k = 0, p = r.start; k < r.count; ++k, p += r.step)
      v.push_back((*xv.host)[size_t(p)]);
    return {Value(y, v)};
  }
  return {y};
}

std::vector<Value> gather(OpContext& c) {
  const Value& xv = c.value(0);
  const Tensor& x = xv.tensor();
  const Tensor idx = c.in(1);
  const int64_t axis = axis_of(c, c.attr_i("axis", 0), x.ndim());
  const int64_t n = x.shape()[size_t(axis)];
  Shape out;
  for (int64_t d = 0; d < axis; ++d) out.push_back(x.shape()[size_t(d)]);
  for (int64_t s : idx.shape()) out.push_back(s);
  for (int64_t d = axis + 1; d < x.ndim(); ++d) out.push_back(x.shape()[size_t(d)]);
  Tensor y = x.index_select(axis, wrap_index(idx, n).flatten()).reshape(out);
  if (xv.host && c.value(1).host && x.ndim() == 1) {
    std::vector<int64_t> v;
    for (int64_t i : *c.value(1).host) {
      if (i < -n || i >= n)
        c.fail("index " + std::to_string(i) + " is outside an axis of size " + std::to_string(n));
      v.push_back((*xv.host)[size_t(i < 0 ? i + n : i)]);
    }
    return {Value(y, v)};
  }
  return {y};
}

std::vector<Value> gather_elements(OpContext& c) {
  const Tensor x = c.in(0);
  const int64_t axis = axis_of(c, c.attr_i("axis", 0), x.ndim());
  return {x.gather(axis, wrap_index(c.in(1), x.shape()[size_t(axis)]))};
}

std::vector<int64_t> squeeze_axes(OpContext& c, int input_from) {
  if (c.opset() >= input_from) return c.has(1) ? c.ints_in(1) : std::vector<int64_t>{};
  return c.attr_ints("axes", {});
}

std::vector<Value> squeeze(OpContext& c) {
  const Value& xv = c.value(0);
  Tensor x = xv.tensor();
  std::vector<int64_t> axes = axes_list(c, squeeze_axes(c, 13), x.ndim());
  if (axes.empty())
    for (int64_t d = 0; d < x.ndim(); ++d)
      if (x.shape()[size_t(d)] == 1) axes.push_back(d);
  Shape s;
  for (int64_t d = 0; d < x.ndim(); ++d) {
    const bool drop = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (drop && x.shape()[size_t(d)] != 1)
      c.fail("cannot squeeze axis " + std::to_string(d) + " of size " +
             std::to_string(x.shape()[size_t(d)]));
    if (!drop) s.push_back(x.shape()[size_t(d)]);
  }
  Tensor y = x.reshape(s);
  if (xv.host) return {Value(y, *xv.host)};
  return {y};
}

std::vector<Value> unsqueeze(OpContext& c) {
  const Value& xv = c.value(0);
  const Tensor& x = xv.tensor();
  std::vector<int64_t> raw = squeeze_axes(c, 13);
  const int64_t rank = x.ndim() + int64_t(raw.size());
  std::vector<int64_t> axes = axes_list(c, raw, rank);
  std::sort(axes.begin(), axes.end());
  // A repeated axis would make the output rank larger than its ones: x's shape would run out.
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) c.fail("axes name an axis twice");
  Shape s;
  size_t src = 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (std::binary_search(axes.begin(), axes.end(), d))
      s.push_back(1);
    else
      s.push_back(x.shape()[src++]);
  }
  Tensor y = x.reshape(s);
  if (xv.host) return {Value(y, *xv.host)};
  return {y};
}

std::vector<Value> flatten(OpContext& c) {
  const Tensor x = c.in(0);
  int64_t axis = c.attr_i("axis", 1);
  if (axis < 0) axis += x.ndim();
  if (axis < 0 || axis > x.ndim()) c.fail("axis " + std::to_string(axis) + " is out of range");
  int64_t a = 1, b = 1;
  for (int64_t d = 0; d < x.ndim(); ++d) (d < axis ? a : b) *= x.shape()[size_t(d)];
  return {x.reshape(Shape{a, b})};
}

// Expand broadcasts both ways: a 1 in the shape keeps the input's size.
std::vector<Value> expand(OpContext& c) {
  Tensor x = c.in(0);
  const Shape shape = c.ints_in(1);
  const Shape out = broadcast_shape(x.shape(), shape, "Expand");
  Shape padded(out.size() - size_t(x.ndim()), 1);
  padded.insert(padded.end(), x.shape().begin(), x.shape().end());
  return {x.reshape(padded).expand(out)};
}

std::vector<Value> tile(OpContext& c) { return {c.in(0).repeat(c.ints_in(1))}; }

std::vector<Value> pad(OpContext& c) {
  const Tensor x = c.in(0);
  std::vector<int64_t> pads;
  double value = 0;
  if (c.opset() >= 11) {
    pads = c.ints_in(1);
    if (c.has(2)) value = c.double_in(2);
  } else {
    pads = c.attr_ints(c.opset() >= 2 ? "pads" : "paddings", {});
    value = c.attr_f("value", 0.0f);
  }
  const int64_t r = x.ndim();
  std::vector<int64_t> axes(static_cast<size_t>(r));
  std::iota(axes.begin(), axes.end(), 0);
  if (c.has(3)) axes = axes_list(c, c.ints_in(3), r);
  if (pads.size() != 2 * axes.size())
    c.fail("pads holds " + std::to_string(pads.size()) + " values for " +
           std::to_string(axes.size()) + " axes");
  std::vector<std::pair<int64_t, int64_t>> pw(size_t(r), {0, 0});
  for (size_t i = 0; i < axes.size(); ++i) pw[size_t(axes[i])] = {pads[i], pads[i + axes.size()]};
  const std::string mode = c.attr_s("mode", "constant");
  const PadMode m = mode == "constant"  ? PadMode::Constant
                    : mode == "reflect" ? PadMode::Reflect
                    : mode == "edge"    ? PadMode::Replicate
                                        : (c.unsupported("mode '" + mode + "'"), PadMode::Constant);
  Scalarish v = x.dtype().is_float() ? Scalarish(value) : Scalarish(int64_t(value));
  if (x.dtype().is_bool()) v = Scalarish(value != 0);
  return {x.pad(pw, m, v)};
}

// DepthToSpace and SpaceToDepth on (N, C, H, W) with block size b.
std::vector<Value> depth_to_space(OpContext& c) {
  const Tensor x = c.in(0);
  const int64_t b = c.attr_i("blocksize", 0);
  const std::string mode = c.attr_s("mode", "DCR");
  const auto& s = x.shape();
  if (x.ndim() != 4 || b <= 0 || s[1] % (b * b))
    c.fail("needs a 4-D input whose channels divide by blocksize^2");
  const int64_t n = s[0], ch = s[1] / (b * b), h = s[2], w = s[3];
  Tensor y = mode == "DCR" ? x.reshape(Shape{n, b, b, ch, h, w}).permute({0, 3, 4, 1, 5, 2})
                           : x.reshape(Shape{n, ch, b, b, h, w}).permute({0, 1, 4, 2, 5, 3});
  return {y.reshape(Shape{n, ch, h * b, w * b})};
}
std::vector<Value> space_to_depth(OpContext& c) {
  const Tensor x = c.in(0);
  const int64_t b = c.attr_i("blocksize", 0);
  const auto& s = x.shape();
  if (x.ndim() != 4 || b <= 0 || s[2] % b || s[3] % b)
    c.fail("needs a 4-D input whose height and width divide by blocksize");
  const int64_t n = s[0], ch = s[1], h = s[2] / b, w = s[3] / b;
  return {x.reshape(Shape{n, ch, h, b, w, b})
              .permute({0, 3, 5, 1, 2, 4})
              .reshape(Shape{n, ch * b * b, h, w})};
}

std::vector<Value> trilu(OpContext& c) {
  const Tensor x = c.in(0);
  const int64_t k = c.has(1) ? c.int_in(1) : 0;
  return {c.attr_i("upper", 1) ? x.triu(k) : x.tril(k)};
}

std::vector<Value> scatter_elements(OpContext& c) {
  const Tensor x = c.in(0);
  const int64_t axis = axis_of(c, c.attr_i("axis", 0), x.ndim());
  const Tensor idx = wrap_index(c.in(1), x.shape()[size_t(axis)]);
  const std::string red = c.attr_s("reduction", "none");
  if (red == "none") return {x.scatter(axis, idx, c.in(2))};
  if (red == "add") return {x.scatter_reduce(axis, idx, c.in(2), ScatterReduce::Sum, true)};
  if (red == "mul") return {x.scatter_reduce(axis, idx, c.in(2), ScatterReduce::Prod, true)};
  if (red == "max") return {x.scatter_reduce(axis, idx, c.in(2), ScatterReduce::Amax, true)};
  if (red == "min") return {x.scatter_reduce(axis, idx, c.in(2), ScatterReduce::Amin, true)};
  c.unsupported("reduction '" + red + "'");
}

std::vector<Value> one_hot(OpContext& c) {
  const Tensor idx = c.in(0);
  const double depth_in = c.double_in(1);
  if (!(depth_in >= 1 && depth_in <= double(std::numeric_limits<int32_t>::max())))
    c.fail("depth " + std::to_string(depth_in) + " is not a class count");
  const int64_t depth = int64_t(depth_in);
  const Tensor values = c.in(2);
  const int64_t rank = idx.ndim() + 1;
  const int64_t axis = axis_of(c, c.attr_i("axis", -1), rank);
  Tensor i = idx.dtype().is_float() ? idx.cast(dtypes::int64) : idx;
  i = wrap_index(i, depth);
  Shape s(size_t(rank), 1);
  s[size_t(axis)] = depth;
  const Tensor pos = Tensor::arange(0, depth, 1, idx.device()).cast(i.dtype()).reshape(s);
  const Tensor hot = pos.eq(i.unsqueeze(axis));
  return {hot.where(values[1], values[0])};
}

std::vector<Value> non_zero(OpContext& c) {
  const Tensor x = c.in(0);
  if (x.ndim() == 0)
    return {
        x.reshape(Shape{1}).nonzero().permute({1, 0}).cast(dtypes::int64).reshape(Shape{0, -1})};
  return {x.nonzero().permute({1, 0}).cast(dtypes::int64)};
}

std::vector<Value> compress(OpContext& c) {
  Tensor x = c.in(0);
  const std::vector<int64_t> cond = c.ints_in(1);
  std::optional<int64_t> axis;
  if (auto a = c.attr_i("axis")) axis = axis_of(c, *a, x.ndim());
  if (!axis) x = x.flatten(), axis = 0;
  std::vector<int64_t> keep;
  for (size_t i = 0; i < cond.size() && int64_t(i) < x.shape()[size_t(*axis)]; ++i)
    if (cond[i]) keep.push_back(int64_t(i));
  return {x.index_select(*axis, Tensor(keep, Shape{int64_t(keep.size())}, x.device()))};
}

}  // namespace

void add_shape_ops(OpTable& t) {
  t["Reshape"] = reshape;
  t["Transpose"] = transpose;
  t["Concat"] = concat;
  t["Split"] = split;
  t["Slice"] = slice;
  t["Gather"] = gather;
  t["GatherElements"] = gather_elements;
  t["Squeeze"] = squeeze;
  t["Unsqueeze"] = unsqueeze;
  t["Flatten"] = flatten;
  t["Expand"] = expand;
  t["Tile"] = tile;
  t["Pad"] = pad;
  t["DepthToSpace"] = depth_to_space;
  t["SpaceToDepth"] = space_to_depth;
  t["Trilu"] = trilu;
  t["ScatterElements"] = scatter_elements;
  t["Scatter"] = scatter_elements;
  t["OneHot"] = one_hot;
  t["NonZero"] = non_zero;
  t["Compress"] = compress;
}

}  // namespace vkg::onnx
