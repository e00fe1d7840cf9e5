// One Vulkan runtime shared by every test of a test binary: starting the instance with the
// validation layer costs a fraction of a second, so tests pay it once. test_main.cpp destroys it
// after the last test so that messages from tearing down (leaked objects) still fail the run.
#pragma once
#include <memory>

#include <vkgrad/vk/runtime.hpp>

namespace vkg::test {

inline std::unique_ptr<vk::Runtime>& vk_runtime_slot() {
  static std::unique_ptr<vk::Runtime> runtime;
  return runtime;
}

inline vk::Runtime& vk_runtime() {
  auto& slot = vk_runtime_slot();
  if (!slot) slot = std::make_unique<vk::Runtime>();
  return *slot;
}

}  // namespace vkg::test
