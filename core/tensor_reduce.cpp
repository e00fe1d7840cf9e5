// Reductions and the ops composed from them (mean, var, dot, matmul).
#include <algorithm>
#include <limits>

#include <vkgrad/core/binding_guard.hpp>
#include <vkgrad/core/device.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/multi.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

namespace {

// Sorted, distinct, non-negative axes; all axes when none are given.
std::vector<int64_t> reduce_axes(const Axes& axes, const Shape& shape, std::string_view op) {
  std::vector<int64_t> out;
  if (axes.list.empty())
    for (size_t i = 0; i < shape.size(); ++i) out.push_back(int64_t(i));
  for (int64_t ax : axes.list) out.push_back(normalize_axis(ax, shape, op));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    throw Error(std::string(op) + ": an axis is named twice for shape " + shape_str(shape));
  return out;
}

Shape without_axes(const Shape& shape, const std::vector<int64_t>& axes) {
  Shape out;
  for (size_t i = 0; i < shape.size(); ++i)
    if (!std::binary_search(axes.begin(), axes.end(), int64_t(i))) out.push_back(shape[i]);
  return out;
}

// out (a reduce of x over `axes`) reshaped to x's shape without those axes (keepdim false) or
// with them 1: by x's symbolic sizes where it has them, as a reshape to plain sizes cannot tell
// a size bound to 1 from a 1 (a sum(-1) of (n, 1, 4) at n = 1 gave (1, n): symbolic fuzzer seed
// 20261805).
Tensor reduced_shape(const Tensor& out, const Tensor& x, const std::vector<int64_t>& axes,
                     bool keepdim) {
  if (!x.has_symbolic_shape()) {
    Shape with_ones = x.shape();
    for (int64_t a : axes) with_ones[size_t(a)] = 1;
    return out.reshape(keepdim ? with_ones : without_axes(x.shape(), axes));
  }
  SymShape s;
  const SymShape in = x.sym_shape();
  for (size_t i = 0; i < in.size(); ++i) {
    const bool reduced = std::binary_search(axes.begin(), axes.end(), int64_t(i));
    if (!reduced)
      s.push_back(in[i]);
    else if (keepdim)
      s.push_back(SymInt(1));
  }
  return out.reshape(s);
}

// What a reduce of no elements gives, and what pads a reduce: 0 for a sum, 1 for a product, the
// smallest value for a max.
Scalarish reduce_identity(Ops op, DType d) {
  if (op == Ops::MAX && d.is_float()) return -std::numeric_limits<double>::infinity();
  if (op == Ops::MAX && d.is_int()) return int64_t(dtypes::min_value(d));
  if (op == Ops::MAX) return false;
  return int64_t(op == Ops::MUL ? 1 : 0);
}

// The number of elements a reduce over `axes` of `shape` takes per output, as a size.
SymInt reduced_count(const SymShape& shape, const std::vector<int64_t>& axes) {
  SymInt n = 1;
  for (int64_t a : axes) n = n * shape[size_t(a)];
  return n;
}

// A Jit's replays throw where a size of x is 0, as max and min do eagerly (their kernels would
// give the identity, -inf).
void guard_not_empty(const Tensor& x, std::string_view op) {
  if (!x.has_symbolic_shape() || !recording_guards()) return;
  const SymShape s = x.sym_shape();
  for (const SymInt& d : s)
    if (d.is_symbolic())
      guard_binding(d.expr(), 1, std::numeric_limits<int64_t>::max(), [&] {
        std::string shape = "(";
        for (size_t i = 0; i < s.size(); ++i) shape += (i ? ", " : "") + s[i].str();
        return std::string(op) + ": cannot reduce a tensor with no elements (shape " + shape + "))";
      });
}

}  // namespace

// The most elements one output of a reduce kernel sums (or maxes) in its loop. Larger reduces
// run in two steps. Lavapipe needs it: llvmpipe ends loops after 65535 iterations per invocation
// (LP_MAX_TGSI_LOOP_ITERATIONS, counted over nested loops too) without a word, so a sum over
// 100000 elements read only the first 65535. GPUs want it as well: one invocation looping over a
// large reduce leaves the device idle (tinygrad's split_reduceop, same threshold).
constexpr int64_t kMaxReducePerOutput = 32768;

namespace {

// Whether the device, or one device of a sharded tensor, ends long loops early
// (Device::loop_iteration_limit).
bool limits_loops(const std::string& devices) {
  for (const std::string& d : split_devices(devices))
    if (device(d).loop_iteration_limit() != 0) return true;
  return false;
}

}  // namespace

Tensor Tensor::reduce(Ops op, const Axes& which, bool keepdim, std::string_view name) const {
  const std::vector<int64_t> axes = reduce_axes(which, shape(), name);
  int64_t count = 1;
  for (int64_t a : axes) count *= shape()[size_t(a)];
  if (count <= kMaxReducePerOutput && has_symbolic_shape() && !axes.empty() && recording_guards() &&
      limits_loops(device()))
    // One kernel loops over the symbolic count: on a device that ends long loops early a Jit's
    // replay at a larger count would be cut short (llvmpipe summed the first 65535 of 100000),
    // where an eager call splits it. Elsewhere the one kernel is right at every count, if slower
    // than the split past it.
    guard_binding(reduced_count(sym_shape(), axes).expr(), 0, kMaxReducePerOutput, [&] {
      return std::string(name) + ": one kernel reduces at most " +
             std::to_string(kMaxReducePerOutput) + " elements per output on " + device() +
             ", whose driver ends longer loops early; an eager call splits more in two";
    });
  if (count > kMaxReducePerOutput) {
    std::vector<int64_t> order;
    Shape kept;
    for (size_t i = 0; i < shape().size(); ++i)
      if (!std::binary_search(axes.begin(), axes.end(), int64_t(i)))
        order.push_back(int64_t(i)), kept.push_back(shape()[i]);
    order.insert(order.end(), axes.begin(), axes.end());
    const int64_t last = int64_t(kept.size());
    auto finish = [&](const Tensor& partial) {
      const Tensor out = partial.reduce(op, Axes{last}, false, name);
      return keepdim ? reduced_shape(out, *this, axes, true) : out;
    };
    // Where the outermost reduced axis has a divisor `parts` that brings each output's share
    // under the limit, partial p reduces its p-th block of that axis with every inner reduced
    // axis whole: the first kernel keeps the input's views as they are (a convolution's weight
    // gradient, reducing over (batch, y, x), stays a matmul over windows with a batch of
    // partials; no flattened index to divide back into (b, y, x)), and each partial reads
    // contiguous runs. The fewest such parts: each extra one is another output to write and add;
    // at most the limit, so that the second reduce is one kernel.
    const int64_t outer = shape()[size_t(axes.front())];
    for (int64_t parts = 2; parts <= std::min(outer, kMaxReducePerOutput); ++parts) {
      if (outer % parts != 0 || count / parts > kMaxReducePerOutput) continue;
      Shape split_shape = kept;
      split_shape.push_back(parts);
      split_shape.push_back(outer / parts);
      for (size_t i = 1; i < axes.size(); ++i) split_shape.push_back(shape()[size_t(axes[i])]);
      std::vector<int64_t> inner;
      for (int64_t a = last + 1; a < int64_t(split_shape.size()); ++a) inner.push_back(a);
      return finish(permute(order).reshape(split_shape).reduce(op, Axes{inner}, false, name));
    }
    // Otherwise the reduced axes go last, as one axis of `count` elements, padded with the op's
    // identity to `rows` x `split`: split partial results per output, partial s over elements s, s
    // + split, ... (adjacent partials read adjacent elements), then a reduce of those.
    int64_t split = 256;
    for (int64_t d = 256; d >= 8; --d)
      if (count % d == 0) {
        split = d;
        break;
      }
    const int64_t rows = (count + split - 1) / split;
    Shape flat_shape = kept;
    flat_shape.push_back(count);
    Tensor flat = permute(order).reshape(flat_shape);
    if (rows * split != count) {
      std::vector<std::pair<int64_t, int64_t>> pads(kept.size(), {0, 0});
      pads.emplace_back(0, rows * split - count);
      // Floats sum pads of -0.0 (as the kernels' accumulators start): +0.0 would make a sum of
      // -0.0s +0.0.
      const bool neg_zero = op == Ops::ADD && dtype().is_float();
      flat = flat.pad(pads, neg_zero ? Scalarish(-0.0) : reduce_identity(op, dtype()));
    }
    Shape split_shape = kept;
    split_shape.push_back(rows);
    split_shape.push_back(split);
    return finish(flat.reshape(split_shape).reduce(op, Axes{last}, false, name));
  }
  // Over no elements the result is the identity, as a constant: a kernel would hoist the loads
  // out of its zero-trip loop and read element 0 of an empty buffer. Only a plain 0 is empty at
  // every binding: a size that is an expression equal to 0 now (i - 1 at i = 1) is a kernel, or a
  // Jit's replays at other bindings would give the identity.
  bool plain_empty = count == 0 && !has_symbolic_shape();
  if (count == 0 && has_symbolic_shape()) {
    const SymShape sizes = sym_shape();
    for (int64_t a : axes)
      plain_empty =
          plain_empty || (!sizes[size_t(a)].is_symbolic() && sizes[size_t(a)].value() == 0);
  }
  if (plain_empty && !axes.empty()) {
    if (has_symbolic_shape()) {
      // Expanded to the kept axes' symbolic sizes, so a Jit's replays give the shape of their
      // binding (the plain sizes of the capture's stayed: symbolic fuzzer seed 20261415).
      SymShape with_ones = sym_shape(), kept;
      for (int64_t a : axes) with_ones[size_t(a)] = 1;
      for (size_t i = 0; i < with_ones.size(); ++i)
        if (!std::binary_search(axes.begin(), axes.end(), int64_t(i))) kept.push_back(with_ones[i]);
      const SymShape& out_shape = keepdim ? with_ones : kept;
      return Tensor::full(Shape(out_shape.size(), 1), reduce_identity(op, dtype()), dtype(),
                          device())
          .expand(out_shape);
    }
    Shape with_ones = shape();
    for (int64_t a : axes) with_ones[size_t(a)] = 1;
    const Tensor out = Tensor::full(with_ones, reduce_identity(op, dtype()), dtype(), device());
    return keepdim ? out : out.reshape(without_axes(shape(), axes));
  }
  Tensor out = *this;
  if (!axes.empty())
    out = Tensor(UOp::make(Ops::REDUCE_AXIS, dtype(), {node()}, ReduceArg{op, axes}));
  if (!axes.empty() && op == Ops::ADD && dtype().is_float() && has_symbolic_shape()) {
    // A float sum's loop starts from -0 (so that a sum of -0s is -0); over no elements it must
    // give +0, as the constant above does. Where the reduced size is an expression that can be 0
    // at some binding, the kernel picks +0 when it is.
    const SymInt n = reduced_count(sym_shape(), axes);
    if (n.is_symbolic() && n.expr()->vmin() <= 0)
      out = (Tensor::from_size(n, device()) > 0).where(out, 0.0).cast(dtype());
  }
  return keepdim ? out : reduced_shape(out, *this, axes, false);
}

Tensor Tensor::sum(Axes axes, bool keepdim) const {
  // Small integers and bools sum in 32 bits; half floats accumulate in float32 and come back.
  const DType acc = sum_acc_dtype(dtype());
  Tensor out = cast(acc).reduce(Ops::ADD, std::move(axes), keepdim, "sum");
  return dtype().is_float() ? out.cast(dtype()) : out;
}

Tensor Tensor::max(Axes axes, bool keepdim) const {
  for (int64_t d : shape())
    if (d == 0)
      throw Error("max: cannot reduce a tensor with no elements (shape " + shape_str(shape()) +
                  ")");
  guard_not_empty(*this, "max");
  return reduce(Ops::MAX, std::move(axes), keepdim, "max");
}

Tensor Tensor::mean(Axes axes, bool keepdim) const {
  const std::vector<int64_t> ax = reduce_axes(axes, shape(), "mean");
  int64_t n = 1;
  for (int64_t a : ax) n *= shape()[size_t(a)];
  const Tensor x = dtype().is_float() ? *this : cast(dtypes::default_float);
  if (has_symbolic_shape()) {
    // Over symbolic sizes the count is read at run time, so the kernel serves every binding.
    const Tensor sum = x.sum(ax, keepdim);
    return sum / Tensor::from_size(reduced_count(sym_shape(), ax), device()).cast(sum.dtype());
  }
  return x.sum(ax, keepdim) / double(n);
}

Tensor Tensor::var(Axes axes, bool keepdim, int64_t correction) const {
  const std::vector<int64_t> ax = reduce_axes(axes, shape(), "var");
  int64_t n = 1;
  for (int64_t a : ax) n *= shape()[size_t(a)];
  const Tensor centered = *this - mean(ax, true);
  if (has_symbolic_shape()) {
    // As below, a correction past the count divides by 0 (nan), not by a negative count (-0).
    const SymInt count = reduced_count(sym_shape(), ax) - SymInt(correction);
    const Tensor sq = (centered * centered).sum(ax, keepdim);
    return sq / Tensor::from_size(count, device()).maximum(0).cast(sq.dtype());
  }
  return (centered * centered).sum(ax, keepdim) / double(std::max<int64_t>(0, n - correction));
}

Tensor Tensor::std(Axes axes, bool keepdim, int64_t correction) const {
  return var(std::move(axes), keepdim, correction).sqrt();
}

// Order-reversing maps turn min into max: negation for floats (nan still propagates), bitwise not
// for integers (a bijection, so the smallest int8 -128 needs no -(-128)), logical not for bools.
Tensor Tensor::min(Axes axes, bool keepdim) const {
  for (int64_t d : shape())
    if (d == 0)
      throw Error("min: cannot reduce a tensor with no elements (shape " + shape_str(shape()) +
                  ")");
  guard_not_empty(*this, "min");
  if (dtype().is_float()) return -(-*this).max(std::move(axes), keepdim);
  return bitwise_not().max(std::move(axes), keepdim).bitwise_not();
}

// Accumulates as sum does (small integers and bools in 32 bits, half floats in float32); the
// product of nothing is 1.
Tensor Tensor::prod(Axes axes, bool keepdim) const {
  const DType acc = sum_acc_dtype(dtype());
  Tensor out = cast(acc).reduce(Ops::MUL, std::move(axes), keepdim, "prod");
  return dtype().is_float() ? out.cast(dtype()) : out;
}

// MAX over bools is or; nothing is false.
Tensor Tensor::any(Axes axes, bool keepdim) const {
  return cast(dtypes::bool_).reduce(Ops::MAX, std::move(axes), keepdim, "any");
}

Tensor Tensor::all(Axes axes, bool keepdim) const {
  return logical_not().any(std::move(axes), keepdim).logical_not();
}

// numpy's matmul: 1-D operands get a dimension of 1 prepended (x) or appended (w) that the
// result drops; leading (batch) dimensions broadcast, e.g. (2, 1, 3, 4) @ (5, 4, 6) is
// (2, 5, 3, 6).
Tensor Tensor::dot(const Tensor& w) const {
  const int dx = ndim(), dw = w.ndim();
  auto operands = [&] {
    return shape_str(shape()) + " " + dtype().name() + " and " + shape_str(w.shape()) + " " +
           w.dtype().name();
  };
  if (dx == 0 || dw == 0)
    throw Error("dot: both tensors need at least one dimension, got " + operands());
  if (device() != w.device())
    throw Error("dot: tensors are on different devices (" + device() + " and " + w.device() + ")");
  try {
    (void)promote(dtype(), w.dtype());
  } catch (const Error&) {
    throw Error("dot: cannot combine the dtypes of " + operands());
  }
  const int64_t inner_w = w.shape()[size_t(dw >= 2 ? dw - 2 : 0)];
  if (shape().back() != inner_w)
    throw Error("dot: inner dimensions differ: " + operands() + " (" +
                std::to_string(shape().back()) + " != " + std::to_string(inner_w) + ")");
  const Shape batch_x(shape().begin(), shape().end() - std::min(dx, 2));
  const Shape batch_w(w.shape().begin(), w.shape().end() - std::min(dw, 2));
  try {
    (void)broadcast_shape(batch_x, batch_w, "dot");
  } catch (const Error&) {
    throw Error("dot: batch dimensions " + shape_str(batch_x) + " and " + shape_str(batch_w) +
                " do not broadcast: " + operands());
  }
  // Lay x out as (..., [1], k) and w as (..., [1], n, k) so that x*w broadcasts to (..., m, n, k)
  // and the product sums over its last axis: one fused multiply-reduce kernel.
  const int ones = std::min({dx - 1, dw - 1, 1});
  Shape xs(shape().begin(), shape().end() - 1);
  xs.insert(xs.end(), size_t(ones), 1);
  xs.push_back(shape().back());
  Shape ws(w.shape().begin(), w.shape().end() - std::min(dw, 2));
  ws.insert(ws.end(), size_t(ones), 1);
  ws.insert(ws.end(), w.shape().end() - std::min(dw, 2), w.shape().end());
  const DType out = promote(dtype(), w.dtype());
  if (has_symbolic_shape() || w.has_symbolic_shape()) {
    // The same layout with the symbolic sizes placed by hand: a size bound to 1 is not a 1 to
    // insert or drop.
    const SymShape sx = sym_shape(), sw = w.sym_shape();
    const SymInt& inner = sw[size_t(dw >= 2 ? dw - 2 : 0)];
    guard_same_value(sx.back().expr() - inner.expr(), 0, [&] {
      return "dot: inner dimensions differ (" + sx.back().str() + " and " + inner.str() + ")";
    });
    SymShape xs_sym(sx.begin(), sx.end() - 1);
    xs_sym.insert(xs_sym.end(), size_t(ones), SymInt(1));
    xs_sym.push_back(sx.back());
    SymShape ws_sym(sw.begin(), sw.end() - std::min(dw, 2));
    ws_sym.insert(ws_sym.end(), size_t(ones), SymInt(1));
    ws_sym.insert(ws_sym.end(), sw.end() - std::min(dw, 2), sw.end());
    const Tensor wt_sym = w.reshape(ws_sym).transpose(-1, -std::min(dw, 2));
    return (reshape(xs_sym) * wt_sym).sum(-1).cast(out);
  }
  const Tensor wt = w.reshape(ws).transpose(-1, -std::min(dw, 2));
  return (reshape(xs) * wt).sum(-1).cast(out);
}

Tensor Tensor::matmul(const Tensor& w) const { return dot(w); }

}  // namespace vkg
