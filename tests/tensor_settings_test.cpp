// Settings set from code with ScopedSetting take effect for the realizes they wrap, also when the
// device was opened before them under other settings: they are read where a realize starts and
// passed down (core/run_options.hpp), never fixed when the device opens.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include <vkgrad/vkgrad.hpp>

using namespace vkg;

namespace {

// The device times of the kernels (not the copies) in DEBUG=2 output: the "tm <us>us/" field.
std::vector<double> kernel_times_us(const std::string& log) {
  std::vector<double> out;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("*** VK", 0) != 0 || line.find(" copy ") != std::string::npos) continue;
    const size_t tm = line.find(" tm ");
    if (tm != std::string::npos) out.push_back(std::stod(line.substr(tm + 4)));
  }
  return out;
}

void open_vk_device_quietly() {
  ScopedSetting quiet("DEBUG", 0);
  EXPECT_EQ(Tensor(std::vector<int32_t>{1, 2}, {2}, "VK").sum().item<int32_t>(), 3);
}

}  // namespace

// DEBUG=2 set after the device opened printed `tm 0.00us`: the device chose at open whether to
// time its kernels.
TEST(SettingsFromCode, DebugTwoTimesKernelsOnADeviceOpenedWithoutIt) {
  open_vk_device_quietly();
  const std::vector<float> v(1 << 16, 1.0f);
  std::string log;
  {
    ScopedSetting debug("DEBUG", 2);
    testing::internal::CaptureStdout();
    EXPECT_EQ((Tensor(v, {int64_t(v.size())}, "VK") * 3.25f).sum().item<float>(), 3.25f * 65536);
    log = testing::internal::GetCapturedStdout();
  }
  const std::vector<double> times = kernel_times_us(log);
  ASSERT_FALSE(times.empty()) << log;
  for (double t : times) EXPECT_GT(t, 0.0) << log;

  // And off again once the scope ends: nothing printed.
  testing::internal::CaptureStdout();
  EXPECT_EQ((Tensor(v, {int64_t(v.size())}, "VK") * 3.25f).sum().item<float>(), 3.25f * 65536);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "");
}

TEST(SettingsFromCode, DebugFourPrintsTheGlslOfANewKernel) {
  open_vk_device_quietly();
  ScopedSetting debug("DEBUG", 4);
  testing::internal::CaptureStdout();
  EXPECT_EQ((Tensor(std::vector<float>{1, 2, 3}, {3}, "VK") * 1.75f).to_vector<float>(),
            (std::vector<float>{1.75f, 3.5f, 5.25f}));
  const std::string log = testing::internal::GetCapturedStdout();
  EXPECT_NE(log.find("void main()"), std::string::npos) << log;
}

// NOOPT is part of the compiled-kernel cache key: the same kernel under NOOPT=1 and without it is
// compiled twice, each with its own opts.
TEST(SettingsFromCode, NoOptFromCodeCompilesItsOwnKernel) {
  open_vk_device_quietly();
  const std::vector<float> v(8192, 2.0f);
  auto opts_log = [&](int noopt) {
    ScopedSetting n("NOOPT", noopt), debug("DEBUG", 3);
    testing::internal::CaptureStdout();
    EXPECT_EQ((Tensor(v, {8192}, "VK") + 0.625f).sum().item<float>(), 8192 * 2.625f);
    return testing::internal::GetCapturedStdout();
  };
  const std::string plain = opts_log(1), optimized = opts_log(0), plain_again = opts_log(1);
  EXPECT_NE(plain.find("opts=[]"), std::string::npos) << plain;
  EXPECT_EQ(optimized.find("opts=[]"), std::string::npos) << "the NOOPT=1 kernel was reused:\n"
                                                          << optimized;
  EXPECT_EQ(plain_again.find("opts="), std::string::npos) << "compiled again: " << plain_again;
}
