// The inverse trigonometric and hyperbolic functions, log1p, expm1, log10, tanh and the
// activations built on them, against the C library's closed forms (computed in double and
// rounded) on Vulkan and the CPU device: within a few ulps over a sweep of magnitudes from 1e-30
// to 1e30, both signs, and exactly on the special values (inf, nan, signed zero, domain ends).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <random>

#include "support/device_compare.hpp"

using namespace vkg;
using namespace vkg::test;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// Distance in representable floats; nan only matches nan, and -0 and +0 differ by one step.
uint64_t float_ulps(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : UINT64_MAX;
  const auto key = [](float f) {
    const int32_t i = std::bit_cast<int32_t>(f);
    return i < 0 ? -int64_t(i & 0x7fffffff) - 1 : int64_t(i);  // -0 is -1, just below +0
  };
  const int64_t d = key(a) - key(b);
  return uint64_t(d < 0 ? -d : d);
}

// Special values, the branch boundaries of the implementations, and 3000 magnitudes spread
// log-uniformly over [1e-30, 1e30] with both signs.
std::vector<float> sweep() {
  std::vector<float> v = {0.0f, -0.0f, kInf, -kInf, kNan, 1.0f, -1.0f, 0.5f, -0.5f, 0.25f, -0.25f,
                          0.2499999f, 0.2500001f, 0.4999999f, 0.5000001f, 0.4142135f, 0.4142137f,
                          0.66f, 2.4142134f, 2.4142137f, 0.9999999f, 1.0000001f, -0.9999999f,
                          2.0f, 10.0f, 88.0f, 88.8f, 89.0f, 89.5f, 268435456.0f, 3e8f, 1e-8f,
                          -1e-8f, 1e-30f, 1e-40f, 3e38f, -3e38f};
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> exponent(-30, 30);
  for (int i = 0; i < 3000; ++i)
    v.push_back(float(std::pow(10.0, exponent(rng))) * (i % 2 ? -1.0f : 1.0f));
  return v;
}

struct Case {
  const char* name;
  std::function<Tensor(const Tensor&)> f;
  std::function<double(double)> reference;
  uint64_t ulps;  // allowed distance from the rounded reference
  // Built on exp, which is exp2(x log2(e)): the product's rounding costs up to about |x| ulps
  // more (44 at x = 61.5, where x log2(e) is 88.8 and its half-ulp is 2^-18). A Cody-Waite exp needs arithmetic the shader compiler may not
  // reassociate (README: Numerics); until then the tests allow it.
  double exp_based = 0;  // ulps allowed per unit of |x|
};

// The ulps allowed at x.
double allowed(const Case& c, double x) {
  return double(c.ulps) + (std::isfinite(x) ? c.exp_based * std::abs(x) : 0);
}

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"log1p", [](const Tensor& x) { return x.log1p(); }, [](double x) { return std::log1p(x); }, 4},
      {"expm1", [](const Tensor& x) { return x.expm1(); }, [](double x) { return std::expm1(x); }, 4, 1.0},
      {"log10", [](const Tensor& x) { return x.log10(); }, [](double x) { return std::log10(x); }, 4},
      {"sinh", [](const Tensor& x) { return x.sinh(); }, [](double x) { return std::sinh(x); }, 4, 1.0},
      {"cosh", [](const Tensor& x) { return x.cosh(); }, [](double x) { return std::cosh(x); }, 4, 1.0},
      {"tanh", [](const Tensor& x) { return x.tanh(); }, [](double x) { return std::tanh(x); }, 4},
      {"asinh", [](const Tensor& x) { return x.asinh(); }, [](double x) { return std::asinh(x); }, 4},
      {"acosh", [](const Tensor& x) { return x.acosh(); }, [](double x) { return std::acosh(x); }, 4},
      {"atanh", [](const Tensor& x) { return x.atanh(); }, [](double x) { return std::atanh(x); }, 4},
      {"atan", [](const Tensor& x) { return x.atan(); }, [](double x) { return std::atan(x); }, 3},
      {"asin", [](const Tensor& x) { return x.asin(); }, [](double x) { return std::asin(x); }, 4},
      {"acos", [](const Tensor& x) { return x.acos(); }, [](double x) { return std::acos(x); }, 4},
      // exp2 of a rounded argument, as exp: about 6 ulps more per unit of |x| (55 at x = 9).
      {"erfc", [](const Tensor& x) { return x.erfc(); }, [](double x) { return std::erfc(x); }, 4, 6.0},
  };
  return c;
}

// The largest ulp distance from the reference over `xs`, and the first input past `ulps`.
testing::AssertionResult within_ulps(const Case& c, const std::vector<float>& xs,
                                     const std::vector<float>& got) {
  for (size_t i = 0; i < xs.size(); ++i) {
    const float want = float(c.reference(double(xs[i])));
    const uint64_t d = float_ulps(want, got[i]);
    if (double(d) > allowed(c, double(xs[i])))
      return testing::AssertionFailure()
             << c.name << "(" << xs[i] << ") = " << got[i] << ", want " << want << " ("
             << (d == UINT64_MAX ? std::string("nan mismatch") : std::to_string(d) + " ulps") << ")";
  }
  return testing::AssertionSuccess();
}

}  // namespace

TEST(Transcendental, Float32AgreesWithTheCLibraryOnBothDevices) {
  const std::vector<float> xs = sweep();
  for (const Case& c : cases()) {
    for (const char* dev : {"CPU", "VK"}) {
      SCOPED_TRACE(dev);
      const std::vector<float> got =
          c.f(Tensor(xs, {int64_t(xs.size())}, dev)).to_vector<float>();
      EXPECT_TRUE(within_ulps(c, xs, got));
    }
  }
}

TEST(Transcendental, Float64OnTheCpuIsAccurateToDoublePrecision) {
  std::vector<double> xs;
  for (float f : sweep()) xs.push_back(double(f) * (1 + 1e-12));  // bits a float cannot hold
  for (const Case& c : cases()) {
    const std::vector<double> got =
        c.f(Tensor(xs, {int64_t(xs.size())}, "CPU")).to_vector<double>();
    for (size_t i = 0; i < xs.size(); ++i) {
      const double want = c.reference(xs[i]);
      if (std::isnan(want) || std::isinf(want)) {
        EXPECT_TRUE(std::isnan(want) ? std::isnan(got[i]) : got[i] == want)
            << c.name << "(" << xs[i] << ") = " << got[i];
        continue;
      }
      const double tolerance = (allowed(c, xs[i]) + 4) * std::abs(want) *
                                   std::numeric_limits<double>::epsilon() +
                               std::numeric_limits<double>::denorm_min();
      EXPECT_NEAR(got[i], want, tolerance) << c.name << "(" << xs[i] << ")";
      if (want == 0) {
        EXPECT_EQ(std::signbit(got[i]), std::signbit(want)) << c.name << "(" << xs[i] << ")";
      }
    }
  }
}

TEST(Transcendental, SmallArgumentsKeepTheirPrecisionAndTheSignOfZero) {
  // The textbook forms lose these entirely: log(1 + 1e-8) = 0, exp(1e-8) - 1 = 0,
  // 2 sigmoid(2e-8) - 1 = 0.
  for (const char* dev : {"CPU", "VK"}) {
    SCOPED_TRACE(dev);
    const Tensor x(std::vector<float>{1e-8f, -0.0f}, {2}, dev);
    for (auto f : {&Tensor::log1p, &Tensor::expm1, &Tensor::tanh, &Tensor::sinh, &Tensor::asinh,
                   &Tensor::atanh, &Tensor::atan, &Tensor::asin}) {
      const std::vector<float> r = (x.*f)().to_vector<float>();
      EXPECT_NEAR(r[0], 1e-8f, 1e-15f);
      EXPECT_EQ(r[1], 0.0f);
      EXPECT_TRUE(std::signbit(r[1]));
    }
  }
}

TEST(Transcendental, Atan2FollowsCOnEveryQuadrantZeroAndInfinity) {
  const float pi = std::numbers::pi_v<float>;
  const std::vector<float> special = {0.0f, -0.0f, 1.0f, -1.0f, 2.5f, -0.3f, kInf, -kInf, kNan};
  std::vector<float> ys, xs;
  for (float y : special)
    for (float x : special) ys.push_back(y), xs.push_back(x);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-100, 100);
  for (int i = 0; i < 500; ++i) ys.push_back(u(rng)), xs.push_back(u(rng) * (i % 3 ? 1.0f : 1e-4f));
  const int64_t n = int64_t(xs.size());
  for (const char* dev : {"CPU", "VK"}) {
    SCOPED_TRACE(dev);
    const std::vector<float> got =
        Tensor(ys, {n}, dev).atan2(Tensor(xs, {n}, dev)).to_vector<float>();
    for (size_t i = 0; i < size_t(n); ++i) {
      const float want = float(std::atan2(double(ys[i]), double(xs[i])));
      EXPECT_LE(float_ulps(want, got[i]), 3u) << "atan2(" << ys[i] << ", " << xs[i] << ") = "
                                              << got[i] << ", want " << want;
    }
  }
  // A few by hand: the quadrants of the signed zeros and of the infinities.
  const std::vector<float> y = {0.0f, -0.0f, 0.0f, -0.0f, kInf, -kInf, kInf, 1.0f};
  const std::vector<float> x = {-0.0f, -0.0f, 0.0f, 0.0f, kInf, -kInf, 0.0f, -kInf};
  const std::vector<float> got = Tensor(y, {8}, "VK").atan2(Tensor(x, {8}, "VK")).to_vector<float>();
  EXPECT_EQ(got, (std::vector<float>{pi, -pi, 0.0f, -0.0f, pi / 4, -3 * pi / 4, pi / 2, pi}));
  EXPECT_TRUE(std::signbit(got[3]));
}

TEST(Transcendental, ActivationsMatchTheirClosedForms) {
  const std::vector<float> xs = {-100.0f, -6.0f, -3.0f, -2.0f, -1e-8f, -0.0f, 0.0f, 1e-8f,
                                 0.5f,    3.0f,  6.0f,  7.0f,  100.0f, kInf,  -kInf, kNan};
  const double alpha = 1.6732632423543772848170429916717, scale = 1.0507009873554804934193349852946;
  struct Act {
    const char* name;
    std::function<Tensor(const Tensor&)> f;
    std::function<double(double)> reference;
  };
  const std::vector<Act> acts = {
      {"relu6", [](const Tensor& x) { return x.relu6(); },
       [](double x) { return std::isnan(x) ? x : std::min(std::max(x, 0.0), 6.0); }},
      {"hardtanh", [](const Tensor& x) { return x.hardtanh(-2, 3); },
       [](double x) { return std::isnan(x) ? x : std::min(std::max(x, -2.0), 3.0); }},
      {"hardsigmoid", [](const Tensor& x) { return x.hardsigmoid(); },
       [](double x) { return x <= -3 ? 0 : x >= 3 ? 1 : x / 6 + 0.5; }},
      {"logsigmoid", [](const Tensor& x) { return x.logsigmoid(); },
       [](double x) { return std::min(x, 0.0) - std::log1p(std::exp(-std::abs(x))); }},
      // torch's formulas, so inf / inf: softsign(+-inf) and mish(-inf) are nan there too.
      {"softsign", [](const Tensor& x) { return x.softsign(); },
       [](double x) { return x / (1 + std::abs(x)); }},
      {"mish", [](const Tensor& x) { return x.mish(); },
       [](double x) { return x * std::tanh(x > 30 ? x : std::log1p(std::exp(x))); }},
      {"selu", [](const Tensor& x) { return x.selu(); },
       [&](double x) { return scale * (x > 0 ? x : alpha * std::expm1(x)); }},
      {"celu", [](const Tensor& x) { return x.celu(0.5); },
       [](double x) { return x > 0 ? x : 0.5 * std::expm1(x / 0.5); }},
      {"elu", [](const Tensor& x) { return x.elu(); },
       [](double x) { return x > 0 ? x : std::expm1(x); }},
  };
  for (const Act& a : acts) {
    SCOPED_TRACE(a.name);
    for (const char* dev : {"CPU", "VK"}) {
      SCOPED_TRACE(dev);
      const std::vector<float> got =
          a.f(Tensor(xs, {int64_t(xs.size())}, dev)).to_vector<float>();
      for (size_t i = 0; i < xs.size(); ++i) {
        const float want = float(a.reference(double(xs[i])));
        // A subnormal result keeps few bits: mish(-100) = -100 tanh(softplus(-100)) goes
        // through 3.7e-44, as in torch's float32.
        if (std::fpclassify(want) == FP_SUBNORMAL && std::abs(got[i] - want) < 1e-43f) continue;
        EXPECT_LE(float_ulps(want, got[i]), 6u)
            << a.name << "(" << xs[i] << ") = " << got[i] << ", want " << want;
      }
    }
  }
}

TEST(Transcendental, BinaryFunctionsFollowTorch) {
  for (const char* dev : {"CPU", "VK"}) {
    SCOPED_TRACE(dev);
    const auto t = [&](std::vector<float> v) { return Tensor(v, {int64_t(v.size())}, dev); };
    // signbit: the bit itself, so -0 and a negative nan have it.
    EXPECT_EQ(t({-0.0f, 0, -1, 1, -kInf, kNan, -kNan}).signbit().to_vector<bool>(),
              (std::vector<bool>{true, false, true, false, true, false, true}));
    EXPECT_EQ(Tensor(std::vector<double>{-0.0, 2}, {2}, dev).signbit().to_vector<bool>(),
              (std::vector<bool>{true, false}));
    // copysign: the magnitude of a, the sign bit of b (-0 counts), integers promote.
    const std::vector<float> cs = t({1, -2, 3, kInf, 0}).copysign(t({-0.0f, 5, -kInf, -1, -1})).to_vector<float>();
    EXPECT_EQ(cs, (std::vector<float>{-1, 2, -3, -kInf, -0.0f}));
    EXPECT_TRUE(std::signbit(cs[4]));
    EXPECT_EQ(Tensor(std::vector<int>{3, -4}, {2}, dev).copysign(t({-1, 1})).dtype(), dtypes::float32);
    // lerp: exact at both ends, both of torch's forms, broadcast weights.
    const std::vector<float> l = t({1, 1, 1, 1e8f}).lerp(t({3, 3, 3, 1}), t({0, 0.25f, 1, 1})).to_vector<float>();
    EXPECT_EQ(l, (std::vector<float>{1, 1.5f, 3, 1}));
    EXPECT_EQ(t({0, 10}).lerp(t({10, 20}), 0.75).to_vector<float>(), (std::vector<float>{7.5f, 17.5f}));
    // logaddexp: no overflow, and the same infinity stays.
    const std::vector<float> la =
        t({1000, -1000, kInf, -kInf, -kInf, 0}).logaddexp(t({1000, -1000, kInf, -kInf, 2, 0})).to_vector<float>();
    EXPECT_FLOAT_EQ(la[0], 1000 + std::numbers::ln2_v<float>);
    EXPECT_FLOAT_EQ(la[1], -1000 + std::numbers::ln2_v<float>);
    EXPECT_EQ(la[2], kInf);
    EXPECT_EQ(la[3], -kInf);
    EXPECT_EQ(la[4], 2.0f);
    EXPECT_FLOAT_EQ(la[5], std::numbers::ln2_v<float>);
    // isclose: relative to b, infinities only match themselves, nan only with equal_nan.
    const Tensor a = t({1, 1, 100, kInf, kInf, kNan, 1}), b = t({1.000001f, 1.1f, 100.0009f, kInf, -kInf, kNan, kInf});
    EXPECT_EQ(a.isclose(b).to_vector<bool>(), (std::vector<bool>{true, false, true, true, false, false, false}));
    EXPECT_EQ(a.isclose(b, 1e-5, 1e-8, true).to_vector<bool>()[5], true);
    EXPECT_FALSE(a.allclose(b));
    EXPECT_TRUE(t({1, 2}).allclose(t({1, 2.00001f})));
  }
}

TEST(Transcendental, MisuseNamesTheOp) {
  const Tensor a = Tensor::ones({2, 3}), b = Tensor::ones({4});
  for (auto f : {&Tensor::atan2, &Tensor::copysign, &Tensor::logaddexp}) {
    try {
      (a.*f)(b);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("(2, 3)"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(a.isclose(a, -1), Error);
  EXPECT_THROW(a.celu(0), Error);
}
