// tests/support/child_process.hpp: the environment a child gets. Tests that pin a setting in
// their child ("DEBUG=3", "VKG_HEURISTICS=") rely on it overriding what the parent has.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "support/child_process.hpp"
#include "support/scoped_env.hpp"

namespace vkg::test {
namespace {

constexpr const char* kChildEnv = "VKG_TEST_CHILD_PROCESS_CHILD";

// Exits nonzero (a failed expectation) unless it sees the values its parent passes.
TEST(ChildProcessChild, SeesTheValuesItWasGiven) {
  if (!std::getenv(kChildEnv))
    GTEST_SKIP() << "runs only as ChildProcess.ExtraEnvOverridesTheInheritedValue's child";
  const char* set = std::getenv("VKG_TEST_CHILD_SET");
  const char* kept = std::getenv("VKG_TEST_CHILD_KEPT");
  EXPECT_STREQ(set, "child");
  EXPECT_STREQ(kept, "parent");
}

TEST(ChildProcess, ExtraEnvOverridesTheInheritedValue) {
  const ScopedEnv set("VKG_TEST_CHILD_SET", "parent"), kept("VKG_TEST_CHILD_KEPT", "parent");
  EXPECT_EQ(
      run_child("ChildProcessChild.*", {std::string(kChildEnv) + "=1", "VKG_TEST_CHILD_SET=child"}),
      0);
}

}  // namespace
}  // namespace vkg::test
