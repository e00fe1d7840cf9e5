// Shared main() for every test executable. VKG_VALIDATION=1 turns the Khronos validation layer on
// for any Vulkan instance the tests create, also when a test binary is run by hand.
#include <gtest/gtest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  setenv("VKG_VALIDATION", "1", /*overwrite=*/0);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
