// Folds of integer division, modulo and comparisons against constants, reasoning on the linear
// form of the left side. Division truncates toward zero (C, GLSL), so the floor-division algebra
// holds only where the dividend keeps one sign: a fold that needs it says which sign it uses.
//
// Every fold here reads its operand's true value: it requires form.exact (no node wraps), builds
// results whose true value fits the dtype, and so may build them with wrapping arithmetic.
#include <algorithm>
#include <numeric>

#include <vkgrad/core/symbolic_folds.hpp>

namespace vkg::symbolic_detail {

namespace {

// A form the folds can trust: its value is the node's and each number fits the dtype.
bool usable(const LinearForm& f, DType d) {
  if (!f.exact || !fits(f.constant, d) || f.constant == INT64_MIN) return false;
  for (const LinearTerm& t : f.terms)
    if (!fits(t.coeff, d) || t.coeff == INT64_MIN) return false;
  return true;
}

// gcd of `g` and every coefficient (all are > INT64_MIN, so their magnitudes are int64).
int64_t coeff_gcd(const LinearForm& f, int64_t g) {
  for (const LinearTerm& t : f.terms) g = std::gcd(g, t.coeff);
  return g;
}

LinearForm negated(LinearForm f) {
  for (LinearTerm& t : f.terms) t.coeff = -t.coeff;
  f.constant = -f.constant;
  return f;
}

// The terms with coefficients divided by g (which divides each), and the given constant.
LinearForm divided(const LinearForm& f, int64_t g, int64_t constant) {
  LinearForm out{{}, constant, true};
  for (const LinearTerm& t : f.terms) out.terms.push_back({t.base, t.coeff / g});
  return out;
}

// x = c*q + r for a divisor c > 0. Each term's remainder coefficient is taken in [0, c) or in
// (-c, 0]: by_sign picks the one that gives the term's share of r the sign wanted (r >= 0 for
// floor, r <= 0 for ceil) given the sign of its base; otherwise, or for a base of either sign,
// the one of smaller magnitude. The constant's remainder has the wanted sign.
struct Split {
  LinearForm q, r;
};
Split split(const LinearForm& f, int64_t c, bool floor, bool by_sign) {
  Split s;
  auto positive_rem = [&](int64_t a) { return a % c < 0 ? a % c + c : a % c; };
  auto one = [&](int64_t a, bool want_positive, int64_t& q, int64_t& r) {
    const int64_t pos = positive_rem(a);
    r = (want_positive || pos == 0) ? pos : pos - c;
    q = a / c + (a % c - r) / c;  // (a - r) / c without overflow: a % c - r is 0 or +-c
  };
  for (const LinearTerm& t : f.terms) {
    const int64_t pos = positive_rem(t.coeff);
    const bool want_positive = !by_sign              ? pos <= c - pos
                               : t.base->vmin() >= 0 ? floor
                               : t.base->vmax() <= 0 ? !floor
                                                     : pos <= c - pos;
    int64_t q, r;
    one(t.coeff, want_positive, q, r);
    if (q != 0) s.q.terms.push_back({t.base, q});
    if (r != 0) s.r.terms.push_back({t.base, r});
  }
  one(f.constant, floor, s.q.constant, s.r.constant);
  return s;
}

// Accepts a fold's result if it is new and no larger than the node it replaces; `strictly`
// smaller where the result divides again and an equal-sized one could fold back.
struct SizeCheck {
  const UOp& n;
  const LinearForm& f;
  size_t old_size = 0;
  bool ok(const UOpPtr& out, bool strictly = false) {
    if (!out || out.get() == &n) return false;
    if (old_size == 0) old_size = spine_size(n, f.terms);
    const size_t size = spine_size(*out, f.terms);
    return strictly ? size < old_size : size <= old_size;
  }
};

bool bounds_fit(const std::optional<std::pair<int64_t, int64_t>>& b, DType d) {
  return b && fits(b->first, d) && fits(b->second, d);
}

UOpPtr konst(DType d, int64_t v) { return UOp::const_(d, v); }

// x = g*y + s for a g that divides c, where y holds the terms whose coefficients g divides and s
// the others (and the constant's remainder), and s lies in [0, g). For x >= 0 then y >= 0, and
// x // c = y // (c/g), x % c = (y % (c/g))*g + s: s is too small to carry into the quotient. A
// padded view's index reads so: (2601*a + 51*p + q) // 867 with q in [0, 51) is (51*a + p) // 17.
struct SmallRemainder {
  LinearForm y, s;
  int64_t g;
};
std::vector<SmallRemainder> small_remainders(const LinearForm& f, int64_t c) {
  std::vector<int64_t> gs;
  for (const LinearTerm& t : f.terms)
    if (const int64_t g = std::gcd(c, t.coeff); g > 1) gs.push_back(g);
  std::sort(gs.rbegin(), gs.rend());
  gs.erase(std::unique(gs.begin(), gs.end()), gs.end());
  std::vector<SmallRemainder> out;
  for (int64_t g : gs) {
    SmallRemainder r{{{}, floor_div(f.constant, g), true}, {{}, 0, true}, g};
    r.s.constant = f.constant - g * r.y.constant;
    for (const LinearTerm& t : f.terms) {
      if (t.coeff % g == 0)
        r.y.terms.push_back({t.base, t.coeff / g});
      else
        r.s.terms.push_back(t);
    }
    if (r.s.terms.empty() || r.y.terms.empty()) continue;  // the plain gcd folds cover these
    const auto sb = linear_bounds(r.s.terms, r.s.constant);
    if (sb && sb->first >= 0 && sb->second < g) out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

UOpPtr fold_idiv(const UOp& n) {
  const DType d = n.dtype;
  const UOp& x = *n.src[0];
  int64_t c = n.src[1]->const_int();
  LinearForm f = read_linear(x, kDividendWindow);
  if (c == 0 || c == INT64_MIN || !usable(f, d)) return nullptr;
  int64_t lo = x.vmin(), hi = x.vmax();
  if (c < 0) {  // trunc(x / c) == trunc(-x / -c): divide the negated form by a positive divisor
    f = negated(std::move(f));
    c = -c;
    std::tie(lo, hi) = std::pair{-hi, -lo};
  }
  SizeCheck size{n, f};
  // Everything divides: the quotient is exact, whatever the signs.
  if (coeff_gcd(f, f.constant) % c == 0)
    if (UOpPtr out = build_linear(divided(f, c, f.constant / c), d); size.ok(out)) return out;
  // x = c*q + r: trunc(x/c) = q + floor(r/c) for x >= 0, q + ceil(r/c) for x <= 0; that is a
  // constant when r's bounds round alike, and q + r//c when r keeps x's sign.
  for (const auto& [floor, by_sign] :
       {std::pair{true, true}, {true, false}, {false, true}, {false, false}}) {
    if (floor ? lo < 0 : hi > 0) continue;
    Split s = split(f, c, floor, by_sign);
    const auto rb = linear_bounds(s.r.terms, s.r.constant);
    if (!rb) continue;
    const int64_t e0 = floor ? floor_div(rb->first, c) : ceil_div(rb->first, c);
    const int64_t e1 = floor ? floor_div(rb->second, c) : ceil_div(rb->second, c);
    if (e0 == e1) {
      s.q.constant += e0;
      if (UOpPtr out = build_linear(s.q, d); size.ok(out)) return out;
    } else if ((floor ? rb->first >= 0 : rb->second <= 0) && bounds_fit(rb, d) && fits(c, d)) {
      s.q.terms.push_back({build_linear(s.r, d) / konst(d, c), 1});
      if (UOpPtr out = build_linear(s.q, d); size.ok(out, /*strictly=*/true)) return out;
    }
  }
  if (lo >= 0)
    for (const SmallRemainder& r : small_remainders(f, c)) {
      const UOpPtr y = build_linear(r.y, d);
      if (UOpPtr out = c == r.g ? y : y / konst(d, c / r.g); size.ok(out)) return out;
    }
  // (g*y + k) // (g*c') = (y + k') // c' with k' = floor(k/g) for x >= 0, ceil(k/g) for x <= 0
  // (no rounding at all when k = 0); y + k' then has x's sign, so truncation agrees.
  const int64_t g = coeff_gcd(f, c);
  if (g > 1 && !f.terms.empty()) {
    std::optional<int64_t> k;
    if (f.constant == 0)
      k = 0;
    else if (lo >= 0)
      k = floor_div(f.constant, g);
    else if (hi <= 0)
      k = ceil_div(f.constant, g);
    if (k) {
      UOpPtr y = build_linear(divided(f, g, *k), d);
      if (UOpPtr out = c == g ? y : y / konst(d, c / g); size.ok(out)) return out;
    }
  }
  return nullptr;
}

UOpPtr fold_mod(const UOp& n) {
  const DType d = n.dtype;
  const UOp& x = *n.src[0];
  const int64_t c = n.src[1]->const_int();
  if (c == 0 || c == INT64_MIN) return nullptr;
  if (c < 0)
    return fits(-c, d) ? x.ptr() % konst(d, -c)
                       : nullptr;                     // C's remainder ignores the divisor's sign
  if (x.vmin() > -c && x.vmax() < c) return x.ptr();  // |x| < c
  // (a // c1) % c = (a % (c1*c)) // c1 for a >= 0: the remainder by c1*c may fold where a's terms
  // are known (a small remainder, above), which the quotient hides. Kept only when smaller.
  if (x.op == Ops::IDIV && x.src[1]->is_const() && x.src[0]->vmin() >= 0) {
    const int64_t c1 = x.src[1]->const_int();
    int64_t cc;
    if (c1 > 0 && !__builtin_mul_overflow(c1, c, &cc) && fits(cc, d)) {
      const UOpPtr wide = x.src[0] % konst(d, cc);
      if (UOpPtr folded = fold_mod(*wide)) {
        UOpPtr q = folded / konst(d, c1);
        if (UOpPtr better = fold_idiv(*q)) q = better;
        if (toposort(q.get()).size() < toposort(&n).size()) return q;
      }
    }
  }
  const LinearForm f = read_linear(x, kDividendWindow);
  if (!usable(f, d)) return nullptr;
  SizeCheck size{n, f};
  if (coeff_gcd(f, f.constant) % c == 0) return konst(d, 0);
  // x = c*q + r: x % c = r - c*floor(r/c) for x >= 0 (r - c*ceil(r/c) for x <= 0), which is r
  // minus a constant when r's bounds round alike, and r % c when r keeps x's sign.
  for (const auto& [floor, by_sign] :
       {std::pair{true, true}, {true, false}, {false, true}, {false, false}}) {
    if (floor ? x.vmin() < 0 : x.vmax() > 0) continue;
    Split s = split(f, c, floor, by_sign);
    const auto rb = linear_bounds(s.r.terms, s.r.constant);
    if (!rb) continue;
    const int64_t e0 = floor ? floor_div(rb->first, c) : ceil_div(rb->first, c);
    const int64_t e1 = floor ? floor_div(rb->second, c) : ceil_div(rb->second, c);
    if (e0 == e1) {
      s.r.constant -= e0 * c;
      if (UOpPtr out = build_linear(s.r, d); size.ok(out)) return out;
    } else if ((floor ? rb->first >= 0 : rb->second <= 0) && bounds_fit(rb, d)) {
      if (UOpPtr out = build_linear(s.r, d) % konst(d, c); size.ok(out, /*strictly=*/true))
        return out;
    }
  }
  if (x.vmin() >= 0)
    for (SmallRemainder& r : small_remainders(f, c)) {
      if (r.g < c)
        r.s.terms.insert(r.s.terms.begin(), {build_linear(r.y, d) % konst(d, c / r.g), r.g});
      if (UOpPtr out = build_linear(r.s, d); size.ok(out)) return out;
    }
  // (g*y + k) % (g*c') = ((y + k') % c')*g + (k - g*k'), k' rounded toward x's sign as in
  // fold_idiv.
  const int64_t g = coeff_gcd(f, c);
  if (g > 1 && g < c && !f.terms.empty()) {
    std::optional<int64_t> k;
    if (f.constant == 0)
      k = 0;
    else if (x.vmin() >= 0)
      k = floor_div(f.constant, g);
    else if (x.vmax() <= 0)
      k = ceil_div(f.constant, g);
    if (k) {
      UOpPtr inner = build_linear(divided(f, g, *k), d) % konst(d, c / g);
      if (UOpPtr out = build_linear({{{inner, g}}, f.constant - g * *k, true}, d); size.ok(out))
        return out;
    }
  }
  return nullptr;
}

namespace {

// y for x = g*y + k: x's own first source when x is y + k, so that an unchanged sum is reused.
UOpPtr quotient_node(const UOp& x, const LinearForm& f, int64_t g, DType d) {
  if (g == 1 && x.op == Ops::ADD && x.src[1]->is_const()) return x.src[0];
  return build_linear(divided(f, g, 0), d);
}

}  // namespace

UOpPtr fold_cmplt(const UOp& n) {
  const UOp& a = *n.src[0];
  const UOp& b = *n.src[1];
  if (a.is_const() == b.is_const()) return nullptr;
  const bool const_right = b.is_const();
  const UOp& x = const_right ? a : b;
  const DType d = x.dtype;
  const LinearForm f = read_linear(x, kDividendWindow);
  if (!usable(f, d) || f.terms.empty()) return nullptr;
  const int64_t g = coeff_gcd(f, 0);
  int64_t m;
  if (__builtin_sub_overflow((const_right ? b : a).const_int(), f.constant, &m)) return nullptr;
  // g*y + k < c  <=>  y < ceil((c-k)/g);   c < g*y + k  <=>  floor((c-k)/g) < y   (g > 0)
  const int64_t bound = const_right ? ceil_div(m, g) : floor_div(m, g);
  if (!fits(bound, d) || !bounds_fit(linear_bounds(divided(f, g, 0).terms, 0), d)) return nullptr;
  UOpPtr y = quotient_node(x, f, g, d);
  UOpPtr out = const_right ? y->lt(konst(d, bound)) : konst(d, bound)->lt(y);
  SizeCheck size{n, f};
  return size.ok(out) ? out : nullptr;
}

UOpPtr fold_cmpne(const UOp& n) {
  const UOp& x = *n.src[0];
  const DType d = x.dtype;
  const LinearForm f = read_linear(x, kDividendWindow);
  if (!usable(f, d) || f.terms.empty()) return nullptr;
  const int64_t g = coeff_gcd(f, 0);
  int64_t m;
  if (__builtin_sub_overflow(n.src[1]->const_int(), f.constant, &m)) return nullptr;
  if (m % g != 0) return UOp::const_(dtypes::bool_, true);  // g*y + k never hits c
  if (!fits(m / g, d) || !bounds_fit(linear_bounds(divided(f, g, 0).terms, 0), d)) return nullptr;
  UOpPtr out = quotient_node(x, f, g, d)->ne(konst(d, m / g));
  SizeCheck size{n, f};
  return size.ok(out) ? out : nullptr;
}

}  // namespace vkg::symbolic_detail
