// Fails the running test when the Vulkan validation layer reported anything during it, and prints
// the messages. Tests that provoke a message on purpose call acknowledge_validation_messages().
#pragma once
#include <gtest/gtest.h>

#include <cstddef>
#include <string>

#include <vkgrad/vk/instance.hpp>

namespace vkg::test {

// Messages up to this count are accounted for (reported by an earlier test, or expected).
inline std::size_t& validation_baseline() {
  static std::size_t seen = 0;
  return seen;
}

inline void acknowledge_validation_messages() {
  validation_baseline() = vk::validation_message_count();
  vk::take_validation_messages();
}

// The messages since the baseline, as one string; moves the baseline past them.
inline std::string take_unacknowledged_validation_messages() {
  const std::size_t now = vk::validation_message_count();
  if (now == validation_baseline()) return {};
  std::string text = std::to_string(now - validation_baseline()) + " Vulkan validation message(s):";
  for (const std::string& m : vk::take_validation_messages()) text += "\n  " + m;
  validation_baseline() = now;
  return text;
}

class ValidationListener : public testing::EmptyTestEventListener {
  void OnTestStart(const testing::TestInfo&) override {
    // Messages between tests (runtime start-up) belong to the next test to run.
  }
  // gtest calls OnTestEnd listeners in reverse order, so this runs before the result printer and
  // the failure is attributed to the test that caused the messages.
  void OnTestEnd(const testing::TestInfo&) override {
    std::string text = take_unacknowledged_validation_messages();
    if (!text.empty()) ADD_FAILURE() << text;
  }
};

}  // namespace vkg::test
