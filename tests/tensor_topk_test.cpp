// topk of a small k without a sort (core/tensor_sort.cpp's tournament): values and positions
// against a stable host sort (ties to the lower position, nan largest, -0.0 tied with 0.0) on both
// devices, both orders, along either axis, integer dtypes, a few kernels where the sort takes
// hundreds, and the gradient through the values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include <vkgrad/core/schedule.hpp>
#include <vkgrad/core/tensor.hpp>

using namespace vkg;

namespace {

// n floats with repeats, nan, inf and both zeros mixed in.
std::vector<float> awkward_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> v(n);
  for (float& x : v) {
    const int kind = std::uniform_int_distribution<int>(0, 19)(rng);
    x = kind == 0   ? NAN
        : kind == 1 ? -0.0f
        : kind == 2 ? 0.0f
        : kind == 3 ? INFINITY
        : kind < 8  ? float(std::uniform_int_distribution<int>(-3, 3)(rng))  // ties
                    : std::normal_distribution<float>()(rng);
  }
  return v;
}

// The positions of the k first of row, stable: by value (nan largest), then by position.
std::vector<int32_t> host_topk(const std::vector<float>& row, int64_t k, bool largest) {
  std::vector<int32_t> at(row.size());
  std::iota(at.begin(), at.end(), 0);
  auto rank = [](float v) { return std::isnan(v) ? INFINITY : v; };
  std::stable_sort(at.begin(), at.end(), [&](int32_t a, int32_t b) {
    const float x = rank(row[size_t(a)]), y = rank(row[size_t(b)]);
    const bool xn = std::isnan(row[size_t(a)]), yn = std::isnan(row[size_t(b)]);
    if (xn != yn) return largest ? xn : yn;
    if (xn) return false;
    return largest ? x > y : x < y;
  });
  at.resize(size_t(k));
  return at;
}

bool same_float(float a, float b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

}  // namespace

TEST(Topk, MatchesAStableHostSortOnBothDevices) {
  constexpr int64_t rows = 3, n = 1000;
  const std::vector<float> data = awkward_floats(size_t(rows * n), 1);
  for (const std::string dev : {"CPU", "VK"})
    for (bool largest : {true, false})
      for (int64_t k : {1, 10, 33}) {
        SCOPED_TRACE(dev + " k=" + std::to_string(k) + (largest ? " largest" : " smallest"));
        const Tensor x(data, {rows, n}, dev);
        // Along the last axis, and along the first of the transpose.
        const auto [v1, p1] = x.topk(k, 1, largest);
        const auto [v0, p0] = x.transpose(0, 1).topk(k, 0, largest);
        ASSERT_EQ(v1.shape(), (Shape{rows, k}));
        ASSERT_EQ(p0.shape(), (Shape{k, rows}));
        const std::vector<float> values1 = v1.to_vector<float>(), values0 = v0.to_vector<float>();
        const std::vector<int32_t> at1 = p1.to_vector<int32_t>(), at0 = p0.to_vector<int32_t>();
        for (int64_t r = 0; r < rows; ++r) {
          const std::vector<float> row(data.begin() + r * n, data.begin() + (r + 1) * n);
          const std::vector<int32_t> want = host_topk(row, k, largest);
          for (int64_t j = 0; j < k; ++j) {
            EXPECT_EQ(at1[size_t(r * k + j)], want[size_t(j)]) << r << " " << j;
            EXPECT_EQ(at0[size_t(j * rows + r)], want[size_t(j)]) << r << " " << j;
            EXPECT_TRUE(same_float(values1[size_t(r * k + j)], row[size_t(want[size_t(j)])]));
            EXPECT_TRUE(same_float(values0[size_t(j * rows + r)], row[size_t(want[size_t(j)])]));
          }
        }
      }
}

TEST(Topk, IntegerDtypesAndTiesKeepTheLowerPosition) {
  for (const std::string dev : {"CPU", "VK"}) {
    std::vector<int32_t> v(500);
    for (size_t i = 0; i < v.size(); ++i) v[i] = int32_t((i * 37) % 11) - 5;  // many ties
    for (DType d : {dtypes::int8, dtypes::uint32, dtypes::int32}) {
      SCOPED_TRACE(dev + " " + d.name());
      const int32_t shift = d.is_unsigned() ? 5 : 0;  // unsigned: 0..10
      const Tensor x = (Tensor(v, {500}, dev) + shift).cast(d);
      const auto [values, at] = x.topk(5);
      std::vector<float> host;
      for (int32_t e : v) host.push_back(float(e + shift));
      const std::vector<int32_t> want = host_topk(host, 5, true);
      EXPECT_EQ(at.to_vector<int32_t>(), want);
      EXPECT_EQ(values.dtype(), d);
    }
  }
}

// A few kernels per round of the tournament, where the sort takes one per compare-exchange step.
TEST(Topk, TakesFarFewerKernelsThanTheSort) {
  Tensor x = Tensor::randn({1 << 14});
  x.realize();
  const auto [values, at] = x.topk(10);
  const size_t topk_kernels = create_schedule({values.node(), at.node()}).items.size();
  const auto [sorted, order] = x.sort(0, true);
  const size_t sort_kernels = create_schedule({sorted.node(), order.node()}).items.size();
  // The keys, two per round (16384 -> 2560 -> 400 -> 70 -> 20 -> 10), the values.
  EXPECT_LE(topk_kernels, 12u);
  EXPECT_GE(sort_kernels, 100u);
}

// The values are read at the positions (an indexed load): the gradient lands on the k chosen.
TEST(Topk, GradientReachesTheChosenElements) {
  for (const std::string dev : {"CPU", "VK"}) {
    std::vector<float> v(300);
    for (size_t i = 0; i < v.size(); ++i) v[i] = float((i * 53) % 300);
    Tensor x = Tensor(v, {300}, dev).requires_grad_();
    const auto [values, at] = x.topk(3);
    (values * Tensor(std::vector<float>{1, 2, 3}, {3}, dev)).sum().backward();
    std::vector<float> want(300, 0.0f);
    for (int j = 0; j < 3; ++j) want[size_t(std::find(v.begin(), v.end(), float(299 - j)) - v.begin())] = float(j + 1);
    EXPECT_EQ(x.grad()->to_vector<float>(), want) << dev;
  }
}
