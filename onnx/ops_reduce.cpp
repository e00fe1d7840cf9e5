// Reductions and the ops that read a whole axis: Reduce* (axes as an attribute, or as an input
// from the opset that moved them), ArgMax/ArgMin, Softmax/LogSoftmax/Hardmax, CumSum, TopK.
// Reductions keep the input's dtype, as ONNX does (vkgrad sums small integers wider).
#include <limits>
#include <numeric>

#include <vkgrad/onnx/ops.hpp>

namespace vkg::onnx {
namespace {

// The axes of a Reduce* node: an input from opset `input_from` on, an attribute before. None
// means all of them, unless noop_with_empty_axes makes it the identity (nullopt).
std::optional<std::vector<int64_t>> reduce_axes(OpContext& c, int64_t input_from) {
  std::vector<int64_t> axes;
  if (c.opset() >= input_from) {
    if (c.has(1)) axes = c.ints_in(1);
  } else {
    axes = c.attr_ints("axes", {});
  }
  const bool noop = c.attr_i("noop_with_empty_axes", 0) != 0;
  if (axes.empty()) {
    if (noop) return std::nullopt;
    axes.resize(size_t(c.in(0).ndim()));
    std::iota(axes.begin(), axes.end(), 0);
  }
  for (auto& a : axes) a = axis_of(c, a, c.in(0).ndim());
  return axes;
}

enum class Reduce { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

OpFn reduce(Reduce kind, int64_t input_from) {
  return [kind, input_from](OpContext& c) -> std::vector<Value> {
    const Tensor x = c.in(0);
    const auto axes = reduce_axes(c, input_from);
    const bool keep = c.attr_i("keepdims", 1) != 0;
    if (!axes) return {x};
    const Axes a(*axes);
    // Reducing an empty axis gives the op's identity (as numpy's reduce with an initial value).
    bool empty = false;
    for (int64_t ax : *axes) empty |= x.shape()[size_t(ax)] == 0;
    Tensor y = [&] {
      switch (kind) {
        case Reduce::Sum:
          return x.sum(a, keep);
        case Reduce::Mean:
          return x.mean(a, keep);
        case Reduce::Max:
          if (empty)
            return x.sum(a, keep) + x.scalar_like(x.dtype().is_float()
                                                      ? -std::numeric_limits<double>::infinity()
                                                      : dtypes::min_value(x.dtype()));
          return x.max(a, keep);
        case Reduce::Min:
          if (empty)
            return x.sum(a, keep) + x.scalar_like(x.dtype().is_float()
                                                      ? std::numeric_limits<double>::infinity()
                                                      : dtypes::max_value(x.dtype()));
          return x.min(a, keep);
        case Reduce::Prod:
          return x.prod(a, keep);
        case Reduce::L1:
          return x.abs().sum(a, keep);
        case Reduce::L2:
          return x.square().sum(a, keep).sqrt();
        case Reduce::LogSum:
          return x.sum(a, keep).log();
        case Reduce::LogSumExp:
          if (empty) return x.sum(a, keep).log();
          if (x.dtype() == dtypes::float64) {  // GLSL has no float64 exp: exponentials in float32
            const Tensor m = x.max(a, true);
            const Tensor s =
                (x - m).cast(dtypes::float32).exp().sum(a, true).log().cast(dtypes::float64) + m;
            return keep ? s : s.reshape(x.sum(a, false).shape());
          }
          return x.logsumexp(a, keep);
        case Reduce::SumSquare:
          return x.square().sum(a, keep);
      }
      return x;
    }();
    return {as_dtype(y, x.dtype())};
  };
}

// ArgMax/ArgMin: int64 positions; select_last_index counts ties from the end.
OpFn arg_extreme(bool max) {
  return [max](OpContext& c) -> std::vector<Value> {
    Tensor x = c.in(0);
    const int64_t axis = axis_of(c, c.attr_i("axis", 0), x.ndim());
    const bool keep = c.attr_i("keepdims", 1) != 0;
    const bool last = c.attr_i("select_last_index", 0) != 0;
    if (last) x = x.flip({axis});
    Tensor i = max ? x.argmax(axis, keep) : x.argmin(axis, keep);
    i = i.cast(dtypes::int64);
    if (last) i = Tensor::full({}, x.shape()[size_t(axis)] - 1, dtypes::int64, x.device()) - i;
    return {i};
  };
}

// Softmax family. Before opset 13 the input is read as 2-D (the axes before `axis`, and the rest)
// and normalized over the second; from 13 on, over `axis` alone.
enum class Norm { Softmax, LogSoftmax, Hardmax };
OpFn softmax(Norm kind) {
  return [kind](OpContext& c) -> std::vector<Value> {
    const Tensor x = c.in(0);
    const bool v13 = c.opset() >= 13;
    const int64_t axis = axis_of(c, c.attr_i("axis", v13 ? -1 : 1), x.ndim());
    auto apply = [&](const Tensor& t, int64_t ax) {
      switch (kind) {
        case Norm::Softmax:
          return t.softmax(ax);
        case Norm::LogSoftmax:
          return t.log_softmax(ax);
        case Norm::Hardmax: {  // 1 at the first maximum along ax
          Shape s(size_t(t.ndim()), 1);
          s[size_t(ax)] = t.shape()[size_t(ax)];
          const Tensor pos = Tensor::arange(0, s[size_t(ax)], 1, t.device()).reshape(s);
          return pos.eq(t.argmax(ax, true)).cast(t.dtype());
        }
      }
      return t;
    };
    if (x.ndim() == 0) return {apply(x.reshape(Shape{1}), 0).reshape(Shape{})};
    if (v13) return {apply(x, axis)};
    Shape flat{1, 1};
    for (int64_t d = 0; d < x.ndim(); ++d) flat[d < axis ? 0 : 1] *= x.shape()[size_t(d)];
    return {apply(x.reshape(flat), 1).reshape(x.shape())};
  };
}

std::vector<Value> cumsum(OpContext& c) {
  Tensor x = c.in(0);
  const auto axis_v = c.ints_in(1);
  if (axis_v.size() != 1) c.fail("axis must hold one value");
  const int64_t axis = axis_of(c, axis_v[0], x.ndim());
  const bool exclusive = c.attr_i("exclusive", 0) != 0, reverse = c.attr_i("reverse", 0) != 0;
  if (reverse) x = x.flip({axis});
  Tensor y = as_dtype(x.cumsum(axis), x.dtype());
  if (exclusive) {  // shift by one along axis: a zero first, the last sum dropped
    std::vector<std::pair<int64_t, int64_t>> pad(size_t(x.ndim()), {0, 0}), shrink;
    pad[size_t(axis)] = {1, 0};
    for (int64_t d = 0; d < x.ndim(); ++d) shrink.push_back({0, x.shape()[size_t(d)]});
    y = y.pad(pad).shrink(shrink);
  }
  if (reverse) y = y.flip({axis});
  return {y};
}

std::vector<Value> topk(OpContext& c) {
  const Tensor x = c.in(0);
  int64_t k = 0;
  if (c.opset() >= 10) {
    const auto kv = c.ints_in(1);
    if (kv.size() != 1) c.fail("K must hold one value");
    k = kv[0];
  } else {
    k = c.attr_i("k", 0);
  }
  const int64_t axis = axis_of(c, c.attr_i("axis", -1), x.ndim());
  const bool largest = c.attr_i("largest", 1) != 0;
  c.ignore_attr("sorted");  // sorted = 0 allows any order; ours is sorted
  if (k < 0 || k > x.shape()[size_t(axis)])
    c.fail("K = " + std::to_string(k) + " is outside the axis");
  auto [v, i] = x.topk(k, axis, largest);
  return {v, i.cast(dtypes::int64)};
}

}  // namespace

void add_reduce_ops(OpTable& t) {
  t["ReduceSum"] = reduce(Reduce::Sum, 13);
  t["ReduceMean"] = reduce(Reduce::Mean, 18);
  t["ReduceMax"] = reduce(Reduce::Max, 18);
  t["ReduceMin"] = reduce(Reduce::Min, 18);
  t["ReduceProd"] = reduce(Reduce::Prod, 18);
  t["ReduceL1"] = reduce(Reduce::L1, 18);
  t["ReduceL2"] = reduce(Reduce::L2, 18);
  t["ReduceLogSum"] = reduce(Reduce::LogSum, 18);
  t["ReduceLogSumExp"] = reduce(Reduce::LogSumExp, 18);
  t["ReduceSumSquare"] = reduce(Reduce::SumSquare, 18);
  t["ArgMax"] = arg_extreme(true);
  t["ArgMin"] = arg_extreme(false);
  t["Softmax"] = softmax(Norm::Softmax);
  t["LogSoftmax"] = softmax(Norm::LogSoftmax);
  t["Hardmax"] = softmax(Norm::Hardmax);
  t["CumSum"] = cumsum;
  t["TopK"] = topk;
}

}  // namespace vkg::onnx
