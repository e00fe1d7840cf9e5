// Views with symbolic sizes: the View movement ops and index expression over expressions
// (View::sym), for kernels compiled once for every binding of their variables. Each op mirrors
// its concrete form in core/view.cpp with plain numbers replaced by simplified UOps; a decision
// the concrete form takes from a number (is this dimension 1, is this mask full) is taken here
// only when the expression decides it for every binding.
#include <algorithm>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/int_math.hpp>
#include <vkgrad/core/symbolic.hpp>
#include <vkgrad/core/view.hpp>

namespace vkg {

namespace {

UOpPtr num(int64_t v) { return UOp::const_(dtypes::int32, v); }
bool is_num(const UOpPtr& e, int64_t v) { return e->is_const() && e->const_int() == v; }
UOpPtr smax(const UOpPtr& a, const UOpPtr& b) { return simplify(a->maximum(b)); }
UOpPtr smin(const UOpPtr& a, const UOpPtr& b) { return simplify(-((-a)->maximum(-b))); }

std::vector<UOpPtr> row_major(const std::vector<UOpPtr>& shape) {
  std::vector<UOpPtr> st(shape.size());
  UOpPtr acc = num(1);
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = is_num(shape[i], 1) ? num(0) : acc;
    acc = simplify(acc * shape[i]);
  }
  return st;
}

std::vector<UOpPtr> nums(const std::vector<int64_t>& v) {
  std::vector<UOpPtr> out;
  for (int64_t x : v) out.push_back(num(x));
  return out;
}

bool all_const(const std::vector<UOpPtr>& v) {
  return std::all_of(v.begin(), v.end(), [](const UOpPtr& e) { return e->is_const(); });
}

// resize() of core/view.cpp: the view restricted to `ranges` (which may reach outside the shape,
// as a pad's do), its old mask moved along and intersected with `extra` if given.
View resize(const SymbolicView& v, const std::vector<SymRange>& ranges,
            const std::vector<SymRange>& extra) {
  UOpPtr offset = v.offset;
  std::vector<UOpPtr> shape(ranges.size());
  for (size_t i = 0; i < ranges.size(); ++i) {
    offset = simplify(offset + v.strides[i] * ranges[i].first);
    shape[i] = simplify(ranges[i].second - ranges[i].first);
  }
  std::vector<SymRange> mask = extra;
  if (!v.mask.empty()) {
    mask.assign(ranges.size(), {});
    for (size_t i = 0; i < ranges.size(); ++i) {
      auto clamp = [&](const UOpPtr& x) {
        return smin(smax(simplify(x - ranges[i].first), num(0)), shape[i]);
      };
      mask[i] = {clamp(v.mask[i].first), clamp(v.mask[i].second)};
      if (!extra.empty())
        mask[i] = {smax(mask[i].first, extra[i].first), smin(mask[i].second, extra[i].second)};
    }
  }
  return View::create_symbolic(std::move(shape), v.strides, offset, std::move(mask));
}

}  // namespace

View View::create_symbolic(std::vector<UOpPtr> shape, std::optional<std::vector<UOpPtr>> strides,
                           UOpPtr offset, std::vector<SymRange> mask) {
  for (UOpPtr& s : shape) s = simplify(s);
  std::vector<UOpPtr> st = strides ? std::move(*strides) : row_major(shape);
  if (st.size() != shape.size() || (!mask.empty() && mask.size() != shape.size()))
    throw Error("View: symbolic strides or mask do not match the shape");
  for (size_t i = 0; i < shape.size(); ++i) st[i] = is_num(shape[i], 1) ? num(0) : simplify(st[i]);
  offset = offset ? simplify(offset) : num(0);
  bool full = true;
  for (size_t i = 0; i < mask.size(); ++i) {
    mask[i] = {simplify(mask[i].first), simplify(mask[i].second)};
    full = full && is_num(mask[i].first, 0) && mask[i].second == shape[i];
  }
  if (full) mask.clear();
  bool numbers = all_const(shape) && all_const(st) && offset->is_const();
  for (const auto& [b, e] : mask) numbers = numbers && b->is_const() && e->is_const();
  auto ints = [](const std::vector<UOpPtr>& v) {
    std::vector<int64_t> out;
    for (const UOpPtr& e : v) out.push_back(e->const_int());
    return out;
  };
  if (numbers) {
    std::optional<Mask> m;
    if (!mask.empty()) {
      m.emplace();
      for (const auto& [b, e] : mask) m->push_back({b->const_int(), e->const_int()});
    }
    return View::create(ints(shape), ints(st), offset->const_int(), std::move(m));
  }
  View v;
  for (const UOpPtr& s : shape) v.shape.push_back(std::max<int64_t>(s->vmax(), 0));
  v.strides.assign(shape.size(), 0);
  v.contiguous = is_num(offset, 0) && mask.empty() && st == row_major(shape);
  v.sym = SymbolicView{std::move(shape), std::move(st), std::move(offset), std::move(mask)};
  return v;
}

SymbolicView View::symbolic() const {
  if (sym) return *sym;
  SymbolicView s{nums(shape), nums(strides), num(offset), {}};
  if (mask)
    for (const auto& [b, e] : *mask) s.mask.push_back({num(b), num(e)});
  return s;
}

std::optional<View> View::reshape_sym(const std::vector<UOpPtr>& new_shape) const {
  if (all_const(new_shape) && !sym) {
    Shape target;
    for (const UOpPtr& e : new_shape) target.push_back(e->const_int());
    return reshape(target);
  }
  if (contiguous) return create_symbolic(new_shape);
  // Only dimensions of size 1 come or go: the others keep their strides and mask.
  const SymbolicView s = symbolic();
  std::vector<UOpPtr> st;
  std::vector<SymRange> m;
  size_t i = 0;
  for (const UOpPtr& d : new_shape) {
    while (i < s.shape.size() && is_num(s.shape[i], 1) && simplify(d) != s.shape[i]) ++i;
    if (i < s.shape.size() && simplify(d) == s.shape[i]) {
      st.push_back(s.strides[i]);
      m.push_back(s.mask.empty() ? SymRange{num(0), s.shape[i]} : s.mask[i]);
      ++i;
    } else if (is_num(simplify(d), 1)) {
      st.push_back(num(0));
      m.push_back({num(0), num(1)});
    } else {
      return std::nullopt;
    }
  }
  while (i < s.shape.size() && is_num(s.shape[i], 1)) ++i;
  if (i != s.shape.size()) return std::nullopt;
  if (s.mask.empty()) m.clear();
  return create_symbolic(new_shape, std::move(st), s.offset, std::move(m));
}

View View::expand_sym(const std::vector<UOpPtr>& new_shape) const {
  const SymbolicView s = symbolic();
  if (new_shape.size() != s.shape.size()) throw Error("expand: a symbolic shape of another rank");
  // Only plain 1s expand. Other sizes stay as they are: Tensor checked with the values that they
  // equal the new ones, which may be written differently ((j+i) for (i+j)).
  std::vector<UOpPtr> shape = s.shape;
  std::vector<SymRange> m = s.mask;
  for (size_t i = 0; i < s.shape.size(); ++i) {
    if (!is_num(s.shape[i], 1) || is_num(simplify(new_shape[i]), 1)) continue;
    shape[i] = new_shape[i];
    if (m.empty()) continue;
    const auto [b, e] = m[i];
    if (b->is_const() && e->is_const()) {
      m[i] = b->const_int() <= 0 && e->const_int() > 0 ? SymRange{num(0), new_shape[i]}
                                                       : SymRange{num(0), num(0)};
    } else {
      // The one element is valid where b <= 0 < e, which may hang on a variable (a size n bound
      // to 1, shrunk to 1, keeps min(n, 1) of its padded view's mask): all or none of the
      // expanded ones, by the same test, at run time.
      const UOpPtr valid = smin(smax(e, num(0)), num(1)) * smin(smax(num(1) - b, num(0)), num(1));
      m[i] = SymRange{num(0), simplify(new_shape[i] * valid)};
    }
  }
  return create_symbolic(std::move(shape), s.strides, s.offset, std::move(m));
}

View View::pad_sym(const std::vector<SymRange>& widths) const {
  const SymbolicView s = symbolic();
  std::vector<SymRange> ranges, valid;
  for (size_t i = 0; i < s.shape.size(); ++i) {
    ranges.push_back({simplify(-widths[i].first), simplify(s.shape[i] + widths[i].second)});
    valid.push_back({widths[i].first, simplify(s.shape[i] + widths[i].first)});
  }
  return resize(s, ranges, valid);
}

View View::shrink_sym(const std::vector<SymRange>& ranges) const {
  return resize(symbolic(), ranges, {});
}

// The symbolic forms of the concrete ops and of expr, which core/view.cpp calls for a view with
// `sym` set.
namespace symbolic_view {

View permute(const View& v, const std::vector<int64_t>& order) {
  const SymbolicView& s = *v.sym;
  std::vector<UOpPtr> shape, st;
  std::vector<SymRange> m;
  for (int64_t a : order) {
    shape.push_back(s.shape[size_t(a)]);
    st.push_back(s.strides[size_t(a)]);
    if (!s.mask.empty()) m.push_back(s.mask[size_t(a)]);
  }
  return View::create_symbolic(std::move(shape), std::move(st), s.offset, std::move(m));
}

IndexExpr expr(const View& v, const std::vector<UOpPtr>& idxs, const UOpPtr& valid) {
  const SymbolicView& s = *v.sym;
  UOpPtr index = is_num(s.offset, 0) ? nullptr : s.offset;
  for (size_t i = 0; i < s.shape.size(); ++i) {
    if (is_num(s.shape[i], 1) || is_num(s.strides[i], 0)) continue;
    const UOpPtr term = is_num(s.strides[i], 1) ? idxs[i] : idxs[i] * s.strides[i];
    index = index ? index + term : term;
  }
  UOpPtr ok = valid;
  for (size_t i = 0; i < s.mask.size(); ++i) {
    const UOpPtr& x = idxs[i];
    const auto& [b, e] = s.mask[i];
    if (x->vmin() < b->vmax()) ok = ok->alu(Ops::AND, {x->ge(b)});
    if (x->vmax() >= e->vmin()) ok = ok->alu(Ops::AND, {x->lt(e)});
  }
  return {index ? index : UOp::const_(dtypes::int32, 0), ok};
}

[[noreturn]] void unsupported(const char* op) {
  throw Error(
      std::string(op) +
      " of a tensor with a symbolic shape is not supported: reshape it to plain numbers first");
}

std::vector<UOpPtr> as_exprs(const Shape& s) { return nums(s); }

}  // namespace symbolic_view

}  // namespace vkg
