// VKG_HEURISTICS=gpu (devices/vk_device.cpp) gives a CPU Vulkan device (Lavapipe) a GPU's kernel
// heuristics, so that a failure seen on a GPU reruns with the GPU's kernels in CI. It is read
// where the device opens: a child process sums a long vector with DEBUG=3, which prints each
// kernel's opts, with the setting and without it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <vkgrad/vkgrad.hpp>

#include "support/child_process.hpp"

namespace vkg {
namespace {

constexpr const char* kChildEnv = "VKG_TEST_HEURISTICS_CHILD";

TEST(HeuristicsSettingChild, SumsALongVector) {
  if (!std::getenv(kChildEnv))
    GTEST_SKIP() << "runs only as HeuristicsSetting.GpuHeuristicsGroupALongSumOnAnyDevice's child";
  EXPECT_EQ(Tensor::ones({1 << 16}).contiguous().sum().item<float>(), 65536.0f);
}

// The child's DEBUG=3 output with VKG_HEURISTICS set to `value` ("" as unset); its exit status
// is expected to be `expected_status`.
std::string child_log(const std::string& value, int expected_status = 0) {
  const std::filesystem::path log =
      std::filesystem::temp_directory_path() /
      ("vkgrad-heuristics-" + std::to_string(::getpid()) + "-" + (value.empty() ? "unset" : value));
  const int status = test::run_child(
      "HeuristicsSettingChild.*",
      {std::string(kChildEnv) + "=1", "DEBUG=3", "VKG_HEURISTICS=" + value}, log.string());
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::remove(log);
  EXPECT_EQ(status, expected_status) << text.str();
  return text.str();
}

// A GPU's heuristics split a long reduce with few outputs over a workgroup (GROUP); Lavapipe's
// take none (shared memory and barriers are per-lane loops there).
TEST(HeuristicsSetting, GpuHeuristicsGroupALongSumOnAnyDevice) {
  const std::string gpu = child_log("gpu"), own = child_log("");
  EXPECT_NE(gpu.find("GROUP("), std::string::npos) << gpu;
  if (own.find("GROUP(") == std::string::npos) {
    EXPECT_NE(own, gpu);  // a CPU device: its own heuristics made other kernels
  }
}

// A mistyped value once kept the device's own heuristics silently: it is a vkg::Error naming the
// setting and the values it takes.
TEST(HeuristicsSetting, AnUnknownValueIsAnErrorNamingTheSetting) {
  const std::string log = child_log("GPU", /*expected_status=*/1);
  EXPECT_NE(log.find("VKG_HEURISTICS=GPU"), std::string::npos) << log;
  EXPECT_NE(log.find("'gpu'"), std::string::npos) << log;
}

}  // namespace
}  // namespace vkg
