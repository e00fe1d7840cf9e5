// The pattern matcher and graph_rewrite.
#include <gtest/gtest.h>

#include <vkgrad/core/rewrite.hpp>

using namespace vkg;

namespace {
UOpPtr c(int64_t v) { return UOp::const_(dtypes::int32, v); }
UOpPtr fold_add(const Match& m) { return c(m["a"]->const_int() + m["b"]->const_int()); }
}  // namespace

TEST(Rewrite, IdentityRuleMatchesEitherOperandOrder) {
  PatternMatcher pm{{{UPat::var("x") + 0, [](const Match& m) { return m["x"]; }}}};
  UOpPtr x = UOp::var("x", 0, 9);
  EXPECT_EQ(graph_rewrite(x + 0, pm), x);
  EXPECT_EQ(graph_rewrite(0 + x, pm), x);
  EXPECT_EQ(graph_rewrite(x + 1, pm), x + 1);
}

TEST(Rewrite, ConstantFoldingReachesAFixedPointBottomUp) {
  PatternMatcher pm{{{UPat::cvar("a") + UPat::cvar("b"), fold_add}}};
  UOpPtr e = ((c(1) + c(2)) + c(3)) + (c(4) + c(5));
  EXPECT_EQ(graph_rewrite(e, pm), c(15));
}

TEST(Rewrite, ARepeatedNameMustCaptureTheSameNode) {
  PatternMatcher pm{{{UPat::var("x") - UPat::var("x"), [](const Match&) { return c(0); }}}};
  UOpPtr x = UOp::var("x", 0, 9), y = UOp::var("y", 0, 9);
  EXPECT_EQ(graph_rewrite(x - x, pm), c(0));
  EXPECT_EQ(graph_rewrite(x - y, pm), x - y);
}

TEST(Rewrite, RuleThatDeclinesLetsTheOtherOrderOrTheNextRuleTry) {
  // (c * x) where only the second capture order gives a const "c": the matcher must retry.
  int calls = 0;
  PatternMatcher pm{{
      {UPat::var("x") * UPat::var("y"),
       [&](const Match& m) -> UOpPtr {
         ++calls;
         return m["y"]->is_const() ? m["x"] + m["x"] : nullptr;  // x*2 -> x+x, declines otherwise
       }},
  }};
  UOpPtr x = UOp::var("x", 0, 9);
  EXPECT_EQ(graph_rewrite(c(2) * x, pm), x + x);
  EXPECT_EQ(calls, 2);  // first order declined, second accepted
}

TEST(Rewrite, DTypeArgAndPrefixConstraints) {
  PatternMatcher pm{{
      {UPat(Ops::CAST, {UPat::var("x").dtypes({dtypes::int32})}).dtypes({dtypes::int32}),
       [](const Match& m) { return m["x"]; }},  // a cast to its own dtype is nothing
      {UPat(Ops::SINK).src_each(UPat::cvar()), [](const Match&) { return c(-1); }},
  }};
  UOpPtr x = UOp::var("x", 0, 9);
  EXPECT_EQ(graph_rewrite(UOp::make(Ops::CAST, dtypes::int32, {x}), pm), x);
  UOpPtr to64 = x->cast(dtypes::int64);
  EXPECT_EQ(graph_rewrite(to64, pm), to64);
  EXPECT_EQ(graph_rewrite(UOp::make(Ops::SINK, dtypes::void_, {c(1), c(2)}), pm), c(-1));
  UOpPtr mixed = UOp::make(Ops::SINK, dtypes::void_, {c(1), x});
  EXPECT_EQ(graph_rewrite(mixed, pm), mixed);
}

TEST(Rewrite, ContextReachesRules) {
  struct Counter { int seen = 0; };
  PatternMatcher pm{{{UPat(Ops::DEFINE_VAR).named("v"), [](const Match& m) -> UOpPtr {
                        ++m.ctx<Counter>().seen;
                        return nullptr;
                      }}}};
  Counter counter;
  UOpPtr a = UOp::var("a", 0, 9), b = UOp::var("b", 0, 9);
  graph_rewrite((a + b) * (a + b), pm, &counter);
  EXPECT_EQ(counter.seen, 2);  // shared nodes are visited once
}

TEST(Rewrite, RuleSetsCompose) {
  PatternMatcher zero{{{UPat::var("x") + 0, [](const Match& m) { return m["x"]; }}}};
  PatternMatcher one{{{UPat::var("x") * 1, [](const Match& m) { return m["x"]; }}}};
  PatternMatcher both = zero + one;
  EXPECT_EQ(both.size(), 2u);
  UOpPtr x = UOp::var("x", 0, 9);
  EXPECT_EQ(graph_rewrite((x * 1) + 0, both), x);
}

TEST(Rewrite, ACycleIsAnErrorNotAHang) {
  PatternMatcher pm{{{UPat::var("x") + 1, [](const Match& m) { return (m["x"] + 1) + 0; }},
                     {UPat::var("x") + 0, [](const Match& m) { return m["x"] + 1; }}}};
  EXPECT_THROW(graph_rewrite(UOp::var("x", 0, 9) + 1, pm), Error);
}

TEST(Rewrite, TenThousandNodeGraphRewritesQuickly) {
  PatternMatcher pm{{{UPat::cvar("a") + UPat::cvar("b"), fold_add},
                     {UPat::var("x") * 1, [](const Match& m) { return m["x"]; }}}};
  UOpPtr acc = UOp::var("x", 0, 9);
  for (int i = 0; i < 5000; ++i) acc = (acc * 1) + (c(i) + c(1));
  UOpPtr out = graph_rewrite(acc, pm);
  EXPECT_EQ(toposort(out.get()).size(), 1 + 2 * 5000u);  // x, then per step: const + add
}
