// Tensor ops with symbolic sizes (core/variable.hpp): the SymInt forms of reshape, expand, pad
// and shrink, and the symbolic broadcast of elementwise ops. Each checks its arguments by doing
// the same op with the bound values, then builds a node that carries the expressions too.
#include <algorithm>

#include <limits>

#include <vkgrad/core/binding_guard.hpp>
#include <vkgrad/core/device.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/symbolic.hpp>
#include <vkgrad/core/symbolic_shape.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

namespace {

bool any_symbolic(const std::vector<SymInt>& v) {
  return std::any_of(v.begin(), v.end(),
                     [](const SymInt& s) { return s.is_symbolic() || !s.is_bound(); });
}

std::vector<int64_t> values_of(const std::vector<SymInt>& v, std::string_view op) {
  std::vector<int64_t> out;
  for (const SymInt& s : v) {
    s.require_bound(op);
    out.push_back(s.value());
  }
  return out;
}

std::vector<UOpPtr> exprs_of(const std::vector<SymInt>& v) {
  std::vector<UOpPtr> out;
  for (const SymInt& s : v) out.push_back(s.expr());
  return out;
}

std::vector<Binding> bindings_of(const std::vector<SymInt>& v, std::string_view op) {
  std::vector<std::vector<Binding>> all;
  for (const SymInt& s : v) all.push_back(s.bindings());
  return merge_bindings(all, op);
}

std::string sym_str(const SymShape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + s[i].str();
  return out + ")";
}

std::vector<SymInt> flatten_pairs(const std::vector<std::pair<SymInt, SymInt>>& pairs) {
  std::vector<SymInt> out;
  for (const auto& [a, b] : pairs) out.push_back(a), out.push_back(b);
  return out;
}

std::vector<std::pair<int64_t, int64_t>> value_pairs(
    const std::vector<std::pair<SymInt, SymInt>>& pairs, std::string_view op) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& [a, b] : pairs) {
    a.require_bound(op), b.require_bound(op);
    out.emplace_back(a.value(), b.value());
  }
  return out;
}

}  // namespace

SymShape Tensor::sym_shape() const {
  const Shape& s = shape();
  const auto* e = node()->sym_shape();
  if (!e) return SymShape(s.begin(), s.end());
  const std::vector<Binding> b = collect_bindings(node().get());
  SymShape out;
  for (size_t i = 0; i < s.size(); ++i) out.emplace_back((*e)[i], s[i], b);
  return out;
}

Tensor Tensor::sym_movement(Ops op, std::vector<int64_t> values, std::vector<UOpPtr> exprs,
                            const std::vector<Binding>& bindings) const {
  std::vector<Binding> all =
      merge_bindings({bindings, collect_bindings(node().get())}, op_name(op));
  for (UOpPtr& e : exprs) e = simplify(e);
  return Tensor(UOp::make(op, dtype(), {node()},
                          make_symbolic_arg(std::move(values), std::move(exprs), std::move(all))));
}

Tensor Tensor::reshape(const SymShape& target) const {
  const std::vector<int64_t> values = values_of(target, "reshape");
  if (!any_symbolic(target)) return reshape(Shape(values));
  if (std::find(values.begin(), values.end(), -1) != values.end())
    throw Error("reshape: -1 cannot be combined with symbolic sizes in " + shape_str(values));
  (void)reshape(Shape(values));  // the checks, with the bound values
  if (recording_guards()) {
    UOpPtr from = UOp::const_(dtypes::int32, 1), to = from;
    for (const SymInt& d : sym_shape()) from = from * d.expr();
    for (const SymInt& d : target) to = to * d.expr();
    guard_same_value(from - to, 0, [&] {
      return "reshape: " + sym_str(sym_shape()) + " to " + sym_str(target) +
             " keeps the number of elements only where both sides' counts agree";
    });
  }
  return sym_movement(Ops::RESHAPE, values, exprs_of(target), bindings_of(target, "reshape"));
}

Tensor Tensor::expand(const SymShape& target) const {
  std::vector<int64_t> values = values_of(target, "expand");
  if (!any_symbolic(target)) return expand(Shape(values));
  (void)expand(Shape(values));  // the checks, with the bound values
  const size_t lead = target.size() - shape().size();
  Shape padded(lead, 1);
  padded.insert(padded.end(), shape().begin(), shape().end());
  const Tensor base = reshape(padded);
  SymShape full = target;
  const SymShape have = base.sym_shape();
  for (size_t i = 0; i < full.size(); ++i)
    if (values[i] == -1) full[i] = have[i], values[i] = have[i].value();
  if (exprs_of(full) == exprs_of(have)) return base;
  return base.broadcast_from(exprs_of(full), values)
      .sym_movement(Ops::EXPAND, values, exprs_of(full), bindings_of(full, "expand"));
}

Tensor Tensor::pad(const std::vector<std::pair<SymInt, SymInt>>& before_after,
                   Scalarish value) const {
  const auto values = value_pairs(before_after, "pad");
  const std::vector<SymInt> flat = flatten_pairs(before_after);
  if (!any_symbolic(flat)) return pad(values, value);
  if (value.as_double() != 0)
    throw Error("pad: symbolic pads fill zeros only, got value " +
                std::to_string(value.as_double()));
  {
    const GuardsPaused paused;  // its own guards, over the symbols, follow
    (void)pad(values);          // the checks, with the bound values
  }
  // A negative pad trims, as torch's F.pad: the view's range then starts inside the axis (or ends
  // before its end), so the one kernel serves pads of either sign. Eager throws only where the
  // trims take more than the axis.
  if (recording_guards()) {
    const SymShape in = sym_shape();
    const UOpPtr zero = UOp::const_(dtypes::int32, 0);
    for (size_t i = 0; i < in.size(); ++i) {
      const auto& [b, a] = before_after[i];
      const UOpPtr kept = in[i].expr() - (-b.expr())->maximum(zero) - (-a.expr())->maximum(zero);
      guard_binding(kept, 0, std::numeric_limits<int64_t>::max(), [&] {
        return "pad: pads (" + b.str() + ", " + a.str() + ") trim more than dimension " +
               std::to_string(i) + " of size " + in[i].str();
      });
    }
  }
  return sym_movement(Ops::PAD, values_of(flat, "pad"), exprs_of(flat), bindings_of(flat, "pad"));
}

Tensor Tensor::shrink(const std::vector<std::pair<SymInt, SymInt>>& begin_end) const {
  const auto values = value_pairs(begin_end, "shrink");
  const std::vector<SymInt> flat = flatten_pairs(begin_end);
  if (!any_symbolic(flat)) return shrink(values);
  {
    const GuardsPaused paused;  // its own guards, over the symbols, follow
    (void)shrink(values);       // the checks, with the bound values
  }
  if (recording_guards()) {
    const SymShape in = sym_shape();
    constexpr int64_t kAny = std::numeric_limits<int64_t>::max();
    for (size_t i = 0; i < in.size(); ++i) {
      const auto& [b, e] = begin_end[i];
      auto what = [&] {
        return "shrink: range [" + b.str() + ", " + e.str() + ") is outside dimension " +
               std::to_string(i) + " of size " + in[i].str();
      };
      guard_binding(b.expr(), 0, kAny, what);
      guard_binding(e.expr() - b.expr(), 0, kAny, what);
      guard_binding(in[i].expr() - e.expr(), 0, kAny, what);
    }
  }
  return sym_movement(Ops::SHRINK, values_of(flat, "shrink"), exprs_of(flat),
                      bindings_of(flat, "shrink"));
}

Tensor Tensor::from_size(const SymInt& size, std::string device) {
  size.require_bound("from_size");
  if (!size.is_symbolic()) return Tensor::full({}, size.value(), dtypes::int32, device);
  const UOpPtr dev = UOp::make(Ops::DEVICE, dtypes::void_, {},
                               canonical_device(device.empty() ? default_device() : device));
  return Tensor(UOp::make(Ops::BIND, dtypes::int32, {size.expr(), dev},
                          make_symbolic_arg({size.value()}, {size.expr()}, size.bindings())));
}

Tensor Tensor::broadcast_to(const SymShape& target) const {
  Shape padded(target.size() - shape().size(), 1);
  padded.insert(padded.end(), shape().begin(), shape().end());
  return reshape(padded).expand(target);
}

Tensor Tensor::broadcast_from(const std::vector<UOpPtr>& target, const Shape& values) const {
  const SymShape have = sym_shape();
  std::vector<int64_t> range_values;
  std::vector<UOpPtr> range_exprs;
  bool pinned = false;
  for (size_t i = 0; i < have.size(); ++i) {
    const UOpPtr h = simplify(have[i].expr()), t = simplify(target[i]);
    const bool plain_one = h->is_const() && h->const_int() == 1;
    auto what = [&] {
      return "expand: dimension " + std::to_string(i) + " of size " + have[i].str() + " to " +
             render(t);
    };
    UOpPtr end = h;
    if (plain_one || h == t) {
      // As they are: a plain 1 broadcasts at every binding, an equal expression is the same size.
    } else if (have[i].value() == 1 && values[i] != 1) {
      // A size bound to 1 broadcasts as a 1: shrunk to a plain 1 (stride 0, element 0), as a view
      // of size n would read n consecutive elements. At another value it does not broadcast.
      guard_same_value(h, 1, [&] {
        return what() +
               " broadcasts a size of 1, and at another size an eager call adds elementwise or "
               "throws";
      });
      end = UOp::const_(dtypes::int32, 1);
      pinned = true;
    } else {
      // Sizes equal at this binding (a plain 3 and n = 3): the kernels take them as one size.
      guard_same_value(h - t, 0, [&] {
        return what() + " takes the two sizes as equal, as they were at the capture";
      });
    }
    range_values.push_back(0);
    range_values.push_back(end == h ? have[i].value() : 1);
    range_exprs.push_back(UOp::const_(dtypes::int32, 0));
    range_exprs.push_back(end);
  }
  if (!pinned) return *this;
  return sym_movement(Ops::SHRINK, std::move(range_values), std::move(range_exprs));
}

std::optional<SymShape> Tensor::symbolic_broadcast(std::initializer_list<const Tensor*> ts,
                                                   const Shape& s) {
  if (std::none_of(ts.begin(), ts.end(), [](const Tensor* t) { return t->has_symbolic_shape(); }))
    return std::nullopt;
  SymShape out(s.begin(), s.end());
  for (const Tensor* t : ts) {
    if (!t->has_symbolic_shape()) continue;
    const SymShape mine = t->sym_shape();
    const size_t lead = s.size() - mine.size();
    for (size_t i = 0; i < mine.size(); ++i)
      if (mine[i].is_symbolic() && mine[i].value() == s[lead + i] && !out[lead + i].is_symbolic())
        out[lead + i] = mine[i];
  }
  return out;
}

}  // namespace vkg
