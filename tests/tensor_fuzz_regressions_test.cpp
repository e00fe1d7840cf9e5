// Silent wrong answers the differential fuzzers found (tests/tensor_differential_fuzz*_test.cpp),
// each cut down to the smallest program that still showed it, checked on both devices against the
// value torch gives.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>

#include "support/device_compare.hpp"
#include "support/fuzz_host_ops.hpp"

using namespace vkg;
using namespace vkg::test;
using vkg::fuzz::HostArray;

namespace {
const std::vector<std::string> kDevices = {"CPU", "VK"};
}  // namespace

// Elementwise fuzzer seeds 800062, 800611: the max of an int32 value the rewriter folds to the
// constant 0 gave INT_MIN (the reduce's start value) on VK.
TEST(FuzzRegressions, IntMaxOfFoldedZeroIsZero) {
  for (const std::string& dev : kDevices) {
    SCOPED_TRACE(dev);
    const Tensor x(std::vector<int32_t>{3, -4, 5, 6, 7, 8}, {2, 3}, dev);
    const Tensor zero = x.lt(x).cast(dtypes::int32);
    EXPECT_EQ(zero.max({1}).to_vector<int32_t>(), (std::vector<int32_t>{0, 0}));
    EXPECT_EQ(zero.max({}).item<int32_t>(), 0);
    EXPECT_EQ(zero.min({1}).to_vector<int32_t>(), (std::vector<int32_t>{0, 0}));
  }
}

