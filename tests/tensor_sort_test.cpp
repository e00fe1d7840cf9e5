// sort, argsort, topk, max/min with indices, unique and the scans (cumsum, cumprod, cummax,
// cummin, logcumsumexp): against std::stable_sort and running loops on the host in torch's order
// (nan largest, -0.0 tied with 0.0, ties kept in input order), on Vulkan and the CPU device,
// bit for bit between the two.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "support/device_compare.hpp"
#include "support/error_of.hpp"

using namespace vkg;
using namespace vkg::test;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// torch's order: a belongs before b.
bool before(float a, float b, bool descending) {
  if (std::isnan(a) || std::isnan(b)) return descending ? std::isnan(a) && !std::isnan(b) : !std::isnan(a) && std::isnan(b);
  return descending ? a > b : a < b;
}

std::vector<int32_t> host_argsort(const std::vector<float>& v, bool descending) {
  std::vector<int32_t> p(v.size());
  std::iota(p.begin(), p.end(), 0);
  std::stable_sort(p.begin(), p.end(),
                   [&](int32_t a, int32_t b) { return before(v[size_t(a)], v[size_t(b)], descending); });
  return p;
}

// Values with ties, signed zeros, infinities and nans, in no order.
std::vector<float> awkward(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  const float specials[] = {0.0f, -0.0f, kInf, -kInf, kNan, 1.5f, -1.5f};
  std::vector<float> v(n);
  for (float& x : v) x = rng() % 4 == 0 ? specials[rng() % 7] : float(int(rng() % 41) - 20) / 4;
  return v;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0 || (std::isnan(a) && std::isnan(b)); }

TEST(Sort, MatchesAStableHostSortInBothOrdersOnBothDevices) {
  for (size_t n : {1, 2, 3, 7, 16, 100, 257}) {
    const std::vector<float> v = awkward(n, uint32_t(n));
    for (bool descending : {false, true}) {
      SCOPED_TRACE(std::to_string(n) + (descending ? " descending" : " ascending"));
      const std::vector<int32_t> want = host_argsort(v, descending);
      for (const char* dev : {"CPU", "VK"}) {
        auto [values, positions] = Tensor(v, {int64_t(n)}, dev).sort(0, descending);
        const std::vector<float> got = values.to_vector<float>();
        EXPECT_EQ(positions.to_vector<int32_t>(), want) << dev;
        for (size_t i = 0; i < n; ++i)
          ASSERT_TRUE(same_bits(got[i], v[size_t(want[i])])) << dev << " [" << i << "] " << got[i];
      }
    }
  }
}

TEST(Sort, SortsAlongAnyAxisOfIntegersAndBools) {
  // 2 x 3 x 4 int32, along axis 1, descending: the host computes each column.
  std::vector<int32_t> data(24);
  for (size_t i = 0; i < data.size(); ++i) data[i] = int32_t((i * 7) % 5) - 2;
  for (const char* dev : {"CPU", "VK"}) {
    auto [values, positions] = Tensor(data, {2, 3, 4}, dev).sort(1, true);
    const auto got = values.to_vector<int32_t>();
    const auto at = positions.to_vector<int32_t>();
    for (int a = 0; a < 2; ++a)
      for (int c = 0; c < 4; ++c) {
        std::vector<std::pair<int32_t, int32_t>> col;
        for (int b = 0; b < 3; ++b) col.emplace_back(data[size_t(a * 12 + b * 4 + c)], b);
        std::stable_sort(col.begin(), col.end(), [](auto x, auto y) { return x.first > y.first; });
        for (int b = 0; b < 3; ++b) {
          EXPECT_EQ(got[size_t(a * 12 + b * 4 + c)], col[size_t(b)].first) << dev;
          EXPECT_EQ(at[size_t(a * 12 + b * 4 + c)], col[size_t(b)].second) << dev;
        }
      }
    auto [flags, order] = Tensor(std::vector<bool>{true, false, true, false}, {4}, dev).sort();
    EXPECT_EQ(flags.dtype(), dtypes::bool_);
    EXPECT_EQ(order.to_vector<int32_t>(), (std::vector<int32_t>{1, 3, 0, 2})) << dev;
  }
}

TEST(Sort, ArgsortAndTopkAndTheirShapes) {
  const std::vector<float> v{3, 1, 4, 1, 5, 9, 2, 6};
  for (const char* dev : {"CPU", "VK"}) {
    const Tensor x(v, {2, 4}, dev);
    EXPECT_EQ(x.argsort().to_vector<int32_t>(), (std::vector<int32_t>{1, 3, 0, 2, 2, 0, 3, 1})) << dev;
    EXPECT_EQ(x.argsort(0, true).to_vector<int32_t>(), (std::vector<int32_t>{1, 1, 0, 1, 0, 0, 1, 0})) << dev;
    auto [top, where] = x.topk(2);
    EXPECT_EQ(top.shape(), (Shape{2, 2}));
    EXPECT_EQ(top.to_vector<float>(), (std::vector<float>{4, 3, 9, 6})) << dev;
    EXPECT_EQ(where.to_vector<int32_t>(), (std::vector<int32_t>{2, 0, 1, 3})) << dev;
    auto [low, low_at] = x.topk(3, 1, false);
    EXPECT_EQ(low.to_vector<float>(), (std::vector<float>{1, 1, 3, 2, 5, 6})) << dev;
    EXPECT_EQ(low_at.to_vector<int32_t>(), (std::vector<int32_t>{1, 3, 0, 2, 0, 3})) << dev;
    EXPECT_EQ(x.topk(0).first.shape(), (Shape{2, 0}));
    auto [m, i] = x.max_with_indices(1);
    EXPECT_EQ(m.to_vector<float>(), (std::vector<float>{4, 9})) << dev;
    EXPECT_EQ(i.to_vector<int32_t>(), (std::vector<int32_t>{2, 1})) << dev;
    auto [lo, li] = x.min_with_indices(1, true);
    EXPECT_EQ(lo.shape(), (Shape{2, 1}));
    EXPECT_EQ(lo.to_vector<float>(), (std::vector<float>{1, 2})) << dev;
    EXPECT_EQ(li.to_vector<int32_t>(), (std::vector<int32_t>{1, 2})) << dev;  // the first of the tied 1s
  }
  EXPECT_NE(error_of([&] { Tensor(v, {2, 4}).topk(5); }).find("topk: k = 5"), std::string::npos);
  EXPECT_NE(error_of([&] { Tensor(v, {2, 4}).sort(2); }).find("sort"), std::string::npos);
}

TEST(Sort, GradientGoesToWhereEachValueCameFrom) {
  for (const char* dev : {"CPU", "VK"}) {
    const Tensor x = Tensor(std::vector<float>{3, -1, 2, 5}, {4}, dev).requires_grad_();
    auto [values, positions] = x.sort();
    // values = [-1, 2, 3, 5]; weights 1..4 land on their sources.
    (values * Tensor(std::vector<float>{1, 2, 3, 4}, {4}, dev)).sum().backward();
    EXPECT_EQ(x.grad()->to_vector<float>(), (std::vector<float>{3, 1, 2, 4})) << dev;
  }
}

TEST(Sort, AThousandRandomRowsAgreeBetweenDevicesAndTheHost) {
  std::vector<float> v(4 * 1000);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (float& x : v) x = normal(rng);
  for (const char* dev : {"CPU", "VK"}) {
    auto [values, positions] = Tensor(v, {4, 1000}, dev).sort(1);
    const auto got = values.to_vector<float>();
    const auto at = positions.to_vector<int32_t>();
    for (size_t r = 0; r < 4; ++r) {
      const std::vector<float> row(v.begin() + ptrdiff_t(r * 1000), v.begin() + ptrdiff_t(r * 1000 + 1000));
      const auto want = host_argsort(row, false);
      for (size_t i = 0; i < 1000; ++i) {
        ASSERT_EQ(at[r * 1000 + i], want[i]) << dev << " row " << r << " [" << i << "]";
        ASSERT_EQ(got[r * 1000 + i], row[size_t(want[i])]);
      }
    }
  }
}

TEST(Unique, ValuesInverseAndCountsAsTorch) {
  for (const char* dev : {"CPU", "VK"}) {
    const Tensor x(std::vector<int32_t>{3, 1, 3, 2, 1, 3}, {2, 3}, dev);
    auto [values, inverse, counts] = x.unique();
    EXPECT_EQ(values.to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3})) << dev;
    EXPECT_EQ(inverse.shape(), (Shape{2, 3}));
    EXPECT_EQ(inverse.to_vector<int32_t>(), (std::vector<int32_t>{2, 0, 2, 1, 0, 2})) << dev;
    EXPECT_EQ(counts.to_vector<int32_t>(), (std::vector<int32_t>{2, 1, 3})) << dev;
    // -0.0 and 0.0 are one value (the first in sorted order, the -0.0 here); each nan is its own.
    auto [fv, fi, fc] = Tensor(std::vector<float>{kNan, -0.0f, 0.0f, kNan, 1.0f}, {5}, dev).unique();
    const auto f = fv.to_vector<float>();
    ASSERT_EQ(f.size(), 4u) << dev;
    EXPECT_TRUE(std::signbit(f[0]) && f[0] == 0) << dev;
    EXPECT_EQ(f[1], 1.0f);
    EXPECT_TRUE(std::isnan(f[2]) && std::isnan(f[3]));
    EXPECT_EQ(fi.to_vector<int32_t>(), (std::vector<int32_t>{2, 0, 0, 3, 1})) << dev;
    EXPECT_EQ(fc.to_vector<int32_t>(), (std::vector<int32_t>{2, 1, 1, 1})) << dev;
  }
}

// ---- scans ----

TEST(Scan, CumprodAndLogcumsumexpMatchRunningLoops) {
  std::vector<float> v(600);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 1.0f + float(int(i % 7) - 3) / 256;
  for (const char* dev : {"CPU", "VK"}) {
    const auto prod = Tensor(v, {600}, dev).cumprod().to_vector<float>();
    const auto lse = Tensor(v, {600}, dev).logcumsumexp().to_vector<float>();
    double p = 1, l = -INFINITY;
    for (size_t i = 0; i < v.size(); ++i) {
      p *= v[i];
      l = std::max(l, double(v[i])) + std::log1p(std::exp(-std::abs(l - double(v[i]))));
      EXPECT_NEAR(prod[i], p, 1e-5 * p) << dev << " [" << i << "]";
      EXPECT_NEAR(lse[i], l, 2e-6 * std::abs(l)) << dev << " [" << i << "]";
    }
  }
  // A wide range that a global-max shift would underflow: log(e^-1000 + ...) stays finite.
  EXPECT_TRUE(cpu_vk_agree([](const std::string& dev) {
    return Tensor(std::vector<float>{-1000, 0, -kInf, 5, kInf, kNan}, {6}, dev).logcumsumexp();
  }, 2));
  const auto wide = Tensor(std::vector<float>{-1000, -1000, 0}, {3}).logcumsumexp().to_vector<float>();
  EXPECT_NEAR(wide[0], -1000, 1e-3);
  EXPECT_NEAR(wide[1], -1000 + std::log(2.0), 1e-3);
  EXPECT_NEAR(wide[2], 0, 1e-6);
  // Integers: products in int32, along axis 1.
  EXPECT_EQ(Tensor(std::vector<int32_t>{1, 2, 3, -1, 0, 4}, {2, 3}).cumprod(1).to_vector<int32_t>(),
            (std::vector<int32_t>{1, 2, 6, -1, 0, 0}));
}

TEST(Scan, CummaxAndCumminFollowTorchOnTiesAndNans) {
  // torch.cummax([1, 3, 3, nan, 2, nan]) = values [1, 3, 3, nan, nan, nan], indices [0, 1, 2, 3, 3, 5].
  for (const char* dev : {"CPU", "VK"}) {
    auto [v, i] = Tensor(std::vector<float>{1, 3, 3, kNan, 2, kNan}, {6}, dev).cummax(0);
    const auto got = v.to_vector<float>();
    EXPECT_EQ(got[0], 1);
    EXPECT_EQ(got[2], 3);
    EXPECT_TRUE(std::isnan(got[3]) && std::isnan(got[4]) && std::isnan(got[5])) << dev;
    EXPECT_EQ(i.to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 3, 3, 5})) << dev;
    auto [mv, mi] = Tensor(std::vector<int32_t>{5, 2, 7, 2, 1}, {5}, dev).cummin(0);
    EXPECT_EQ(mv.to_vector<int32_t>(), (std::vector<int32_t>{5, 2, 2, 2, 1})) << dev;
    EXPECT_EQ(mi.to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 1, 3, 4})) << dev;
  }
  // Long axes (several 256-element blocks) against a running loop, both devices.
  std::vector<float> v(1000);
  std::mt19937 rng(5);
  for (float& x : v) x = float(int(rng() % 2001) - 1000);
  for (const char* dev : {"CPU", "VK"}) {
    auto [values, indices] = Tensor(v, {2, 500}, dev).cummax(1);
    const auto got = values.to_vector<float>();
    const auto at = indices.to_vector<int32_t>();
    for (size_t r = 0; r < 2; ++r) {
      float m = -kInf;
      int32_t k = 0;
      for (size_t j = 0; j < 500; ++j) {
        if (v[r * 500 + j] >= m) m = v[r * 500 + j], k = int32_t(j);
        ASSERT_EQ(got[r * 500 + j], m) << dev;
        ASSERT_EQ(at[r * 500 + j], k) << dev << " [" << r << ", " << j << "]";
      }
    }
  }
}

TEST(Scan, CumsumKeepsItsDtypesAndLongAxes) {
  EXPECT_EQ(Tensor(std::vector<int8_t>{100, 100, 100}, {3}).cumsum().dtype(), dtypes::int32);
  EXPECT_EQ(Tensor(std::vector<int8_t>{100, 100, 100}, {3}).cumsum().to_vector<int32_t>(),
            (std::vector<int32_t>{100, 200, 300}));
  EXPECT_TRUE(cpu_vk_agree([](const std::string& dev) {
    return Tensor::ones({3, 70000}, dtypes::int32, dev).cumsum(1);
  }));
  const auto big = Tensor::ones({70000}, dtypes::int32, "VK").cumsum().to_vector<int32_t>();
  for (size_t i = 0; i < big.size(); i += 997) ASSERT_EQ(big[i], int32_t(i + 1));
}

}  // namespace
