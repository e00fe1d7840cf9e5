// Random tensors: the THREEFRY op against Random123's known threefry2x32 vectors on both devices,
// rand bit-equal on VK and CPU and to a host model of the counter scheme, reproducibility under
// manual_seed, the statistics of rand, randn, randint and dropout, the nn.init bounds, and
// misuse errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>

#include <vkgrad/core/schedule.hpp>

#include "support/device_compare.hpp"
#include "support/error_of.hpp"

using namespace vkg;
using namespace vkg::test;

namespace {

const std::vector<std::string> kDevices = {"CPU", "VK"};

// The host model: threefry2x32, 20 rounds (Salmon et al., Random123).
uint64_t threefry(uint64_t x, uint64_t key) {
  const uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32),
                 ks[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu};
  const int rot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  uint32_t x0 = uint32_t(x) + ks[0], x1 = uint32_t(x >> 32) + ks[1];
  for (int i = 0; i < 5; ++i) {
    for (int r : rot[i % 2]) {
      x0 += x1;
      x1 = std::rotl(x1, r) ^ x0;
    }
    x0 += ks[(i + 1) % 3];
    x1 += ks[(i + 2) % 3] + uint32_t(i + 1);
  }
  return uint64_t(x1) << 32 | x0;
}

float uniform_of(uint32_t bits) { return std::bit_cast<float>((bits >> 9) | 0x3F800000u) - 1.0f; }

struct Training {
  Training() { Tensor::training = true; }
  ~Training() { Tensor::training = false; }
};

}  // namespace

// Random123's known-answer vectors (kat_vectors, threefry2x32_20), low word first.
TEST(TensorRandom, ThreefryOpMatchesKnownVectors) {
  const std::vector<uint64_t> x = {0, ~0ull, 0x85a308d3243f6a88ull};
  const std::vector<uint64_t> key = {0, ~0ull, 0x0370734413198a2eull};
  const std::vector<uint64_t> want = {0x99ba4efe6b200159ull, 0xbb002be71cb996fcull,
                                      0x483df7a0c4923a9cull};
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(threefry(x[i], key[i]), want[i]) << i;
  for (const std::string& dev : kDevices) {
    const Tensor a(x, {3}, dev), k(key, {3}, dev);
    EXPECT_EQ(Tensor(UOp::make(Ops::THREEFRY, dtypes::uint64, {a.node(), k.node()}))
                  .to_vector<uint64_t>(),
              want)
        << dev;
  }
}

// Element i of the first tensor after manual_seed(s) is uniform_of(low word of
// threefry(i, s)); the next tensor continues the counter. Same bits on both devices.
TEST(TensorRandom, RandIsTheCounterSchemeOnEveryDevice) {
  for (const std::string& dev : kDevices) {
    Tensor::manual_seed(1234);
    const std::vector<float> first =
        Tensor::rand({3, 5, 7}, dtypes::float32, dev).to_vector<float>();
    const std::vector<float> second = Tensor::rand({4}, dtypes::float32, dev).to_vector<float>();
    for (size_t i = 0; i < first.size(); ++i)
      ASSERT_EQ(first[i], uniform_of(uint32_t(threefry(i, 1234)))) << dev << " " << i;
    for (size_t i = 0; i < second.size(); ++i)
      ASSERT_EQ(second[i], uniform_of(uint32_t(threefry(105 + i, 1234)))) << dev << " " << i;
  }
  for (DType d : {dtypes::float32, dtypes::float16, dtypes::float64}) {
    EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) {
      Tensor::manual_seed(7);
      return Tensor::rand({33, 3}, d, dev);
    })) << d.name();
    Tensor::manual_seed(7);
    for (double v : values(Tensor::rand({1000}, d)))
      ASSERT_TRUE(v >= 0.0 && v < 1.0) << d.name() << " " << v;
  }
  // A long randint is an upcast kernel whose THREEFRY is vectorized (uint64x4).
  EXPECT_TRUE(cpu_vk_agree([](const std::string& dev) {
    Tensor::manual_seed(8);
    return Tensor::randint(0, 100, {4096}, dtypes::int8, dev);
  }));
  // bfloat16: in [0, 1), and the same bits on Vulkan (float32 registers) as on the CPU device.
  for (double v : values(Tensor::rand({1000}, dtypes::bfloat16, "CPU")))
    ASSERT_TRUE(v >= 0.0 && v < 1.0) << v;
  EXPECT_TRUE(cpu_vk_agree([](const std::string& dev) {
    Tensor::manual_seed(5);
    return Tensor::rand({1000}, dtypes::bfloat16, dev);
  }));
  // randn: Box-Muller through log, sqrt and cos, which may differ by an ulp between devices.
  EXPECT_TRUE(cpu_vk_agree(
      [](const std::string& dev) {
        Tensor::manual_seed(99);
        return Tensor::randn({257}, dtypes::float32, dev);
      },
      4));  // measured: at most 2 on Lavapipe
  EXPECT_TRUE(cpu_vk_agree([](const std::string& dev) {
    Tensor::manual_seed(5);
    return Tensor::randint(-3, 1000, {2, 50}, dtypes::int16, dev);
  }));
}

TEST(TensorRandom, ManualSeedReproducesAndTheCounterAdvances) {
  Tensor::manual_seed(42);
  const std::vector<float> a = Tensor::rand({64}).to_vector<float>();
  const std::vector<float> b = Tensor::rand({64}).to_vector<float>();
  Tensor::manual_seed(42);
  EXPECT_EQ(Tensor::rand({64}).to_vector<float>(), a);
  EXPECT_EQ(Tensor::rand({64}).to_vector<float>(), b);
  EXPECT_NE(a, b);
  Tensor::manual_seed(43);
  EXPECT_NE(Tensor::rand({64}).to_vector<float>(), a);
  // 0-d and 0-size shapes.
  EXPECT_EQ(Tensor::rand({}).shape(), Shape{});
  EXPECT_EQ(Tensor::randn({0, 4}).numel(), 0);
}

// A new seed or counter is new data in a buffer, not a new constant: every draw of one shape is
// the same kernel (compiled once), and a dropout fuses into its consumer.
TEST(TensorRandom, EveryDrawOfAShapeIsOneKernel) {
  const auto kernel_of = [](const Tensor& t) {
    const Schedule s = create_schedule({t.node()});
    EXPECT_EQ(s.items.size(), 1u);
    return s.items.empty() ? nullptr : s.items.back().ast;
  };
  Tensor::manual_seed(1);
  const UOpPtr first = kernel_of(Tensor::rand({8, 16}));
  const UOpPtr second = kernel_of(Tensor::rand({8, 16}));
  Tensor::manual_seed(2);
  EXPECT_EQ(kernel_of(Tensor::rand({8, 16})), first);
  EXPECT_EQ(second, first);
  Training on;
  (void)kernel_of((Tensor::ones({8, 16}) * 3).dropout(0.1) + 1);
}

// Mean, spread and range of 2^17 samples, counted on the host (one kernel per distribution):
// tolerances are several standard errors wide.
struct Stats {
  double mean = 0, std = 0, min = 0, max = 0, within_one_std = 0;
};

Stats stats_of(const Tensor& t) {
  const std::vector<double> v = values(t);
  Stats s;
  s.min = *std::min_element(v.begin(), v.end());
  s.max = *std::max_element(v.begin(), v.end());
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
  double sq = 0, near = 0;
  for (double x : v) sq += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(sq / double(v.size() - 1));
  for (double x : v) near += std::abs(x - s.mean) < s.std;
  s.within_one_std = near / double(v.size());
  return s;
}

TEST(TensorRandom, Statistics) {
  Tensor::manual_seed(2024);
  const int64_t n = 1 << 17;
  const Stats u = stats_of(Tensor::rand({n}));
  EXPECT_NEAR(u.mean, 0.5, 0.005);
  EXPECT_NEAR(u.std * u.std, 1.0 / 12, 0.003);
  EXPECT_GE(u.min, 0.0);
  EXPECT_LT(u.max, 1.0);
  const Stats z = stats_of(Tensor::randn({n}));
  EXPECT_NEAR(z.mean, 0.0, 0.015);
  EXPECT_NEAR(z.std, 1.0, 0.01);
  EXPECT_NEAR(z.within_one_std, 0.6827, 0.01);  // P(|z| < 1)
  const Stats g = stats_of(Tensor::normal({n}, 3.0, 0.5));
  EXPECT_NEAR(g.mean, 3.0, 0.01);
  EXPECT_NEAR(g.std, 0.5, 0.01);
  const Stats w = stats_of(Tensor::uniform({n}, -2.0, 6.0));
  EXPECT_NEAR(w.mean, 2.0, 0.05);
  EXPECT_GE(w.min, -2.0);
  EXPECT_LT(w.max, 6.0);
  // randint: every value of [-3, 4) about 1/7 of the time, nothing outside.
  const Tensor r = Tensor::randint(-3, 4, {n}, dtypes::int8);
  EXPECT_EQ(r.dtype(), dtypes::int8);
  std::vector<int> histogram(7, 0);
  for (int8_t v : r.to_vector<int8_t>()) {
    ASSERT_TRUE(v >= -3 && v < 4) << int(v);
    ++histogram[size_t(v + 3)];
  }
  for (int count : histogram) EXPECT_NEAR(double(count) / double(n), 1.0 / 7, 0.005);
  EXPECT_EQ(Tensor::randint(5, 6, {3}, dtypes::uint64).to_vector<uint64_t>(),
            (std::vector<uint64_t>{5, 5, 5}));
  const Stats big =
      stats_of(Tensor::randint(-(int64_t(1) << 31), int64_t(1) << 31, {1000}, dtypes::int64));
  EXPECT_LT(big.min, -double(int64_t(1) << 29));
  EXPECT_GT(big.max, double(int64_t(1) << 29));
}

// torch.nn.init's bounds for a (64, 32, 3, 3) weight: fan_in 288, fan_out 576.
TEST(TensorRandom, InitializersUseTorchFans) {
  Tensor::manual_seed(3);
  const Shape s{64, 32, 3, 3};
  const double ku = std::sqrt(2.0) * std::sqrt(3.0 / 288);
  const Tensor a = Tensor::kaiming_uniform(s);
  EXPECT_EQ(a.shape(), s);
  EXPECT_LE(a.abs().max().item<float>(), float(ku));
  EXPECT_GT(a.abs().max().item<float>(), float(0.99 * ku));
  const double leaky = std::sqrt(2.0 / (1 + 0.25)) * std::sqrt(3.0 / 288);
  EXPECT_LE(Tensor::kaiming_uniform(s, 0.5).abs().max().item<float>(), float(leaky));
  EXPECT_NEAR(Tensor::kaiming_normal(s).std().item<float>(), std::sqrt(2.0 / 288), 0.002);
  const double gu = std::sqrt(6.0 / (288 + 576));
  const Tensor g = Tensor::glorot_uniform(s);
  EXPECT_LE(g.abs().max().item<float>(), float(gu));
  EXPECT_GT(g.abs().max().item<float>(), float(0.99 * gu));
  EXPECT_NEAR(g.var().item<float>(), gu * gu / 3, 0.05 * gu * gu / 3);
}

TEST(TensorRandom, DropoutScalesSurvivorsAndIsReproducible) {
  const Tensor x = Tensor::ones({256, 512});
  EXPECT_EQ(x.dropout(0.5).node(), x.node());  // not training: the identity
  Training on;
  Tensor::manual_seed(11);
  const Tensor y = x.dropout(0.25);
  const std::vector<float> v = y.to_vector<float>();
  size_t zeros = 0;
  for (float f : v) {
    if (f == 0.0f)
      ++zeros;
    else
      ASSERT_EQ(f, 1.0f / 0.75f);
  }
  EXPECT_NEAR(double(zeros) / double(v.size()), 0.25, 0.005);
  EXPECT_NEAR(y.mean().item<float>(), 1.0f, 0.01f);
  Tensor::manual_seed(11);
  EXPECT_EQ(x.dropout(0.25).to_vector<float>(), v);
  EXPECT_EQ(x.dropout(0.0).node(), x.node());
  EXPECT_EQ(x.dropout(1.0).sum().item<float>(), 0.0f);
  // The same mask on both devices.
  EXPECT_TRUE(cpu_vk_agree([](const std::string& dev) {
    Tensor::manual_seed(12);
    return Tensor::ones({9, 7}, dtypes::float32, dev).dropout(0.5);
  }));
}

TEST(TensorRandom, MisuseNamesOpShapeAndDtype) {
  std::string e = error_of([] { (void)Tensor::rand({2, 3}, dtypes::int32); });
  EXPECT_NE(e.find("rand"), std::string::npos) << e;
  EXPECT_NE(e.find("int32"), std::string::npos) << e;
  EXPECT_NE(e.find("(2, 3)"), std::string::npos) << e;
  e = error_of([] { (void)Tensor::randn({-1}); });
  EXPECT_NE(e.find("randn"), std::string::npos) << e;
  e = error_of([] { (void)Tensor::randint(4, 4, {2}); });
  EXPECT_NE(e.find("randint"), std::string::npos) << e;
  e = error_of([] { (void)Tensor::randint(0, 300, {2}, dtypes::int8); });
  EXPECT_NE(e.find("int8"), std::string::npos) << e;
  e = error_of([] { (void)Tensor::randint(0, 3, {2}, dtypes::float32); });
  EXPECT_NE(e.find("float32"), std::string::npos) << e;
  e = error_of([] { (void)Tensor::kaiming_uniform({5}); });
  EXPECT_NE(e.find("kaiming_uniform"), std::string::npos) << e;
  EXPECT_NE(e.find("(5,)"), std::string::npos) << e;
  e = error_of([] { (void)Tensor::ones({2}).dropout(1.5); });
  EXPECT_NE(e.find("dropout"), std::string::npos) << e;
}
