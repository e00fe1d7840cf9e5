// Every elementwise op, reduction and movement op of Tensor on every dtype the Vulkan device
// computes in: the Vulkan results equal the CPU reference interpreter's (exact for integers and
// bools, within a few ulps for transcendental floats) and closed forms. Odd sizes, 0-size and 0-d
// tensors, broadcasting, padded and permuted inputs; NOOPT=1 against the default opts.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numeric>

#include "support/device_compare.hpp"
#include "support/error_bound.hpp"

using namespace vkg;
using namespace vkg::test;

namespace {

using Unary = std::function<Tensor(const Tensor&)>;
using Binary = std::function<Tensor(const Tensor&, const Tensor&)>;

struct UnaryOp {
  const char* name;
  Unary f;
  uint64_t ulps;           // allowed float difference (0: correctly rounded on both devices)
  bool on_bool = true;     // defined for bool tensors
  bool on_float64 = true;  // GLSL has no float64 exp2/log2/sin: see tensor_dtypes_test
};

const std::vector<UnaryOp>& unary_ops() {
  static const std::vector<UnaryOp> ops = {
      {"neg", [](const Tensor& x) { return -x; }, 0, false},
      {"exp2", [](const Tensor& x) { return x.exp2(); }, 2, true, false},
      {"log2", [](const Tensor& x) { return x.log2(); }, 2, true, false},
      {"sin", [](const Tensor& x) { return x.sin(); }, 2, true, false},
      {"sqrt", [](const Tensor& x) { return x.sqrt(); }, 0},
      {"reciprocal", [](const Tensor& x) { return x.reciprocal(); }, 0},
      {"exp", [](const Tensor& x) { return x.exp(); }, 2, true, false},
      {"log", [](const Tensor& x) { return x.log(); }, 2, true, false},
      {"relu", [](const Tensor& x) { return x.relu(); }, 0},
      {"abs", [](const Tensor& x) { return x.abs(); }, 0, false},
  };
  return ops;
}

struct BinaryOp {
  const char* name;
  Binary f;
  uint64_t ulps;
  bool on_bool = true;
  bool ints_only = false;  // idiv, mod: the divisor is drawn nonzero
};

const std::vector<BinaryOp>& binary_ops() {
  static const std::vector<BinaryOp> ops = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }, 0},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }, 0, false},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }, 0},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }, 0},
      {"idiv", [](const Tensor& a, const Tensor& b) { return a.idiv(b); }, 0, false, true},
      {"mod", [](const Tensor& a, const Tensor& b) { return a.mod(b); }, 0, false, true},
      {"maximum", [](const Tensor& a, const Tensor& b) { return a.maximum(b); }, 0},
      {"minimum", [](const Tensor& a, const Tensor& b) { return a.minimum(b); }, 0},
      {"lt", [](const Tensor& a, const Tensor& b) { return a.lt(b); }, 0},
      {"gt", [](const Tensor& a, const Tensor& b) { return a.gt(b); }, 0},
      {"le", [](const Tensor& a, const Tensor& b) { return a.le(b); }, 0},
      {"ge", [](const Tensor& a, const Tensor& b) { return a.ge(b); }, 0},
      {"eq", [](const Tensor& a, const Tensor& b) { return a.eq(b); }, 0},
      {"ne", [](const Tensor& a, const Tensor& b) { return a.ne(b); }, 0},
  };
  return ops;
}

// Divisors for idiv and mod: nonzero, and never -1 (INT_MIN / -1 overflows, undefined on GPUs).
std::vector<std::byte> divisor_bytes(DType d, size_t n, uint32_t seed) {
  std::vector<std::byte> raw = sample_bytes(d, n, seed, true);
  const size_t size = size_t(d.scalar_size());
  for (size_t i = 0; i < n; ++i) {
    std::byte* at = raw.data() + i * size;
    const double v = element(d, at);
    if (v == 0 || v == -1) {
      const int64_t repl = d.is_unsigned() ? 3 : (i % 2 ? -3 : 7);
      std::memcpy(at, &repl, size);  // little-endian: the low bytes hold the small value
    }
  }
  return raw;
}

// The shape every dtype x op case runs on: 3 x 7 (odd, so vector paths see a ragged tail).
const Shape kShape{3, 7};

// Runs `body(dtype)` for every dtype, labelling failures with the dtype.
template <class F>
void for_each_dtype(F&& body) {
  for (DType d : vk_dtypes()) {
    SCOPED_TRACE(d.name());
    body(d);
  }
}

}  // namespace

TEST(Numerics, UnaryOpsAgreeWithTheCpuOnEveryDtype) {
  for_each_dtype([](DType d) {
    for (const UnaryOp& op : unary_ops()) {
      if ((d.is_bool() && !op.on_bool) || (d == dtypes::float64 && !op.on_float64)) continue;
      SCOPED_TRACE(op.name);
      EXPECT_TRUE(cpu_vk_agree(
          [&](const std::string& dev) { return op.f(random_tensor(d, kShape, dev, 1)); }, op.ulps));
    }
  });
}

TEST(Numerics, BinaryOpsAgreeWithTheCpuOnEveryDtypeWithBroadcasting) {
  for_each_dtype([](DType d) {
    for (const BinaryOp& op : binary_ops()) {
      if ((d.is_bool() && !op.on_bool) || (op.ints_only && !d.is_int())) continue;
      SCOPED_TRACE(op.name);
      // b is one row, broadcast over a's rows.
      auto b_of = [&](const std::string& dev) {
        if (!op.ints_only) return random_tensor(d, {kShape[1]}, dev, 2);
        return Tensor(divisor_bytes(d, size_t(kShape[1]), 2), size_t(kShape[1]), d, {kShape[1]},
                      dev);
      };
      EXPECT_TRUE(cpu_vk_agree(
          [&](const std::string& dev) { return op.f(random_tensor(d, kShape, dev, 1), b_of(dev)); },
          op.ulps));
    }
  });
}

TEST(Numerics, WhereCastAndBitcastAgreeWithTheCpuOnEveryDtype) {
  for_each_dtype([](DType d) {
    EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) {
      return random_tensor(dtypes::bool_, kShape, dev, 3)
          .where(random_tensor(d, kShape, dev, 1), random_tensor(d, {1}, dev, 2));
    }));
    // Casts to every dtype, from values each target holds (float -> int out of range is undefined).
    for (DType to : vk_dtypes()) {
      SCOPED_TRACE("cast to " + to.name());
      const bool finite = !to.is_float();
      EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) {
        Tensor x = random_tensor(d, kShape, dev, 4, finite);
        if (d.is_float() && !to.is_float() && !to.is_bool())
          x = x.maximum(Tensor::full({}, 0, d, dev)).minimum(Tensor::full({}, 100, d, dev));
        return x.cast(to);
      }));
    }
    for (DType to : vk_dtypes()) {
      if (to == d || to.is_bool() || d.is_bool() || to.scalar_size() != d.scalar_size()) continue;
      SCOPED_TRACE("bitcast to " + to.name());
      EXPECT_TRUE(cpu_vk_agree(
          [&](const std::string& dev) { return random_tensor(d, kShape, dev, 5).bitcast(to); }));
    }
  });
}

TEST(Numerics, ElementwiseOnPaddedPermutedAndFlippedInputs) {
  for (DType d : {dtypes::int32, dtypes::float32, dtypes::uint8, dtypes::float16}) {
    SCOPED_TRACE(d.name());
    EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) {
      Tensor a = random_tensor(d, {4, 5}, dev, 1, true), b = random_tensor(d, {5, 2}, dev, 2, true);
      return a.pad({{1, 0}, {0, 2}}) * 3 +
             b.permute({1, 0}).pad({{2, 1}, {0, 3}}, 7).flip({1}).shrink({{0, 5}, {1, 8}});
    }));
  }
}

TEST(Numerics, ReductionsOverEveryAxisSetAgreeWithTheCpu) {
  const std::vector<std::pair<Axes, bool>> cases = {{Axes{}, false},    {Axes{0}, false},
                                                    {Axes{1}, true},    {Axes{2}, false},
                                                    {Axes{0, 2}, true}, {Axes{-1, 0}, false}};
  for_each_dtype([&](DType d) {
    for (const auto& [axes, keep] : cases) {
      // Integers wrap the same way on both; floats sum in the same order (ulps for contraction).
      EXPECT_TRUE(cpu_vk_agree(
          [&](const std::string& dev) {
            return random_tensor(d, {3, 7, 5}, dev, 6, true).sum(axes, keep);
          },
          4));
      EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) {
        return random_tensor(d, {3, 7, 5}, dev, 7).max(axes, keep);
      }));
    }
    if (d.is_bool()) return;
    EXPECT_TRUE(cpu_vk_agree(
        [&](const std::string& dev) {
          return random_tensor(d, {3, 7, 5}, dev, 8, true).mean({1});
        },
        4));
    EXPECT_TRUE(cpu_vk_agree(
        [&](const std::string& dev) {
          return random_tensor(d, {3, 7, 5}, dev, 9, true).var({0, 2});
        },
        8));
  });
}

TEST(Numerics, SumMaxMeanVarMatchClosedForms) {
  for (const std::string dev : {"CPU", "VK"}) {
    SCOPED_TRACE(dev);
    std::vector<float> v(7 * 13);
    for (size_t i = 0; i < v.size(); ++i) v[i] = float(int(i * 37 % 101) - 50);
    Tensor x(v, {7, 13}, dev);
    std::vector<float> rows(7, 0), cols(13, -1e9f);
    for (size_t i = 0; i < 7; ++i)
      for (size_t j = 0; j < 13; ++j) {
        rows[i] += v[i * 13 + j];
        cols[j] = std::max(cols[j], v[i * 13 + j]);
      }
    EXPECT_EQ(x.sum(1).to_vector<float>(), rows);
    EXPECT_EQ(x.max(0).to_vector<float>(), cols);
    EXPECT_EQ(x.sum().item<float>(), std::accumulate(v.begin(), v.end(), 0.0f));
    EXPECT_FLOAT_EQ(x.mean().item<float>(), std::accumulate(v.begin(), v.end(), 0.0f) / 91.0f);
    double mean = 0, ss = 0;
    for (float f : v) mean += f / 91.0;
    for (float f : v) ss += (f - mean) * (f - mean);
    EXPECT_NEAR(x.var().item<float>(), ss / 90.0, 1e-5 * ss / 90.0);
    EXPECT_NEAR(x.var({}, false, 0).item<float>(), ss / 91.0, 1e-5 * ss / 91.0);
    // Integer sums are exact and wrap at the accumulator's width (int8 sums in int32).
    Tensor i8(std::vector<int8_t>(300, 100), {300}, dev);
    EXPECT_EQ(i8.sum().item<int32_t>(), 30000);
    Tensor u32(std::vector<uint32_t>{4000000000u, 4000000000u}, {2}, dev);
    EXPECT_EQ(u32.sum().item<uint32_t>(), uint32_t(8000000000ull));
    Tensor b(std::vector<bool>{true, false, true, true}, {4}, dev);
    EXPECT_EQ(b.sum().item<int32_t>(), 3);
    EXPECT_EQ(b.max().item<bool>(), true);
  }
}

TEST(Numerics, DotAndMatmulMatchClosedFormsOnOddShapes) {
  for (const std::string dev : {"CPU", "VK"}) {
    SCOPED_TRACE(dev);
    for (const auto& [m, k, n] : {std::tuple{1, 1, 1}, {3, 7, 5}, {17, 33, 9}, {16, 64, 32}}) {
      SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n));
      std::vector<int32_t> a(size_t(m * k)), b(size_t(k * n));
      for (size_t i = 0; i < a.size(); ++i) a[i] = int32_t(i * 7 % 11) - 5;
      for (size_t i = 0; i < b.size(); ++i) b[i] = int32_t(i * 5 % 13) - 6;
      std::vector<int32_t> want(size_t(m * n), 0);
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j)
          for (int q = 0; q < k; ++q)
            want[size_t(i * n + j)] += a[size_t(i * k + q)] * b[size_t(q * n + j)];
      EXPECT_EQ(Tensor(a, {m, k}, dev).matmul(Tensor(b, {k, n}, dev)).to_vector<int32_t>(), want);
      // The same in float32: small integers, so every order of summation is exact.
      std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end()),
          wantf(want.begin(), want.end());
      EXPECT_EQ(Tensor(af, {m, k}, dev).matmul(Tensor(bf, {k, n}, dev)).to_vector<float>(), wantf);
      // Transposed operands read through permuted views.
      EXPECT_EQ(Tensor(bf, {k, n}, dev)
                    .transpose()
                    .matmul(Tensor(af, {m, k}, dev).transpose())
                    .transpose()
                    .contiguous()
                    .to_vector<float>(),
                wantf);
    }
    EXPECT_EQ(Tensor(std::vector<int64_t>{1, 2, 3}, {3}, dev)
                  .dot(Tensor(std::vector<int64_t>{4, 5, 6}, {3}, dev))
                  .item<int64_t>(),
              32);
    // Matrix x vector and vector x matrix.
    Tensor mat(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, dev);
    EXPECT_EQ(mat.dot(Tensor(std::vector<float>{1, 0, -1}, {3}, dev)).to_vector<float>(),
              (std::vector<float>{-2, -2}));
    EXPECT_EQ(Tensor(std::vector<float>{1, -1}, {2}, dev).dot(mat).to_vector<float>(),
              (std::vector<float>{-3, -3, -3}));
  }
}

// Within the forward error bound of a 24-term dot product (support/error_bound.hpp), not a count
// of ulps: a GPU reduces in another order than the CPU device, and where terms cancel the result
// moves by many ulps of itself (NVIDIA: 270) while staying within rounding of the terms.
// float16 accumulates in float32 and rounds once (Tensor::sum), on both devices: its bound is
// float32's over the 24 terms plus a float16 rounding of each side's result (~1 float16 ulp),
// not float16's unit roundoff over 24 terms (~140 ulps).
Tensor float_product(DType d, const std::string& dev, bool magnitude) {
  const Tensor a = random_tensor(d, {19, 24}, dev, 11, true),
               b = random_tensor(d, {24, 12}, dev, 12, true);
  if (!magnitude) return a.matmul(b);
  return a.cast(dtypes::float64).abs().matmul(b.cast(dtypes::float64).abs());
}

TEST(Numerics, FloatMatmulAgreesWithTheCpuWithinRounding) {
  for (DType d : {dtypes::float32, dtypes::float16, dtypes::float64}) {
    SCOPED_TRACE(d.name());
    const Tensor cpu = float_product(d, "CPU", false), vk = float_product(d, "VK", false),
                 magnitude = float_product(d, "CPU", true);
    if (d == dtypes::float16)
      EXPECT_TRUE(within_widened_sum_error_bound(cpu, vk, magnitude, 24, dtypes::float32));
    else
      EXPECT_TRUE(within_sum_error_bound(cpu, vk, magnitude, 24));
  }
}

// The float16 bound catches an error one float16 step past it: each of several results is moved
// away from zero a step at a time; the last step within the bound passes, the next fails (and
// float16's unit roundoff over 24 terms, the bound before, let that through).
TEST(Numerics, Float16MatmulBoundFailsJustAboveIt) {
  const Tensor cpu = float_product(dtypes::float16, "CPU", false),
               magnitude = float_product(dtypes::float16, "CPU", true);
  const std::vector<double> h = values_of(cpu), m = values_of(magnitude);
  const double u = std::ldexp(1.0, -11),
               gamma = 24 * std::ldexp(1.0, -24) / (1 - 24 * std::ldexp(1.0, -24));
  auto bound = [&](size_t i, double v) {
    return 2 * gamma * (1 + u) * m[i] + u * (std::abs(h[i]) + std::abs(v)) + std::ldexp(1.0, -24);
  };
  // The next float16 from v away from zero (h[i] is a float16, so each step is one).
  auto step = [](double v) {
    const double a = std::abs(v);
    const double ulp =
        a < std::ldexp(1.0, -14) ? std::ldexp(1.0, -24) : std::ldexp(1.0, std::ilogb(a) - 10);
    return v + std::copysign(ulp, v);
  };
  auto with = [&](size_t i, double v) {
    std::vector<float> moved(h.begin(), h.end());
    moved[i] = float(v);
    return Tensor(moved, cpu.shape(), "CPU").cast(dtypes::float16);
  };
  int checked = 0;
  for (size_t i = 0; i < h.size(); i += 23) {
    if (h[i] == 0) continue;
    double inside = h[i], outside = step(h[i]);
    while (std::abs(outside - h[i]) <= bound(i, outside)) inside = outside, outside = step(outside);
    SCOPED_TRACE("element " + std::to_string(i) + ": " + std::to_string(h[i]) + " moved to " +
                 std::to_string(outside) + ", bound " + std::to_string(bound(i, outside)));
    EXPECT_LE(std::abs(outside - h[i]), 2 * bound(i, outside));  // "a little above"
    EXPECT_TRUE(
        within_widened_sum_error_bound(cpu, with(i, inside), magnitude, 24, dtypes::float32));
    EXPECT_FALSE(
        within_widened_sum_error_bound(cpu, with(i, outside), magnitude, 24, dtypes::float32));
    EXPECT_TRUE(within_sum_error_bound(cpu, with(i, outside), magnitude, 24));
    ++checked;
  }
  EXPECT_GE(checked, 8);
}

TEST(Numerics, MovementOpsAndTheirChainsAgreeWithTheCpu) {
  for_each_dtype([](DType d) {
    EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) {
      return random_tensor(d, {2, 3, 4}, dev, 1).reshape({4, -1}).contiguous();
    }));
    EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) {
      return random_tensor(d, {2, 3, 4}, dev, 1).permute({2, 0, 1}).contiguous();
    }));
    EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) {
      return random_tensor(d, {3, 1}, dev, 1).expand({3, 5}).contiguous();
    }));
    EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) {
      return random_tensor(d, {2, 3}, dev, 1).pad({{1, 2}, {0, 3}});
    }));
    EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) {
      return random_tensor(d, {2, 3}, dev, 1).pad({{1, 2}, {0, 3}}, 1);
    }));
    EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) {
      return random_tensor(d, {5, 6}, dev, 1).shrink({{1, 4}, {2, 3}}).contiguous();
    }));
    EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) {
      return random_tensor(d, {3, 4}, dev, 1).flip({0, 1}).contiguous();
    }));
    EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) {
      return random_tensor(d, {4, 6}, dev, 1)
          .permute({1, 0})
          .reshape({2, 3, 4})
          .flip({1})
          .pad({{0, 1}, {1, 1}, {0, 0}})
          .shrink({{1, 3}, {0, 4}, {1, 4}})
          .expand({2, 2, 4, 3})
          .contiguous();
    }));
  });
}

TEST(Numerics, MovementChainsMatchAnExplicitArray) {
  for (const std::string dev : {"CPU", "VK"}) {
    SCOPED_TRACE(dev);
    Tensor x(std::vector<int32_t>{0, 1, 2, 3, 4, 5}, {2, 3}, dev);
    EXPECT_EQ(x.permute({1, 0}).flip({0}).contiguous().to_vector<int32_t>(),
              (std::vector<int32_t>{2, 5, 1, 4, 0, 3}));
    EXPECT_EQ(x.pad({{1, 0}, {0, 1}}, -1).to_vector<int32_t>(),
              (std::vector<int32_t>{-1, -1, -1, -1, 0, 1, 2, -1, 3, 4, 5, -1}));
    EXPECT_EQ(x.shrink({{0, 2}, {1, 2}}).expand({2, 3}).contiguous().to_vector<int32_t>(),
              (std::vector<int32_t>{1, 1, 1, 4, 4, 4}));
    EXPECT_EQ(x.reshape({3, 2}).sum(0).to_vector<int32_t>(), (std::vector<int32_t>{6, 9}));
    EXPECT_EQ(x.pad({{0, 0}, {2, 0}}).flip({1}).sum(1).to_vector<int32_t>(),
              (std::vector<int32_t>{3, 12}));
  }
}

TEST(Numerics, OddSizesZeroSizeAndZeroD) {
  for (int64_t n : {1, 3, 7, 1000003}) {
    SCOPED_TRACE(n);
    std::vector<int32_t> v(static_cast<size_t>(n));
    std::iota(v.begin(), v.end(), -int32_t(n / 2));
    Tensor x(v, {n}, "VK");
    const std::vector<int32_t> y = (x * 3 - 1).to_vector<int32_t>();
    ASSERT_EQ(y.size(), v.size());
    for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(y[i], v[i] * 3 - 1) << i;
    int64_t total = 0;
    for (int32_t e : v) total += e;
    EXPECT_EQ(x.cast(dtypes::int64).sum().item<int64_t>(), total);
    EXPECT_EQ(x.max().item<int32_t>(), v.back());
    if (n <= 7) {
      EXPECT_TRUE(cpu_vk_agree(
          [&](const std::string& dev) {
            return random_tensor(dtypes::float32, {n}, dev, 3).exp2() + 1;
          },
          2));
    }
  }
  for (const std::string dev : {"CPU", "VK"}) {
    SCOPED_TRACE(dev);
    Tensor empty = Tensor::zeros({3, 0}, dtypes::float32, dev);
    EXPECT_EQ((empty + 1).exp2().shape(), (Shape{3, 0}));
    EXPECT_TRUE((empty * 2).to_vector<float>().empty());
    EXPECT_EQ(empty.sum(1).to_vector<float>(), (std::vector<float>{0, 0, 0}));
    EXPECT_EQ(empty.sum(0).to_vector<float>().size(), 0u);
    EXPECT_THROW(empty.max(), Error);
    Tensor zero_d(std::vector<float>{2.5f}, {}, dev);
    EXPECT_EQ((zero_d * 2).item<float>(), 5.0f);
    EXPECT_EQ(zero_d.sum().item<float>(), 2.5f);
    EXPECT_EQ((zero_d + Tensor(std::vector<float>{1, 2}, {2}, dev)).to_vector<float>(),
              (std::vector<float>{3.5f, 4.5f}));
    EXPECT_EQ(zero_d.reshape({1, 1}).expand({2, 2}).contiguous().to_vector<float>(),
              (std::vector<float>(4, 2.5f)));
  }
}

TEST(Numerics, BroadcastingAgreesWithTheCpu) {
  EXPECT_TRUE(cpu_vk_agree([](const std::string& dev) {
    Tensor a = random_tensor(dtypes::float32, {3, 1, 5}, dev, 1, true),
           b = random_tensor(dtypes::float32, {4, 1}, dev, 2, true);
    Tensor c = random_tensor(dtypes::float32, {}, dev, 3, true);
    return (a * b + c).maximum(b);
  }));
  EXPECT_TRUE(cpu_vk_agree([](const std::string& dev) {
    Tensor a = random_tensor(dtypes::int16, {1, 6}, dev, 1),
           b = random_tensor(dtypes::uint8, {5, 1}, dev, 2);
    return a + b;  // int16 + uint8 promotes to int16
  }));
}

// With NOOPT=1 a kernel is the plain one (one output per invocation); the default opts upcast,
// unroll and tile. Both must compute the same values. The compiled-kernel cache must not hand a
// kernel compiled under one setting to the other.
TEST(Numerics, NoOptAndDefaultOptsGiveEqualResults) {
  std::vector<std::function<Tensor(const std::string&)>> kernels = {
      [](const std::string& dev) {
        return random_tensor(dtypes::float32, {64, 64}, dev, 1, true).exp2() * 3 + 1;
      },
      [](const std::string& dev) { return random_tensor(dtypes::int32, {1024}, dev, 2) * 7; },
      [](const std::string& dev) {
        return random_tensor(dtypes::float32, {32, 40}, dev, 3, true).sum(1);
      },
      [](const std::string& dev) {
        return random_tensor(dtypes::float32, {32, 40}, dev, 4, true).sum(0);
      },
      [](const std::string& dev) {
        return random_tensor(dtypes::int32, {32, 40}, dev, 5).max();
      },
      [](const std::string& dev) {
        return random_tensor(dtypes::float32, {48, 32}, dev, 6, true)
            .matmul(random_tensor(dtypes::float32, {32, 64}, dev, 7, true));
      },
      [](const std::string& dev) {
        return random_tensor(dtypes::float32, {36, 16}, dev, 8, true)
            .transpose()
            .matmul(random_tensor(dtypes::float32, {36, 20}, dev, 9, true));
      },
      [](const std::string& dev) {
        return random_tensor(dtypes::float32, {30, 60}, dev, 10, true)
            .pad({{1, 1}, {2, 2}})
            .permute({1, 0})
            .sum(1);
      },
      [](const std::string& dev) {
        return random_tensor(dtypes::float16, {256, 4}, dev, 11, true).permute({1, 0}).contiguous();
      },
      // The kernels whose counts tensor_schedule_test pins.
      [](const std::string& dev) {
        return random_tensor(dtypes::float32, {512}, dev, 12, true) +
               random_tensor(dtypes::float32, {512}, dev, 13, true);
      },
      [](const std::string& dev) {
        return (random_tensor(dtypes::int32, {512}, dev, 12) +
                random_tensor(dtypes::int32, {512}, dev, 13)) *
               random_tensor(dtypes::int32, {512}, dev, 14);
      },
      [](const std::string& dev) {
        return random_tensor(dtypes::int32, {512}, dev, 15)
            .dot(random_tensor(dtypes::int32, {512}, dev, 16));
      },
      [](const std::string& dev) {
        return (random_tensor(dtypes::int32, {512}, dev, 15) *
                random_tensor(dtypes::int32, {512}, dev, 16))
                   .sum() +
               1;
      },
      [](const std::string& dev) {
        return random_tensor(dtypes::float32, {16, 64}, dev, 17, true).var(1);
      },
      [](const std::string& dev) {
        Tensor x = random_tensor(dtypes::float32, {16, 64}, dev, 18, true);
        Tensor e = (x - x.max(-1, true)).exp();
        return e / e.sum(-1, true);
      },
      [](const std::string& dev) {
        Tensor x = random_tensor(dtypes::float32, {32, 16}, dev, 19, true),
               w = random_tensor(dtypes::float32, {16, 24}, dev, 20, true);
        return (x.matmul(w) + random_tensor(dtypes::float32, {24}, dev, 21, true)).relu();
      },
      [](const std::string& dev) {
        return random_tensor(dtypes::int8, {12, 20}, dev, 22).permute({1, 0}).contiguous();
      },
  };
  for (size_t i = 0; i < kernels.size(); ++i) {
    SCOPED_TRACE("kernel " + std::to_string(i));
    for (const std::string dev : {"CPU", "VK"}) {
      std::vector<std::byte> plain;
      {
        ScopedSetting noopt("NOOPT", 1);
        plain = kernels[i](dev).bytes();
      }
      const Tensor opt = kernels[i](dev);
      EXPECT_TRUE(same_elements(opt.dtype(), plain, opt.bytes(), 8)) << dev;
    }
  }
}

TEST(Numerics, TheNoOptSettingSelectsWhichCompiledKernelRuns) {
  const std::vector<float> v(4096, 1.0f);
  for (const std::string dev : {"CPU", "VK"}) {
    SCOPED_TRACE(dev);
    auto compile_log = [&](int noopt) {
      ScopedSetting n("NOOPT", noopt), debug("DEBUG", 3);
      testing::internal::CaptureStdout();
      (Tensor(v, {4096}, dev) * 3).realize();
      return testing::internal::GetCapturedStdout();
    };
    EXPECT_NE(compile_log(1).find("opts=[]"), std::string::npos);
    EXPECT_NE(compile_log(0).find("UPCAST"), std::string::npos) << "the NOOPT=1 kernel was reused";
  }
}
