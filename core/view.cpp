#include <vkgrad/core/view.hpp>

#include <algorithm>
#include <cstdlib>
#include <ostream>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/int_math.hpp>
#include <vkgrad/core/symbolic.hpp>

namespace vkg {

namespace {

int64_t checked_prod(const Shape& shape, const char* op) {
  int64_t n = 1;
  for (int64_t s : shape)
    if (__builtin_mul_overflow(n, s, &n))
      throw Error(std::string(op) + ": shape " + shape_str(shape) + " has too many elements");
  return n;
}

std::string pairs_str(const std::vector<std::pair<int64_t, int64_t>>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", (" : "(") + std::to_string(v[i].first) + ", " + std::to_string(v[i].second) + ")";
  return s + (v.size() == 1 ? ",)" : ")");
}

std::string mask_str(const std::optional<Mask>& m) { return m ? pairs_str(*m) : "None"; }

[[noreturn]] void fail(const char* op, const View& v, const std::string& arg,
                       const std::string& why) {
  throw Error(std::string(op) + " " + arg + " of shape " + shape_str(v.shape) + ": " + why);
}

void check_rank(const char* op, const View& v, size_t n, const std::string& arg) {
  if (n != v.shape.size())
    fail(op, v, arg,
         "needs one entry per dimension (" + std::to_string(v.shape.size()) + "), got " +
             std::to_string(n));
}

bool is_full(const Mask& m, const Shape& shape) {
  for (size_t i = 0; i < m.size(); ++i)
    if (m[i] != DimRange{0, shape[i]}) return false;
  return true;
}

bool any_empty(const Mask& m) {
  return std::any_of(m.begin(), m.end(), [](const DimRange& r) { return r.first >= r.second; });
}

// The view restricted to `ranges` (which may reach outside the shape, as a pad's do), its old
// mask moved along and intersected with `extra` if given.
View resize(const View& v, const Mask& ranges, const std::optional<Mask>& extra) {
  int64_t offset = v.offset;
  Shape shape(ranges.size());
  for (size_t i = 0; i < ranges.size(); ++i) {
    offset += v.strides[i] * ranges[i].first;
    shape[i] = ranges[i].second - ranges[i].first;
  }
  std::optional<Mask> mask = extra;
  if (v.mask) {
    Mask moved(ranges.size());
    for (size_t i = 0; i < ranges.size(); ++i) {
      auto clamp = [&](int64_t x) { return std::clamp<int64_t>(x - ranges[i].first, 0, shape[i]); };
      moved[i] = {clamp((*v.mask)[i].first), clamp((*v.mask)[i].second)};
      if (extra)
        moved[i] = {std::max(moved[i].first, (*extra)[i].first),
                    std::min(moved[i].second, (*extra)[i].second)};
    }
    mask = std::move(moved);
  }
  return View::create(std::move(shape), v.strides, offset, std::move(mask));
}

// The mask of a reshape from `old_shape` to `new_shape`, or nullopt when a masked region would
// not be a box in the new shape. Walks both shapes from the innermost dimension: a new dimension
// that is smaller than the current old one splits it (allowed only if the valid range does not
// wrap around the split), a larger one absorbs the next old dimensions (allowed only if every
// dimension absorbed so far is unmasked or the next one is narrowed to a single index).
// `mask` has no empty range (an all-masked view is reshaped without it).
std::optional<Mask> reshape_mask(const Mask& mask, const Shape& old_shape, const Shape& new_shape) {
  Mask out;
  size_t old_i = old_shape.size(), new_i = new_shape.size();
  auto next_old = [&]() -> std::pair<int64_t, DimRange> {
    if (old_i == 0) return {1, {0, 1}};
    --old_i;
    return {old_shape[old_i], mask[old_i]};
  };
  auto next_new = [&]() -> int64_t { return new_i == 0 ? 1 : new_shape[--new_i]; };

  auto [old_dim, range] = next_old();
  int64_t new_dim = next_new();
  int64_t carved = 1;  // product of the new dimensions already split off the current old one
  while (out.size() < new_shape.size()) {
    const auto [l, r] = range;
    const int64_t block = new_dim * carved;
    if (old_dim == block) {
      out.push_back({floor_div(l, carved), floor_div(r - 1, carved) + 1});
      std::tie(old_dim, range) = next_old();
      new_dim = next_new();
      carved = 1;
    } else if (old_dim > block) {
      if (old_dim % block != 0) return std::nullopt;
      const bool aligned = l % block == 0 && r % block == 0;
      if (!aligned && floor_div(l, block) != floor_div(r - 1, block)) return std::nullopt;
      out.push_back({(l % block) / carved, ((r - 1) % block) / carved + 1});
      carved = block;
      new_dim = next_new();
    } else {
      const auto [size, outer] = next_old();
      if (range != DimRange{0, old_dim} && outer.second - outer.first != 1) return std::nullopt;
      range = {outer.first * old_dim + l, (outer.second - 1) * old_dim + r};
      old_dim *= size;
    }
  }
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace

// ---- canonical form ----

std::vector<int64_t> strides_for_shape(const Shape& shape) {
  std::vector<int64_t> st(shape.size(), 0);
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = shape[i] == 1 ? 0 : acc;
    acc *= shape[i];
  }
  return st;
}

View View::create(Shape shape, std::optional<std::vector<int64_t>> strides, int64_t offset,
                  std::optional<Mask> mask) {
  for (int64_t s : shape)
    if (s < 0) throw Error("View: negative dimension in shape " + shape_str(shape));
  if (strides && strides->size() != shape.size())
    throw Error("View: strides " + shape_str(*strides) + " do not match shape " + shape_str(shape));
  if (mask && mask->size() != shape.size())
    throw Error("View: mask " + mask_str(mask) + " does not match shape " + shape_str(shape));
  std::vector<int64_t> st = strides ? std::move(*strides) : strides_for_shape(shape);
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 1) st[i] = 0;
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) {
    std::vector<int64_t> zeros(shape.size(), 0);
    return View{std::move(shape), std::move(zeros), 0, std::nullopt, true, std::nullopt};
  }
  if (mask && is_full(*mask, shape)) mask.reset();
  if (mask && any_empty(*mask)) {
    std::fill(st.begin(), st.end(), 0);
    offset = 0;
    mask = Mask(shape.size(), {0, 0});
  } else if (mask) {
    for (size_t i = 0; i < shape.size(); ++i)
      if ((*mask)[i].second - (*mask)[i].first == 1) {
        offset += st[i] * (*mask)[i].first;
        st[i] = 0;
      }
  }
  const bool contiguous = offset == 0 && !mask && st == strides_for_shape(shape);
  return View{std::move(shape), std::move(st), offset, std::move(mask), contiguous, std::nullopt};
}

int64_t View::size() const { return checked_prod(shape, "View"); }

bool View::all_masked() const { return mask && any_empty(*mask); }

size_t View::hash() const {
  size_t h = hash_mix(shape.size(), size_t(offset));
  for (size_t i = 0; i < shape.size(); ++i) {
    h = hash_mix(hash_mix(h, size_t(shape[i])), size_t(strides[i]));
    if (mask) h = hash_mix(hash_mix(h, size_t((*mask)[i].first)), size_t((*mask)[i].second));
  }
  if (sym) {
    for (const auto* part : {&sym->shape, &sym->strides})
      for (const UOpPtr& e : *part) h = hash_mix(h, e->hash());
    h = hash_mix(h, sym->offset->hash());
    for (const auto& [b, e] : sym->mask) h = hash_mix(hash_mix(h, b->hash()), e->hash());
  }
  return hash_mix(h, (mask ? 2 : 0) | (contiguous ? 1 : 0));
}

// ---- merging dimensions ----

std::vector<MergedDim> merge_dims(const Shape& shape, const std::vector<int64_t>& strides,
                                  const std::optional<Mask>& mask) {
  std::vector<MergedDim> out;
  if (shape.empty()) return out;
  // A dimension pinned to one index (size 1, or masked to width 1) adds no address of its own,
  // so the next dimension merges into it whatever its stride.
  auto pinned = [&](size_t i) {
    return mask ? (*mask)[i].second - (*mask)[i].first == 1 : shape[i] == 1;
  };
  out.push_back({shape[0], strides[0], strides[0] != 0 ? shape[0] : 0});
  bool absorb = pinned(0);
  for (size_t i = 1; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    MergedDim& last = out.back();
    if (absorb || last.stride == shape[i] * strides[i])
      last = {last.size * shape[i], strides[i], absorb ? shape[i] : last.real_size * shape[i]};
    else
      out.push_back({shape[i], strides[i], shape[i]});
    absorb = pinned(i);
  }
  return out;
}

// ---- movement ops ----

std::optional<View> View::reshape(const Shape& new_shape) const {
  if (sym) return reshape_sym(symbolic_view::as_exprs(new_shape));
  if (new_shape == shape) return *this;
  for (int64_t s : new_shape)
    if (s < 0)
      fail("reshape", *this, "to " + shape_str(new_shape), "dimensions cannot be negative");
  const int64_t n = size(), m = checked_prod(new_shape, "reshape");
  if (n != m)
    fail("reshape", *this, "to " + shape_str(new_shape),
         "element counts differ (" + std::to_string(n) + " vs " + std::to_string(m) + ")");
  if (n == 0 || contiguous) return create(new_shape);
  if (all_masked()) {
    if (new_shape.empty()) return std::nullopt;  // a 0-d view has no mask to hide its element
    return create(new_shape, std::vector<int64_t>(new_shape.size(), 0), 0,
                  Mask(new_shape.size(), {0, 0}));
  }

  // Cut each merged run into consecutive new dimensions, innermost first; a run must be covered
  // exactly. Past a run's real size the remaining new dimensions only walk masked or broadcast
  // positions, so they get stride 0.
  std::vector<int64_t> new_strides(new_shape.size(), 0);
  size_t j = new_shape.size();
  const std::vector<MergedDim> runs = merge_dims(shape, strides, mask);
  for (auto run = runs.rbegin(); run != runs.rend(); ++run) {
    int64_t acc = 1, stride = run->stride;
    while (acc < run->size && j > 0 && new_shape[j - 1] > 0) {
      new_strides[--j] = stride * acc;
      acc *= new_shape[j];
      if (acc >= run->real_size) stride = 0;
    }
    if (acc != run->size) return std::nullopt;
  }

  std::optional<Mask> new_mask;
  int64_t new_offset = offset;
  if (mask) {
    new_mask = reshape_mask(*mask, shape, new_shape);
    if (!new_mask) return std::nullopt;
    // Strides of pinned dimensions were folded into the offset at each mask's begin; re-anchor
    // that to the new mask's begins.
    for (size_t i = 0; i < shape.size(); ++i) new_offset += (*mask)[i].first * strides[i];
    for (size_t i = 0; i < new_shape.size(); ++i)
      new_offset -= (*new_mask)[i].first * new_strides[i];
  }
  return create(new_shape, std::move(new_strides), new_offset, std::move(new_mask));
}

View View::permute(const std::vector<int64_t>& order) const {
  const std::string arg = shape_str(order);
  check_rank("permute", *this, order.size(), arg);
  std::vector<bool> seen(order.size(), false);
  for (int64_t a : order) {
    if (a < 0 || a >= int64_t(order.size()) || seen[size_t(a)])
      fail("permute", *this, arg, "is not a permutation of the axes");
    seen[size_t(a)] = true;
  }
  if (sym) return symbolic_view::permute(*this, order);
  Shape s;
  std::vector<int64_t> st;
  std::optional<Mask> m;
  if (mask) m.emplace();
  for (int64_t a : order) {
    s.push_back(shape[size_t(a)]);
    st.push_back(strides[size_t(a)]);
    if (mask) m->push_back((*mask)[size_t(a)]);
  }
  return create(std::move(s), std::move(st), offset, std::move(m));
}

View View::expand(const Shape& new_shape) const {
  if (sym) return expand_sym(symbolic_view::as_exprs(new_shape));
  const std::string arg = "to " + shape_str(new_shape);
  check_rank("expand", *this, new_shape.size(), arg);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (new_shape[i] < 0) fail("expand", *this, arg, "dimensions cannot be negative");
    if (new_shape[i] != shape[i] && shape[i] != 1)
      fail("expand", *this, arg,
           "dimension " + std::to_string(i) + " has size " + std::to_string(shape[i]) +
               ", only size 1 expands");
  }
  if (size() == 0) return create(new_shape);
  std::optional<Mask> m = mask;
  if (m)
    for (size_t i = 0; i < shape.size(); ++i)
      if (shape[i] != new_shape[i])
        (*m)[i] = (*m)[i] == DimRange{0, 1} ? DimRange{0, new_shape[i]} : DimRange{0, 0};
  return create(new_shape, strides, offset, std::move(m));
}

View View::pad(const std::vector<PadWidth>& widths) const {
  const std::string arg = pairs_str(widths);
  check_rank("pad", *this, widths.size(), arg);
  bool any = false;
  for (const auto& [before, after] : widths) {
    if (before < 0 || after < 0) fail("pad", *this, arg, "padding cannot be negative");
    any |= before != 0 || after != 0;
  }
  if (!any) return *this;
  if (sym) {
    std::vector<SymRange> w;
    for (const auto& [b, a] : widths)
      w.push_back({UOp::const_(dtypes::int32, b), UOp::const_(dtypes::int32, a)});
    return pad_sym(w);
  }
  Mask ranges, valid;
  for (size_t i = 0; i < shape.size(); ++i) {
    ranges.push_back({-widths[i].first, shape[i] + widths[i].second});
    valid.push_back({widths[i].first, shape[i] + widths[i].first});
  }
  return resize(*this, ranges, valid);
}

View View::shrink(const Mask& ranges) const {
  const std::string arg = pairs_str(ranges);
  check_rank("shrink", *this, ranges.size(), arg);
  if (sym) {
    std::vector<SymRange> r;
    for (const auto& [b, e] : ranges)
      r.push_back({UOp::const_(dtypes::int32, b), UOp::const_(dtypes::int32, e)});
    return shrink_sym(r);
  }
  for (size_t i = 0; i < shape.size(); ++i) {
    const auto [b, e] = ranges[i];
    if (b < 0 || e > shape[i] || b > e)
      fail("shrink", *this, arg,
           "dimension " + std::to_string(i) +
               " needs 0 <= begin <= end <= " + std::to_string(shape[i]));
  }
  return resize(*this, ranges, std::nullopt);
}

View View::flip(const std::vector<bool>& flipped) const {
  if (sym) symbolic_view::unsupported("flip");
  std::vector<int64_t> as_ints(flipped.begin(), flipped.end());
  check_rank("flip", *this, flipped.size(), shape_str(as_ints));
  std::vector<int64_t> st = strides;
  std::optional<Mask> m = mask;
  int64_t off = offset;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (!flipped[i]) continue;
    off += (shape[i] - 1) * st[i];
    st[i] = -st[i];
    if (m) (*m)[i] = {shape[i] - (*m)[i].second, shape[i] - (*m)[i].first};
  }
  return create(shape, std::move(st), off, std::move(m));
}

View View::flip_axes(const std::vector<int64_t>& axes) const {
  std::vector<bool> flipped(shape.size(), false);
  for (int64_t a : axes) {
    if (a < 0 || a >= int64_t(shape.size()) || flipped[size_t(a)])
      fail("flip", *this, "of axes " + shape_str(axes),
           "axes must be distinct and in [0, " + std::to_string(shape.size()) + ")");
    flipped[size_t(a)] = true;
  }
  return flip(flipped);
}

View View::stride(const std::vector<int64_t>& steps) const {
  if (sym) symbolic_view::unsupported("stride");
  const std::string arg = shape_str(steps);
  check_rank("stride", *this, steps.size(), arg);
  if (std::find(steps.begin(), steps.end(), 0) != steps.end())
    fail("stride", *this, arg, "a stride cannot be 0");
  Shape s(shape.size());
  std::vector<int64_t> st(shape.size());
  std::optional<Mask> m = mask;
  int64_t off = offset;
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t k = std::abs(steps[i]), n = shape[i];
    s[i] = ceil_div(n, k);
    st[i] = strides[i] * steps[i];
    if (steps[i] < 0) off += (n - 1) * strides[i];
    // New index j reads old position j*k (or n-1-j*k when reversed); keep the j that land in
    // the old mask.
    if (m) {
      const auto [b, e] = (*m)[i];
      (*m)[i] = steps[i] > 0 ? DimRange{ceil_div(b, k), ceil_div(e, k)}
                             : DimRange{ceil_div(n - e, k), ceil_div(n - b, k)};
    }
  }
  return create(std::move(s), std::move(st), off, std::move(m));
}

View View::minify() const {
  if (sym) return *this;
  Shape merged;
  for (const MergedDim& d : merge_dims(shape, strides, mask)) merged.push_back(d.size);
  if (merged == shape) return *this;
  std::optional<View> v = reshape(merged);
  return v ? *v : *this;
}

// ---- index expressions ----

IndexExpr View::expr(const std::vector<UOpPtr>& idxs, const UOpPtr& valid) const {
  if (idxs.size() != shape.size())
    throw Error("View::expr: " + std::to_string(idxs.size()) + " indexes for shape " +
                shape_str(shape));
  if (sym) return symbolic_view::expr(*this, idxs, valid);
  const DType dt = idxs.empty() ? dtypes::int32 : idxs[0]->dtype;
  if (all_masked()) return {UOp::const_(dt, 0), UOp::const_(dtypes::bool_, false)};
  // Terms go most significant (largest stride) first, so the sum reads like an address, as
  // (i*10)+j does; symbolic keeps the order of the terms it is given.
  std::vector<size_t> dims;
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] != 1 && strides[i] != 0) dims.push_back(i);
  std::stable_sort(dims.begin(), dims.end(),
                   [&](size_t a, size_t b) { return std::abs(strides[a]) > std::abs(strides[b]); });
  UOpPtr index = offset != 0 ? UOp::const_(dt, offset) : nullptr;
  for (size_t i : dims) {
    const UOpPtr term = strides[i] == 1 ? idxs[i] : idxs[i] * strides[i];
    index = index ? index + term : term;
  }
  UOpPtr ok = valid;
  for (size_t i = 0; i < shape.size() && mask; ++i) {
    const UOpPtr& x = idxs[i];
    const auto [b, e] = (*mask)[i];
    auto both = [&](const UOpPtr& c) { ok = ok->alu(Ops::AND, {c}); };
    if (x->vmin() < b) both(x->ge(b));
    if (x->vmax() >= e) both(x->lt(e));
  }
  return {index ? index : UOp::const_(dt, 0), ok};
}

// ---- printing ----

std::string to_string(const View& v) {
  if (v.sym) {
    auto list = [](const std::vector<UOpPtr>& es) {
      std::string out = "(";
      for (size_t i = 0; i < es.size(); ++i) out += (i ? ", " : "") + render(es[i]);
      return out + (es.size() == 1 ? ",)" : ")");
    };
    std::string m = "None";
    if (!v.sym->mask.empty()) {
      m = "(";
      for (size_t i = 0; i < v.sym->mask.size(); ++i)
        m += (i ? ", (" : "(") + render(v.sym->mask[i].first) + ", " +
             render(v.sym->mask[i].second) + ")";
      m += ")";
    }
    return "View(shape=" + list(v.sym->shape) + ", strides=" + list(v.sym->strides) +
           ", offset=" + render(v.sym->offset) + ", mask=" + m +
           ", contiguous=" + (v.contiguous ? "True" : "False") + ")";
  }
  return "View(shape=" + shape_str(v.shape) + ", strides=" + shape_str(v.strides) +
         ", offset=" + std::to_string(v.offset) + ", mask=" + mask_str(v.mask) +
         ", contiguous=" + (v.contiguous ? "True" : "False") + ")";
}

std::ostream& operator<<(std::ostream& os, const View& v) { return os << to_string(v); }

}  // namespace vkg
