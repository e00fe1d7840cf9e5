// symbolic_rules(): the simplifier, as a table of rewrite rules over integer and bool nodes.
//
// Every rule replaces a node with one that computes the same value on the device (wrap-around,
// C truncating division) and is no larger; graph_rewrite applies them bottom-up, so a rule sees
// sources that are already simplified. The order matters only for speed and for which of two
// equal-sized forms wins: constants fold first, then bounds decide, then operands are put in
// canonical order (constants right), then identities, then the structural folds.
//
// Canonical sums are left-nested with the constant outermost: ((a+(b*3))-c)+-5
// (symbolic_folds.hpp).
#include <vkgrad/core/bounds.hpp>
#include <vkgrad/core/symbolic_folds.hpp>

namespace vkg {

namespace {

using namespace symbolic_detail;

// Patterns that also constrain the node's dtype.
UPat on_int(UPat p) { return p.dtype_if(is_int_scalar); }
UPat on_signed(UPat p) { return p.dtype_if(is_signed_scalar); }
UPat on_intlike(UPat p) { return p.dtype_if(is_intlike_scalar); }
UPat on_bool(UPat p) { return p.dtypes({dtypes::bool_}); }

// The ALU ops whose rows say Folds, by arity (and CAST), and those that commute.
std::vector<Ops> alu_ops_where(bool (*keep)(const AluInfo&)) {
  std::vector<Ops> out;
  for (int i = 0; i < kOpsCount; ++i)
    if (keep(alu_info(Ops(i)))) out.push_back(Ops(i));
  return out;
}
const std::vector<Ops> kFoldable1 = [] {
  auto ops = alu_ops_where([](const AluInfo& a) { return a.arity == 1 && a.has(alu::Folds); });
  ops.push_back(Ops::CAST);
  return ops;
}();
const std::vector<Ops> kFoldable2 =
    alu_ops_where([](const AluInfo& a) { return a.arity == 2 && a.has(alu::Folds); });
const std::vector<Ops> kFoldable3 =
    alu_ops_where([](const AluInfo& a) { return a.arity == 3 && a.has(alu::Folds); });
const std::vector<Ops> kCommutative =
    alu_ops_where([](const AluInfo& a) { return a.has(alu::Commutes); });

std::vector<Ops> alu_ops(OpFamily family) {
  std::vector<Ops> out;
  for (int i = 0; i < kOpsCount; ++i)
    if (op_family(Ops(i)) == family) out.push_back(Ops(i));
  return out;
}

UOpPtr zero(const Match& m) { return m.root().const_like(0); }
UOpPtr one(const Match& m) { return m.root().const_like(1); }
UOpPtr fals(const Match&) { return UOp::const_(dtypes::bool_, false); }
UOpPtr x_of(const Match& m) { return m["x"]; }
int64_t ci(const Match& m, const char* name) { return m.get(name)->const_int(); }

// c + delta, if it is a value of dtype d.
std::optional<int64_t> offset(int64_t c, int64_t delta, DType d) {
  int64_t r;
  if (__builtin_add_overflow(c, delta, &r) || !fits(r, d)) return std::nullopt;
  return r;
}

// Every source a constant: compute it as the device would. Division by zero stays unfolded.
UOpPtr fold_constants(const Match& m) {
  const UOp& n = m.root();
  if (!is_intlike_scalar(n.dtype)) return nullptr;
  std::vector<int64_t> args;
  for (const UOpPtr& s : n.src) {
    if (!is_intlike_scalar(s->dtype)) return nullptr;
    args.push_back(s->const_int());
  }
  const DType operand = n.op == Ops::WHERE ? n.src[1]->dtype : n.src[0]->dtype;
  const std::optional<int64_t> v = exec_alu(n.op, n.dtype, operand, args);
  return v ? UOp::const_(n.dtype, *v) : nullptr;
}

// Bounds sound for every value a node takes: when they meet, the node is that constant.
UOpPtr fold_to_bounds(const Match& m) {
  const UOp& n = m.root();
  if (!has_bounds(n.dtype) || n.vmin() != n.vmax()) return nullptr;
  return n.const_like(n.vmin());
}

UOpPtr constant_right(const Match& m) {
  const UOp& n = m.root();
  if (n.src[1]->is_const() || !is_intlike_scalar(n.src[1]->dtype)) return nullptr;
  return UOp::make(n.op, n.dtype, {n.src[1], n.src[0]}, n.arg);
}

bool nonzero(const UOp& u) { return has_bounds(u.dtype) && (u.vmin() > 0 || u.vmax() < 0); }
// x >= y wherever both are evaluated: x's bounds sit above y's.
bool at_least(const UOp& x, const UOp& y) { return has_bounds(x.dtype) && x.vmin() >= y.vmax(); }

std::vector<Rule> rules() {
  const auto unary = alu_ops(OpFamily::Unary), binary = alu_ops(OpFamily::Binary),
             ternary = alu_ops(OpFamily::Ternary);
  const UPat X = UPat::var("x"), Y = UPat::var("y"), Z = UPat::var("z"), V = UPat::var();
  const UPat C = UPat::cvar("c"), C1 = UPat::cvar("c1"), C2 = UPat::cvar("c2");
  const UPat B = on_bool(X);  // a bool x
  return {
      // ---- constants and bounds ----
      {UPat(kFoldable1, {UPat::cvar()}), fold_constants},
      {UPat(kFoldable2, {UPat::cvar(), UPat::cvar()}), fold_constants},
      {UPat(kFoldable3, {UPat::cvar(), UPat::cvar(), UPat::cvar()}), fold_constants},
      {UPat(unary, {V}), fold_to_bounds},
      {UPat(binary, {V, V}), fold_to_bounds},
      {UPat(ternary, {V, V, V}), fold_to_bounds},
      {UPat(kCommutative, {UPat::cvar(), V}), constant_right},

      // ---- identities ----
      {on_int(X + 0), x_of},
      {on_int(X - 0), x_of},
      {on_int(X - X), zero},
      {on_int(UPat::cnst(0) - X), [](const Match& m) { return -m["x"]; }},
      {on_int(X * 1), x_of},
      {on_int(X * 0), zero},
      {on_int(X / 1), x_of},
      // MIN // -1 wraps to MIN (exec_alu), as -MIN does.
      {on_int(X / -1), [](const Match& m) { return -m["x"]; }},
      {on_int(X % 1), zero},
      {on_int(X % -1), zero},
      {on_int(X / X), [](const Match& m) { return nonzero(*m.get("x")) ? one(m) : nullptr; }},
      {on_int(X % X), [](const Match& m) { return nonzero(*m.get("x")) ? zero(m) : nullptr; }},
      {on_int(UPat(Ops::NEG, {UPat(Ops::NEG, {X})})), x_of},
      {on_intlike(UPat(Ops::MAX, {X, X})), x_of},
      {on_intlike(UPat(Ops::MAX, {X, Y}).commutative()),
       [](const Match& m) { return at_least(*m.get("x"), *m.get("y")) ? m["x"] : nullptr; }},
      {UPat(Ops::CMPLT, {on_intlike(X), X}), fals},
      {UPat(Ops::CMPNE, {on_intlike(X), X}), fals},  // not for floats: nan != nan

      // ---- bitwise and bool ----
      {on_intlike(UPat(Ops::AND, {X, UPat::cnst(0)})), zero},
      {on_intlike(UPat(Ops::OR, {X, UPat::cnst(0)})), x_of},
      {on_intlike(UPat(Ops::XOR, {X, UPat::cnst(0)})), x_of},
      {on_intlike(UPat(Ops::AND, {X, X})), x_of},
      {on_intlike(UPat(Ops::OR, {X, X})), x_of},
      {on_intlike(UPat(Ops::XOR, {X, X})), zero},
      {on_int(UPat(Ops::SHL, {X, UPat::cnst(0)})), x_of},
      {on_int(UPat(Ops::SHR, {X, UPat::cnst(0)})), x_of},
      {on_bool(UPat(Ops::AND, {X, UPat::cnst(true)})), x_of},
      {on_bool(UPat(Ops::OR, {X, UPat::cnst(true)})), one},
      {on_bool(UPat(Ops::XOR, {X, UPat::cnst(true)})),
       [](const Match& m) { return m["x"]->logical_not(); }},
      {UPat(Ops::CMPNE, {B, UPat::cnst(false)}), x_of},
      {UPat(Ops::CMPNE, {UPat(Ops::CMPNE, {B, UPat::cnst(true)}), UPat::cnst(true)}), x_of},
      // not (x < c)  <=>  c-1 < x, and not (c < x)  <=>  x < c+1: integers have no values between.
      {UPat(Ops::CMPNE, {UPat(Ops::CMPLT, {on_int(X), C}), UPat::cnst(true)}),
       [](const Match& m) -> UOpPtr {
         const auto c = offset(ci(m, "c"), -1, m.get("x")->dtype);
         return c ? m["x"]->const_like(*c)->lt(m["x"]) : nullptr;
       }},
      {UPat(Ops::CMPNE, {UPat(Ops::CMPLT, {C, on_int(X)}), UPat::cnst(true)}),
       [](const Match& m) -> UOpPtr {
         const auto c = offset(ci(m, "c"), 1, m.get("x")->dtype);
         return c ? m["x"]->lt(*c) : nullptr;
       }},

      // ---- where ----
      {UPat(Ops::WHERE, {UPat::cvar("c"), Y, Z}),
       [](const Match& m) { return ci(m, "c") ? m["y"] : m["z"]; }},
      {UPat(Ops::WHERE, {V, Y, Y}), [](const Match& m) { return m["y"]; }},
      {UPat(Ops::WHERE, {UPat(Ops::CMPNE, {B, UPat::cnst(true)}), Y, Z}),
       [](const Match& m) { return m["x"]->where(m["z"], m["y"]); }},
      {on_bool(UPat(Ops::WHERE, {X, UPat::cnst(true), UPat::cnst(false)})), x_of},
      {on_bool(UPat(Ops::WHERE, {X, UPat::cnst(false), UPat::cnst(true)})),
       [](const Match& m) { return m["x"]->logical_not(); }},
      // Under where(x, ., .) the inner where(x, a, b) on the taken side is a, on the other side b.
      {UPat(Ops::WHERE, {X, UPat(Ops::WHERE, {X, Y, V}), Z}),
       [](const Match& m) { return m["x"]->where(m["y"], m["z"]); }},
      {UPat(Ops::WHERE, {X, Y, UPat(Ops::WHERE, {X, V, Z})}),
       [](const Match& m) { return m["x"]->where(m["y"], m["z"]); }},

      // ---- nested division and modulo ----
      // trunc(trunc(x/a)/b) == trunc(x/(a*b)) for nonzero a, b of any sign.
      {on_int((X / C1) / C2),
       [](const Match& m) -> UOpPtr {
         const DType d = m.root().dtype;
         int64_t ab;
         if (!has_bounds(d) || __builtin_mul_overflow(ci(m, "c1"), ci(m, "c2"), &ab) ||
             !fits(ab, d) || ab == dtype_range(d).first)
           return nullptr;
         return m["x"] / m["x"]->const_like(ab);
       }},
      // x % (b*k) % b == x % b: both are x's remainder mod b, with x's sign.
      {on_int((X % C1) % C2),
       [](const Match& m) -> UOpPtr {
         const int64_t c1 = ci(m, "c1"), c2 = ci(m, "c2");
         const bool ok =
             has_bounds(m.root().dtype) && c1 != 0 && c2 != 0 && c2 != -1 && c1 % c2 == 0;
         return ok ? m["x"] % m.get("c2")->ptr() : nullptr;
       }},

      // ---- linear folds (symbolic_divmod.cpp, symbolic_linear.cpp) ----
      {on_signed(UPat({Ops::ADD, Ops::SUB}, {X, Y})),
       [](const Match& m) { return fold_linear(m.root()); }},
      {on_signed(UPat(Ops::NEG, {X})), [](const Match& m) { return fold_linear(m.root()); }},
      {on_signed(UPat(Ops::MUL, {X, C})), [](const Match& m) { return fold_linear(m.root()); }},
      {on_signed(UPat(Ops::IDIV, {X, C})), [](const Match& m) { return fold_idiv(m.root()); }},
      {on_signed(UPat(Ops::MOD, {X, C})), [](const Match& m) { return fold_mod(m.root()); }},
      {UPat(Ops::CMPLT, {on_signed(X), Y}), [](const Match& m) { return fold_cmplt(m.root()); }},
      {UPat(Ops::CMPNE, {on_signed(X), C}), [](const Match& m) { return fold_cmpne(m.root()); }},
  };
}

}  // namespace

const PatternMatcher& symbolic_rules() {
  static const PatternMatcher pm{rules()};
  return pm;
}

}  // namespace vkg
