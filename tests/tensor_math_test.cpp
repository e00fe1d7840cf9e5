// Elementwise math composed from ALU ops (core/tensor_math.cpp): closed forms with inf and nan on
// both devices, the Vulkan results equal to the CPU interpreter's on sampled data of every dtype an
// op takes, integer semantics (floordiv rounds down, pow by squaring wraps, shifts), and misuse
// errors naming the op, the shapes and the dtypes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>

#include "support/device_compare.hpp"
#include "support/error_of.hpp"

using namespace vkg;
using namespace vkg::test;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNan = std::numeric_limits<double>::quiet_NaN();

const std::vector<std::string> kDevices = {"CPU", "VK"};

// Specials and the rounding cases: ties on both sides of 0, -0.4 (rounds to -0), a value past 2^23
// where x + 0.5 would round, large values that overflow exp.
const std::vector<float> kInputs = {
    -float(kInf), -100.0f, -3.5f, -2.5f, -1.5f,      -0.5f,  -0.4f,       0.0f,       0.3f,
    0.5f,         1.5f,    2.5f,  2.7f,  8388609.0f, 100.0f, float(kInf), float(kNan)};

Tensor inputs(const std::string& dev) { return Tensor(kInputs, {int64_t(kInputs.size())}, dev); }

// Closed forms in double; a float result within rel (or abs near 0); nan where nan is expected.
void expect_close(const std::vector<double>& got, const std::function<double(double)>& want,
                  double tol, const std::string& what) {
  ASSERT_EQ(got.size(), kInputs.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const double x = double(kInputs[i]), w = want(x);
    if (std::isnan(w)) {
      EXPECT_TRUE(std::isnan(got[i])) << what << "(" << x << ") = " << got[i] << ", want nan";
    } else if (std::isinf(w) || tol == 0) {
      EXPECT_EQ(got[i], w) << what << "(" << x << ")";
    } else {
      EXPECT_NEAR(got[i], w, tol * std::max(1.0, std::abs(w))) << what << "(" << x << ")";
    }
  }
}

double round_half_even(double x) { return std::nearbyint(x); }  // the default mode: to nearest even
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double softplus(double x) { return x > 30 ? x : std::log1p(std::exp(x)); }

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> want;
  double tol;  // relative; 0 for exact
};

const std::vector<UnaryCase>& unary_cases() {
  static const std::vector<UnaryCase> cases = {
      {"trunc", [](const Tensor& x) { return x.trunc(); }, [](double x) { return std::trunc(x); },
       0},
      {"floor", [](const Tensor& x) { return x.floor(); }, [](double x) { return std::floor(x); },
       0},
      {"ceil", [](const Tensor& x) { return x.ceil(); }, [](double x) { return std::ceil(x); }, 0},
      {"round", [](const Tensor& x) { return x.round(); }, round_half_even, 0},
      {"sign", [](const Tensor& x) { return x.sign(); },
       [](double x) { return std::isnan(x) ? x : double((x > 0) - (x < 0)); }, 0},
      {"square", [](const Tensor& x) { return x.square(); },
       [](double x) { return double(float(x) * float(x)); }, 0},
      {"sigmoid", [](const Tensor& x) { return x.sigmoid(); }, sigmoid, 2e-6},
      {"tanh", [](const Tensor& x) { return x.tanh(); }, [](double x) { return std::tanh(x); },
       2e-6},
      {"silu", [](const Tensor& x) { return x.silu(); },
       [](double x) { return std::isinf(x) && x < 0 ? kNan : x * sigmoid(x); }, 2e-6},
      {"softplus", [](const Tensor& x) { return x.softplus(); }, softplus, 2e-6},
      {"elu", [](const Tensor& x) { return x.elu(); },
       [](double x) { return x > 0 ? x : std::expm1(x); }, 2e-6},
      {"leaky_relu", [](const Tensor& x) { return x.leaky_relu(0.1); },
       [](double x) { return x < 0 ? x * 0.1 : x; }, 1e-7},
      {"gelu", [](const Tensor& x) { return x.gelu(); },
       [](double x) {
         if (std::isinf(x)) return x > 0 ? x : kNan;  // -inf * 0: the tanh form's own nan
         return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
       },
       2e-6},
      {"hardswish", [](const Tensor& x) { return x.hardswish(); },
       [](double x) { return std::isinf(x) && x < 0 ? kNan : x * std::clamp(x + 3, 0.0, 6.0) / 6; },
       2e-7},
      {"clip", [](const Tensor& x) { return x.clip(-1.5, 2); },
       [](double x) { return std::isnan(x) ? x : std::clamp(x, -1.5, 2.0); }, 0},
      {"rsqrt", [](const Tensor& x) { return x.abs().rsqrt(); },
       [](double x) { return 1 / std::sqrt(std::abs(x)); }, 2e-7},
      {"cos", [](const Tensor& x) { return x.clip(-4, 4).cos(); },
       [](double x) { return std::cos(std::clamp(x, -4.0, 4.0)); }, 1e-6},
      {"tan", [](const Tensor& x) { return x.clip(-1.2, 1.2).tan(); },
       [](double x) { return std::tan(std::clamp(x, -1.2, 1.2)); }, 2e-6},
      {"isnan", [](const Tensor& x) { return x.isnan().cast(dtypes::float32); },
       [](double x) { return double(std::isnan(x)); }, 0},
      {"isinf", [](const Tensor& x) { return x.isinf().cast(dtypes::float32); },
       [](double x) { return double(std::isinf(x)); }, 0},
      {"isfinite", [](const Tensor& x) { return x.isfinite().cast(dtypes::float32); },
       [](double x) { return double(std::isfinite(x)); }, 0},
      {"pow2", [](const Tensor& x) { return x.pow(2); },
       [](double x) { return double(float(x) * float(x)); }, 0},
      {"pow-3", [](const Tensor& x) { return x.pow(-3); },
       [](double x) { return 1.0 / (x * x * x); }, 2e-7},
      {"pow0", [](const Tensor& x) { return x.pow(0); }, [](double) { return 1.0; }, 0},
      {"pow0.5", [](const Tensor& x) { return x.abs().pow(0.5); },
       [](double x) { return std::pow(std::abs(x), 0.5); }, 2e-6},
      {"pow1.5", [](const Tensor& x) { return x.clip(-4, 4).pow(1.5); },
       [](double x) { return std::pow(std::clamp(x, -4.0, 4.0), 1.5); }, 2e-6},
  };
  return cases;
}

}  // namespace

// sigmoid(-inf) = 0, tanh(+-inf) = +-1, softplus(100) = 100 (no overflow), round(2.5) = 2,
// round(8388609) = 8388609, isnan(nan): every op's closed form on both devices.
TEST(TensorMath, UnaryClosedFormsWithInfAndNan) {
  for (const std::string& dev : kDevices)
    for (const UnaryCase& c : unary_cases()) {
      const Tensor out = c.op(inputs(dev));
      EXPECT_EQ(out.dtype(), dtypes::float32) << c.name;
      expect_close(values(out), c.want, c.tol, std::string(c.name) + " on " + dev);
    }
}

// cos is its own op with sin's exact reduction: as sin(pi/2 - x) it was 0.3% off at 1e6 and gave
// -sin(x) past 2^25, where pi/2 - x rounds to -x. The gradients swap the two: d sin = cos, d cos =
// -sin, at large x too, and at inf they are nan, as torch.
TEST(TensorMath, SinAndCosOfLargeArgumentsAndTheirGradientsMatchLibm) {
  const std::vector<float> xs{1e6f,   123456.7f, 1e10f, 1.00151e38f,
                              -1e30f, 0.75f,     -0.0f, std::numeric_limits<float>::infinity()};
  for (const std::string& dev : kDevices) {
    Tensor x = Tensor(xs, {int64_t(xs.size())}, dev).requires_grad_();
    const Tensor s = x.sin(), c = x.cos();
    (s + c * 2).sum().backward();
    const std::vector<double> sv = values(s), cv = values(c), g = values(*x.grad());
    for (size_t i = 0; i < xs.size(); ++i) {
      const double x64 = xs[i], want_s = std::sin(x64), want_c = std::cos(x64);
      if (std::isinf(x64)) {
        EXPECT_TRUE(std::isnan(sv[i]) && std::isnan(cv[i]) && std::isnan(g[i])) << dev;
        continue;
      }
      EXPECT_NEAR(sv[i], want_s, 2e-7) << "sin(" << xs[i] << ") on " << dev;
      EXPECT_NEAR(cv[i], want_c, 2e-7) << "cos(" << xs[i] << ") on " << dev;
      EXPECT_NEAR(g[i], want_c - 2 * want_s, 6e-7) << "grad at " << xs[i] << " on " << dev;
    }
  }
}

// erf against closed forms (torch.erf) on both devices: the specials, both branches of the GLSL
// helper, values that round to +-1, -0 kept; an int tensor becomes float32; the gradient is
// 2/sqrt(pi) exp(-x^2) (0 at +-inf).
TEST(TensorMath, ErfClosedFormsSpecialValuesAndGradient) {
  const std::vector<float> x = {0.0f, -0.0f, 1e-3f,  -0.25f,      0.5f,         1.0f,       -2.0f,
                                3.0f, 10.0f, -1e30f, float(kInf), -float(kInf), float(kNan)};
  const std::vector<double> want = {0.0,
                                    -0.0,
                                    0.0011283787909692363,
                                    -0.2763263901682369,
                                    0.5204998778130465,
                                    0.8427007929497149,
                                    -0.9953222650189527,
                                    0.9999779095030014,
                                    1.0,
                                    -1.0,
                                    1.0,
                                    -1.0,
                                    kNan};
  for (const std::string& dev : kDevices) {
    SCOPED_TRACE(dev);
    const std::vector<double> got = values(Tensor(x, {int64_t(x.size())}, dev).erf());
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(want[i])) {
        EXPECT_TRUE(std::isnan(got[i])) << x[i];
      } else {
        EXPECT_NEAR(got[i], want[i], 2e-7 * std::abs(want[i])) << "erf(" << x[i] << ")";
        EXPECT_EQ(std::signbit(got[i]), std::signbit(want[i])) << "erf(" << x[i] << ")";
      }
    }
    const Tensor i = Tensor(std::vector<int32_t>{-1, 0, 2}, {3}, dev).erf();
    EXPECT_EQ(i.dtype(), dtypes::float32);
    EXPECT_NEAR(values(i)[2], 0.9953222650189527, 1e-7);

    const std::vector<float> gx = {-1.5f, 0.0f, 0.5f, 2.0f, float(kInf)};
    Tensor t = Tensor(gx, {int64_t(gx.size())}, dev).requires_grad_();
    t.erf().sum().backward();
    ASSERT_TRUE(t.grad().has_value());
    const std::vector<double> g = values(*t.grad());
    for (size_t k = 0; k < gx.size(); ++k) {
      const double d = 2 / std::sqrt(std::numbers::pi) * std::exp(-double(gx[k]) * gx[k]);
      EXPECT_NEAR(g[k], d, 1e-6) << "erf'(" << gx[k] << ")";
    }
  }
}

// Both devices within rel (relative, or absolute below 1): fused multiply-adds that the shader
// compiler may form move results near 0 by many ulps and by nothing that matters.
testing::AssertionResult close_on_both(const std::function<Tensor(const std::string&)>& make,
                                       double rel) {
  const std::vector<double> cpu = values(make("CPU")), vk = values(make("VK"));
  if (cpu.size() != vk.size()) return testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < cpu.size(); ++i) {
    const bool same = (std::isnan(cpu[i]) && std::isnan(vk[i])) || cpu[i] == vk[i] ||
                      std::abs(cpu[i] - vk[i]) <= rel * std::max(1.0, std::abs(cpu[i]));
    if (!same) return testing::AssertionFailure() << "[" << i << "] " << cpu[i] << " vs " << vk[i];
  }
  return testing::AssertionSuccess();
}

// The derived ops on sampled data of float and integer dtypes: VK equals CPU (exactly for the
// rounding ops and predicates).
TEST(TensorMath, VulkanMatchesCpuOnSampledData) {
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&)> op;
    double rel;
    bool on_int;
  };
  const std::vector<Case> cases = {
      {"floor", [](const Tensor& x) { return x.floor(); }, 0, true},
      {"round", [](const Tensor& x) { return x.round(); }, 0, true},
      {"sign", [](const Tensor& x) { return x.sign(); }, 0, true},
      {"isfinite", [](const Tensor& x) { return x.isfinite(); }, 0, true},
      {"clip", [](const Tensor& x) { return x.clip(-3, 5); }, 0, true},
      {"sigmoid", [](const Tensor& x) { return x.sigmoid(); }, 1e-6, false},
      {"softplus", [](const Tensor& x) { return x.softplus(); }, 1e-6, false},
      {"gelu", [](const Tensor& x) { return x.gelu(); }, 1e-6, false},
  };
  for (DType d : {dtypes::float32, dtypes::float16, dtypes::float64, dtypes::int8, dtypes::uint16,
                  dtypes::int64})
    for (const Case& c : cases) {
      if (d == dtypes::float64 && c.rel != 0)
        continue;  // GLSL has no float64 exp2 (tensor_dtypes_test)
      if (!d.is_float() && !c.on_int) continue;
      const double rel = d == dtypes::float16 ? c.rel * 2000 : c.rel;
      EXPECT_TRUE(close_on_both(
          [&](const std::string& dev) {
            return c.op(random_tensor(d, {7, 3}, dev, 11));
          },
          rel))
          << c.name << " " << d.name();
    }
}

// Every integer dtype and bool: the integer ops folded into one value per element by xor (one
// kernel per dtype and device, and any difference shows), VK equal to CPU.
TEST(TensorMath, IntegerOpsOnEveryIntegerDtype) {
  for (DType d : vk_dtypes()) {
    if (d.is_float()) continue;
    EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) {
      const Tensor a = random_tensor(d, {5, 7}, dev, 31), b = random_tensor(d, {7}, dev, 32);
      Tensor r =
          (a & b) ^ (a | b) ^ (~a) ^ a.logical_xor(b).cast(d) ^ (a >= b).cast(d) ^ a.eq(1).cast(d);
      if (d.is_bool()) return r;
      const Tensor positive = (b & Tensor::full({}, 7, d, dev)) | Tensor::full({}, 1, d, dev);
      return r ^ a.lshift(3) ^ a.rshift(1) ^ a.floordiv(positive) ^ a.pow(3) ^ a.sign() ^
             a.maximum(b) ^ a.minimum(b) ^ (a > b).where(a, 7) ^ a.clip(2, 9);
    })) << d.name();
  }
}

TEST(TensorMath, RoundingOpsKeepIntegersAndBroadcastShapes) {
  const Tensor i(std::vector<int8_t>{-128, -3, 0, 7, 127}, {5});
  EXPECT_EQ(i.floor().to_vector<int8_t>(), (std::vector<int8_t>{-128, -3, 0, 7, 127}));
  EXPECT_EQ(i.round().dtype(), dtypes::int8);
  EXPECT_EQ(i.sign().to_vector<int8_t>(), (std::vector<int8_t>{-1, -1, 0, 1, 1}));
  // 0-d and 0-size shapes go through unchanged.
  EXPECT_EQ(Tensor(2.5f).round().item<float>(), 2.0f);
  EXPECT_EQ(Tensor::zeros({0, 3}).sigmoid().shape(), (Shape{0, 3}));
  EXPECT_EQ(Tensor::zeros({0, 3}).sigmoid().numel(), 0);
  // float16: round half to even and the bits come back as float16.
  const Tensor h(std::vector<float16_t>{float16_t(0.5f), float16_t(1.5f), float16_t(-2.5f)}, {3});
  const std::vector<float16_t> r = h.round().to_vector<float16_t>();
  EXPECT_EQ(float(r[0]), 0.0f);
  EXPECT_EQ(float(r[1]), 2.0f);
  EXPECT_EQ(float(r[2]), -2.0f);
}

// Python semantics: -7 // 2 = -4, 7 // -2 = -4, -7.0 // 2.0 = -4.0; unsigned divides plainly.
TEST(TensorMath, FloordivRoundsDown) {
  for (const std::string& dev : kDevices) {
    const Tensor a(std::vector<int32_t>{7, -7, 7, -7, 6, -6, 0}, {7}, dev);
    const Tensor b(std::vector<int32_t>{2, 2, -2, -2, 3, 3, -5}, {7}, dev);
    EXPECT_EQ(a.floordiv(b).to_vector<int32_t>(), (std::vector<int32_t>{3, -4, -4, 3, 2, -2, 0}))
        << dev;
    EXPECT_EQ(a.cast(dtypes::float32).floordiv(b.cast(dtypes::float32)).to_vector<float>(),
              (std::vector<float>{3, -4, -4, 3, 2, -2, -0.0f}))
        << dev;
    const Tensor u(std::vector<uint8_t>{250, 7}, {2}, dev);
    EXPECT_EQ(u.floordiv(Tensor(std::vector<uint8_t>{7, 2}, {2}, dev)).to_vector<uint8_t>(),
              (std::vector<uint8_t>{35, 3}));
    // int8 with a broadcast (3, 1) x (1, 2) divisor.
    const Tensor c(std::vector<int8_t>{-128, 5, -1}, {3, 1}, dev),
        e(std::vector<int8_t>{3, -4}, {1, 2}, dev);
    EXPECT_EQ(c.floordiv(e).to_vector<int8_t>(), (std::vector<int8_t>{-43, 32, 1, -2, -1, 0}))
        << dev;
  }
}

// pow: x^2 = x*x for negative x, 0^0 = 1, (-8)^(1/3) is nan, (-2)^3 = -8, int powers exact and
// wrapping, integer ** negative integer truncates (1, +-1 or 0).
TEST(TensorMath, PowSignsZerosAndIntegers) {
  for (const std::string& dev : kDevices) {
    const Tensor b(std::vector<float>{-2, -2, -8, 0, 0, 0, 2, float(kNan), 1, 1}, {10}, dev);
    const Tensor e(std::vector<float>{3, 2, 1.0f / 3, 0, 2, -1, 0.5f, 0, 7, float(kNan)}, {10},
                   dev);
    const std::vector<double> got = values(b.pow(e));
    const std::vector<double> want = {-8, 4, kNan, 1, 0, kInf, std::sqrt(2.0), 1, 1, 1};
    for (size_t i = 0; i < want.size(); ++i) {
      if (std::isnan(want[i]))
        EXPECT_TRUE(std::isnan(got[i])) << i;
      else if (std::isinf(want[i]))
        EXPECT_EQ(got[i], want[i]) << dev << " " << i;
      else
        EXPECT_NEAR(got[i], want[i], 1e-6 * std::max(1.0, std::abs(want[i]))) << dev << " " << i;
    }
    const Tensor ib(std::vector<int32_t>{-3, 2, 7, 1, -1, -1, 5, 0}, {8}, dev);
    const Tensor ie(std::vector<int32_t>{3, 31, 0, -4, -3, -2, -1, 0}, {8}, dev);
    EXPECT_EQ(ib.pow(ie).to_vector<int32_t>(),
              (std::vector<int32_t>{-27, int32_t(0x80000000u), 1, 1, -1, 1, 0, 1}))
        << dev;
    // int64 wraps as C does: 3^41 mod 2^64.
    uint64_t p = 1;
    for (int k = 0; k < 41; ++k) p *= 3;
    EXPECT_EQ(Tensor(std::vector<int64_t>{3}, {1}, dev)
                  .pow(Tensor(std::vector<int64_t>{41}, {1}, dev))
                  .to_vector<int64_t>()[0],
              int64_t(p));
    // Scalar exponents: ints stay ints, a float exponent makes floats.
    EXPECT_EQ(ib.pow(3).to_vector<int32_t>(),
              (std::vector<int32_t>{-27, 8, 343, 1, -1, -1, 125, 0}));
    EXPECT_EQ(ib.pow(2.0).dtype(), dtypes::float32);
    EXPECT_EQ(Tensor(std::vector<float>{-3}, {1}, dev).pow(2).to_vector<float>()[0], 9.0f);
  }
  EXPECT_TRUE(cpu_vk_agree(
      [](const std::string& dev) {
        // Finite bases: exp2(e log2|b|) magnifies a 1-ulp log2 difference by e log2|b|.
        return random_tensor(dtypes::float32, {5, 3}, dev, 3, true)
            .pow(random_tensor(dtypes::float32, {3}, dev, 4, true));
      },
      64));
}

// pow at every pair of special bases and exponents is C's pow (C11 F.10.4.4, which torch
// follows): an infinite exponent is even ((-2)^inf = inf, not -inf), (-1)^+-inf = 1, -0 and -inf
// are negative bases ((-0)^-3 = -inf, (-inf)^0.5 = inf). The devices gave nan for (-1)^inf and
// -inf for (-2)^inf (and Lavapipe -1, see SpecialValues.AConstantExpressionThatIsZero...).
TEST(TensorMath, PowOfSpecialBasesAndExponentsIsCs) {
  const std::vector<float> specials = {-float(kInf), -3, -2, -1, -0.5f,       -0.0f,      0.0f,
                                       0.5f,         1,  2,  3,  float(kInf), float(kNan)};
  const int64_t n = int64_t(specials.size());
  std::vector<float> bases, exps;
  for (float b : specials)
    for (float e : specials) bases.push_back(b), exps.push_back(e);
  for (const std::string& dev : kDevices) {
    const Tensor b(bases, {n * n}, dev), e(exps, {n * n}, dev);
    const std::vector<double> got = values(b.pow(e));
    for (size_t i = 0; i < bases.size(); ++i) {
      const double want = double(std::pow(bases[i], exps[i]));
      SCOPED_TRACE(dev + " pow(" + std::to_string(bases[i]) + ", " + std::to_string(exps[i]) + ")");
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got[i])) << got[i];
      } else {
        if (std::isinf(want))
          EXPECT_EQ(got[i], want);
        else
          EXPECT_NEAR(got[i], want, 1e-6 * std::abs(want)) << got[i];
        EXPECT_EQ(std::signbit(got[i]), std::signbit(want)) << got[i];
      }
    }
    // A constant base (full_like), as the fuzzer wrote it: (-1)^inf was -1 on Lavapipe.
    const Tensor inf = Tensor(std::vector<float>{float(kInf), -float(kInf)}, {2}, dev);
    EXPECT_EQ(values(Tensor::full_like(inf, -1.0).pow(inf)), (std::vector<double>{1, 1})) << dev;
  }
}

TEST(TensorMath, MaximumMinimumWithScalarsPropagateNan) {
  for (const std::string& dev : kDevices) {
    const Tensor x(std::vector<float>{-1, 2, float(kNan)}, {3}, dev);
    const std::vector<float> mx = x.maximum(0).to_vector<float>(),
                             mn = x.minimum(0).to_vector<float>();
    EXPECT_EQ(mx[0], 0.0f);
    EXPECT_EQ(mx[1], 2.0f);
    EXPECT_TRUE(std::isnan(mx[2]));
    EXPECT_EQ(mn[0], -1.0f);
    EXPECT_EQ(mn[1], 0.0f);
    EXPECT_TRUE(std::isnan(mn[2]));
    // int8 and uint32 extremes: minimum goes through bitwise not, no overflow.
    const Tensor i(std::vector<int8_t>{-128, 127, 5}, {3}, dev);
    EXPECT_EQ(i.minimum(Tensor(std::vector<int8_t>{127, -128, 5}, {3}, dev)).to_vector<int8_t>(),
              (std::vector<int8_t>{-128, -128, 5}));
    const Tensor u(std::vector<uint32_t>{0, 0xFFFFFFFFu, 9}, {3}, dev);
    EXPECT_EQ(u.minimum(7).to_vector<uint32_t>(), (std::vector<uint32_t>{0, 7, 7}));
    EXPECT_EQ(u.maximum(7).to_vector<uint32_t>(), (std::vector<uint32_t>{7, 0xFFFFFFFFu, 9}));
    // A float scalar with an int tensor promotes to float.
    EXPECT_EQ(i.maximum(0.5).dtype(), dtypes::float32);
  }
}

// Bitwise ops on every integer width and bool, shifts, and the logical ops on any dtype.
TEST(TensorMath, BitwiseLogicalAndShifts) {
  for (const std::string& dev : kDevices) {
    const Tensor a(std::vector<uint8_t>{0xF0, 0x0F, 0xFF}, {3}, dev),
        b(std::vector<uint8_t>{0xCC, 0xCC, 0x01}, {3}, dev);
    EXPECT_EQ((a & b).to_vector<uint8_t>(), (std::vector<uint8_t>{0xC0, 0x0C, 0x01}));
    EXPECT_EQ((a | b).to_vector<uint8_t>(), (std::vector<uint8_t>{0xFC, 0xCF, 0xFF}));
    EXPECT_EQ((a ^ b).to_vector<uint8_t>(), (std::vector<uint8_t>{0x3C, 0xC3, 0xFE}));
    EXPECT_EQ((~a).to_vector<uint8_t>(), (std::vector<uint8_t>{0x0F, 0xF0, 0x00}));
    const Tensor s(std::vector<int16_t>{-8, 3, 0x4000}, {3}, dev);
    EXPECT_EQ((~s).to_vector<int16_t>(), (std::vector<int16_t>{7, -4, -0x4001}));
    EXPECT_EQ(s.lshift(1).to_vector<int16_t>(), (std::vector<int16_t>{-16, 6, int16_t(0x8000)}));
    EXPECT_EQ(s.rshift(2).to_vector<int16_t>(),
              (std::vector<int16_t>{-2, 0, 0x1000}));  // arithmetic
    const Tensor l(std::vector<int64_t>{1}, {1}, dev);
    EXPECT_EQ(l.lshift(62).to_vector<int64_t>()[0], int64_t(1) << 62);
    const Tensor pd = Tensor(std::vector<bool>{true, true, false, false}, {4}, dev);
    const Tensor qd = Tensor(std::vector<bool>{true, false, true, false}, {4}, dev);
    EXPECT_EQ((pd & qd).to_vector<bool>(), (std::vector<bool>{true, false, false, false}));
    EXPECT_EQ((pd | qd).to_vector<bool>(), (std::vector<bool>{true, true, true, false}));
    EXPECT_EQ((pd ^ qd).to_vector<bool>(), (std::vector<bool>{false, true, true, false}));
    EXPECT_EQ((~pd).to_vector<bool>(), (std::vector<bool>{false, false, true, true}));
    // Logical ops read any dtype as nonzero-is-true; a float nan is true.
    const Tensor f(std::vector<float>{0, 2, float(kNan), 0}, {4}, dev);
    EXPECT_EQ(f.logical_and(qd).to_vector<bool>(), (std::vector<bool>{false, false, true, false}));
    EXPECT_EQ(f.logical_or(Tensor(std::vector<int32_t>{0, 0, 0, 5}, {4}, dev)).to_vector<bool>(),
              (std::vector<bool>{false, true, true, true}));
    EXPECT_EQ(f.logical_xor(pd).to_vector<bool>(), (std::vector<bool>{true, false, true, false}));
  }
  EXPECT_TRUE(cpu_vk_agree([](const std::string& dev) {
    const Tensor x = random_tensor(dtypes::int32, {4, 5}, dev, 8),
                 y = random_tensor(dtypes::int32, {5}, dev, 9);
    return ((x & y) ^ (~x | y.lshift(3))).rshift(1);
  }));
}

TEST(TensorMath, ScalarComparisonsAndWhereWithScalars) {
  for (const std::string& dev : kDevices) {
    const Tensor x(std::vector<int32_t>{1, 2, 3}, {3}, dev);
    EXPECT_EQ((x < 2).to_vector<bool>(), (std::vector<bool>{true, false, false}));
    EXPECT_EQ((x > 2).to_vector<bool>(), (std::vector<bool>{false, false, true}));
    EXPECT_EQ((x <= 2).to_vector<bool>(), (std::vector<bool>{true, true, false}));
    EXPECT_EQ((x >= 2).to_vector<bool>(), (std::vector<bool>{false, true, true}));
    EXPECT_EQ(x.eq(2).to_vector<bool>(), (std::vector<bool>{false, true, false}));
    EXPECT_EQ(x.ne(2).to_vector<bool>(), (std::vector<bool>{true, false, true}));
    EXPECT_EQ(x.lt(2.5).to_vector<bool>(),
              (std::vector<bool>{true, true, false}));  // compared as floats
    const Tensor y(std::vector<float>{10, 20, 30}, {3}, dev);
    EXPECT_EQ((x < y).to_vector<bool>(), (std::vector<bool>{true, true, true}));
    const Tensor c = x > 1;
    EXPECT_EQ(c.where(y, -1).to_vector<float>(), (std::vector<float>{-1, 20, 30}));
    EXPECT_EQ(c.where(7, x).to_vector<int32_t>(), (std::vector<int32_t>{1, 7, 7}));
    const Tensor both = c.where(1.5, 0);
    EXPECT_EQ(both.dtype(), dtypes::float32);
    EXPECT_EQ(both.to_vector<float>(), (std::vector<float>{0, 1.5f, 1.5f}));
    EXPECT_EQ(c.where(2, 3).to_vector<int32_t>(), (std::vector<int32_t>{3, 2, 2}));
    // nan compares false except with ne.
    const Tensor n(std::vector<float>{float(kNan)}, {1}, dev);
    EXPECT_EQ((n < 1).to_vector<bool>()[0] || (n >= 1).to_vector<bool>()[0] ||
                  n.eq(n).to_vector<bool>()[0],
              false);
  }
}

TEST(TensorMath, MisuseNamesOpShapesAndDtypes) {
  const Tensor f = Tensor::zeros({2, 3}), i = Tensor::zeros({3}, dtypes::int32);
  std::string e = error_of([&] { (void)(f & i); });
  EXPECT_NE(e.find("bitwise_and"), std::string::npos) << e;
  EXPECT_NE(e.find("float32 (2, 3)"), std::string::npos) << e;
  EXPECT_NE(e.find("int32 (3,)"), std::string::npos) << e;
  e = error_of([&] { (void)(~f); });
  EXPECT_NE(e.find("bitwise_not"), std::string::npos) << e;
  e = error_of([&] { (void)f.lshift(1); });
  EXPECT_NE(e.find("lshift"), std::string::npos) << e;
  EXPECT_NE(e.find("float32"), std::string::npos) << e;
  e = error_of([&] { (void)i.rshift(32); });
  EXPECT_NE(e.find("rshift: shift by 32"), std::string::npos) << e;
  e = error_of([&] { (void)i.pow(-2); });
  EXPECT_NE(e.find("pow"), std::string::npos) << e;
  EXPECT_NE(e.find("negative"), std::string::npos) << e;
  e = error_of([&] { (void)Tensor({true}).floordiv(Tensor({false})); });
  EXPECT_NE(e.find("floordiv"), std::string::npos) << e;
  EXPECT_NE(e.find("bool"), std::string::npos) << e;
  e = error_of([&] { (void)f.pow(Tensor::zeros({2})); });
  EXPECT_NE(e.find("pow"), std::string::npos) << e;
  EXPECT_NE(e.find("(2, 3)"), std::string::npos) << e;
  // The library stays usable after each.
  EXPECT_EQ((i + 1).to_vector<int32_t>(), (std::vector<int32_t>{1, 1, 1}));
}
