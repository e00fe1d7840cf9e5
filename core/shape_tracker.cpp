#include <vkgrad/core/shape_tracker.hpp>

#include <algorithm>
#include <ostream>
#include <unordered_map>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/int_math.hpp>
#include <vkgrad/core/symbolic.hpp>

namespace vkg {

namespace {

// Position of flat element `flat` in `shape` (floor semantics, so a position off the end still
// gets digits that differ from a neighbour's by the step taken).
std::vector<int64_t> unravel(const Shape& shape, int64_t flat) {
  std::vector<int64_t> pos(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    const int64_t q = floor_div(flat, acc);
    pos[i] = q - floor_div(q, shape[i]) * shape[i];
    acc *= shape[i];
  }
  return pos;
}

// c + sum(coef[d] * x[d]) over an outer view's indexes x[d] in [0, shape[d] - 1]: the position an
// outer element reaches along a group of inner dimensions, with its exact range.
struct Linear {
  std::vector<int64_t> coef;
  int64_t c = 0;
  explicit Linear(size_t n) : coef(n, 0) {}
  bool is_zero() const {
    return c == 0 && std::all_of(coef.begin(), coef.end(), [](int64_t k) { return k == 0; });
  }
  int64_t bound(const Shape& shape, bool upper) const {
    int64_t r = c;
    for (size_t d = 0; d < coef.size(); ++d) {
      const int64_t far = coef[d] * (shape[d] - 1);
      r += upper ? std::max<int64_t>(far, 0) : std::min<int64_t>(far, 0);
    }
    return r;
  }
};

View all_masked_view(const Shape& shape) {
  return View::create(shape, std::vector<int64_t>(shape.size(), 0), 0, Mask(shape.size(), {0, 0}));
}

std::optional<View> merge(const View& inner, const View& outer, int depth);

// `outer` without a mask: project its offset and strides onto inner's dimensions.
std::optional<View> merge_unmasked(const View& inner, const View& outer, int depth) {
  const size_t n1 = outer.shape.size(), n2 = inner.shape.size();
  const std::vector<int64_t> origin = unravel(inner.shape, outer.offset);
  // terms[d2]: (outer dim, how far one step along it moves along inner dim d2). This assumes a
  // step never carries between inner dimensions; the grouping below checks that it does not.
  std::vector<std::vector<std::pair<size_t, int64_t>>> terms(n2);
  std::vector<int64_t> strides(n1, 0);
  for (size_t d1 = 0; d1 < n1; ++d1) {
    if (outer.strides[d1] == 0) continue;
    const std::vector<int64_t> step = unravel(inner.shape, outer.offset + outer.strides[d1]);
    for (size_t d2 = 0; d2 < n2; ++d2) {
      const int64_t delta = step[d2] - origin[d2];
      if (delta == 0) continue;
      terms[d2].push_back({d1, delta});
      strides[d1] += delta * inner.strides[d2];
    }
  }

  // Group inner dimensions, innermost first, until every outer element's position within the
  // group stays inside it: then no step carries out of the group. A group of several inner
  // dimensions needs inner reshaped to it first, which merging only asks for when it must
  // (merged dimensions make inner's mask harder to project).
  Shape groups;
  std::vector<Linear> forms;
  Linear acc(n1);
  int64_t group = 1;
  for (size_t k = n2; k-- > 0;) {
    for (const auto& [d1, delta] : terms[k]) acc.coef[d1] += delta * group;
    acc.c += origin[k] * group;
    group *= inner.shape[k];
    if (acc.bound(outer.shape, false) >= 0 && acc.bound(outer.shape, true) < group) {
      groups.push_back(group);
      forms.push_back(acc);
      acc = Linear(n1);
      group = 1;
    }
  }
  if (!acc.is_zero() || group != 1) return std::nullopt;
  std::reverse(groups.begin(), groups.end());
  std::reverse(forms.begin(), forms.end());
  if (groups != inner.shape) {
    std::optional<View> regrouped = inner.reshape(groups);
    if (!regrouped) return std::nullopt;
    return merge(*regrouped, outer, depth + 1);
  }

  if (inner.mask) {
    // Restrict outer to where inner's mask holds, where that is a box in outer's indexes.
    Mask keep(n1);
    for (size_t d1 = 0; d1 < n1; ++d1) keep[d1] = {0, outer.shape[d1]};
    bool unexpressible = false;
    for (size_t d2 = 0; d2 < n2; ++d2) {
      const auto [b, e] = (*inner.mask)[d2];
      const Linear& at = forms[d2];
      if (at.bound(outer.shape, false) >= b && at.bound(outer.shape, true) < e) continue;
      if (terms[d2].empty()) {  // every outer element sits at one position, outside the mask
        if (n1 == 0) return std::nullopt;
        return all_masked_view(outer.shape);
      }
      if (terms[d2].size() != 1) {
        unexpressible = true;
        continue;
      }
      const auto [d1, c] = terms[d2][0];
      const int64_t o = origin[d2];
      const int64_t lo = c > 0 ? ceil_div(b - o, c) : ceil_div(e - 1 - o, c);
      const int64_t hi = c > 0 ? floor_div(e - 1 - o, c) : floor_div(b - o, c);
      keep[d1] = {std::max(keep[d1].first, lo), std::min(keep[d1].second, hi + 1)};
    }
    for (size_t d1 = 0; d1 < n1; ++d1)
      if (keep[d1] != DimRange{0, outer.shape[d1]})
        return merge(inner, View::create(outer.shape, outer.strides, outer.offset, keep),
                     depth + 1);
    if (unexpressible) return std::nullopt;
  }

  int64_t offset = inner.offset;
  for (size_t d2 = 0; d2 < n2; ++d2) offset += origin[d2] * inner.strides[d2];
  return View::create(outer.shape, std::move(strides), offset);
}

std::optional<View> merge(const View& inner, const View& outer, int depth) {
  // Each retry makes progress (a regrouped inner, a narrower outer); the cap only guards
  // against a case that does not, since giving up is always correct.
  if (depth > 16) return std::nullopt;
  // Symbolic views merge only where the inner one is the buffer itself.
  if (inner.sym || outer.sym) return inner.contiguous ? std::optional(outer) : std::nullopt;
  if (inner.contiguous) return outer;
  if (outer.contiguous && outer.shape == inner.shape) return inner;
  if (outer.contiguous && outer.size() == inner.size())
    if (std::optional<View> v = inner.reshape(outer.shape)) return v;
  if (outer.size() == 0 || outer.all_masked()) return outer;  // reads nothing from inner
  if (inner.all_masked())
    return outer.shape.empty() ? std::nullopt : std::optional(all_masked_view(outer.shape));
  if (outer.mask) {
    // Merge the unmasked box alone, then pad it back out to outer's shape.
    const Mask& m = *outer.mask;
    const View box = outer.shrink(m);
    if (box == outer) return std::nullopt;
    std::optional<View> merged = merge(inner, box, depth + 1);
    if (!merged) return std::nullopt;
    std::vector<PadWidth> widths;
    for (size_t i = 0; i < m.size(); ++i)
      widths.push_back({m[i].first, outer.shape[i] - m[i].second});
    return merged->pad(widths);
  }
  return merge_unmasked(inner, outer, depth);
}

// Per-dimension indexes of flat index `flat` in `shape`. The outermost dimension needs no modulo:
// a flat index is in [0, size) wherever the element it names is valid.
std::vector<UOpPtr> unravel_expr(const Shape& shape, const UOpPtr& flat) {
  std::vector<UOpPtr> idxs(shape.size());
  int64_t acc = 1, total = 1;
  for (int64_t s : shape) total *= s;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) {
      idxs[i] = flat->const_like(0);
      continue;
    }
    UOpPtr q = acc == 1 ? flat : flat / acc;
    idxs[i] = acc * shape[i] == total ? q : q % shape[i];
    acc *= shape[i];
  }
  return idxs;
}

// unravel_expr over a symbolic shape.
std::vector<UOpPtr> unravel_sym(const std::vector<UOpPtr>& shape, const UOpPtr& flat) {
  std::vector<UOpPtr> idxs(shape.size());
  UOpPtr acc = flat->const_like(1);
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i]->is_const() && shape[i]->const_int() == 1) {
      idxs[i] = flat->const_like(0);
      continue;
    }
    const UOpPtr q = acc->is_const() && acc->const_int() == 1 ? flat : flat / acc;
    idxs[i] = i == 0 ? q : q % shape[i];
    acc = simplify(acc * shape[i]);
  }
  return idxs;
}

bool is_false(const UOpPtr& u) { return u->is_const() && u->const_int() == 0; }

UOpPtr index_var(size_t i, int64_t extent) {
  return UOp::var("idx" + std::to_string(i), 0, std::max<int64_t>(extent - 1, 0));
}

}  // namespace

std::optional<View> merge_views(const View& inner, const View& outer) {
  return merge(inner, outer, 0);
}

// ---- the tracker and its movement ops ----

ShapeTracker::ShapeTracker(std::vector<View> views) : views_(std::move(views)) {
  if (views_.empty()) throw Error("ShapeTracker needs at least one view");
}

ShapeTracker ShapeTracker::from_shape(const Shape& shape) {
  return ShapeTracker({View::create(shape)});
}

ShapeTracker ShapeTracker::from_sym_shape(const std::vector<UOpPtr>& shape) {
  return ShapeTracker({View::create_symbolic(shape)});
}

bool ShapeTracker::symbolic() const {
  return std::any_of(views_.begin(), views_.end(), [](const View& v) { return v.sym.has_value(); });
}

ShapeTracker ShapeTracker::reshape_sym(const std::vector<UOpPtr>& new_shape) const {
  if (std::optional<View> v = views_.back().reshape_sym(new_shape)) return with_last(std::move(*v));
  std::vector<View> vs = views_;
  vs.push_back(View::create_symbolic(new_shape));
  return ShapeTracker(std::move(vs));
}
ShapeTracker ShapeTracker::expand_sym(const std::vector<UOpPtr>& new_shape) const {
  return with_last(views_.back().expand_sym(new_shape));
}
ShapeTracker ShapeTracker::pad_sym(const std::vector<SymRange>& widths) const {
  return with_last(views_.back().pad_sym(widths));
}
ShapeTracker ShapeTracker::shrink_sym(const std::vector<SymRange>& ranges) const {
  return with_last(views_.back().shrink_sym(ranges));
}

ShapeTracker ShapeTracker::with_last(View v) const {
  std::vector<View> vs = views_;
  vs.back() = std::move(v);
  return ShapeTracker(std::move(vs));
}

ShapeTracker ShapeTracker::reshape(const Shape& new_shape) const {
  if (std::optional<View> v = views_.back().reshape(new_shape)) return with_last(std::move(*v));
  std::vector<View> vs = views_;
  vs.push_back(View::create(new_shape));
  return ShapeTracker(std::move(vs));
}

ShapeTracker ShapeTracker::permute(const std::vector<int64_t>& order) const {
  return with_last(views_.back().permute(order));
}
ShapeTracker ShapeTracker::expand(const Shape& new_shape) const {
  return with_last(views_.back().expand(new_shape));
}
ShapeTracker ShapeTracker::pad(const std::vector<PadWidth>& widths) const {
  return with_last(views_.back().pad(widths));
}
ShapeTracker ShapeTracker::shrink(const Mask& ranges) const {
  return with_last(views_.back().shrink(ranges));
}
ShapeTracker ShapeTracker::flip(const std::vector<bool>& flipped) const {
  return with_last(views_.back().flip(flipped));
}
ShapeTracker ShapeTracker::flip_axes(const std::vector<int64_t>& axes) const {
  return with_last(views_.back().flip_axes(axes));
}
ShapeTracker ShapeTracker::stride(const std::vector<int64_t>& steps) const {
  return with_last(views_.back().stride(steps));
}

ShapeTracker ShapeTracker::simplify() const {
  std::vector<View> vs = views_;
  while (vs.size() >= 2) {
    std::optional<View> merged = merge_views(vs[vs.size() - 2], vs.back());
    if (!merged) break;
    vs.pop_back();
    vs.back() = std::move(*merged);
  }
  return ShapeTracker(std::move(vs));
}

ShapeTracker ShapeTracker::operator+(const ShapeTracker& top) const {
  ShapeTracker out = *this;
  for (const View& v : top.views_) {  // one view at a time: each merge sees the simplest stack
    out.views_.push_back(v);
    out = out.simplify();
  }
  return out;
}

size_t ShapeTracker::hash() const {
  size_t h = views_.size();
  for (const View& v : views_) h = hash_mix(h, v.hash());
  return h;
}

// ---- index expressions ----

namespace {

bool is_variable(const UOp& u) {
  return u.op == Ops::DEFINE_VAR || u.op == Ops::SPECIAL || u.op == Ops::RANGE;
}

// Stand-ins for the compound indexes of masked dimensions. A padded view's index is read only
// where its mask holds, so in the address (not in the validity) such an index may be replaced by
// a fresh variable bounded by the mask; the views below then fold their div and mod against
// those bounds. In a convolution's input gradient, the tiled index p = a*16 + y of a dimension
// padded to [0, 51) becomes P in [0, 50], and (nc*2601 + P*51 + Q) // 867 % 3 folds to P // 17.
// restore() puts the expressions back.
class StandIns {
 public:
  std::vector<UOpPtr> replace(const View& v, std::vector<UOpPtr> idxs) {
    if (!v.mask) return idxs;
    for (size_t d = 0; d < idxs.size(); ++d) {
      const UOpPtr& x = idxs[d];
      if (x->is_const() || is_variable(*x) || !x->dtype.is_int()) continue;
      const auto [b, e] = (*v.mask)[d];
      const int64_t lo = std::max(b, x->vmin()), hi = std::min(e - 1, x->vmax());
      if (lo > hi || (lo == x->vmin() && hi == x->vmax())) continue;  // the mask says nothing new
      UOpPtr stand_in = UOp::var("given" + std::to_string(alive_.size()), lo, hi, x->dtype);
      // x may hold the stand-ins of the views above: simplified within their bounds, then restored.
      back_.emplace(stand_in.get(), restore(simplify(x)));
      alive_.push_back(stand_in);
      idxs[d] = std::move(stand_in);
    }
    return idxs;
  }
  bool any() const { return !alive_.empty(); }
  UOpPtr restore(const UOpPtr& u) const { return substitute(u, back_); }

 private:
  std::unordered_map<const UOp*, UOpPtr> back_;
  std::vector<UOpPtr> alive_;
};

// The address and validity of views[top] at `idxs`, carried down through the views below it.
// With stand-ins, each view's validity reads the true indexes and its address the stand-ins.
IndexExpr compose(const std::vector<View>& views, size_t top, const std::vector<UOpPtr>& idxs,
                  bool simplified, StandIns* stand_ins) {
  auto view_expr = [&](const View& v, const std::vector<UOpPtr>& at, const UOpPtr& valid) {
    IndexExpr e = v.expr(at, valid);
    if (stand_ins) e.index = v.expr(stand_ins->replace(v, at), valid).index;
    return e;
  };
  IndexExpr e = view_expr(views[top], idxs, UOp::const_(dtypes::bool_, true));
  for (size_t i = top; i-- > 0;) {
    if (simplified) e = {simplify(e.index), simplify(e.valid)};
    if (is_false(e.valid)) break;
    const View v = views[i].minify();
    e = view_expr(v, v.sym ? unravel_sym(v.sym->shape, e.index) : unravel_expr(v.shape, e.index),
                  e.valid);
  }
  if (stand_ins && stand_ins->any())
    e = {stand_ins->restore(simplify(e.index)), stand_ins->restore(simplify(e.valid))};
  if (simplified) e = {simplify(e.index), simplify(e.valid)};
  if (is_false(e.valid)) e.index = e.index->const_like(0);  // nothing is read: any index will do
  return e;
}

int64_t divmod_count(const IndexExpr& e) {
  int64_t n = 0;
  for (const UOpPtr& root : {e.index, e.valid})
    for (const UOp* u : toposort(root.get())) n += u->op == Ops::IDIV || u->op == Ops::MOD;
  return n;
}

// The plain composition, or the one with stand-ins where that leaves fewer divisions and
// remainders (they cost the most in a kernel's index math).
IndexExpr compose_best(const std::vector<View>& views, size_t top, const std::vector<UOpPtr>& idxs,
                       bool simplified) {
  IndexExpr plain = compose(views, top, idxs, simplified, nullptr);
  bool masked = false;
  for (const View& v : views) masked |= v.mask.has_value();
  if (!simplified || !masked || divmod_count(plain) == 0) return plain;
  StandIns stand_ins;
  IndexExpr given = compose(views, top, idxs, simplified, &stand_ins);
  return divmod_count(given) < divmod_count(plain) ? given : plain;
}

}  // namespace

IndexExpr ShapeTracker::expr_idxs(const std::vector<UOpPtr>& idxs, bool simplified) const {
  if (idxs.size() != shape().size())
    throw Error("expr_idxs: " + std::to_string(idxs.size()) + " indexes for shape " +
                shape_str(shape()));
  return compose_best(views_, views_.size() - 1, idxs, simplified);
}

IndexExpr ShapeTracker::expr_idxs() const {
  std::vector<UOpPtr> idxs;
  for (size_t i = 0; i < shape().size(); ++i) idxs.push_back(index_var(i, shape()[i]));
  return expr_idxs(idxs);
}

IndexExpr ShapeTracker::expr_node(const UOpPtr& flat, bool simplified) const {
  std::vector<View> vs = views_;
  vs.back() = vs.back().minify();  // same flat order, fewer dimensions to unravel
  return compose_best(vs, vs.size() - 1, unravel_expr(vs.back().shape, flat), simplified);
}

IndexExpr ShapeTracker::expr_node() const { return expr_node(index_var(0, size())); }

// ---- real strides ----

namespace {

// `u` read as a sum of coeff * base plus a constant, distributing constant factors over sums so
// that (3-x)*6 reads as -6 * x + 18 (symbolic keeps a product whole where distributing would
// grow it).
void read_terms(const UOp& u, int64_t scale, std::unordered_map<const UOp*, int64_t>& coeff) {
  switch (u.op) {
    case Ops::CONST:
      return;
    case Ops::ADD:
      read_terms(*u.src[0], scale, coeff);
      return read_terms(*u.src[1], scale, coeff);
    case Ops::SUB:
      read_terms(*u.src[0], scale, coeff);
      return read_terms(*u.src[1], -scale, coeff);
    case Ops::NEG:
      return read_terms(*u.src[0], -scale, coeff);
    case Ops::MUL:
      if (u.src[1]->is_const()) return read_terms(*u.src[0], scale * u.src[1]->const_int(), coeff);
      if (u.src[0]->is_const()) return read_terms(*u.src[1], scale * u.src[0]->const_int(), coeff);
      break;
    default:
      break;
  }
  coeff[&u] += scale;
}

}  // namespace

std::vector<std::optional<int64_t>> ShapeTracker::real_strides(bool ignore_valid) const {
  const size_t n = shape().size();
  std::vector<std::optional<int64_t>> out(n);
  if (views_.size() == 1) {
    const View& v = views_[0];
    for (size_t i = 0; i < n; ++i)
      if (ignore_valid || !v.mask || (*v.mask)[i] == DimRange{0, v.shape[i]}) out[i] = v.strides[i];
    return out;
  }
  // Read the strides off the simplified index: a dimension whose variable is a term of its own
  // has that term's coefficient; one that also appears inside another term (a div, a mod) has none.
  std::vector<UOpPtr> idxs;
  std::unordered_map<const UOp*, size_t> dim_of;
  for (size_t i = 0; i < n; ++i) {
    idxs.push_back(index_var(i, shape()[i]));
    dim_of[idxs.back().get()] = i;
  }
  const IndexExpr e = expr_idxs(idxs);
  // Where the element exists is all that matters, and there padding's offsets fold away.
  const UOpPtr index = simplify_given(e.index, e.valid);  // keeps the terms' nodes alive
  std::unordered_map<const UOp*, int64_t> terms;
  read_terms(*index, 1, terms);
  std::vector<int64_t> coeff(n, 0);
  std::vector<bool> nonlinear(n, false);
  auto mark_all = [&](const UOp* root) {
    for (const UOp* u : toposort(root))
      if (auto it = dim_of.find(u); it != dim_of.end()) nonlinear[it->second] = true;
  };
  for (const auto& [base, k] : terms) {
    if (auto it = dim_of.find(base); it != dim_of.end())
      coeff[it->second] += k;
    else
      mark_all(base);
  }
  if (!ignore_valid) mark_all(e.valid.get());
  for (size_t i = 0; i < n; ++i)
    if (!nonlinear[i]) out[i] = shape()[i] == 1 ? 0 : coeff[i];
  return out;
}

std::vector<int64_t> ShapeTracker::unit_stride_axes(bool ignore_valid) const {
  std::vector<int64_t> axes;
  const auto st = real_strides(ignore_valid);
  for (size_t i = 0; i < st.size(); ++i)
    if (st[i] == 1) axes.push_back(int64_t(i));
  return axes;
}

// ---- as a UOp argument ----

namespace {
struct TrackerArg final : ArgPayload {
  ShapeTracker st;
  explicit TrackerArg(ShapeTracker s) : st(std::move(s)) {}
  size_t hash() const override { return st.hash(); }
  bool equals(const ArgPayload& other) const override {
    return st == static_cast<const TrackerArg&>(other).st;
  }
  std::string repr() const override { return to_string(st); }
};
}  // namespace

Arg ShapeTracker::to_arg() const {
  return std::shared_ptr<const ArgPayload>(std::make_shared<const TrackerArg>(*this));
}

const ShapeTracker* ShapeTracker::from_arg(const Arg& arg) {
  const auto* p = std::get_if<std::shared_ptr<const ArgPayload>>(&arg);
  if (!p || !*p) return nullptr;
  const auto* t = dynamic_cast<const TrackerArg*>(p->get());
  return t ? &t->st : nullptr;
}

// ---- printing ----

std::string to_string(const ShapeTracker& st) {
  std::string s = "ShapeTracker(views=(";
  for (size_t i = 0; i < st.views().size(); ++i) s += (i ? ", " : "") + to_string(st.views()[i]);
  return s + (st.views().size() == 1 ? ",))" : "))");
}

std::ostream& operator<<(std::ostream& os, const ShapeTracker& st) { return os << to_string(st); }

}  // namespace vkg
