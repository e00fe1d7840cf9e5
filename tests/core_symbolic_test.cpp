// Symbolic integer algebra: simplify's rules one behaviour at a time, C semantics for negative
// operands, eval_int, IntExpr, render and linear_form. The random counterpart is
// core_symbolic_fuzz_test.cpp.
#include <gtest/gtest.h>

#include <map>

#include <vkgrad/core/bounds.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/symbolic.hpp>

using namespace vkg;

namespace {

UOpPtr i32(int64_t v) { return UOp::const_(dtypes::int32, v); }
UOpPtr boolean(bool v) { return UOp::const_(dtypes::bool_, v); }
std::string simp(const UOpPtr& u) { return render(simplify(u)); }

// simplify(u) evaluates like u at every value of variable `v` (C's semantics on both sides).
void expect_agrees_everywhere(const UOpPtr& u, const UOpPtr& v) {
  const UOpPtr s = simplify(u);
  const std::string name = v->arg_as<VarArg>().name;
  for (int64_t x = v->vmin(); x <= v->vmax(); ++x)
    EXPECT_EQ(eval_int(s, {{name, x}}), eval_int(u, {{name, x}}))
        << render(u) << " -> " << render(s) << " at " << name << "=" << x;
}

}  // namespace

// ---- the seed examples (tinygrad's symbolic walkthrough) ----

TEST(Symbolic, SeedVariablesCarryTheirBoundsThroughArithmetic) {
  UOpPtr a = UOp::var("a", 0, 10), b = UOp::var("b", 0, 10);
  EXPECT_EQ((a * 10)->vmin(), 0);
  EXPECT_EQ((a * 10)->vmax(), 100);
  EXPECT_EQ((a + b)->vmin(), 0);
  EXPECT_EQ((a + b)->vmax(), 20);
}

TEST(Symbolic, SeedModOfASumDropsTheMultipleOfTheModulus) {
  UOpPtr a = UOp::var("a", 0, 10), b = UOp::var("b", 0, 10);
  EXPECT_EQ(simp((a + b * 10) % 10), "(a%10)");
}

TEST(Symbolic, SeedDivOfASumDividesEachTermAndDropsTheBoundedRest) {
  UOpPtr a = UOp::var("a", 0, 10), b = UOp::var("b", 0, 10);
  UOpPtr e = simplify((a * 40 + b) / 20);
  EXPECT_EQ(render(e), "(a*2)");
  EXPECT_EQ(e->vmin(), 0);
  EXPECT_EQ(e->vmax(), 20);
}

// ---- constant folding ----

TEST(Symbolic, ConstantsFoldForEveryIntegerOp) {
  EXPECT_EQ(simplify(i32(7) + i32(5)), i32(12));
  EXPECT_EQ(simplify(i32(7) - i32(5)), i32(2));
  EXPECT_EQ(simplify(i32(7) * i32(5)), i32(35));
  EXPECT_EQ(simplify(i32(7) / i32(2)), i32(3));
  EXPECT_EQ(simplify(i32(7) % i32(5)), i32(2));
  EXPECT_EQ(simplify(i32(7)->maximum(i32(9))), i32(9));
  EXPECT_EQ(simplify(i32(7)->lt(i32(9))), boolean(true));
  EXPECT_EQ(simplify(i32(7)->ne(i32(7))), boolean(false));
  EXPECT_EQ(simplify(i32(6)->alu(Ops::AND, {i32(3)})), i32(2));
  EXPECT_EQ(simplify(i32(6)->alu(Ops::OR, {i32(3)})), i32(7));
  EXPECT_EQ(simplify(i32(6)->alu(Ops::XOR, {i32(3)})), i32(5));
  EXPECT_EQ(simplify(i32(3)->alu(Ops::SHL, {i32(4)})), i32(48));
  EXPECT_EQ(simplify(i32(-48)->alu(Ops::SHR, {i32(4)})), i32(-3));  // arithmetic shift
  EXPECT_EQ(simplify(-i32(7)), i32(-7));
  EXPECT_EQ(simplify(boolean(false)->where(i32(1), i32(2))), i32(2));
  EXPECT_EQ(simplify(i32(300)->cast(dtypes::uint8)), UOp::const_(dtypes::uint8, 44));
  EXPECT_EQ(simplify(i32(2)->alu(Ops::MULACC, {i32(3), i32(4)})), i32(10));
  EXPECT_EQ(simplify(boolean(true)->alu(Ops::AND, {boolean(false)})), boolean(false));
}

TEST(Symbolic, ConstantFoldingWrapsAtTheDtypesWidth) {
  EXPECT_EQ(simplify(UOp::const_(dtypes::int8, 100) + UOp::const_(dtypes::int8, 100)),
            UOp::const_(dtypes::int8, -56));
  EXPECT_EQ(simplify(i32(INT32_MAX) + i32(1)), i32(INT32_MIN));
  EXPECT_EQ(simplify(UOp::const_(dtypes::uint8, 0) - UOp::const_(dtypes::uint8, 1)),
            UOp::const_(dtypes::uint8, 255));
  EXPECT_EQ(simplify(i32(INT32_MIN) / i32(-1)), i32(INT32_MIN));  // wraps, as -INT32_MIN does
  EXPECT_EQ(simplify(UOp::const_(dtypes::uint32, 7) / UOp::const_(dtypes::uint32, 0xFFFFFFFF)),
            UOp::const_(dtypes::uint32, 0));
  EXPECT_EQ(simplify(UOp::const_(dtypes::uint32, 1)->lt(UOp::const_(dtypes::uint32, 0xFFFFFFFF))),
            boolean(true));
}

TEST(Symbolic, DivisionByZeroIsNeverFolded) {
  UOpPtr x = UOp::var("x", 0, 10);
  EXPECT_EQ(simplify(i32(7) / i32(0)), i32(7) / i32(0));
  EXPECT_EQ(simplify(i32(7) % i32(0)), i32(7) % i32(0));
  EXPECT_EQ(simplify(x / i32(0)), x / i32(0));
  EXPECT_EQ(simplify(i32(1)->alu(Ops::SHL, {i32(32)})),
            i32(1)->alu(Ops::SHL, {i32(32)}));  // shift past the width
  EXPECT_THROW(eval_int(i32(7) / i32(0), {}), Error);
  EXPECT_THROW(eval_int(x % i32(0), {{"x", 3}}), Error);
}

// ---- C semantics for negative operands ----

TEST(Symbolic, DivisionAndModuloTruncateTowardZeroAsC) {
  EXPECT_EQ(eval_int(i32(-7) % i32(3), {}), -1);
  EXPECT_EQ(eval_int(i32(7) % i32(-3), {}), 1);
  EXPECT_EQ(eval_int(i32(-7) % i32(-3), {}), -1);
  EXPECT_EQ(eval_int(i32(-7) / i32(2), {}), -3);
  EXPECT_EQ(eval_int(i32(7) / i32(-2), {}), -3);
  EXPECT_EQ(simplify(i32(-7) % i32(3)), i32(-1));
  EXPECT_EQ(simplify(i32(-7) / i32(2)), i32(-3));
}

TEST(Symbolic, DivisionOfANegativeRangeEvaluatesAsCAtEveryPoint) {
  UOpPtr x = UOp::var("x", -5, 5);
  for (int64_t v = -5; v <= 5; ++v) {
    EXPECT_EQ(eval_int(x / 2, {{"x", v}}), v / 2);
    EXPECT_EQ(eval_int(x % 3, {{"x", v}}), v % 3);
    EXPECT_EQ(eval_int(x / -2, {{"x", v}}), v / -2);
    EXPECT_EQ(eval_int(x % -3, {{"x", v}}), v % -3);
  }
  EXPECT_EQ((x / 2)->vmin(), -2);
  EXPECT_EQ((x / 2)->vmax(), 2);
  EXPECT_EQ((x / -2)->vmin(), -2);
  EXPECT_EQ((x % -3)->vmin(), -2);
  EXPECT_EQ((x % -3)->vmax(), 2);
  for (const UOpPtr& e :
       {x / 2, x % 3, x / -2, x % -3, (x * 4 + 3) / 4, (x * 4 + 3) % 4, (x + 10) / 3 - 3})
    expect_agrees_everywhere(e, x);
}

// ---- identities ----

TEST(Symbolic, AddingZeroMultiplyingAndDividingByOneLeaveTheOperand) {
  UOpPtr x = UOp::var("x", -5, 5);
  EXPECT_EQ(simplify(x + 0), x);
  EXPECT_EQ(simplify(0 + x), x);
  EXPECT_EQ(simplify(x - 0), x);
  EXPECT_EQ(simplify(x * 1), x);
  EXPECT_EQ(simplify(1 * x), x);
  EXPECT_EQ(simplify(x / 1), x);
}

TEST(Symbolic, MultiplyingByZeroModuloOneAndSelfSubtractionGiveZero) {
  UOpPtr x = UOp::var("x", -5, 5);
  EXPECT_EQ(simplify(x * 0), i32(0));
  EXPECT_EQ(simplify(x % 1), i32(0));
  EXPECT_EQ(simplify(x % -1), i32(0));
  EXPECT_EQ(simplify(x - x), i32(0));
}

TEST(Symbolic, DividingByMinusOneNegates) {
  UOpPtr x = UOp::var("x", -5, 5);
  EXPECT_EQ(simp(x / -1), "(-x)");
  EXPECT_EQ(simp(0 - x), "(-x)");
  EXPECT_EQ(simplify(-(-x)), x);
}

TEST(Symbolic, SelfDivisionFoldsOnlyWhenTheDivisorCannotBeZero) {
  UOpPtr p = UOp::var("p", 1, 5), n = UOp::var("n", -5, -1), z = UOp::var("z", -2, 2);
  EXPECT_EQ(simplify(p / p), i32(1));
  EXPECT_EQ(simplify(n / n), i32(1));
  EXPECT_EQ(simplify(p % p), i32(0));
  EXPECT_EQ(simplify(z / z), z / z);
  EXPECT_EQ(simplify(z % z), z % z);
}

TEST(Symbolic, MaxOfEqualOrDominatedOperandsIsThatOperand) {
  UOpPtr a = UOp::var("a", 0, 10), b = UOp::var("b", 0, 10);
  EXPECT_EQ(simplify(a->maximum(a)), a);
  EXPECT_EQ(simplify(a->maximum(b - 20)), a);
  EXPECT_EQ(simplify((b - 20)->maximum(a)), a);
  EXPECT_EQ(simp(a->maximum(-3)), "a");
  EXPECT_EQ(simp(a->maximum(b)), "max(a,b)");
}

TEST(Symbolic, SelfComparisonsAreFalseForIntegersOnly) {
  UOpPtr x = UOp::var("x", -5, 5);
  EXPECT_EQ(simplify(x->lt(x)), boolean(false));
  EXPECT_EQ(simplify(x->ne(x)), boolean(false));
  UOpPtr f = x->cast(dtypes::float32);
  EXPECT_EQ(simplify(f->ne(f)), f->ne(f));  // nan != nan
}

TEST(Symbolic, BoolOpsWithConstantsFold) {
  UOpPtr b = UOp::var("x", 0, 10)->lt(5);
  EXPECT_EQ(simplify(b->alu(Ops::AND, {boolean(true)})), b);
  EXPECT_EQ(simplify(b->alu(Ops::AND, {boolean(false)})), boolean(false));
  EXPECT_EQ(simplify(b->alu(Ops::OR, {boolean(true)})), boolean(true));
  EXPECT_EQ(simplify(boolean(false)->alu(Ops::OR, {b})), b);
  EXPECT_EQ(simplify(b->alu(Ops::XOR, {boolean(false)})), b);
  EXPECT_EQ(simplify(b->alu(Ops::XOR, {b})), boolean(false));
  EXPECT_EQ(simplify(b->ne(false)), b);
  EXPECT_EQ(simplify(b->logical_not()->logical_not()), b);
  EXPECT_EQ(simp(b->alu(Ops::XOR, {boolean(true)})), "(4<x)");  // not (x<5)
}

TEST(Symbolic, IntegerBitwiseIdentities) {
  UOpPtr x = UOp::var("x", -5, 5);
  EXPECT_EQ(simplify(x->alu(Ops::AND, {i32(0)})), i32(0));
  EXPECT_EQ(simplify(x->alu(Ops::OR, {i32(0)})), x);
  EXPECT_EQ(simplify(x->alu(Ops::XOR, {i32(0)})), x);
  EXPECT_EQ(simplify(x->alu(Ops::AND, {x})), x);
  EXPECT_EQ(simplify(x->alu(Ops::XOR, {x})), i32(0));
  EXPECT_EQ(simplify(x->alu(Ops::SHL, {i32(0)})), x);
}

TEST(Symbolic, WhereWithAKnownConditionOrEqualArmsPicksAnArm) {
  UOpPtr a = UOp::var("a", 0, 10), b = UOp::var("b", 0, 10);
  UOpPtr c = a->lt(b);
  EXPECT_EQ(simplify(boolean(true)->where(a, b)), a);
  EXPECT_EQ(simplify(boolean(false)->where(a, b)), b);
  EXPECT_EQ(simplify(a->lt(11)->where(a, b)), a);  // the condition is decided by bounds
  EXPECT_EQ(simplify(c->where(a, a)), a);
  EXPECT_EQ(simplify(c->logical_not()->where(a, b)), c->where(b, a));
  EXPECT_EQ(simplify(c->where(boolean(true), boolean(false))), c);
  EXPECT_EQ(simplify(c->where(boolean(false), boolean(true))), c->logical_not());
  EXPECT_EQ(simplify(c->where(c->where(a, b), i32(3))), c->where(a, i32(3)));
  EXPECT_EQ(simplify(c->where(i32(3), c->where(a, b))), c->where(i32(3), b));
}

// ---- canonical order and collecting terms ----

TEST(Symbolic, ConstantsMoveToTheRightOfCommutativeOps) {
  UOpPtr x = UOp::var("x", -5, 5);
  EXPECT_EQ(simp(3 + x), "(x+3)");
  EXPECT_EQ(simp(3 * x), "(x*3)");
  EXPECT_EQ(simp(i32(3)->maximum(x)), "max(x,3)");
  EXPECT_EQ(simp(i32(3)->ne(x)), "(x!=3)");
}

TEST(Symbolic, ConstantsCollectOutermostInASum) {
  UOpPtr x = UOp::var("x", -5, 5), y = UOp::var("y", 0, 7);
  EXPECT_EQ(simp((x + 3) + 4), "(x+7)");
  EXPECT_EQ(simp((x + 3) + y), "((x+y)+3)");
  EXPECT_EQ(simp(x + (y + 3)), "((x+y)+3)");
  EXPECT_EQ(simp((x + 3) - 3), "x");
  EXPECT_EQ(simp(x - 3), "(x+-3)");
  EXPECT_EQ(simp(((x + 1) + y) + 2), "((x+y)+3)");
}

TEST(Symbolic, LikeTermsCollectIntoOneProduct) {
  UOpPtr x = UOp::var("x", -5, 5), y = UOp::var("y", 0, 7);
  EXPECT_EQ(simp(x * 2 + x * 3), "(x*5)");
  EXPECT_EQ(simp(x + x * 3), "(x*4)");
  EXPECT_EQ(simp(x + x + x), "(x*3)");
  EXPECT_EQ(simp((x * 3) * 4), "(x*12)");
  EXPECT_EQ(simp(x * 2 + y + x * 3), "((x*5)+y)");
  EXPECT_EQ(simp(x - x * 3), "(x*-2)");
  EXPECT_EQ(simp((x + y) - x), "y");
}

TEST(Symbolic, LikeTermsCollectAcrossAWideSum) {
  UOpPtr x = UOp::var("x", -5, 5);
  UOpPtr sum = x * 3;
  for (int i = 0; i < 20; ++i) sum = sum + UOp::var("v" + std::to_string(i), 0, 9) * 2;
  const LinearForm f = *linear_form(simplify(sum - x * 3));
  EXPECT_EQ(f.terms.size(), 20u);  // x is gone
  EXPECT_EQ(f.terms[0].base->arg_as<VarArg>().name, "v0");
}

// x + x has two nodes, x*2 three: collecting the pair alone would grow the graph. It still
// counts as 2*x wherever the coefficient matters.
TEST(Symbolic, XPlusXStaysWhereTheProductWouldBeLarger) {
  UOpPtr x = UOp::var("x", -5, 5);
  EXPECT_EQ(simplify(x + x), x + x);
  EXPECT_EQ(simplify((x + x) / 2), x);
  EXPECT_EQ(simplify((x + x) % 2), i32(0));
}

TEST(Symbolic, SubtractionStaysSubtractionAndLeadsWithAPositiveTerm) {
  UOpPtr x = UOp::var("x", -5, 5), y = UOp::var("y", 0, 7);
  EXPECT_EQ(simp(x - y), "(x-y)");
  EXPECT_EQ(simp(x * -1 + 9), "(9-x)");
  EXPECT_EQ(simp(-x + y), "(y-x)");
  EXPECT_EQ(simp(y + x * -3), "(y-(x*3))");
  EXPECT_EQ(simp(-(x * 3)), "(x*-3)");
  EXPECT_EQ(simp(-x - y), "((-x)-y)");
}

// ---- division and modulo ----

TEST(Symbolic, AMultipleDividedByItsFactorIsTheVariableForEitherSign) {
  UOpPtr x = UOp::var("x", -5, 5);
  EXPECT_EQ(simplify((x * 4) / 4), x);
  EXPECT_EQ(simplify((x * 4) % 4), i32(0));
  EXPECT_EQ(simp((x * 6) / 3), "(x*2)");
  EXPECT_EQ(simp((x * 6) / -3), "(x*-2)");
  EXPECT_EQ(simp((x * 6 + 9) / 3), "((x*2)+3)");
}

TEST(Symbolic, DivisionSplitsOffWholeTermsWhenTheRestKeepsTheSign) {
  UOpPtr a = UOp::var("a", 0, 10), b = UOp::var("b", 0, 3), c = UOp::var("c", 0, 10),
         d = UOp::var("d", 0, 2);
  EXPECT_EQ(simp((a * 4 + b) / 4), "a");
  EXPECT_EQ(simp((a * 4 + c) / 4), "(a+(c//4))");
  EXPECT_EQ(simp((a * 4 + b) % 4), "b");
  EXPECT_EQ(simp((a * 4 + c) % 4), "(c%4)");
  EXPECT_EQ(simp((a * 4 + d + 5) / 4), "(a+1)");  // (d+5)//4 is 1 for d in [0, 2]
  EXPECT_EQ(simp((a * 4 - b + 3) / 4), "a");      // 3-b in [0, 3]
}

TEST(Symbolic, DivisionOfAMixedSignSumIsLeftAlone) {
  // x*4 + y is negative for some points: C's division rounds those up, so splitting as floor
  // division would be wrong; with both sides non-positive the ceiling version applies.
  UOpPtr x = UOp::var("x", -5, 5), y = UOp::var("y", 0, 3);
  EXPECT_EQ(simplify((x * 4 + y) / 4), (x * 4 + y) / 4);
  UOpPtr n = UOp::var("n", -5, -1), m = UOp::var("m", -3, 0);
  EXPECT_EQ(simplify((n * 4 + m) / 4), n);
  EXPECT_EQ(simplify((n * 4 + m) % 4), m);
  for (int64_t xv = -5; xv <= 5; ++xv)
    for (int64_t yv = 0; yv <= 3; ++yv)
      EXPECT_EQ(eval_int(simplify((x * 4 + y) / 4), {{"x", xv}, {"y", yv}}), (xv * 4 + yv) / 4);
}

TEST(Symbolic, DivisionByACommonFactorOfTheTerms) {
  UOpPtr a = UOp::var("a", 0, 10), b = UOp::var("b", 0, 10), x = UOp::var("x", -5, 5);
  EXPECT_EQ(simp((a * 6 + 3) / 9), "(((a*2)+1)//3)");
  EXPECT_EQ(simp((a * 4 + b * 2) / 8), "(((a*2)+b)//4)");
  EXPECT_EQ(simp((x * 4) / 8), "(x//2)");  // exact, so either sign
  EXPECT_EQ(simp((a * 4) % 8), "((a%2)*4)");
  expect_agrees_everywhere((x * 4) / 8, x);
  expect_agrees_everywhere((x * 4) % 8, x);
}

TEST(Symbolic, ModOfAValueSmallerThanTheModulusIsTheValue) {
  UOpPtr a = UOp::var("a", 0, 10), x = UOp::var("x", -5, 5);
  EXPECT_EQ(simplify(a % 11), a);
  EXPECT_EQ(simplify(x % 6), x);  // |x| < 6: C's remainder is x itself, negative or not
  EXPECT_EQ(simplify(x % 5), x % 5);
  EXPECT_EQ(simplify(a / 11), i32(0));
}

TEST(Symbolic, ModByANegativeConstantIsModByItsMagnitude) {
  UOpPtr x = UOp::var("x", -9, 9);
  EXPECT_EQ(simp(x % -4), "(x%4)");
  expect_agrees_everywhere(x % -4, x);
}

TEST(Symbolic, NestedDivisionsMultiplyTheirDivisors) {
  UOpPtr a = UOp::var("a", 0, 100), x = UOp::var("x", -50, 50);
  EXPECT_EQ(simp((a / 2) / 3), "(a//6)");
  EXPECT_EQ(simp((x / 2) / 3), "(x//6)");  // truncation nests for either sign
  EXPECT_EQ(simp((x / -2) / 3), "(x//-6)");
  expect_agrees_everywhere((x / 2) / 3, x);
  expect_agrees_everywhere((x / -2) / 3, x);
}

TEST(Symbolic, NestedModuloByADivisorOfTheOuterModulus) {
  UOpPtr a = UOp::var("a", 0, 100), x = UOp::var("x", -50, 50);
  EXPECT_EQ(simp((a % 12) % 4), "(a%4)");
  EXPECT_EQ(simp((x % 12) % 4), "(x%4)");
  EXPECT_EQ(simp((x % 12) % 5), "((x%12)%5)");
  EXPECT_EQ(simp((x % 4) % 12), "(x%4)");  // |x%4| < 12
  expect_agrees_everywhere((x % 12) % 4, x);
}

TEST(Symbolic, ModThenDivideByTheModulusIsZero) {
  UOpPtr a = UOp::var("a", 0, 100), x = UOp::var("x", -50, 50);
  EXPECT_EQ(simplify((a % 7) / 7), i32(0));
  EXPECT_EQ(simplify((x % 7) / 7), i32(0));
}

// ---- comparisons ----

TEST(Symbolic, AnExpressionWhoseBoundsMeetIsThatConstant) {
  UOpPtr a = UOp::var("a", 0, 10), b = UOp::var("b", 0, 10);
  EXPECT_EQ(simplify(a->lt(11)), boolean(true));
  EXPECT_EQ(simplify(a->lt(0)), boolean(false));
  EXPECT_EQ(simplify(a->ne(-1)), boolean(true));
  EXPECT_EQ(simplify(a->maximum(20)), i32(20));
  EXPECT_EQ(simplify((a + b)->lt(21)), boolean(true));
  EXPECT_EQ(simplify((a * 0 + 3) * (b / 11)), i32(0));
}

TEST(Symbolic, ComparingAScaledSumDividesThroughAndMovesTheConstant) {
  UOpPtr a = UOp::var("a", 0, 10), x = UOp::var("x", -5, 5);
  EXPECT_EQ(simp((a * 2)->lt(7)), "(a<4)");
  EXPECT_EQ(simp((a + 3)->lt(7)), "(a<4)");
  EXPECT_EQ(simp(i32(7)->lt(a * 2)), "(3<a)");
  EXPECT_EQ(simp((x * 3)->lt(-4)), "(x<-1)");  // 3x < -4 exactly when x <= -2
  expect_agrees_everywhere((x * 3)->lt(-4)->cast(dtypes::int32), x);
  expect_agrees_everywhere(i32(-4)->lt(x * 3 + 2)->cast(dtypes::int32), x);
}

TEST(Symbolic, NotLessThanBecomesTheMirroredComparison) {
  UOpPtr a = UOp::var("a", 0, 10);
  EXPECT_EQ(simp(a->ge(5)), "(4<a)");
  EXPECT_EQ(simp(i32(5)->lt(a)->logical_not()), "(a<6)");
}

TEST(Symbolic, NotEqualOfAScaledSum) {
  UOpPtr a = UOp::var("a", 0, 10);
  EXPECT_EQ(simplify((a * 2)->ne(3)), boolean(true));  // 2a is never odd
  EXPECT_EQ(simp((a * 2)->ne(4)), "(a!=2)");
  EXPECT_EQ(simp((a + 3)->ne(5)), "(a!=2)");
}

// ---- dtypes ----

TEST(Symbolic, FoldsThatNeedExactValuesRespectWrapAround) {
  // In int8, a*2 wraps for a > 63: (a*2)//2 is not a there.
  UOpPtr a = UOp::var("a", 0, 100, dtypes::int8);
  UOpPtr e = (a * 2) / 2;
  EXPECT_EQ(simplify(e), e);
  EXPECT_EQ(eval_int(e, {{"a", 100}}), -28);
  // Sums are right modulo 2^8 whatever wraps: (a+100)-100 is a.
  EXPECT_EQ(simplify((a + 100) - 100), a);
  UOpPtr small = UOp::var("s", 0, 50, dtypes::int8);
  EXPECT_EQ(simplify((small * 2) / 2), small);
}

TEST(Symbolic, FloatArithmeticIsLeftAlone) {
  UOpPtr f = UOp::var("x", 0, 10)->cast(dtypes::float32);
  UOpPtr zero = UOp::const_(dtypes::float32, 0.0);
  EXPECT_EQ(simplify(f + zero), f + zero);  // -0.0 + 0.0 is not -0.0
  EXPECT_EQ(simplify(f * zero), f * zero);  // inf * 0 is nan
}

TEST(Symbolic, UnsignedSumsKeepTheirShape) {
  UOpPtr u = UOp::var("u", 0, 10, dtypes::uint32);
  EXPECT_EQ(simplify(u + UOp::const_(dtypes::uint32, 0)), u);
  const UOpPtr e = u - UOp::const_(dtypes::uint32, 3);
  EXPECT_EQ(simplify(e), e);  // not u + 4294967293
}

// ---- size ----

TEST(Symbolic, SimplifyNeverReturnsALargerGraph) {
  // Alone, (x+3)+y would become (x+y)+3; but x+3 is also used on its own, so the graph would
  // gain a node. simplify keeps the original.
  UOpPtr x = UOp::var("x", -5, 5), y = UOp::var("y", 0, 7);
  UOpPtr s = x + 3;
  UOpPtr e = s * (s + y);
  EXPECT_GT(toposort(graph_rewrite(e, symbolic_rules()).get()).size(), toposort(e.get()).size());
  EXPECT_EQ(simplify(e), e);
}

// ---- bounds the rules rely on ----

TEST(Bounds, NegativeDivisorsBoundQuotientAndRemainder) {
  UOpPtr a = UOp::var("a", 0, 10), d = UOp::var("d", -4, -2);
  EXPECT_EQ((a / d)->vmin(), -5);
  EXPECT_EQ((a / d)->vmax(), 0);
  EXPECT_EQ((a % d)->vmin(), 0);
  EXPECT_EQ((a % d)->vmax(), 3);
  EXPECT_EQ((a / -3)->vmin(), -3);
}

TEST(Bounds, AnInt64ResultThatMayHaveWrappedCoversTheDtype) {
  // 2^62 * 4 wraps in int64: saturated bounds must not claim the product is non-negative.
  UOpPtr big = UOp::var("big", 0, int64_t(1) << 62, dtypes::int64);
  EXPECT_EQ((big * 4)->vmin(), INT64_MIN);
  EXPECT_FALSE(computes_exactly(*(big * 4)));
  EXPECT_TRUE(computes_exactly(*(big + 1)));
  UOpPtr m = UOp::var("m", INT64_MIN, 0, dtypes::int64);
  EXPECT_EQ((-m)->vmin(), INT64_MIN);  // -INT64_MIN wraps
  EXPECT_EQ((m / -1)->vmin(), INT64_MIN);
}

// ---- evaluation, rendering, linear forms ----

TEST(Symbolic, EvalIntReadsVariablesByName) {
  UOpPtr a = UOp::var("a", 0, 10), b = UOp::var("b", 0, 10);
  EXPECT_EQ(eval_int((a * 40 + b) / 20, {{"a", 3}, {"b", 7}}), 6);
  EXPECT_EQ(eval_int(a->lt(b), {{"a", 3}, {"b", 7}}), 1);
  EXPECT_EQ(eval_int(a->lt(b)->where(a, b), {{"a", 9}, {"b", 7}}), 7);
  EXPECT_THROW(eval_int(a + b, {{"a", 3}}), Error);
  EXPECT_THROW(eval_int(a->cast(dtypes::float32), {{"a", 3}}), Error);
  UOpPtr gidx = UOp::make(Ops::SPECIAL, dtypes::int32, {i32(16)}, std::string("gidx0"));
  UOpPtr ridx = UOp::make(Ops::RANGE, dtypes::int32, {i32(0), i32(4)}, int64_t(2));
  EXPECT_EQ(eval_int(gidx * 4 + ridx, {{"gidx0", 3}, {"ridx2", 1}}), 13);
  EXPECT_EQ(render(gidx * 4 + ridx), "((gidx0*4)+ridx2)");
}

TEST(Symbolic, IntExprEvaluatesOneCompiledExpressionAtManyPoints) {
  UOpPtr a = UOp::var("a", 0, 10), b = UOp::var("b", -3, 3);
  const IntExpr e((b * 10 + a) % 7);
  ASSERT_EQ(e.var_names(), (std::vector<std::string>{"b", "a"}));
  for (int64_t av = 0; av <= 10; ++av)
    for (int64_t bv = -3; bv <= 3; ++bv)
      EXPECT_EQ(e(std::vector<int64_t>{bv, av}), (bv * 10 + av) % 7);
  EXPECT_EQ(IntExpr(a / (b * 0))(std::vector<int64_t>{1, 2}), std::nullopt);  // undefined: no value
}

TEST(Symbolic, RenderParenthesizesEveryBinaryOpAsTinygrad) {
  UOpPtr idx0 = UOp::var("idx0", 0, 99), a = UOp::var("a", 0, 10), b = UOp::var("b", 0, 10);
  EXPECT_EQ(render((idx0 % 10) * 10 + idx0 / 10), "(((idx0%10)*10)+(idx0//10))");
  EXPECT_EQ(render(a * 2), "(a*2)");
  EXPECT_EQ(render(a + -3), "(a+-3)");
  EXPECT_EQ(render(a - b), "(a-b)");
  EXPECT_EQ(render(-a), "(-a)");
  EXPECT_EQ(render(a->lt(b)->where(a, i32(-1))), "((a<b)?a:-1)");
  EXPECT_EQ(render(a->ne(b)->alu(Ops::AND, {boolean(true)})), "((a!=b)&true)");
  EXPECT_EQ(render(a->maximum(b)), "max(a,b)");
  EXPECT_EQ(render(a->cast(dtypes::int64)), "((int64)a)");
}

TEST(Symbolic, LinearFormReadsThroughSubtractionNegationAndScaling) {
  UOpPtr x = UOp::var("x", -5, 5), y = UOp::var("y", 0, 7), z = UOp::var("z", 0, 7);
  const auto f = linear_form(x - (y * 3 - 5) + -(x * 2) + (y + z) * 4);
  ASSERT_TRUE(f);
  ASSERT_EQ(f->terms.size(), 3u);
  EXPECT_EQ(f->terms[0].base, x);
  EXPECT_EQ(f->terms[0].coeff, -1);
  EXPECT_EQ(f->terms[1].base, y);
  EXPECT_EQ(f->terms[1].coeff, 1);  // -3 + 4: a product distributes over the sum under it
  EXPECT_EQ(f->terms[2].base, z);
  EXPECT_EQ(f->terms[2].coeff, 4);
  EXPECT_EQ(f->constant, 5);
  EXPECT_TRUE(f->exact);
  EXPECT_FALSE(linear_form(x->cast(dtypes::uint32)));
  EXPECT_FALSE(linear_form(UOp::var("w", 0, INT32_MAX) * 4)->exact);  // wraps
}

TEST(Symbolic, ProductsDistributeOverASumWhereThatIsNoLarger) {
  UOpPtr x = UOp::var("x", 0, 3), y = UOp::var("y", 0, 5);
  EXPECT_EQ(simp((3 - x) * 6 + y), "((y-(x*6))+18)");
  EXPECT_EQ(simp((x + y) * 3), "((x+y)*3)");  // x*3+y*3 would be larger
  EXPECT_EQ(simp(((x + y) * 3) % 3), "0");
}

TEST(Symbolic, SimplifyGivenAValidNarrowsTheVariablesItBounds) {
  // A padded dimension's index: read only where 0 < idx1, where it is linear.
  UOpPtr idx0 = UOp::var("idx0", 0, 5), idx1 = UOp::var("idx1", 0, 4);
  UOpPtr flat = idx0 * 4 + idx1 - 1;
  UOpPtr index = (flat % 4) * 6 + flat / 4;
  UOpPtr valid = i32(0)->lt(idx1);
  EXPECT_EQ(render(simplify(index)), "((((((idx0*4)+idx1)+-1)%4)*6)+((((idx0*4)+idx1)+-1)//4))");
  UOpPtr given = simplify_given(index, valid);
  EXPECT_EQ(render(given), "(((idx1*6)+idx0)+-6)");
  for (int64_t a = 0; a <= 5; ++a)
    for (int64_t b = 1; b <= 4; ++b)
      EXPECT_EQ(eval_int(given, {{"idx0", a}, {"idx1", b}}),
                eval_int(index, {{"idx0", a}, {"idx1", b}}));
  EXPECT_EQ(simplify_given(idx1 % 4, idx1->lt(4)), idx1);
  EXPECT_EQ(simplify_given(idx1 % 4, idx1->lt(4)->alu(Ops::AND, {idx1->lt(9)})), idx1);
  EXPECT_EQ(simplify_given(idx1 % 4, boolean(true)), idx1 % 4);
}

// x = g*y + s with s in [0, g) for a g dividing c: s never carries into x // c, so
// (2601*a + 51*p + q) // 867 = (51*a + p) // 17 and (2601*a + 51*p + q) % 867 = ((51*a + p) % 17)*51 + q
// for q < 51; and (x // 17) % 51 = (x % 867) // 17 for x >= 0, which then folds the same way.
TEST(Symbolic, ASmallRemainderNeverCarriesIntoTheQuotient) {
  UOpPtr a = UOp::var("a", 0, 3), p = UOp::var("p", 0, 50), q = UOp::var("q", 0, 50);
  UOpPtr x = a * 2601 + p * 51 + q;
  const UOpPtr div = simplify(x / 867), mod = simplify(x % 867), mod_of_div = simplify((x / 17) % 51);
  EXPECT_EQ(render(div), "(((a*51)+p)//17)");
  EXPECT_EQ(render(mod_of_div).find("%51"), std::string::npos) << render(mod_of_div);
  for (int64_t va = 0; va <= 3; ++va)
    for (int64_t vp = 0; vp <= 50; ++vp)
      for (int64_t vq = 0; vq <= 50; vq += 7) {
        const std::map<std::string, int64_t> at{{"a", va}, {"p", vp}, {"q", vq}};
        const int64_t v = va * 2601 + vp * 51 + vq;
        ASSERT_EQ(eval_int(div, at), v / 867);
        ASSERT_EQ(eval_int(mod, at), v % 867);
        ASSERT_EQ(eval_int(mod_of_div, at), (v / 17) % 51);
      }
  // A remainder that can reach g carries: no fold.
  UOpPtr wide = UOp::var("w", 0, 51);
  EXPECT_EQ(render(simplify((a * 2601 + p * 51 + wide) / 867)).find("(((a*51)+p)//17)"), std::string::npos);
}

TEST(Symbolic, ExecAluIsTheDevicesIntegerArithmetic) {
  auto run = [](Ops op, DType d, std::vector<int64_t> args) {
    const DType result = is_comparison(op) ? dtypes::bool_ : d;
    return exec_alu(op, result, d, args);
  };
  EXPECT_EQ(run(Ops::IDIV, dtypes::int32, {-7, 2}), -3);
  EXPECT_EQ(run(Ops::MOD, dtypes::int32, {-7, 3}), -1);
  EXPECT_EQ(run(Ops::MOD, dtypes::int32, {5, 0}), std::nullopt);
  EXPECT_EQ(run(Ops::MUL, dtypes::int16, {300, 300}), int16_t(90000 - 65536 * 1));
  EXPECT_EQ(run(Ops::ADD, dtypes::uint64, {-1, 1}), 0);
  EXPECT_EQ(run(Ops::CMPLT, dtypes::uint32, {1, 0xFFFFFFFF}), 1);
  EXPECT_EQ(run(Ops::SHR, dtypes::uint8, {0x80, 7}), 1);
  EXPECT_EQ(run(Ops::SHL, dtypes::int32, {1, -1}), std::nullopt);
  EXPECT_THROW(run(Ops::EXP2, dtypes::float32, {1}), Error);
}
