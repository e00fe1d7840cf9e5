// Gradients at kinks and ties, on both devices, as torch computes them (values from torch 2.x):
// where an op is not differentiable, torch picks one side, and users compare against torch.
#include <gtest/gtest.h>

#include <cmath>

#include "support/device_compare.hpp"
#include "support/error_of.hpp"

using namespace vkg;
using namespace vkg::test;

namespace {

// d/dx sum(f(x)) at the points xs, on `device`.
template <class F>
std::vector<double> grad_at(const std::vector<float>& xs, F&& f, const std::string& device) {
  Tensor x = Tensor(xs, {int64_t(xs.size())}, device).requires_grad_();
  f(x).sum().backward();
  EXPECT_TRUE(x.grad().has_value());
  return x.grad() ? values(*x.grad()) : std::vector<double>{};
}

template <class F>
void expect_grad(const std::vector<float>& xs, F&& f, const std::vector<double>& want) {
  for (const char* dev : {"CPU", "VK"}) {
    const std::vector<double> got = grad_at(xs, f, dev);
    ASSERT_EQ(got.size(), want.size()) << dev;
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 1e-6) << dev << " at x = " << xs[i];
  }
}

}  // namespace

TEST(AutogradKinks, ActivationsAtZeroMatchTorch) {
  expect_grad({0, 1, -1}, [](const Tensor& x) { return x.abs(); }, {0, 1, -1});
  expect_grad({0, 2, -2}, [](const Tensor& x) { return x.leaky_relu(0.1); }, {0.1, 1, 0.1});
  expect_grad({0, 1, -1}, [](const Tensor& x) { return x.relu(); }, {0, 1, 0});
  expect_grad({0}, [](const Tensor& x) { return x.softplus(); }, {0.5});
  expect_grad({0}, [](const Tensor& x) { return x.softplus(2.0); }, {0.5});
  expect_grad({0, 1}, [](const Tensor& x) { return x.elu(0.7); }, {0.7, 1});
  // torch: hardswish'(-3) = -0.5, hardswish'(3) = 1.5 (the middle piece's (2x + 3) / 6).
  expect_grad({-3, 3}, [](const Tensor& x) { return x.hardswish(); }, {-0.5, 1.5});
}

TEST(AutogradKinks, AbsOfNegativeZeroIsPositiveZero) {
  for (const char* dev : {"CPU", "VK"}) {
    const std::vector<float> got =
        Tensor(std::vector<float>{-0.0f, NAN}, {2}, dev).abs().to_vector<float>();
    EXPECT_FALSE(std::signbit(got[0])) << dev;
    EXPECT_TRUE(std::isnan(got[1])) << dev;
  }
}

TEST(AutogradKinks, BinaryCrossEntropyWithLogitsAtZeroIsSigmoidMinusTarget) {
  for (const char* dev : {"CPU", "VK"}) {
    Tensor x = Tensor(std::vector<float>{0, 0, 0}, {3}, dev).requires_grad_();
    const Tensor y = Tensor(std::vector<float>{0, 1, 0.25f}, {3}, dev);
    x.binary_crossentropy_logits(y, Reduction::Sum).backward();
    const std::vector<double> g = values(*x.grad());
    EXPECT_NEAR(g[0], 0.5, 1e-6) << dev;
    EXPECT_NEAR(g[1], -0.5, 1e-6) << dev;
    EXPECT_NEAR(g[2], 0.25, 1e-6) << dev;
  }
}

TEST(AutogradKinks, ClampPassesTheGradientAtItsBounds) {
  // torch.clamp(x, -1, 1) at -1, 1 and inside: 1; outside: 0.
  expect_grad({-1, 1, 0, 2, -2}, [](const Tensor& x) { return x.clip(-1.0, 1.0); },
              {1, 1, 1, 0, 0});
  for (const char* dev : {"CPU", "VK"}) {
    const std::vector<float> v =
        Tensor(std::vector<float>{NAN, 5, -5}, {3}, dev).clip(-1.0, 1.0).to_vector<float>();
    EXPECT_TRUE(std::isnan(v[0])) << dev;
    EXPECT_EQ(v[1], 1.0f) << dev;
    EXPECT_EQ(v[2], -1.0f) << dev;
  }
}

TEST(AutogradKinks, RoundingOpsGiveAZeroGradient) {
  for (auto f :
       {+[](const Tensor& x) { return x.floor(); }, +[](const Tensor& x) { return x.ceil(); },
        +[](const Tensor& x) { return x.round(); }, +[](const Tensor& x) { return x.trunc(); }})
    expect_grad({0.5f, -1.5f, 2}, f, {0, 0, 0});
}

// Decided: max and min along axes are torch.amax/amin (a tie splits the gradient evenly); max
// pooling sends it to the first maximum of each window, as torch.max_pool2d.
TEST(AutogradKinks, TiesSplitForMaxAndGoToTheFirstForMaxPool) {
  expect_grad({3, 1, 3}, [](const Tensor& x) { return x.max(); }, {0.5, 0, 0.5});
  expect_grad({1, 3, 1}, [](const Tensor& x) { return x.min(); }, {0.5, 0, 0.5});
  for (const char* dev : {"CPU", "VK"}) {
    Tensor x =
        Tensor(std::vector<float>{3, 3, 1, 1, 3, 0, 2, 2}, {1, 1, 2, 4}, dev).requires_grad_();
    x.max_pool2d({.kernel = 2}).sum().backward();
    EXPECT_EQ(values(*x.grad()), (std::vector<double>{1, 0, 0, 0, 0, 0, 1, 0})) << dev;
  }
}

// torch.max(dim) / torch.min(dim) and cummax / cummin send each value's gradient to the position
// their index names (the first extreme; for the scans the last at or before, ties and nan
// included), as torch; max and min along axes (amax, amin) split it. Before, these split too.
TEST(AutogradKinks, IndexedExtremesSendTheGradientToTheNamedPosition) {
  expect_grad({5, 5, 1}, [](const Tensor& x) { return x.max_with_indices(0).first; }, {1, 0, 0});
  expect_grad({1, 1, 5}, [](const Tensor& x) { return x.min_with_indices(0, true).first; },
              {1, 0, 0});
  // Running max of [2, 2, 1, 3]: [2, 2, 2, 3] at positions [0, 1, 1, 3].
  expect_grad({2, 2, 1, 3}, [](const Tensor& x) { return x.cummax(0).first; }, {1, 2, 0, 1});
  expect_grad({0, 0, 1}, [](const Tensor& x) { return x.cummin(0).first; }, {1, 2, 0});
  for (const char* dev : {"CPU", "VK"}) {  // along axis 1 of [2, 3], the weights telling rows apart
    Tensor x = Tensor(std::vector<float>{4, 4, 0, 1, 7, 7}, {2, 3}, dev).requires_grad_();
    (x.max_with_indices(1).first * Tensor(std::vector<float>{1, 10}, {2}, dev)).sum().backward();
    EXPECT_EQ(values(*x.grad()), (std::vector<double>{1, 0, 0, 0, 10, 0})) << dev;
  }
}

// torch's pow_backward_self / _exponent. Derived from pow's composition (2^(x log2|b|) with its
// special cases picked by where) these were wrong on both devices: d/db b^x at b = 1 gave 0, not
// x; d/dx 2^x at x = 0 gave 0, not ln 2; b = 0 gave nan for d/db b^2, b^1.5, b^0 and d/dx 0^x.
TEST(AutogradKinks, PowGradientsFollowTorchAtZeroAndOne) {
  auto tensor = [](std::vector<float> v, const Tensor& like) {
    return Tensor(v, {int64_t(v.size())}, like.device());
  };
  // d/db b^x: x b^(x-1), 0 where x = 0.
  expect_grad({1, 1, 0, 0, 0, 0},
              [&](const Tensor& b) {
                return b.pow(tensor({3, -2, 2, 1.5f, 1, 0}, b));
              },
              {3, -2, 0, 0, 1, 0});
  // d/dx b^x: b^x ln b, 0 where b = 0 and x >= 0.
  expect_grad({0, 3, 0, 2},
              [&](const Tensor& x) {
                return tensor({2, 2, 0, 0}, x).pow(x);
              },
              {std::log(2.0), 8 * std::log(2.0), 0, 0});
  // x^0 is 1 with torch's zero gradient (x stays in the graph: backward does not throw).
  expect_grad({0, 2, -3}, [](const Tensor& b) { return b.pow(0.0); }, {0, 0, 0});
  expect_grad({0, 2, -3}, [](const Tensor& b) { return b.pow(0); }, {0, 0, 0});
  for (const char* dev : {"CPU", "VK"}) {  // 0.5 * 0^-0.5 = inf; a negative base's ln is nan
    EXPECT_EQ(grad_at(
                  {0}, [](const Tensor& b) { return b.pow(0.5); }, dev)[0],
              INFINITY)
        << dev;
    Tensor x = Tensor(std::vector<float>{2}, {1}, dev).requires_grad_();
    Tensor(std::vector<float>{-2}, {1}, dev).pow(x).sum().backward();
    EXPECT_TRUE(std::isnan(values(*x.grad())[0])) << dev;
  }
}

// A whole negative exponent (computed as 1 / x^n): torch's v x^(v-1), exactly, with its signs at
// zeros and infinities (x^-2 at 0 is -inf, at -0 +inf, at inf -0), not the reciprocal's nan.
TEST(AutogradKinks, WholeNegativePowerGradientIsTorchsAtZeroAndInfinity) {
  const std::vector<float> xs = {0.0f, -0.0f, INFINITY, -INFINITY, 2.0f, -0.5f, 3.0f};
  for (const double v : {-1.0, -2.0, -3.0})
    for (const char* dev : {"CPU", "VK"}) {
      const std::vector<double> got = grad_at(
          xs, [v](const Tensor& x) { return x.pow(v); }, dev);
      ASSERT_EQ(got.size(), xs.size()) << dev;
      for (size_t i = 0; i < xs.size(); ++i) {
        const double want = v * std::pow(double(xs[i]), v - 1);
        if (std::isfinite(want) && want != 0)  // float32 rounding of x^(v-1) and the products
          EXPECT_NEAR(got[i], want, 1e-6 * std::fabs(want)) << dev << " at x = " << xs[i];
        else
          EXPECT_EQ(got[i], want) << dev << " d/dx x^" << v << " at x = " << xs[i];
        EXPECT_EQ(std::signbit(got[i]), std::signbit(want))
            << dev << " d/dx x^" << v << " at x = " << xs[i];
      }
    }
}

// torch: the logsumexp of an empty tensor is -inf of the sum's shape, and its gradient zeros of
// the input's shape (it was detached, so backward threw).
TEST(AutogradKinks, LogsumexpOfAnEmptyTensorHasAZeroGradient) {
  for (const char* dev : {"CPU", "VK"}) {
    Tensor e = Tensor(std::vector<float>{}, {0, 3}, dev).requires_grad_();
    const Tensor lse = e.logsumexp(0);
    EXPECT_EQ(lse.shape(), (Shape{3})) << dev;
    EXPECT_EQ(values(lse), std::vector<double>(3, -INFINITY)) << dev;
    lse.sum().backward();
    ASSERT_TRUE(e.grad().has_value()) << dev;
    EXPECT_EQ(e.grad()->shape(), (Shape{0, 3})) << dev;
    EXPECT_EQ(e.grad()->dtype(), dtypes::float32) << dev;
  }
}

TEST(AutogradKinks, ResultsOfALeafRequireGrad) {
  Tensor w = Tensor(std::vector<float>{1, 2}, {2}).requires_grad_();
  EXPECT_TRUE((w * 2).sum().requires_grad());
  EXPECT_FALSE((w * 2).detach().requires_grad());
  EXPECT_FALSE(Tensor(std::vector<float>{1, 2}, {2}).sum().requires_grad());
  {
    NoGrad off;
    EXPECT_FALSE((w * 2).requires_grad());
  }
}

// torch's atan2_backward (float32, g = 1): d/dy = (g x) r, d/dx = (g (-y)) r, r = 1 / (y^2 + x^2).
// By hand: (0, 0) is 0 * inf = nan for both (it was (1, 0)); an infinite y makes r = 0, so
// d/dx = -inf * 0 = nan and d/dy a zero with x's sign; an infinite x the same the other way
// round; a zero keeps its sign through the product (d/dx at (+0, 2) is -0 * 0.25 = -0).
TEST(AutogradKinks, Atan2GradientsFollowTorchAtZerosAndInfinities) {
  const float inf = INFINITY, nan = NAN;
  struct Point {
    float y, x;
    double dy, dx;
  };
  const std::vector<Point> points = {
      {0.0f, 0.0f, nan, nan},   {-0.0f, -0.0f, nan, nan},  {0.0f, -0.0f, nan, nan},
      {0.0f, 2.0f, 0.5, -0.0},  {-0.0f, 2.0f, 0.5, 0.0},   {0.0f, -2.0f, -0.5, -0.0},
      {2.0f, 0.0f, 0.0, -0.5},  {2.0f, -0.0f, -0.0, -0.5}, {-2.0f, 0.0f, 0.0, 0.5},
      {inf, 2.0f, 0.0, nan},    {-inf, -2.0f, -0.0, nan},  {inf, 0.0f, 0.0, nan},
      {2.0f, inf, nan, -0.0},   {-2.0f, -inf, nan, 0.0},   {inf, inf, nan, nan},
      {-inf, -inf, nan, nan},   {nan, 1.0f, nan, nan},     {1.0f, nan, nan, nan},
      {3.0f, 4.0f, 0.16, -0.12}};
  std::vector<float> ys, xs;
  for (const Point& p : points) ys.push_back(p.y), xs.push_back(p.x);
  const auto same = [](double got, double want) {
    if (std::isnan(want)) return std::isnan(got);
    if (want == 0 || std::isinf(want))
      return got == want && std::signbit(got) == std::signbit(want);
    return std::fabs(got - want) <= 1e-6 * std::fabs(want);
  };
  for (const char* dev : {"CPU", "VK"}) {
    Tensor y = Tensor(ys, {int64_t(ys.size())}, dev).requires_grad_();
    Tensor x = Tensor(xs, {int64_t(xs.size())}, dev).requires_grad_();
    y.atan2(x).sum().backward();
    ASSERT_TRUE(y.grad().has_value() && x.grad().has_value()) << dev;
    const std::vector<double> dy = values(*y.grad()), dx = values(*x.grad());
    for (size_t i = 0; i < points.size(); ++i) {
      const Point& p = points[i];
      EXPECT_TRUE(same(dy[i], p.dy))
          << dev << " d/dy atan2(" << p.y << ", " << p.x << ") = " << dy[i] << ", torch " << p.dy;
      EXPECT_TRUE(same(dx[i], p.dx))
          << dev << " d/dx atan2(" << p.y << ", " << p.x << ") = " << dx[i] << ", torch " << p.dx;
    }
  }
}
