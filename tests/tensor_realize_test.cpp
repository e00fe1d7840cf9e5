// Realizing tensors on the Vulkan device and on the CPU reference device: results, reuse of
// realized buffers, and the errors of reading values out.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <vkgrad/core/device.hpp>
#include <vkgrad/vkgrad.hpp>

using namespace vkg;

class Realize : public testing::TestWithParam<std::string> {
 protected:
  std::string dev() const { return GetParam(); }
  Tensor floats(std::vector<float> v, Shape s) const { return Tensor(v, std::move(s), dev()); }
};

TEST_P(Realize, SeedDotProduct) {
  Tensor a(std::vector<int32_t>{1, 2}, {2}, dev()), b(std::vector<int32_t>{3, 4}, {2}, dev());
  EXPECT_EQ(a.dot(b).item<int32_t>(), 11);
}

TEST_P(Realize, ElementwiseBroadcastAndReduce) {
  Tensor m = floats({1.5f, 1.5f, 1.5f, 1.5f, 1.5f, 1.5f}, {2, 3});
  EXPECT_EQ((m * 2).sum(1).to_vector<float>(), (std::vector<float>{9, 9}));
  Tensor x = floats({0, 1, 2, 3, 4, 5}, {2, 3}), row = floats({10, 20, 30}, {3});
  EXPECT_EQ((x + row).to_vector<float>(), (std::vector<float>{10, 21, 32, 13, 24, 35}));
  EXPECT_EQ(x.max(0).to_vector<float>(), (std::vector<float>{3, 4, 5}));
  EXPECT_EQ(x.permute({1, 0}).to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST_P(Realize, VarianceOfOneToFour) {
  Tensor x = floats({1, 2, 3, 4}, {4});
  EXPECT_NEAR(x.var().item<float>(), 5.0f / 3.0f, 2e-7);
}

TEST_P(Realize, RealizedTensorsAreNotRecomputed) {
  Tensor x = floats({1, 2, 3}, {3});
  Tensor y = (x * 10).realize();
  EXPECT_EQ(y.node()->op, Ops::BUFFER);
  EXPECT_EQ((y + 1).to_vector<float>(), (std::vector<float>{11, 21, 31}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{10, 20, 30}));
}

TEST_P(Realize, ConstantsZeroSizeAndZeroD) {
  EXPECT_EQ(Tensor::full({2, 2}, 7, dtypes::int32, dev()).to_vector<int32_t>(), (std::vector<int32_t>(4, 7)));
  EXPECT_EQ(Tensor::zeros({0, 3}, dtypes::float32, dev()).to_vector<float>().size(), 0u);
  EXPECT_EQ(Tensor::full({}, 2.5, std::nullopt, dev()).item<float>(), 2.5f);
  EXPECT_EQ(Tensor::zeros({0}, dtypes::float32, dev()).sum().item<float>(), 0.0f);
}

TEST_P(Realize, ReadingOutChecksTypeAndCount) {
  Tensor x = floats({1, 2}, {2});
  EXPECT_THROW(x.to_vector<int32_t>(), Error);
  EXPECT_THROW(x.item<float>(), Error);
  EXPECT_EQ(x.sum().item<float>(), 3.0f);  // still usable after the errors
}

TEST_P(Realize, NoOptAndDefaultOptsAgree) {
  std::vector<float> a(64 * 48), b(48 * 32);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(int(i % 13) - 6);
  for (size_t i = 0; i < b.size(); ++i) b[i] = float(int(i % 7) - 3);
  Tensor ta = floats(a, {64, 48}), tb = floats(b, {48, 32});
  std::vector<float> plain, opt;
  {
    ScopedSetting noopt("NOOPT", 1);
    plain = ta.matmul(tb).to_vector<float>();
  }
  opt = (ta.matmul(tb) + 0).to_vector<float>();
  EXPECT_EQ(plain, opt);  // small integers: both orders of summation are exact
}

INSTANTIATE_TEST_SUITE_P(Devices, Realize, testing::Values("CPU", "VK"));

TEST(RealizeErrors, UnknownDeviceNamesTheKnownOnes) {
  try {
    Tensor({1, 2}).to_vector<int32_t>();  // warm up the default device
    Tensor(std::vector<float>{1}, {1}, "TPU").realize();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TPU"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("CPU"), std::string::npos) << e.what();
  }
}

// Compile before record: a schedule's kernels are all compiled (in parallel where there are
// cores) before the first is recorded, so run() never compiles one itself.
TEST(RealizeCompile, EveryKernelOfAScheduleIsCompiledBeforeRecording) {
  Device& vk = device("VK");
  const Device::CompileCounts before = vk.compile_counts();
  std::vector<float> v(6 * 5);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(int(i % 11) - 5) * 0.25f;
  // Constants no other test uses, so the kernels are new to this process: softmax's three.
  Tensor x = Tensor(v, {6, 5}) * 1.375f;
  const std::vector<float> got = x.softmax(1).to_vector<float>();
  const Device::CompileCounts after = vk.compile_counts();
  EXPECT_GE(after.compiled - before.compiled, 2);
  EXPECT_EQ(after.compiled_in_run, before.compiled_in_run);
  for (int r = 0; r < 6; ++r) {
    double mx = -1e30, sum = 0;
    for (int c = 0; c < 5; ++c) mx = std::max(mx, double(v[size_t(r * 5 + c)]) * 1.375);
    for (int c = 0; c < 5; ++c) sum += std::exp(double(v[size_t(r * 5 + c)]) * 1.375 - mx);
    for (int c = 0; c < 5; ++c)
      EXPECT_NEAR(got[size_t(r * 5 + c)], std::exp(double(v[size_t(r * 5 + c)]) * 1.375 - mx) / sum, 1e-6);
  }
}
