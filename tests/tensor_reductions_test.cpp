// The reductions beyond sum and max: std, min, prod (a MUL reduce), any, all, argmax, argmin and
// cumsum. Hand-computed values on both devices, every dtype where it matters, nan, 0-size and 0-d
// inputs, the sizes past the 32768-element split, and kernel counts.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>

#include <vkgrad/core/schedule.hpp>

#include "support/device_compare.hpp"
#include "support/error_of.hpp"

using namespace vkg;
using namespace vkg::test;

namespace {

const std::vector<std::string> kDevices = {"CPU", "VK"};
const double kNan = std::numeric_limits<double>::quiet_NaN();

size_t kernels(const Tensor& t) { return create_schedule({t.node()}).items.size(); }

}  // namespace

TEST(TensorReductions, StdMinProdOnHandComputedValues) {
  for (const std::string& dev : kDevices) {
    const Tensor x(std::vector<float>{1, 2, 3, 4, -5, 6}, {2, 3}, dev);
    // std over rows: var([1,2,3]) = 1, var([4,-5,6]) = 34.333...
    const std::vector<float> s = x.std(1).to_vector<float>();
    EXPECT_FLOAT_EQ(s[0], 1.0f);
    EXPECT_FLOAT_EQ(s[1], float(std::sqrt(103.0 / 3)));
    EXPECT_FLOAT_EQ(x.std({}, false, 0).item<float>(),
                    float(std::sqrt((1 + 4 + 9 + 16 + 25 + 36) / 6.0 - 121.0 / 36)));
    EXPECT_EQ(x.min(0).to_vector<float>(), (std::vector<float>{1, -5, 3}));
    EXPECT_EQ(x.min().item<float>(), -5.0f);
    EXPECT_EQ(x.min(1, true).shape(), (Shape{2, 1}));
    EXPECT_EQ(x.prod(1).to_vector<float>(), (std::vector<float>{6, -120}));
    EXPECT_EQ(x.prod().item<float>(), -720.0f);
    // min of the extremes of each integer width (bitwise not, no overflow) and of bools.
    EXPECT_EQ(Tensor(std::vector<int8_t>{5, -128, 127}, {3}, dev).min().item<int8_t>(), -128);
    EXPECT_EQ(Tensor(std::vector<uint64_t>{~0ull, 3, 9}, {3}, dev).min().item<uint64_t>(), 3u);
    EXPECT_EQ(Tensor(std::vector<int64_t>{INT64_MIN, 0}, {2}, dev).min().item<int64_t>(),
              INT64_MIN);
    EXPECT_EQ(Tensor(std::vector<bool>{true, false}, {2}, dev).min().item<bool>(), false);
    // nan propagates through min.
    EXPECT_TRUE(
        std::isnan(Tensor(std::vector<float>{1, float(kNan), -2}, {3}, dev).min().item<float>()));
    // prod: small ints accumulate in 32 bits (as sum), products of nothing are 1, int64 wraps.
    const Tensor i8(std::vector<int8_t>{-4, 8, 16}, {3}, dev);
    EXPECT_EQ(i8.prod().dtype(), dtypes::int32);
    EXPECT_EQ(i8.prod().item<int32_t>(), -512);
    EXPECT_EQ(Tensor::zeros({2, 0}, dtypes::float32, dev).prod(1).to_vector<float>(),
              (std::vector<float>{1, 1}));
    EXPECT_EQ(Tensor(std::vector<int64_t>{int64_t(1) << 40, int64_t(1) << 30}, {2}, dev)
                  .prod()
                  .item<int64_t>(),
              0);  // 2^70 wraps to 0
    // float16 multiplies in float32 and comes back: 300 * 300 = 90000 would overflow float16.
    const Tensor h(std::vector<float16_t>{float16_t(300.0f), float16_t(300.0f), float16_t(0.001f)},
                   {3}, dev);
    EXPECT_EQ(h.prod().dtype(), dtypes::float16);
    EXPECT_NEAR(float(h.prod().item<float16_t>()), 90.0f, 0.1f);
    // 0-d
    EXPECT_EQ(Tensor(3.0f).prod().item<float>(), 3.0f);
    EXPECT_EQ(Tensor(3.0f).min().item<float>(), 3.0f);
  }
}

TEST(TensorReductions, AnyAllGiveBool) {
  for (const std::string& dev : kDevices) {
    const Tensor x(std::vector<int32_t>{0, 0, 3, 1, 2, 5}, {2, 3}, dev);
    EXPECT_EQ(x.any(1).dtype(), dtypes::bool_);
    EXPECT_EQ(x.any(1).to_vector<bool>(), (std::vector<bool>{true, true}));
    EXPECT_EQ(x.all(1).to_vector<bool>(), (std::vector<bool>{false, true}));
    EXPECT_EQ(x.all(0).to_vector<bool>(), (std::vector<bool>{false, false, true}));
    EXPECT_EQ(x.any().item<bool>(), true);
    EXPECT_EQ(x.all().item<bool>(), false);
    // nan is true, as a C cast to bool; nothing is false for any and true for all.
    EXPECT_EQ(Tensor(std::vector<float>{float(kNan), 0}, {2}, dev).any().item<bool>(), true);
    const Tensor empty = Tensor::zeros({0}, dtypes::float32, dev);
    EXPECT_EQ(empty.any().item<bool>(), false);
    EXPECT_EQ(empty.all().item<bool>(), true);
  }
}

// The first index of the max (or min), int32, nan counting as the largest; over the flattened
// tensor when no axis is given.
TEST(TensorReductions, ArgmaxArgminFirstIndex) {
  for (const std::string& dev : kDevices) {
    const Tensor x(std::vector<float>{1, 7, 7, -2, 0, -2, 3, 3, 3}, {3, 3}, dev);
    EXPECT_EQ(x.argmax(1).dtype(), dtypes::int32);
    EXPECT_EQ(x.argmax(1).to_vector<int32_t>(), (std::vector<int32_t>{1, 1, 0}));
    EXPECT_EQ(x.argmin(1).to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 0}));
    EXPECT_EQ(x.argmax(0).to_vector<int32_t>(), (std::vector<int32_t>{2, 0, 0}));
    EXPECT_EQ(x.argmin(0, true).to_vector<int32_t>(), (std::vector<int32_t>{1, 1, 1}));
    EXPECT_EQ(x.argmin(0, true).shape(), (Shape{1, 3}));
    EXPECT_EQ(x.argmax().item<int32_t>(), 1);
    EXPECT_EQ(x.argmin().item<int32_t>(), 3);
    EXPECT_EQ(x.argmax({}, true).shape(), (Shape{1, 1}));
    EXPECT_EQ(Tensor(std::vector<float>{1, float(kNan), 5, float(kNan)}, {4}, dev)
                  .argmax()
                  .item<int32_t>(),
              1);
    EXPECT_EQ(Tensor(std::vector<uint8_t>{9, 0, 255, 0}, {4}, dev).argmin().item<int32_t>(), 1);
    EXPECT_EQ(Tensor(std::vector<int8_t>{9, -128, 127, 127}, {4}, dev).argmax().item<int32_t>(), 2);
    EXPECT_EQ(Tensor(std::vector<bool>{false, true, true}, {3}, dev).argmax().item<int32_t>(), 1);
    EXPECT_EQ(Tensor(5.0f).argmax().item<int32_t>(), 0);
  }
  // A long row (past the split): the max near the end.
  std::vector<float> v(70001, 0.0f);
  v[69998] = 2.0f;
  v[5] = 1.0f;
  EXPECT_EQ(Tensor(v, {70001}).argmax().item<int32_t>(), 69998);
  EXPECT_EQ(Tensor(v, {70001}).argmin().item<int32_t>(), 0);
  // Two reduce kernels: the max, then the first index.
  EXPECT_EQ(kernels(Tensor(std::vector<float>(12, 1.0f), {3, 4}).argmax(1)), 2u);
}

// A prefix of -0.0s sums to -0.0, as torch's (the masked-out places held +0.0, so a kernel that
// added them gave +0.0: symbolic fuzzer seed 20261510); +0.0 after them makes +0.0.
TEST(TensorReductions, CumsumKeepsNegativeZero) {
  const std::vector<bool> want_sign = {true, true, false, false};
  for (const std::string& dev : kDevices)
    for (int64_t rows : {1, 3}) {
      std::vector<float> v;
      for (int64_t r = 0; r < rows; ++r) v.insert(v.end(), {-0.0f, -0.0f, 0.0f, -0.0f});
      const Variable n("n", 1, 4);
      for (const Tensor& x :
           {Tensor(v, {rows, 4}, dev), Tensor(v, {rows, 4}, dev).reshape({n.bind(rows), 4})}) {
        const std::vector<float> got = x.cumsum(1).to_vector<float>();
        for (size_t k = 0; k < got.size(); ++k) {
          EXPECT_EQ(got[k], 0.0f) << dev << " " << k;
          EXPECT_EQ(std::signbit(got[k]), want_sign[k % 4])
              << dev << ", rows " << rows << ", symbolic " << x.has_symbolic_shape() << ", " << k;
        }
      }
    }
}

TEST(TensorReductions, CumsumShortAndPastTheSplit) {
  for (const std::string& dev : kDevices) {
    const Tensor x(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, {2, 3}, dev);
    EXPECT_EQ(x.cumsum(1).to_vector<int32_t>(), (std::vector<int32_t>{1, 3, 6, 4, 9, 15}));
    EXPECT_EQ(x.cumsum(0).to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3, 5, 7, 9}));
    EXPECT_EQ(x.cumsum(-1).shape(), (Shape{2, 3}));
    EXPECT_EQ(Tensor(std::vector<bool>{true, false, true}, {3}, dev).cumsum().to_vector<int32_t>(),
              (std::vector<int32_t>{1, 1, 2}));
    EXPECT_EQ(Tensor(4.0f).cumsum().item<float>(), 4.0f);
    EXPECT_EQ(Tensor::zeros({0, 2}, dtypes::float32, dev).cumsum(0).shape(), (Shape{0, 2}));
  }
  // 40000 ones in rows of a (2, 40000) int tensor: every prefix is exact; 1000 odd values on VK
  // equal the CPU's.
  const Tensor ones = Tensor::ones({2, 40000}, dtypes::int32);
  const std::vector<int32_t> c = ones.cumsum(1).to_vector<int32_t>();
  ASSERT_EQ(c.size(), 80000u);
  for (int32_t i = 0; i < 40000; ++i) {
    ASSERT_EQ(c[size_t(i)], i + 1) << i;
    ASSERT_EQ(c[size_t(40000 + i)], i + 1) << i;
  }
  EXPECT_TRUE(cpu_vk_agree([](const std::string& dev) {
    return random_tensor(dtypes::int32, {1000, 3}, dev, 5).cumsum(0);
  }));
  // Float sums in another order round differently (the CPU device takes a GPU's opts, grouped
  // reduces, where Lavapipe does not), and prefix sums cancel, so ulps mislead: compare within an
  // absolute bound (300 values per row within [-8, 8]: running sums of magnitude ~100, each
  // addition rounding by up to 2^-24 of that).
  auto floats = [](const std::string& dev) {
    return random_tensor(dtypes::float32, {3, 300}, dev, 6, true).cumsum(1).to_vector<float>();
  };
  const std::vector<float> on_cpu = floats("CPU"), on_vk = floats("VK");
  ASSERT_EQ(on_cpu.size(), on_vk.size());
  for (size_t i = 0; i < on_cpu.size(); ++i) EXPECT_NEAR(on_cpu[i], on_vk[i], 1e-3) << i;
}

TEST(TensorReductions, MulReducesPastTheSplitPadWithOne) {
  // 40000 elements: two kernels, the padded tail multiplies by 1.
  std::vector<float> v(40001, 1.0f);
  v[7] = 2.0f;
  v[40000] = -3.0f;
  const Tensor t(v, {40001});
  EXPECT_EQ(t.prod().item<float>(), -6.0f);
  EXPECT_EQ(kernels(t.prod()), 2u);
  EXPECT_EQ(t.min().item<float>(), -3.0f);
  EXPECT_EQ((t * 0).all().item<bool>(), false);
  EXPECT_EQ(t.any().item<bool>(), true);
}

// A reduce over (batch, y, x) past the split, as batchnorm's statistics and a convolution's
// weight gradient: the partials are blocks of the batch axis (2 of 48 images, the fewest whose
// share fits 32768), each with y and x whole, so the first kernel's output is (channels, 2) and
// no flat index is divided back into (b, y, x). Small integers keep every order of summation
// exact: both devices give the closed form.
TEST(TensorReductions, SumPastTheSplitTakesPartialsFromTheOuterAxis) {
  const int64_t b = 96, c = 5, h = 19, w = 20;  // 96 * 19 * 20 = 36480 per channel
  std::vector<float> v(size_t(b * c * h * w));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(int64_t(i * 7 % 13) - 6);
  std::vector<float> want(size_t(c), 0);
  for (size_t i = 0; i < v.size(); ++i) want[(i / size_t(h * w)) % size_t(c)] += v[i];
  for (const std::string& dev : kDevices) {
    SCOPED_TRACE(dev);
    const Tensor x(v, {b, c, h, w}, dev);
    const Tensor s = x.sum({0, 2, 3});
    EXPECT_EQ(s.to_vector<float>(), want);
    const Schedule plan = create_schedule({x.sum({0, 2, 3}).node()});
    ASSERT_EQ(plan.items.size(), 2u);
    const std::string first = to_string(plan.items[0].ast);
    EXPECT_NE(first.find("shape=(5, 2, 1, 1, 1)"), std::string::npos) << first;
    EXPECT_EQ(first.find("IDIV"), std::string::npos) << first;
  }
}

TEST(TensorReductions, VulkanMatchesCpuOnEveryDtype) {
  for (DType d : vk_dtypes()) {
    EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) {
      return random_tensor(d, {5, 7}, dev, 21).min(1);
    })) << d.name();
    EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) {
      return random_tensor(d, {5, 7}, dev, 22).argmax(0);
    })) << d.name();
    if (d.is_float() || d == dtypes::bool_) continue;
    EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) {
      return random_tensor(d, {3, 4}, dev, 23).prod(1);
    })) << d.name();
  }
}

TEST(TensorReductions, MisuseNamesOpAndShape) {
  const Tensor e = Tensor::zeros({2, 0});
  std::string m = error_of([&] { (void)e.min(); });
  EXPECT_NE(m.find("min"), std::string::npos) << m;
  EXPECT_NE(m.find("(2, 0)"), std::string::npos) << m;
  m = error_of([&] { (void)e.argmax(1); });
  EXPECT_NE(m.find("argmax"), std::string::npos) << m;
  EXPECT_NE(m.find("(2, 0)"), std::string::npos) << m;
  m = error_of([&] { (void)e.cumsum(2); });
  EXPECT_NE(m.find("cumsum"), std::string::npos) << m;
  m = error_of([&] { (void)e.argmin(-3); });
  EXPECT_NE(m.find("argmin"), std::string::npos) << m;
  EXPECT_NE(m.find("(2, 0)"), std::string::npos) << m;
}

// As torch: softmax and log_softmax of an empty tensor are that empty tensor, and logsumexp over
// no elements is log(0) = -inf. They threw "max: cannot reduce a tensor with no elements".
TEST(Reductions, SoftmaxAndLogsumexpOfEmptyTensorsAreTorchs) {
  for (const char* dev : {"CPU", "VK"}) {
    SCOPED_TRACE(dev);
    const Tensor e = Tensor::zeros({0, 2}, dtypes::float32, dev);
    EXPECT_EQ(e.softmax(0).shape(), (Shape{0, 2}));
    EXPECT_EQ(e.log_softmax(1).shape(), (Shape{0, 2}));
    EXPECT_EQ(e.logsumexp({0}).to_vector<float>(), (std::vector<float>{-INFINITY, -INFINITY}));
    EXPECT_EQ(e.logsumexp({0}, true).shape(), (Shape{1, 2}));
    EXPECT_EQ(e.logsumexp({1}).shape(), (Shape{0}));
    EXPECT_EQ(Tensor::zeros({0}, dtypes::int32, dev).logsumexp({}).item<float>(), -INFINITY);
  }
}
