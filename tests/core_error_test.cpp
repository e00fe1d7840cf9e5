#include <gtest/gtest.h>

#include <vkgrad/core/error.hpp>

TEST(Error, SubclassesAreCaughtAsError) {
  try {
    throw vkg::OutOfMemory("allocating 8 GiB of device memory");
  } catch (const vkg::Error& e) {
    EXPECT_STREQ(e.what(), "allocating 8 GiB of device memory");
  }
}
