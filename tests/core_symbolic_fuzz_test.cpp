// Fuzzing the symbolic simplifier: random integer expressions over two or three small-range
// variables (negative ranges included, int8 as well as int32 so that wrap-around is exercised;
// divisions mostly by nonzero constants of either sign, some by expressions that may be zero),
// each simplified and then evaluated at every assignment of its variables. The simplified
// expression must agree with the original wherever the original is defined, must not have more
// nodes, and every node of both must stay within its own bounds (the rules trust them).
//
// Reproducible: the seed is fixed (VKG_FUZZ_SEED overrides it) and printed with any failure.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

#include <vkgrad/core/symbolic.hpp>

using namespace vkg;

namespace {

class ExprGen {
 public:
  explicit ExprGen(uint32_t seed) : rng_(seed) {}

  // A fresh set of variables and an expression over them.
  UOpPtr next() {
    dtype_ = pick(0, 3) == 0 ? dtypes::int8 : dtypes::int32;
    vars_.clear();
    const int n = pick(2, 3);
    for (int i = 0; i < n; ++i) {
      const int lo = pick(-6, 3);
      vars_.push_back(UOp::var(std::string(1, char('a' + i)), lo, lo + pick(0, 7), dtype_));
    }
    return pick(0, 6) == 0 ? cond(4) : expr(4);
  }

  const std::vector<UOpPtr>& vars() const { return vars_; }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  UOpPtr konst(int lo, int hi) { return UOp::const_(dtype_, pick(lo, hi)); }
  UOpPtr divisor() {
    const int d = pick(1, 9);
    return UOp::const_(dtype_, pick(0, 3) == 0 ? -d : d);
  }

  UOpPtr leaf() {
    return pick(0, 99) < 65 ? vars_[size_t(pick(0, int(vars_.size()) - 1))] : konst(-9, 9);
  }

  UOpPtr expr(int depth) {
    if (depth <= 0 || pick(0, 9) < 2) return leaf();
    const int d = depth - 1;
    switch (pick(0, 13)) {
      case 0:
      case 1:
        return expr(d) + expr(d);
      case 2:
        return expr(d) - expr(d);
      case 3:
        return expr(d) * konst(-6, 6);
      case 4:
        return expr(d) * expr(d);
      case 5:
        return expr(d) / divisor();
      case 6:
        return expr(d) % divisor();
      case 7:
        return expr(d)->maximum(expr(d));
      case 8:
        return cond(d)->where(expr(d), expr(d));
      case 9:
        return -expr(d);
      case 10:
        return konst(-9, 9) + expr(d);  // constants on the left, for the canonical order
      case 11:
        return (expr(d) * konst(1, 8) + expr(d)) / divisor();  // the shape index math takes
      case 12:
        return expr(d) / expr(d);  // may divide by zero: those points are skipped
      default:
        return expr(d) % expr(d);
    }
  }

  UOpPtr cond(int depth) {
    const int d = std::max(depth - 1, 0);
    switch (pick(0, depth > 0 ? 6 : 3)) {
      case 0:
        return expr(d)->lt(expr(d));
      case 1:
        return expr(d)->lt(konst(-9, 9));
      case 2:
        return expr(d)->ne(expr(d));
      case 3:
        return expr(d)->ge(konst(-9, 9));
      case 4:
        return cond(d - 1)->alu(Ops::AND, {cond(d - 1)});
      case 5:
        return cond(d - 1)->alu(Ops::OR, {cond(d - 1)});
      default:
        return cond(d - 1)->logical_not();
    }
  }

  std::mt19937 rng_;
  DType dtype_ = dtypes::int32;
  std::vector<UOpPtr> vars_;
};

// Every assignment of `vars`, as values in the order `names` lists the variables.
template <class F>
void for_each_point(const std::vector<UOpPtr>& vars, F&& f) {
  std::vector<int64_t> point;
  for (const UOpPtr& v : vars) point.push_back(v->vmin());
  while (true) {
    f(point);
    size_t i = 0;
    for (; i < vars.size(); ++i) {
      if (++point[i] <= vars[i]->vmax()) break;
      point[i] = vars[i]->vmin();
    }
    if (i == vars.size()) return;
  }
}

std::vector<int64_t> values_for(const IntExpr& e, const std::vector<UOpPtr>& vars,
                                const std::vector<int64_t>& point) {
  std::vector<int64_t> out;
  for (const std::string& name : e.var_names())
    for (size_t i = 0; i < vars.size(); ++i)
      if (vars[i]->arg_as<VarArg>().name == name) out.push_back(point[i]);
  return out;
}

// The first node whose value lies outside its bounds, or nullptr.
const UOp* out_of_bounds(const IntExpr& e, const std::vector<int64_t>& values) {
  for (size_t i = 0; i < values.size(); ++i) {
    const UOp* n = e.nodes()[i];
    if (n->dtype.is_int() || n->dtype.is_bool())
      if (values[i] < n->vmin() || values[i] > n->vmax()) return n;
  }
  return nullptr;
}

std::string point_str(const std::vector<UOpPtr>& vars, const std::vector<int64_t>& point) {
  std::string s;
  for (size_t i = 0; i < vars.size(); ++i)
    s += vars[i]->arg_as<VarArg>().name + "=" + std::to_string(point[i]) + " in [" +
         std::to_string(vars[i]->vmin()) + ", " + std::to_string(vars[i]->vmax()) + "] ";
  return s;
}

}  // namespace

TEST(SymbolicFuzz, SimplifiedExpressionsAgreeEverywhereAndAreNeverLarger) {
  uint32_t seed = 20240611;
  if (const char* s = std::getenv("VKG_FUZZ_SEED")) seed = uint32_t(std::strtoul(s, nullptr, 10));
  constexpr int kExpressions = 10000;
  ExprGen gen(seed);
  int smaller = 0, unchanged = 0, rewrite_grew = 0, failures = 0;
  size_t nodes_before = 0, nodes_after = 0, points = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kExpressions && failures < 5; ++i) {
    const UOpPtr e = gen.next();
    const std::string where =
        "seed " + std::to_string(seed) + ", expression " + std::to_string(i) + ": " + render(e);
    UOpPtr s, raw;
    try {
      raw = graph_rewrite(e, symbolic_rules());
      s = simplify(e);
    } catch (const std::exception& ex) {
      ADD_FAILURE() << where << "\n  simplify threw: " << ex.what();
      ++failures;
      continue;
    }
    const size_t before = toposort(e.get()).size(), after = toposort(s.get()).size();
    nodes_before += before;
    nodes_after += after;
    smaller += after < before;
    unchanged += s == e;
    rewrite_grew += toposort(raw.get()).size() > before;
    if (after > before) {
      ADD_FAILURE() << where << "\n  grew from " << before << " to " << after
                    << " nodes: " << render(s);
      ++failures;
    }
    const IntExpr fe(e), fs(s);
    std::vector<int64_t> ve_nodes, vs_nodes;
    for_each_point(gen.vars(), [&](const std::vector<int64_t>& point) {
      if (failures >= 5) return;
      ++points;
      const std::optional<int64_t> ve = fe(values_for(fe, gen.vars(), point), &ve_nodes);
      if (!ve) return;  // the original divides by zero here: anything goes
      const std::optional<int64_t> vs = fs(values_for(fs, gen.vars(), point), &vs_nodes);
      const UOp* bad_e = out_of_bounds(fe, ve_nodes);
      const UOp* bad_s = vs ? out_of_bounds(fs, vs_nodes) : nullptr;
      if (!vs || *vs != *ve || bad_e || bad_s) {
        ++failures;
        ADD_FAILURE() << where << "\n  simplified: " << render(s) << "\n  at "
                      << point_str(gen.vars(), point) << "\n  original gives " << *ve
                      << ", simplified gives " << (vs ? std::to_string(*vs) : "undefined")
                      << (bad_e ? "\n  out of its bounds in the original: " + render(bad_e->ptr())
                                : "")
                      << (bad_s ? "\n  out of its bounds in the simplified: " + render(bad_s->ptr())
                                : "");
      }
    });
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "symbolic fuzz: seed %u, %d expressions, %zu points, %d smaller, %d unchanged, nodes %zu -> "
      "%zu, "
      "%d where the raw rewrite grew (simplify kept the original), %.2f s\n",
      seed, kExpressions, points, smaller, unchanged, nodes_before, nodes_after, rewrite_grew,
      secs);
  EXPECT_EQ(failures, 0);
}

// Sums wider than the window fold_linear searches for like terms (symbolic_folds.hpp): built one
// term at a time, with like terms, constants, differences and negations mixed in, then divided.
TEST(SymbolicFuzz, WideSumsStayEqualAndTerminate) {
  uint32_t seed = 777;
  if (const char* s = std::getenv("VKG_FUZZ_SEED")) seed = uint32_t(std::strtoul(s, nullptr, 10));
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<UOpPtr> vars;
  for (int i = 0; i < 12; ++i) vars.push_back(UOp::var("w" + std::to_string(i), -3, 4));
  for (int n = 0; n < 120; ++n) {
    UOpPtr sum = vars[size_t(pick(0, 11))];
    const int terms = pick(20, 120);
    for (int t = 0; t < terms; ++t) {
      UOpPtr term = vars[size_t(pick(0, 11))] * pick(-3, 3);
      switch (pick(0, 4)) {
        case 0:
          sum = sum - term;
          break;
        case 1:
          sum = sum + pick(-5, 5);
          break;
        case 2:
          sum = -term + sum;
          break;
        default:
          sum = sum + term;
      }
    }
    const UOpPtr e = pick(0, 1) ? sum : sum / pick(2, 9);
    UOpPtr s;
    try {
      s = simplify(e);
    } catch (const std::exception& ex) {
      FAIL() << "seed " << seed << ", sum " << n << ": simplify threw: " << ex.what();
    }
    EXPECT_LE(toposort(s.get()).size(), toposort(e.get()).size());
    const IntExpr fe(e), fs(s);
    for (int p = 0; p < 50; ++p) {
      std::vector<int64_t> point;
      for (size_t i = 0; i < vars.size(); ++i) point.push_back(pick(-3, 4));
      const auto ve = fe(values_for(fe, vars, point)), vs = fs(values_for(fs, vars, point));
      ASSERT_EQ(ve, vs) << "seed " << seed << ", sum " << n << " at " << point_str(vars, point)
                        << ":\n  " << render(e) << "\n  -> " << render(s);
    }
  }
}
