// Autograd: gradients in closed form for the common ops, and the rules of leaves, aliases,
// accumulation, detach, NoGrad, assign and realized graphs. Finite-difference checks of every
// rule are in tensor_autograd_gradcheck_test.cpp, kernel counts in tensor_autograd_graph_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "support/device_compare.hpp"
#include "support/error_bound.hpp"
#include "support/error_of.hpp"

using namespace vkg;
using namespace vkg::test;

namespace {

Tensor leaf(std::vector<float> v, Shape shape) {
  return Tensor(v, std::move(shape)).requires_grad_();
}
Tensor leaf(std::vector<float> v) {
  const int64_t n = int64_t(v.size());
  return leaf(std::move(v), {n});
}

// Element by element within a relative 1e-6 (float32 closed forms).
void expect_values(const Tensor& t, const std::vector<double>& want) {
  const std::vector<double> got = values(t);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-6 * std::max(1.0, std::abs(want[i]))) << "element " << i;
}

void expect_grad(const Tensor& t, const std::vector<double>& want) {
  ASSERT_TRUE(t.grad().has_value());
  EXPECT_EQ(t.grad()->shape(), t.shape());
  EXPECT_EQ(t.grad()->dtype(), t.dtype());
  expect_values(*t.grad(), want);
}

}  // namespace

TEST(AutogradClosedForm, ProductAndSum) {
  Tensor x = leaf({1, 2, 3}), y = leaf({4, 5, 6});
  (x * y + x).sum().backward();
  expect_grad(x, {5, 6, 7});  // y + 1
  expect_grad(y, {1, 2, 3});  // x
}

TEST(AutogradClosedForm, MeanSpreadsOneOverN) {
  Tensor x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  x.mean().backward();
  expect_grad(x, std::vector<double>(6, 1.0 / 6));
  Tensor y = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  y.mean(1).sum().backward();
  expect_grad(y, std::vector<double>(6, 1.0 / 3));
}

TEST(AutogradClosedForm, ReluIsZeroAtAndBelowZero) {
  Tensor x = leaf({-1, 0, 2, 0.5f});
  x.relu().sum().backward();
  expect_grad(x, {0, 0, 1, 1});
}

TEST(AutogradClosedForm, ExpLogAndDivision) {
  Tensor x = leaf({0.5f, 1, 2});
  x.exp().sum().backward();
  expect_grad(x, {std::exp(0.5), std::exp(1.0), std::exp(2.0)});
  Tensor l = leaf({0.5f, 1, 4});
  l.log().sum().backward();
  expect_grad(l, {2, 1, 0.25});
  Tensor a = leaf({1, 2, 3}), b = leaf({2, 4, 5});
  (a / b).sum().backward();
  expect_grad(a, {0.5, 0.25, 0.2});                  // 1 / b
  expect_grad(b, {-1.0 / 4, -2.0 / 16, -3.0 / 25});  // -a / b^2
}

TEST(AutogradClosedForm, LargeReducesThatSplitInTwoKernels) {
  std::vector<float> v(40000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(int(i % 17) - 8) / 4;
  Tensor x = leaf(v, {40000});
  (x * x).sum().backward();
  std::vector<double> want(v.size());
  for (size_t i = 0; i < v.size(); ++i) want[i] = 2.0 * v[i];
  expect_grad(x, want);
}

TEST(AutogradClosedForm, MaxReduceSharesTiesEvenly) {
  Tensor x = leaf({1, 3, 3, 2});
  x.max().backward();
  expect_grad(x, {0, 0.5, 0.5, 0});
  Tensor y = leaf({1, 5, 5, 7, 2, 3}, {2, 3});
  (y.max(1) * Tensor({10.0f, 100.0f})).sum().backward();
  expect_grad(y, {0, 5, 5, 100, 0, 0});
}

TEST(AutogradClosedForm, MaximumSplitsEqualInputs) {
  Tensor a = leaf({1, 2, 3}), b = leaf({3, 2, 1});
  a.maximum(b).sum().backward();
  expect_grad(a, {0, 0.5, 1});
  expect_grad(b, {1, 0.5, 0});
}

TEST(AutogradClosedForm, ProdReduceHandlesZeros) {
  // REDUCE_AXIS MUL: the product of the other elements, also where some are zero.
  auto prod = [](const Tensor& t) {
    return Tensor(UOp::make(Ops::REDUCE_AXIS, t.dtype(), {t.node()}, ReduceArg{Ops::MUL, {1}}));
  };
  Tensor x = leaf({2, 4, 3, 2, 0, 3, 0, 0, 3}, {3, 3});
  prod(x).sum().backward();
  expect_grad(x, {12, 6, 8, 0, 6, 0, 0, 0, 0});
}

TEST(AutogradClosedForm, MatmulGradientsAreProductsWithTransposes) {
  const std::vector<float> xv{1, 2, 3, 4, 5, 6}, wv{1, -1, 2, 0, 3, 1, -2, 1, 0.5f, 2, 1, -1};
  const std::vector<float> gv{1, 2, 3, 4, -1, 0, 1, 2};
  Tensor x = leaf(xv, {2, 3}), w = leaf(wv, {3, 4});
  const Tensor g(gv, {2, 4});
  (x.matmul(w) * g).sum().backward();
  std::vector<double> dx(6, 0), dw(12, 0);  // g @ w^T and x^T @ g
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 3; ++k)
      for (int j = 0; j < 4; ++j) {
        dx[size_t(i * 3 + k)] += double(gv[size_t(i * 4 + j)]) * wv[size_t(k * 4 + j)];
        dw[size_t(k * 4 + j)] += double(xv[size_t(i * 3 + k)]) * gv[size_t(i * 4 + j)];
      }
  expect_grad(x, dx);
  expect_grad(w, dw);
}

TEST(AutogradClosedForm, BroadcastInputsGetSummedGradients) {
  Tensor row = leaf({1, 2, 3}), col = leaf({10, 20}, {2, 1});
  Tensor m = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  (row * m + col).sum().backward();
  expect_grad(row, {5, 7, 9});  // column sums of m
  expect_grad(col, {3, 3});
  expect_grad(m, {1, 2, 3, 1, 2, 3});
  Tensor s = leaf({2});
  (s * Tensor({1.0f, 2.0f, 3.0f})).sum().backward();  // a 1-element tensor broadcast
  expect_grad(s, {6});
}

TEST(AutogradClosedForm, MovementOpsRouteGradientsBack) {
  // w weights each element of the moved tensor by a distinct power of ten, so every element's
  // gradient names where it went.
  Tensor x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor moved = x.permute({1, 0}).flip({0}).pad({{1, 0}, {0, 1}}).shrink({{1, 3}, {0, 3}});
  ASSERT_EQ(moved.shape(), (Shape{2, 3}));
  // moved[r][c] = x^T flipped = x[c][2 - r] for c < 2 (column 2 is padding)
  const Tensor w(std::vector<float>{1, 10, 100, 1000, 10000, 100000}, {2, 3});
  (moved * w).sum().backward();
  // x[c][2-r] gets w[r][c]: x[0][2]=w00=1, x[1][2]=w01=10, x[0][1]=w10=1000, x[1][1]=w11=1e4
  expect_grad(x, {0, 1000, 1, 0, 10000, 10});
  Tensor e = leaf({1, 2}, {2, 1});
  (e.expand({2, 3}) * Tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3})).sum().backward();
  expect_grad(e, {6, 15});
  Tensor r = leaf({1, 2, 3, 4}, {2, 2});
  (r.reshape({4}) * Tensor({1.0f, 2.0f, 3.0f, 4.0f})).contiguous().sum().backward();
  expect_grad(r, {1, 2, 3, 4});
}

TEST(AutogradClosedForm, WhereAndCast) {
  Tensor a = leaf({1, 2, 3}), b = leaf({4, 5, 6});
  const Tensor cond = Tensor({true, false, true});
  (cond.where(a, b) * 2).sum().backward();
  expect_grad(a, {2, 0, 2});
  expect_grad(b, {0, 2, 0});
  Tensor c = leaf({1.5f, 2.5f});
  (c.cast(dtypes::float16) * 2).cast(dtypes::float32).sum().backward();  // back through float16
  expect_grad(c, {2, 2});
  Tensor i = leaf({1.5f, 2.5f});
  (i.cast(dtypes::int32).cast(dtypes::float32) + i).sum().backward();  // none through an integer
  expect_grad(i, {1, 1});
  Tensor bits = leaf({1.5f, 2.5f});
  (bits.bitcast(dtypes::int32).bitcast(dtypes::float32) + bits * 2)
      .sum()
      .backward();  // none through bits
  expect_grad(bits, {2, 2});
  Tensor half = Tensor(std::vector<float>{1, 2}, {2}).cast(dtypes::float16).requires_grad_();
  (half * half).sum().backward();  // the gradient has the leaf's dtype
  ASSERT_TRUE(half.grad().has_value());
  EXPECT_EQ(half.grad()->dtype(), dtypes::float16);
  expect_values(*half.grad(), {2, 4});
}

TEST(AutogradLeaves, ALeafUsedTwiceSumsBothUses) {
  Tensor x = leaf({1, 2, 3});
  (x * x + x).sum().backward();
  expect_grad(x, {3, 5, 7});
}

TEST(AutogradLeaves, EqualValuedLeavesAreDistinct) {
  // Both are the same hash-consed node before requires_grad_: each must get only its own gradient.
  Tensor a = Tensor::zeros({3}).requires_grad_(), b = Tensor::zeros({3}).requires_grad_();
  (a * 2 + b * 3).sum().backward();
  expect_grad(a, {2, 2, 2});
  expect_grad(b, {3, 3, 3});
}

TEST(AutogradLeaves, CopiesAreAliases) {
  Tensor x = leaf({1, 2});
  Tensor alias = x;
  (alias * 3).sum().backward();
  expect_grad(x, {3, 3});
  x.set_grad({});
  EXPECT_FALSE(alias.grad().has_value());
  EXPECT_TRUE(alias.requires_grad());
}

TEST(AutogradLeaves, GradientsAccumulateAcrossBackwardCalls) {
  Tensor x = leaf({1, 2, 3});
  const Tensor loss = (x * x).sum();
  loss.backward();
  loss.backward();
  expect_grad(x, {4, 8, 12});
  (x * 10).sum().backward();  // another loss adds too
  expect_grad(x, {14, 18, 22});
  x.set_grad({});  // zero_grad
  EXPECT_FALSE(x.grad().has_value());
  (x * 10).sum().backward();
  expect_grad(x, {10, 10, 10});
}

TEST(AutogradLeaves, OnlyTensorsWithRequiresGradGetGradients) {
  Tensor x = leaf({1, 2}), y = Tensor({3.0f, 4.0f});
  (x * y).sum().backward();
  EXPECT_FALSE(y.grad().has_value());
  Tensor unused = leaf({1, 2});
  (x * 2).sum().backward();
  EXPECT_FALSE(unused.grad().has_value());
}

TEST(AutogradLeaves, DetachStopsTheGradient) {
  Tensor x = leaf({1, 2, 3});
  (x * x.detach()).sum().backward();
  expect_grad(x, {1, 2, 3});  // not 2x
  expect_values(x.detach(), {1, 2, 3});
}

TEST(AutogradLeaves, NoGradResultsCarryNoGradient) {
  Tensor x = leaf({1, 2, 3});
  Tensor twice = Tensor::zeros({3});
  {
    NoGrad ng;
    EXPECT_TRUE(NoGrad::active());
    {
      NoGrad nested;
      twice = x * 2;
    }
    EXPECT_TRUE(NoGrad::active());
  }
  EXPECT_FALSE(NoGrad::active());
  (twice * x).sum().backward();
  expect_grad(x, {2, 4, 6});  // through the second factor only
  expect_values(twice, {2, 4, 6});
}

TEST(AutogradLeaves, NoGradIsPerThread) {
  Tensor x = leaf({1, 2});
  bool other_thread_active = true;
  Tensor from_thread = Tensor::zeros({2});
  {
    NoGrad ng;
    std::thread t([&] {
      other_thread_active = NoGrad::active();
      from_thread = x * 3;  // not in a NoGrad scope on this thread: carries the gradient
    });
    t.join();
  }
  EXPECT_FALSE(other_thread_active);
  from_thread.sum().backward();
  expect_grad(x, {3, 3});
}

TEST(AutogradLeaves, OnlyPathsToALeafAreDifferentiated) {
  // MULACC has no gradient rule: off the path to x it is never looked at, on it it is an error.
  Tensor x = leaf({1, 2});
  const Tensor a({1.0f, 2.0f}), b({3.0f, 4.0f}), c({5.0f, 6.0f});
  const Tensor fused(UOp::make(Ops::MULACC, dtypes::float32, {a.node(), b.node(), c.node()}));
  (x * fused).sum().backward();
  ASSERT_TRUE(x.grad().has_value());
  EXPECT_EQ(x.grad()->shape(), (Shape{2}));
  const Tensor on_path(UOp::make(Ops::MULACC, dtypes::float32, {x.node(), b.node(), c.node()}));
  const std::string err = error_of([&] { on_path.sum().backward(); });
  EXPECT_NE(err.find("no gradient rule for op MULACC"), std::string::npos) << err;
  EXPECT_NE(err.find("(2,)"), std::string::npos) << err;
}

TEST(AutogradLeaves, AssignKeepsTheLeafForTheNextStep) {
  Tensor p = leaf({1, 2, 3});
  Tensor alias = p;
  (p * p).sum().backward();
  expect_grad(p, {2, 4, 6});
  {
    NoGrad ng;
    p.assign(p - *p.grad() * 0.25);  // SGD: p = 0.5 p
  }
  p.set_grad({});
  expect_values(alias, {0.5, 1, 1.5});
  (p * p).sum().backward();  // the new value is still the leaf
  expect_grad(p, {1, 2, 3});
  p.realize();
  p.set_grad({});
  (p * p * p).sum().backward();
  expect_grad(p, {0.75, 3, 6.75});
  // Assign casts to the tensor's dtype and detaches the value's graph.
  Tensor q = Tensor({1.0f, 2.0f});
  Tensor src = leaf({5, 6});
  q.assign(Tensor({7, 8}));
  expect_values(q, {7, 8});
  EXPECT_EQ(q.dtype(), dtypes::float32);
  q.assign(src * 2);
  (q * src).sum().backward();
  expect_grad(src, {10, 12});  // only through the second factor
}

TEST(AutogradLeaves, ARealizedLeafLetsGoOfItsUpdateGraph) {
  // After an optimizer step is realized, the graph that computed it (which reaches back into the
  // previous step's forward and backward) must not be kept alive by the leaf.
  Tensor p = leaf({1, 2, 3});
  (p * p).sum().backward();
  std::weak_ptr<const UOp> update;
  {
    Tensor value = p - *p.grad() * 0.25;
    update = value.node();
    p.assign(value);
  }
  p.set_grad({});
  p.realize();
  EXPECT_TRUE(update.expired());
  expect_values(p, {0.5, 1, 1.5});
  (p * 2).sum().backward();
  expect_grad(p, {2, 2, 2});
}

TEST(AutogradLeaves, ForwardRealizedBeforeBackward) {
  Tensor x = leaf({1, 2, 3});
  Tensor h = x * 2;
  h.realize();  // an intermediate in a buffer: its graph still carries the gradient
  Tensor loss = (h * h).sum();
  loss.realize();
  EXPECT_FLOAT_EQ(loss.item<float>(), 56.0f);
  loss.backward();
  expect_grad(x, {8, 16, 24});  // d (2x)^2 = 8x
  Tensor w = leaf({1, 2});
  Tensor lw = (w * 3).sum();
  w.realize();  // the leaf moves to a buffer after the graph was built
  lw.backward();
  (w * 5).sum().backward();  // and graphs built after it reach it too
  expect_grad(w, {8, 8});
}

TEST(AutogradLeaves, ExplicitSeedForNonScalars) {
  Tensor x = leaf({1, 2, 3});
  (x * x).backward(Tensor({1.0f, 10.0f, 100.0f}));
  expect_grad(x, {2, 40, 600});
}

TEST(AutogradErrors, MisuseIsAClearError) {
  Tensor i = Tensor({1, 2});
  const std::string int_leaf = error_of([&] { i.requires_grad_(); });
  EXPECT_NE(int_leaf.find("requires_grad_"), std::string::npos) << int_leaf;
  EXPECT_NE(int_leaf.find("int32"), std::string::npos) << int_leaf;
  EXPECT_FALSE(i.requires_grad());

  Tensor x = leaf({1, 2, 3});
  const std::string non_scalar = error_of([&] { (x * 2).backward(); });
  EXPECT_NE(non_scalar.find("backward"), std::string::npos) << non_scalar;
  EXPECT_NE(non_scalar.find("(3,)"), std::string::npos) << non_scalar;
  const std::string bad_seed = error_of([&] { (x * 2).backward(Tensor({1.0f})); });
  EXPECT_NE(bad_seed.find("(1,)"), std::string::npos) << bad_seed;
  const std::string no_leaf = error_of([&] { Tensor({1.0f}).sum().backward(); });
  EXPECT_NE(no_leaf.find("requires_grad"), std::string::npos) << no_leaf;

  const std::string shapes = error_of([&] { x.assign(Tensor({1.0f, 2.0f})); });
  EXPECT_NE(shapes.find("assign"), std::string::npos) << shapes;
  EXPECT_NE(shapes.find("(2,)"), std::string::npos) << shapes;
  EXPECT_NE(shapes.find("(3,)"), std::string::npos) << shapes;
  EXPECT_NE(shapes.find("float32"), std::string::npos) << shapes;
  // Still usable after the errors.
  (x * 2).sum().backward();
  expect_grad(x, {2, 2, 2});
}

// Within the forward error bound of the chain of sums the gradients are (support/error_bound.hpp):
// the devices may reduce in another order (NVIDIA's 32-wide subgroups split them differently
// from Lavapipe's 8), which moved a gradient by 6 ulps of itself.
TEST(AutogradDevices, VulkanGradientsEqualTheCpuOracle) {
  // A small MLP's input and weight gradients on both devices; with `magnitude`, the same on
  // absolute values, which bounds every term of every sum.
  auto grads = [](const std::string& dev, int which, bool magnitude) {
    std::vector<float> xv(8 * 5), w1v(5 * 6), w2v(6 * 3);
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = float(int(i * 7 % 11) - 5) / 4;
    for (size_t i = 0; i < w1v.size(); ++i) w1v[i] = float(int(i * 5 % 13) - 6) / 8;
    for (size_t i = 0; i < w2v.size(); ++i) w2v[i] = float(int(i * 3 % 7) - 3) / 5;
    if (magnitude)
      for (auto* v : {&xv, &w1v, &w2v})
        for (float& f : *v) f = std::abs(f);
    Tensor x(xv, {8, 5}, dev), w1 = Tensor(w1v, {5, 6}, dev).requires_grad_(),
                               w2 = Tensor(w2v, {6, 3}, dev).requires_grad_();
    const Tensor out = x.matmul(w1).relu().matmul(w2);
    (out * out).mean().backward();
    return which == 0 ? *w1.grad() : *w2.grad();
  };
  // Sums of 5, 6, 3 and 8 terms and the mean's two roundings along the longest chain.
  for (int which : {0, 1})
    EXPECT_TRUE(within_sum_error_bound(grads("CPU", which, false), grads("VK", which, false),
                                       grads("CPU", which, true), 24));
}
