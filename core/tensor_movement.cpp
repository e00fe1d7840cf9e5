// Movement ops: zero-copy changes of how a tensor's elements are addressed. Each checks its
// arguments against the shape and builds one movement node (or none, when it changes nothing).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <numeric>

#include <vkgrad/core/binding_guard.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/symbolic_shape.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

namespace {

std::string ints_str(const std::vector<int64_t>& v) { return shape_str(v); }

[[noreturn]] void fail(std::string_view op, const Shape& shape, const std::string& why) {
  throw Error(std::string(op) + ": " + why + " (tensor shape " + shape_str(shape) + ")");
}

}  // namespace

Tensor Tensor::movement(Ops op, std::vector<int64_t> arg) const {
  return Tensor(UOp::make(op, dtype(), {node()}, std::move(arg)));
}

Tensor Tensor::reshape(Shape target) const {
  const Shape& in = shape();
  const auto wild = std::count(target.begin(), target.end(), -1);
  if (wild > 1) fail("reshape", in, "only one dimension of " + shape_str(target) + " may be -1");
  for (int64_t d : target)
    if (d < -1) fail("reshape", in, "shape " + shape_str(target) + " has a negative dimension");
  if (wild == 1) {
    Shape known_dims;
    for (int64_t d : target)
      if (d != -1) known_dims.push_back(d);
    check_size(known_dims, dtype().itemsize(), "reshape");
    const int64_t known = vkg::prod(known_dims);
    if (known == 0 || vkg::prod(in) % known != 0)
      fail("reshape", in,
           "cannot infer the -1 in " + shape_str(target) + " for " + std::to_string(vkg::prod(in)) +
               " elements");
    *std::find(target.begin(), target.end(), -1) = vkg::prod(in) / known;
  }
  check_size(target, dtype().itemsize(), "reshape");
  if (vkg::prod(target) != vkg::prod(in))
    fail("reshape", in,
         "cannot reshape " + std::to_string(vkg::prod(in)) + " elements to " + shape_str(target) +
             " (" + std::to_string(vkg::prod(target)) + " elements)");
  if (target == in) return *this;
  // A symbolic tensor keeps its symbolic sizes through reshapes that only add or remove 1s;
  // others give plain numbers (the kernel is then compiled for these values).
  if (const auto* sym = node()->sym_shape())
    if (std::optional<std::vector<UOpPtr>> carried = carry_reshape(in, *sym, target))
      return sym_movement(Ops::RESHAPE, std::move(target), std::move(*carried));
  return movement(Ops::RESHAPE, std::move(target));
}

Tensor Tensor::permute(std::vector<int64_t> order) const {
  const Shape& in = shape();
  if (order.size() != in.size())
    fail("permute", in,
         "order " + ints_str(order) + " must name each of the " + std::to_string(in.size()) +
             " axes once");
  for (int64_t& ax : order) ax = normalize_axis(ax, in, "permute");
  std::vector<int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] != int64_t(i))
      fail("permute", in, "order " + ints_str(order) + " is not a permutation");
  std::vector<int64_t> identity(in.size());
  std::iota(identity.begin(), identity.end(), 0);
  if (order == identity) return *this;
  return movement(Ops::PERMUTE, std::move(order));
}

Tensor Tensor::expand(Shape target) const {
  const Shape& in = shape();
  if (target.size() < in.size())
    fail("expand", in, "cannot expand to " + shape_str(target) + ", which has fewer dimensions");
  Shape padded = in;
  padded.insert(padded.begin(), target.size() - in.size(), 1);  // new leading axes, as torch
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == -1) target[i] = padded[i];
    if (padded[i] != target[i] && padded[i] != 1)
      fail("expand", in,
           "dimension " + std::to_string(i) + " of size " + std::to_string(padded[i]) +
               " cannot expand to " + std::to_string(target[i]) + " (only size 1 expands)");
    if (target[i] < 0)
      fail("expand", in, "shape " + shape_str(target) + " has a negative dimension");
  }
  check_size(target, dtype().itemsize(), "expand");
  if (target == in) return *this;
  const Tensor base = padded == in ? *this : reshape(padded);
  if (target == padded) return base;
  if (const auto* sym = base.node()->sym_shape()) {
    std::vector<UOpPtr> exprs;
    for (size_t i = 0; i < target.size(); ++i)
      exprs.push_back(padded[i] == target[i] ? (*sym)[i] : UOp::const_(dtypes::int32, target[i]));
    const Tensor from = base.broadcast_from(exprs, target);  // a size n bound to 1: a plain 1
    if (from.node()->sym_shape())
      return from.sym_movement(Ops::EXPAND, std::move(target), std::move(exprs));
    return from.movement(Ops::EXPAND, std::move(target));
  }
  return base.movement(Ops::EXPAND, std::move(target));
}

Tensor Tensor::pad(std::vector<std::pair<int64_t, int64_t>> before_after, Scalarish value) const {
  const Shape& in = shape();
  if (before_after.size() != in.size())
    fail(
        "pad", in,
        "needs one (before, after) pair per dimension, got " + std::to_string(before_after.size()));
  // Negative pads trim, as torch's F.pad: the trims first, then the pads.
  if (std::any_of(before_after.begin(), before_after.end(),
                  [](const auto& p) { return p.first < 0 || p.second < 0; })) {
    std::vector<std::pair<int64_t, int64_t>> keep, grow;
    for (size_t i = 0; i < in.size(); ++i) {
      const auto [b, a] = before_after[i];
      const int64_t begin = std::max<int64_t>(-b, 0), end = in[i] - std::max<int64_t>(-a, 0);
      if (begin > end)
        fail("pad", in,
             "pads (" + std::to_string(b) + ", " + std::to_string(a) +
                 ") trim more than dimension " + std::to_string(i) + " of size " +
                 std::to_string(in[i]));
      keep.emplace_back(begin, end);
      grow.emplace_back(std::max<int64_t>(b, 0), std::max<int64_t>(a, 0));
    }
    if (has_symbolic_shape()) {
      // A trim at the end of a symbolic axis ends at n - trim, not at the bound value's: a Jit
      // replay at another binding kept the capture's size (a review's probe: (3, n).pad by -1
      // gave (3, 3) at n = 6). The symbolic shrink also records that the trims fit.
      const SymShape sizes = sym_shape();
      std::vector<std::pair<SymInt, SymInt>> sym_keep;
      for (size_t i = 0; i < in.size(); ++i)
        sym_keep.emplace_back(keep[i].first,
                              sizes[i] - SymInt(std::max<int64_t>(-before_after[i].second, 0)));
      return shrink(sym_keep).pad(std::move(grow), value);
    }
    return shrink(std::move(keep)).pad(std::move(grow), value);
  }
  std::vector<int64_t> arg;
  bool any = false;
  for (const auto& [b, a] : before_after) {
    int64_t grown = 0;
    if (__builtin_add_overflow(in[arg.size() / 2], b, &grown) ||
        __builtin_add_overflow(grown, a, &grown))
      fail(
          "pad", in,
          "pads (" + std::to_string(b) + ", " + std::to_string(a) + ") make a dimension too large");
    arg.push_back(b);
    arg.push_back(a);
    any |= b || a;
  }
  if (!any) return *this;
  Shape grown = in;
  for (size_t i = 0; i < in.size(); ++i) grown[i] += arg[2 * i] + arg[2 * i + 1];
  check_size(grown, dtype().itemsize(), "pad");
  const Tensor padded = movement(Ops::PAD, arg);
  if (value.as_double() == 0 && !std::signbit(value.as_double())) return padded;
  // Padding fills zeros; other values are placed where a padded all-true mask is false. The mask
  // has the tensor's symbolic sizes where it has them: one of the bound values' plain sizes would
  // mark the rows a Jit replay at a larger binding adds as padding (a cumsum of more than 256
  // elements, whose blocks pad with the scan's identity, read -5 fills there).
  const Tensor all_true = has_symbolic_shape()
                              ? Tensor::full({}, true, dtypes::bool_, device()).expand(sym_shape())
                              : Tensor::full(in, true, dtypes::bool_, device());
  const Tensor inside = all_true.movement(Ops::PAD, arg);
  return inside.where(padded, Tensor::full({}, value, dtype(), device()));
}

Tensor Tensor::shrink(std::vector<std::pair<int64_t, int64_t>> begin_end) const {
  const Shape& in = shape();
  if (begin_end.size() != in.size())
    fail("shrink", in,
         "needs one (begin, end) pair per dimension, got " + std::to_string(begin_end.size()));
  std::vector<int64_t> arg;
  bool any = false;
  for (size_t i = 0; i < in.size(); ++i) {
    const auto [b, e] = begin_end[i];
    if (b < 0 || e > in[i] || b > e)
      fail("shrink", in,
           "range [" + std::to_string(b) + ", " + std::to_string(e) + ") is outside dimension " +
               std::to_string(i) + " of size " + std::to_string(in[i]));
    arg.push_back(b);
    arg.push_back(e);
    any |= b != 0 || e != in[i];
  }
  if (!any) return *this;
  // Plain bounds on a symbolic axis hold at this binding; a Jit replay at another must too, as
  // eager checks above (a review's probe: shrink [1, 3) of (3, n) captured at n = 4 read past the
  // axis at n = 2, where eager throws).
  if (has_symbolic_shape() && recording_guards()) {
    const SymShape sizes = sym_shape();
    for (size_t i = 0; i < in.size(); ++i) {
      if (!sizes[i].is_symbolic()) continue;
      const int64_t e = begin_end[i].second;
      guard_binding(sizes[i].expr() - UOp::const_(dtypes::int32, e), 0,
                    std::numeric_limits<int64_t>::max(), [&] {
                      return "shrink: range [" + std::to_string(begin_end[i].first) + ", " +
                             std::to_string(e) + ") is outside dimension " + std::to_string(i) +
                             " of size " + sizes[i].str();
                    });
    }
  }
  return movement(Ops::SHRINK, std::move(arg));
}

Tensor Tensor::flip(std::vector<int64_t> axes) const {
  const Shape& in = shape();
  std::vector<int64_t> flags(in.size(), 0);
  for (int64_t ax : axes) {
    const int a = normalize_axis(ax, in, "flip");
    if (flags[size_t(a)]) fail("flip", in, "axis " + std::to_string(ax) + " is named twice");
    flags[size_t(a)] = 1;
  }
  if (std::none_of(flags.begin(), flags.end(), [](int64_t f) { return f; })) return *this;
  return movement(Ops::FLIP, std::move(flags));
}

Tensor Tensor::transpose(int64_t a, int64_t b) const {
  std::vector<int64_t> order(static_cast<size_t>(ndim()));
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[size_t(normalize_axis(a, shape(), "transpose"))],
            order[size_t(normalize_axis(b, shape(), "transpose"))]);
  return permute(std::move(order));
}

Tensor Tensor::contiguous() const { return Tensor(UOp::make(Ops::CONTIGUOUS, dtype(), {node()})); }

// A CONTIGUOUS numbered like no other: never the buffer it views (core/schedule.cpp), and a new
// node on every call, so each clone is a copy of its own.
Tensor Tensor::clone() const {
  static std::atomic<int64_t> next_clone{1};
  return Tensor(UOp::make(Ops::CONTIGUOUS, dtype(), {node()}, next_clone.fetch_add(1)));
}

}  // namespace vkg
