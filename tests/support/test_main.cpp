// Shared main() for every test executable. VKG_VALIDATION=1 turns the Khronos validation layer on
// for any Vulkan instance the tests create, also when a test binary is run by hand. A validation
// message fails the test during which it arrived; one that arrives while the shared runtime is
// torn down, after the last test, fails the run.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "support/validation_listener.hpp"
#include "support/vk_fixture.hpp"

int main(int argc, char** argv) {
  setenv("VKG_VALIDATION", "1", /*overwrite=*/0);
  testing::InitGoogleTest(&argc, argv);
  // gtest takes ownership of its listeners.
  testing::UnitTest::GetInstance()->listeners().Append(new vkg::test::ValidationListener);
  int rc = RUN_ALL_TESTS();
  vkg::test::vk_runtime_slot().reset();
  std::string late = vkg::test::take_unacknowledged_validation_messages();
  if (!late.empty()) {
    std::fprintf(stderr, "after the last test, while shutting Vulkan down: %s\n", late.c_str());
    rc = 1;
  }
  return rc;
}
