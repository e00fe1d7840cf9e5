// Shifts by a tensor of amounts: torch's values in range and its rule outside [0, width) (left:
// 0; right: the sign fill), on Vulkan and the CPU device, for signed and unsigned dtypes.
#include <gtest/gtest.h>

#include "support/device_compare.hpp"
#include "support/error_of.hpp"

using namespace vkg;
using namespace vkg::test;

TEST(ShiftByTensor, InRangeAndOutOfRangeAmounts) {
  for (const char* dev : {"CPU", "VK"}) {
    const Tensor x(std::vector<int32_t>{1, -8, 5, -1, 3, 7}, {6}, dev);
    const Tensor bits(std::vector<int32_t>{0, 2, 31, 32, -1, 40}, {6}, dev);
    EXPECT_EQ(x.lshift(bits).to_vector<int32_t>(), (std::vector<int32_t>{1, -32, INT32_MIN, 0, 0, 0})) << dev;
    EXPECT_EQ(x.rshift(bits).to_vector<int32_t>(), (std::vector<int32_t>{1, -2, 0, -1, 0, 0})) << dev;
    const Tensor u(std::vector<uint8_t>{200, 200, 1}, {3}, dev);
    const Tensor ub(std::vector<uint8_t>{1, 8, 7}, {3}, dev);
    EXPECT_EQ(u.lshift(ub).to_vector<uint8_t>(), (std::vector<uint8_t>{144, 0, 128})) << dev;
    EXPECT_EQ(u.rshift(ub).to_vector<uint8_t>(), (std::vector<uint8_t>{100, 0, 0})) << dev;
    // Broadcast amounts, and int64 values.
    const Tensor wide(std::vector<int64_t>{1, 3}, {2, 1}, dev);
    EXPECT_EQ(wide.lshift(Tensor(std::vector<int64_t>{0, 40, 63}, {3}, dev)).to_vector<int64_t>(),
              (std::vector<int64_t>{1, int64_t(1) << 40, INT64_MIN, 3, int64_t(3) << 40, INT64_MIN}))
        << dev;
  }
  EXPECT_NE(error_of([] { Tensor(std::vector<float>{1}, {1}).lshift(Tensor(std::vector<int32_t>{1}, {1})); })
                .find("lshift: needs integer tensors"),
            std::string::npos);
}
