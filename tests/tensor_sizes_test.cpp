// Sizes at the edges: reduces over zero-size axes give the identity without reading the empty
// input, shapes whose element or byte count overflows int64 are refused where they are made, and
// slices with extreme steps get the shape Python's slicing gives.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "support/device_compare.hpp"
#include "support/error_of.hpp"

using namespace vkg;
using namespace vkg::test;

TEST(Sizes, ReducesOverAZeroSizeAxisGiveTheIdentityOnEveryDevice) {
  for (const char* dev : {"CPU", "VK"}) {
    const Tensor empty = Tensor::zeros({3, 0}, dtypes::float32, dev).contiguous();
    EXPECT_EQ(empty.sum(1).to_vector<float>(), (std::vector<float>{0, 0, 0})) << dev;
    EXPECT_EQ(empty.sum().item<float>(), 0.0f) << dev;
    EXPECT_EQ(empty.prod(1).to_vector<float>(), (std::vector<float>{1, 1, 1})) << dev;
    for (float m : empty.mean(1).to_vector<float>())
      EXPECT_TRUE(std::isnan(m)) << dev;  // torch: 0/0
    const Tensor ints = Tensor::zeros({0, 4}, dtypes::int32, dev).contiguous();
    EXPECT_EQ(ints.sum(0).to_vector<int>(), (std::vector<int>{0, 0, 0, 0})) << dev;
    // A matmul whose inner dimension is 0 is all zeros.
    const Tensor a = Tensor::ones({2, 0}, dtypes::float32, dev).contiguous();
    const Tensor b = Tensor::ones({0, 3}, dtypes::float32, dev).contiguous();
    EXPECT_EQ(a.matmul(b).to_vector<float>(), std::vector<float>(6, 0.0f)) << dev;
    EXPECT_EQ(a.matmul(b).shape(), (Shape{2, 3})) << dev;
    // Fused with elementwise work on both sides.
    EXPECT_EQ(((empty * 2).sum(1) + 1).to_vector<float>(), (std::vector<float>{1, 1, 1})) << dev;
    EXPECT_NE(error_of([&] { empty.max(1); }).find("max"), std::string::npos) << dev;
    // any of nothing is false and all of nothing is true, as torch.
    const Tensor none = Tensor::zeros({0}, dtypes::bool_, dev).contiguous();
    EXPECT_FALSE(none.any().item<bool>()) << dev;
    EXPECT_TRUE(none.all().item<bool>()) << dev;
  }
}

TEST(Sizes, ShapesThatOverflowAreRefusedWhereTheyAreMade) {
  const int64_t big = int64_t(1) << 32;
  EXPECT_NE(error_of([&] { Tensor::zeros({big, big}); }).find("zeros"), std::string::npos);
  EXPECT_NE(error_of([&] {
              Tensor::zeros({big, big});
            }).find("too many elements"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              Tensor::empty({int64_t(1) << 31, int64_t(1) << 31});
            }).find("empty"),
            std::string::npos);
  // 2^61 float32 elements are 2^63 bytes: the element count fits, the byte count does not.
  EXPECT_NE(error_of([&] { Tensor::empty({int64_t(1) << 61}); }).find("too many elements"),
            std::string::npos);
  EXPECT_NE(error_of([&] { Tensor::full({big, big, big}, 1.0f); }).find("full"), std::string::npos);
  const Tensor one = Tensor::ones({1, 1});
  EXPECT_NE(error_of([&] {
              one.expand({int64_t(1) << 40, int64_t(1) << 40});
            }).find("expand"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              one.reshape({big, big, 0}).reshape({big, big});
            }).find("reshape"),
            std::string::npos);
  EXPECT_NE(error_of([&] { one.pad({{0, INT64_MAX}, {0, 0}}); }).find("pad"), std::string::npos);
  EXPECT_NE(error_of([&] { one.pad({{0, big}, {0, big}}); }).find("pad"), std::string::npos);
  // No elements is a fine count, whatever the other dimensions are (torch agrees).
  EXPECT_EQ(Tensor::zeros({big, big, 0}).numel(), 0);
}

TEST(Sizes, SliceStepsAtTheLimitsOfInt64) {
  for (const char* dev : {"CPU", "VK"}) {
    const Tensor x = Tensor(std::vector<int>{0, 1, 2, 3, 4}, {5}, dev);
    // Python: list(range(5))[::-2**63] == [4], [::2**63-1] == [0].
    const Tensor down = x[{Slice{std::nullopt, std::nullopt, INT64_MIN}}];
    EXPECT_EQ(down.shape(), (Shape{1})) << dev;
    EXPECT_EQ(down.to_vector<int>(), (std::vector<int>{4})) << dev;
    const Tensor up = x[{Slice{std::nullopt, std::nullopt, INT64_MAX}}];
    EXPECT_EQ(up.to_vector<int>(), (std::vector<int>{0})) << dev;
    const Tensor tail = x[{Slice{INT64_MIN, INT64_MAX, INT64_MAX}}];
    EXPECT_EQ(tail.to_vector<int>(), (std::vector<int>{0})) << dev;
    EXPECT_EQ((x[{Slice{3, INT64_MIN, INT64_MIN}}].to_vector<int>()), (std::vector<int>{3})) << dev;
  }
}

TEST(Sizes, ReadingATensorTheHostCannotHoldIsAnError) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizers abort on a 4 TiB request instead of throwing std::bad_alloc";
#endif
  // 4 TiB: Lavapipe may hand out the device memory lazily, the host vector cannot be had.
  const std::string e =
      error_of([] { Tensor::empty({int64_t(1) << 40}, dtypes::float32, "VK").bytes(); });
  EXPECT_FALSE(e.empty());
  EXPECT_TRUE(e.find("bytes") != std::string::npos || e.find("memory") != std::string::npos) << e;
}
