// Tensor::to between devices (VK, VK:1, CPU): values arrive bit for bit, special values included;
// a copy is a schedule item of its own, not a kernel; gradients flow back through it; bad device
// names and mixed devices are clear errors.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include <vkgrad/core/copy_item.hpp>
#include <vkgrad/vkgrad.hpp>

#include "support/error_of.hpp"

namespace vkg {
namespace {

using test::error_of;

std::vector<uint32_t> bits_of(const std::vector<float>& v) {
  std::vector<uint32_t> out;
  for (float f : v) out.push_back(std::bit_cast<uint32_t>(f));
  return out;
}

const std::vector<float> special = {1.5f,
                                    -0.0f,
                                    0.0f,
                                    std::numeric_limits<float>::infinity(),
                                    -std::numeric_limits<float>::infinity(),
                                    std::numeric_limits<float>::quiet_NaN(),
                                    1e-42f,
                                    -3.25f};

TEST(TensorDevices, CopiesBetweenEveryPairKeepTheBits) {
  const std::vector<std::string> devices = {"VK", "VK:1", "CPU"};
  for (const auto& from : devices)
    for (const auto& to : devices) {
      Tensor x(special, {2, 4}, from);
      Tensor y = x.to(to);
      EXPECT_EQ(y.device(), canonical_device(to));
      EXPECT_EQ(y.shape(), (Shape{2, 4}));
      EXPECT_EQ(bits_of(y.to_vector<float>()), bits_of(special)) << from << " -> " << to;
    }
}

TEST(TensorDevices, Int64AndHalfTravelExactly) {
  const std::vector<int64_t> big = {INT64_MIN, -1, 0, (int64_t(1) << 53) + 1, INT64_MAX};
  EXPECT_EQ(Tensor(big, {5}, "VK").to("CPU").to("VK:1").to_vector<int64_t>(), big);
  Tensor h = Tensor(std::vector<float>{0.5f, -2.0f, 65504.0f}, {3}, "CPU").cast(dtypes::float16);
  EXPECT_EQ(h.to("VK").cast(dtypes::float32).to_vector<float>(),
            (std::vector<float>{0.5f, -2.0f, 65504.0f}));
}

TEST(TensorDevices, ACopyIsAScheduleItemNotAKernel) {
  Tensor x(std::vector<float>{1, 2, 3}, {3}, "VK");
  x.realize();
  Schedule s = create_schedule({x.to("CPU").node()});
  ASSERT_EQ(s.items.size(), 1u);
  EXPECT_TRUE(is_copy(s.items[0]));
  EXPECT_EQ(s.items[0].buffers[0]->device(), "CPU");
  EXPECT_EQ(s.items[0].buffers[1]->device(), "VK");
  // Lazy work before the copy is a kernel on the source device, work after it one on the
  // destination: kernel, copy, kernel.
  Schedule t = create_schedule({((x * 2).to("VK:1") + 1).node()});
  ASSERT_EQ(t.items.size(), 3u);
  EXPECT_FALSE(is_copy(t.items[0]));
  EXPECT_EQ(t.items[0].buffers[0]->device(), "VK");
  EXPECT_TRUE(is_copy(t.items[1]));
  EXPECT_FALSE(is_copy(t.items[2]));
  EXPECT_EQ(t.items[2].buffers[0]->device(), "VK:1");
}

TEST(TensorDevices, ComputationOnEachSideAgreesWithTheCpuDevice) {
  std::vector<float> a(64), b(64);
  for (int i = 0; i < 64; ++i)
    a[size_t(i)] = float(i) * 0.25f - 3, b[size_t(i)] = float(i % 7) - 2.5f;
  auto run = [&](const std::string& first, const std::string& second) {
    Tensor x(a, {8, 8}, first), y(b, {8, 8}, second);
    Tensor z = (x.exp2() * 0.5f).to(second) + y.permute({1, 0});
    return (z.sum(1).to(first) * Tensor(a, {8, 8}, first).max(0)).to_vector<float>();
  };
  const std::vector<float> expected = run("CPU", "CPU");
  EXPECT_EQ(run("VK", "CPU"), expected);
  EXPECT_EQ(run("CPU", "VK:1"), expected);
  EXPECT_EQ(run("VK", "VK:1"), expected);
}

TEST(TensorDevices, MovedViewsAndConstantsAreRealizedFirst) {
  Tensor x(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, "VK");
  EXPECT_EQ(x.permute({1, 0}).to("CPU").to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(x.flip({1}).shrink({{0, 2}, {1, 3}}).to("VK:1").to_vector<float>(),
            (std::vector<float>{2, 1, 5, 4}));
  EXPECT_EQ(Tensor::full({2, 2}, 7.0f, {}, "VK").to("CPU").to_vector<float>(),
            (std::vector<float>(4, 7.0f)));
  EXPECT_EQ(Tensor(2.5f).to("CPU").item<float>(), 2.5f);
  EXPECT_EQ(Tensor::zeros({0}, dtypes::float32, "VK").to("CPU").numel(), 0);
}

TEST(TensorDevices, GradientsFlowBackThroughCopies) {
  Tensor w = Tensor(std::vector<float>{1, -2, 3}, {3}, "VK").requires_grad_();
  Tensor c = w.to("CPU");
  Tensor v = w.to("VK:1");
  // d/dw sum(c*c) + sum(3 v) = 2 w + 3, gathered on VK from two other devices.
  Tensor loss = (c * c).sum() + (v * 3).sum().to("CPU");
  loss.backward();
  ASSERT_TRUE(w.grad());
  EXPECT_EQ(w.grad()->device(), "VK");
  EXPECT_EQ(w.grad()->to_vector<float>(), (std::vector<float>{5, -1, 9}));
  EXPECT_EQ(loss.item<float>(), 14.0f + 6.0f);
}

TEST(TensorDevices, ToInPlaceMovesALeafAndItsGradient) {
  Tensor w = Tensor(std::vector<float>{2, 4}, {2}, "VK").requires_grad_();
  (w * w).sum().backward();
  Tensor alias = w;
  w.to_("CPU");
  EXPECT_EQ(alias.device(), "CPU");  // every alias moved
  EXPECT_TRUE(w.requires_grad());
  ASSERT_TRUE(w.grad());
  EXPECT_EQ(w.grad()->device(), "CPU");
  (w * 3).sum().backward();  // accumulates on the new device
  EXPECT_EQ(w.grad()->to_vector<float>(), (std::vector<float>{7, 11}));
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{2, 4}));
}

TEST(TensorDevices, DeviceNamesAreCanonical) {
  Tensor x(std::vector<float>{1}, {1}, "VK");
  EXPECT_EQ(x.to("vk:0").node(), x.node());  // VK:0 is VK
  EXPECT_EQ(canonical_device("cpu"), "CPU");
  EXPECT_EQ(&device("VK:0"), &device("VK"));
  EXPECT_NE(&device("VK:1"), &device("VK"));
}

TEST(TensorDevices, BadDevicesAndMixedDevicesAreClearErrors) {
  Tensor x(std::vector<float>{1, 2}, {2}, "VK");
  EXPECT_NE(error_of([&] { x.to("VK:9"); }).find("no Vulkan device VK:9"), std::string::npos);
  EXPECT_NE(error_of([&] { x.to("VK:one"); }).find("VK:<index>"), std::string::npos);
  EXPECT_NE(error_of([&] { x.to("TPU"); }).find("no device named 'TPU'"), std::string::npos);
  const std::string mixed = error_of([&] { x + x.to("VK:1"); });
  EXPECT_NE(mixed.find("different devices (VK and VK:1)"), std::string::npos) << mixed;
  EXPECT_EQ((x + x.to("VK:1").to("VK")).to_vector<float>(),
            (std::vector<float>{2, 4}));  // still usable
}

TEST(TensorDevices, Debug2ListsTheCopies) {
  Tensor x(std::vector<float>{1, 2, 3, 4}, {4}, "VK");
  x.realize();
  testing::internal::CaptureStdout();
  {
    ScopedSetting debug("DEBUG", 2);
    (x.to("VK:1") * 2).to("CPU").realize();
  }
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("copy 16, VK:1 <- VK"), std::string::npos) << out;
  EXPECT_NE(out.find("copy 16, CPU <- VK:1"), std::string::npos) << out;
}

}  // namespace
}  // namespace vkg

namespace vkg {
namespace {

// One realize that goes back and forth between VK and VK:1 through lent intermediate memory:
// every hop must see the previous device's writes, and no device may overwrite memory a copy has
// yet to read. Compared with the same graph on one device.
TEST(TensorDevicesOrder, PingPongThroughLentMemoryAgreesWithTheCpuDevice) {
  std::vector<float> data(4096);
  for (size_t i = 0; i < data.size(); ++i) data[i] = float(i % 97) * 0.125f - 5;
  auto run = [&](const std::string& a, const std::string& b) {
    Tensor x(data, {64, 64}, a);
    Tensor t = x;
    for (int hop = 0; hop < 6; ++hop) {
      const std::string& here = hop % 2 ? a : b;
      // Intermediates on both sides, so the memory planner lends blocks around each copy.
      t = ((t.to(here) * 1.5f + 1.0f).relu() - 0.75f).permute({1, 0}).contiguous() * 0.5f;
      t = t + t.sum(0, true) * 0.001f;
    }
    return t.to(a).to_vector<float>();
  };
  // The same kernels on one Vulkan device: bit for bit. The CPU device sums in another order.
  const std::vector<float> one_device = run("VK", "VK");
  const std::vector<float> cpu = run("CPU", "CPU");
  for (int repeat = 0; repeat < 3; ++repeat) {
    EXPECT_EQ(run("VK", "VK:1"), one_device);
    const std::vector<float> mixed = run("VK", "CPU");
    ASSERT_EQ(mixed.size(), cpu.size());
    for (size_t i = 0; i < cpu.size(); ++i)
      ASSERT_NEAR(mixed[i], cpu[i], 1e-5f * (1 + std::abs(cpu[i]))) << i;
  }
}

TEST(TensorDevices, EverySpellingOfOneDeviceCombines) {
  // "vk", "VK" and "VK:0" name one device; tensors made with any of them combine without a `to`,
  // and every creation path (data, full, rand, arange) reports the one spelling realize uses.
  Tensor a(std::vector<float>{1.0f, 2.0f}, {2}, "vk");
  Tensor b(std::vector<float>{10.0f, 20.0f}, {2}, "VK:0");
  EXPECT_EQ(a.device(), "VK");
  EXPECT_EQ(b.device(), "VK");
  EXPECT_EQ((a + b).to_vector<float>(), (std::vector<float>{11.0f, 22.0f}));
  EXPECT_EQ(Tensor::full({2}, 3.0f, std::nullopt, "cpu:0").device(), "CPU");
  EXPECT_EQ(Tensor::rand({2}, dtypes::float32, "vk:0").device(), "VK");
  EXPECT_EQ(Tensor::empty({2}, dtypes::float32, "Vk:1").device(), "VK:1");
  Tensor c = Tensor::full({2}, 1.0f, std::nullopt, "vK") * b;
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{10.0f, 20.0f}));
}

}  // namespace
}  // namespace vkg
