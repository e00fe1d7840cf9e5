// Linear forms: an integer expression read as sum(coeff * base) + constant, and the canonical sum
// built back from one. Collecting like terms, folding constants and reassociating sums are all
// one rule (fold_linear): read the form, build it back, keep the result if it is not larger.
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <vkgrad/core/bounds.hpp>
#include <vkgrad/core/symbolic_folds.hpp>

namespace vkg::symbolic_detail {

// ---- small helpers shared by the folds ----

bool is_int_scalar(DType d) { return d.is_int() && d.count == 1 && !d.is_ptr(); }
bool is_signed_scalar(DType d) { return is_int_scalar(d) && !d.is_unsigned(); }
bool is_intlike_scalar(DType d) {
  return (d.is_int() || d.is_bool()) && d.count == 1 && !d.is_ptr();
}
bool has_bounds(DType d) { return is_intlike_scalar(d) && d.scalar != Scalar::UInt64; }

bool fits(int64_t v, DType d) {
  const auto [lo, hi] = dtype_range(d);
  return lo <= v && v <= hi;
}

namespace {

// The value `v` takes in dtype d (its bit pattern narrowed to d's width, sign-extended).
int64_t wrap(int64_t v, DType d) {
  switch (d.scalar) {
    case Scalar::Int8:
      return int8_t(v);
    case Scalar::Int16:
      return int16_t(v);
    case Scalar::Int32:
      return int32_t(v);
    default:
      return v;
  }
}

int64_t neg_wrap(int64_t v) { return int64_t(uint64_t(0) - uint64_t(v)); }

bool is_const_mul(const UOp& u) {
  return u.op == Ops::MUL && (u.src[0]->is_const() || u.src[1]->is_const());
}

bool is_sum(const UOp& u) { return u.op == Ops::ADD || u.op == Ops::SUB; }

// Reads terms into a form, merging like terms. Small forms search linearly; wide sums index.
// After `sums_left` ADD/SUB nodes, what is left of the sum is read as one opaque term.
struct Reader {
  LinearForm f;
  std::unordered_map<const UOp*, size_t> index;
  size_t sums_left = SIZE_MAX;

  void add_term(const UOp* base, int64_t c) {
    size_t i = f.terms.size();
    if (f.terms.size() < 16) {
      for (size_t j = 0; j < f.terms.size(); ++j)
        if (f.terms[j].base.get() == base) i = j;
    } else {
      if (index.empty())
        for (size_t j = 0; j < f.terms.size(); ++j) index.emplace(f.terms[j].base.get(), j);
      auto [it, fresh] = index.emplace(base, f.terms.size());
      i = it->second;
    }
    if (i == f.terms.size())
      f.terms.push_back({base->ptr(), c});
    else
      f.exact &= !__builtin_add_overflow(f.terms[i].coeff, c, &f.terms[i].coeff);
  }

  void read(const UOp& root) {
    std::vector<std::pair<const UOp*, int64_t>> stack{{&root, 1}};
    auto push = [&](const UOp* u, int64_t c) { stack.push_back({u, c}); };
    auto times = [&](int64_t a, int64_t b) {
      int64_t r;
      f.exact &= !__builtin_mul_overflow(a, b, &r);
      return r;
    };
    while (!stack.empty()) {
      auto [u, c] = stack.back();
      stack.pop_back();
      if (u->op == Ops::CONST) {
        f.exact &= !__builtin_add_overflow(f.constant, times(c, u->const_int()), &f.constant);
        continue;
      }
      const bool spine = is_sum(*u) || u->op == Ops::NEG || is_const_mul(*u);
      if (!spine || (is_sum(*u) && sums_left == 0)) {
        add_term(u, c);
        continue;
      }
      if (is_sum(*u)) --sums_left;
      f.exact &= computes_exactly(*u);
      switch (u->op) {
        case Ops::ADD:
          push(u->src[1].get(), c), push(u->src[0].get(), c);
          break;
        case Ops::SUB:
          push(u->src[1].get(), times(c, -1)), push(u->src[0].get(), c);
          break;
        case Ops::NEG:
          push(u->src[0].get(), times(c, -1));
          break;
        default: {  // MUL by a constant; a sum under it is distributed
          const bool right = u->src[1]->is_const();
          push(u->src[right ? 0 : 1].get(), times(c, u->src[right ? 1 : 0]->const_int()));
        }
      }
    }
    std::erase_if(f.terms, [](const LinearTerm& t) { return t.coeff == 0; });
  }
};

UOpPtr term_node(const UOpPtr& base, int64_t c, DType d) {
  return c == 1 ? base : base * UOp::const_(d, c);
}

}  // namespace

LinearForm read_linear(const UOp& u, size_t max_sums) {
  Reader r;
  r.sums_left = max_sums;
  r.read(u);
  return std::move(r.f);
}

UOpPtr build_linear(const LinearForm& f, DType d) {
  int64_t k = wrap(f.constant, d);
  if (f.terms.empty()) return UOp::const_(d, k);
  size_t lead = 0;
  while (lead < f.terms.size() && wrap(f.terms[lead].coeff, d) <= 0) ++lead;
  if (lead == f.terms.size()) lead = 0;
  const LinearTerm& t = f.terms[lead];
  const int64_t c = wrap(t.coeff, d);
  UOpPtr acc;
  if (c > 0)
    acc = term_node(t.base, c, d);
  else if (k != 0)
    acc =
        UOp::const_(d, std::exchange(k, 0)) - term_node(t.base, neg_wrap(c), d);  // 5-a, not (-a)+5
  else
    acc = c == -1 ? -t.base : t.base * UOp::const_(d, c);
  for (size_t i = 0; i < f.terms.size(); ++i) {
    if (i == lead) continue;
    const int64_t ci = wrap(f.terms[i].coeff, d);
    if (ci == 0) continue;
    acc = ci > 0 ? acc + term_node(f.terms[i].base, ci, d)
                 : acc - term_node(f.terms[i].base, neg_wrap(ci), d);
  }
  return k != 0 ? acc + UOp::const_(d, k) : acc;
}

size_t spine_size(const UOp& root, const std::vector<LinearTerm>& terms) {
  std::unordered_set<const UOp*> seen;
  for (const LinearTerm& t : terms) seen.insert(t.base.get());
  const size_t bases = seen.size();
  std::vector<const UOp*> stack{&root};
  while (!stack.empty()) {
    const UOp* u = stack.back();
    stack.pop_back();
    if (!seen.insert(u).second) continue;
    for (const UOpPtr& s : u->src) stack.push_back(s.get());
  }
  return seen.size() - bases;
}

std::optional<std::pair<int64_t, int64_t>> linear_bounds(const std::vector<LinearTerm>& terms,
                                                         int64_t constant) {
  int64_t lo = constant, hi = constant;
  for (const LinearTerm& t : terms) {
    int64_t a, b;
    if (__builtin_mul_overflow(t.coeff, t.base->vmin(), &a) ||
        __builtin_mul_overflow(t.coeff, t.base->vmax(), &b) ||
        __builtin_add_overflow(lo, std::min(a, b), &lo) ||
        __builtin_add_overflow(hi, std::max(a, b), &hi))
      return std::nullopt;
  }
  return std::pair{lo, hi};
}

// ---- fold_linear ----

namespace {

// A node the reader takes as one term: its base and coefficient. Not constants, sums, negations,
// or products the reader would look into or that other rules rewrite (x*1, x*0, x*-1, 3*x,
// (x*2)*3, (x+1)*3).
struct Plain {
  const UOp* base;
  int64_t coeff;
};
std::optional<Plain> plain_term(const UOp* u) {
  switch (u->op) {
    case Ops::CONST:
    case Ops::ADD:
    case Ops::SUB:
    case Ops::NEG:
      return std::nullopt;
    case Ops::MUL: {
      if (u->src[0]->is_const()) return std::nullopt;
      if (!u->src[1]->is_const()) return Plain{u, 1};
      const UOp* x = u->src[0].get();
      const int64_t c = u->src[1]->const_int();
      if (c == 0 || c == 1 || c == -1 || x->op == Ops::NEG || is_const_mul(*x) || is_sum(*x))
        return std::nullopt;
      return Plain{x, c};
    }
    default:
      return Plain{u, 1};
  }
}

// Whether `l` has the canonical shape with no constant and none of its bases is `avoid`; then
// also whether its leading term is negative and whether all of its other terms are.
struct SumShape {
  bool canonical = false, lead_negative = false, rest_negative = true;
};
SumShape sum_shape(const UOp* l, const UOp* avoid) {
  SumShape s;
  const UOp* node = l;
  for (size_t depth = 0; is_sum(*node); node = node->src[0].get()) {
    const auto t = plain_term(node->src[1].get());
    if (!t || t->coeff < 0 || t->base == avoid) return s;
    s.rest_negative &= node->op == Ops::SUB;
    if (++depth == kSumWindow) {  // the rest is as fold_linear left it (and reads it): opaque
      s.canonical = true;
      s.rest_negative = false;
      return s;
    }
  }
  std::optional<Plain> lead;
  if (node->op == Ops::NEG) {
    lead = plain_term(node->src[0].get());
    if (!lead || lead->coeff != 1) return s;
    lead->coeff = -1;
  } else {
    lead = plain_term(node);
  }
  if (!lead || lead->base == avoid) return s;
  s.canonical = true;
  s.lead_negative = lead->coeff < 0;
  return s;
}

// Cases where n = l op r changes only at its top, found by walking l's spine without building
// its form: what keeps a wide sum built one term at a time linear rather than quadratic.
// Returns n itself when n is already canonical, nullptr when the general path must decide.
UOpPtr fold_linear_fast(const UOp& n) {
  const UOp* l = n.src[0].get();
  const UOp* r = n.src[1].get();
  const bool sub = n.op == Ops::SUB;
  if (const auto t = plain_term(r); t && t->coeff > 0) {
    const auto fits_after = [&](const UOp* sum) {
      const SumShape s = sum_shape(sum, t->base);
      return s.canonical && (!s.lead_negative || (s.rest_negative && sub));
    };
    if (fits_after(l)) return n.ptr();
    // (L+k) op r -> (L op r)+k: constants stay outermost.
    if (l->op == Ops::ADD && l->src[1]->is_const() && fits_after(l->src[0].get()))
      return UOp::make(n.op, n.dtype, {l->src[0], r->ptr()}) + l->src[1];
    return nullptr;
  }
  if (!r->is_const()) return nullptr;
  const int64_t k = r->const_int();
  if (l->op == Ops::ADD && l->src[1]->is_const()) {  // (L+k1) op k2 -> L+(k1 op k2); the sum wraps
    const int64_t sum = wrap(int64_t(sub ? uint64_t(l->src[1]->const_int()) - uint64_t(k)
                                         : uint64_t(l->src[1]->const_int()) + uint64_t(k)),
                             n.dtype);
    return sum == 0 ? l->src[0] : l->src[0] + UOp::const_(n.dtype, sum);
  }
  const SumShape s = sum_shape(l, nullptr);
  if (!s.canonical || s.lead_negative || k == 0) return nullptr;
  return sub ? l->ptr() + UOp::const_(n.dtype, neg_wrap(k)) : n.ptr();
}

}  // namespace

UOpPtr fold_linear(const UOp& n) {
  if (n.op == Ops::ADD || n.op == Ops::SUB) {
    if (UOpPtr fast = fold_linear_fast(n)) return fast.get() == &n ? nullptr : fast;
  }
  LinearForm f = read_linear(n, kSumWindow);
  // Sums, differences and products are ring operations, right modulo 2^width whatever wraps:
  // coefficients may be reduced to the dtype and cancel there.
  for (LinearTerm& t : f.terms) t.coeff = wrap(t.coeff, n.dtype);
  std::erase_if(f.terms, [](const LinearTerm& t) { return t.coeff == 0; });
  UOpPtr out = build_linear(f, n.dtype);
  if (out.get() == &n || spine_size(*out, f.terms) > spine_size(n, f.terms)) return nullptr;
  return out;
}

}  // namespace vkg::symbolic_detail

namespace vkg {

std::optional<LinearForm> linear_form(const UOpPtr& u) {
  if (!symbolic_detail::is_signed_scalar(u->dtype)) return std::nullopt;
  return symbolic_detail::read_linear(*u, symbolic_detail::kDividendWindow);
}

}  // namespace vkg
