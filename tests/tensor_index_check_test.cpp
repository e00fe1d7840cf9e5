// CHECK_INDICES=1: index values out of range raise an error naming the op, on every device; by
// default they select nothing (zeros): an indexed load masks them, a one-hot mask matches none.
#include <gtest/gtest.h>

#include <vkgrad/vkgrad.hpp>

#include "support/error_of.hpp"

using namespace vkg;
using vkg::test::error_of;

TEST(IndexCheck, OutOfRangeIndicesRaiseWhenChecked) {
  for (const char* dev : {"CPU", "VK"}) {
    const Tensor x = Tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, dev);
    const Tensor bad = Tensor(std::vector<int>{0, 3}, {2, 1}, dev);
    const Tensor negative = Tensor(std::vector<int>{-1, 0}, {2, 1}, dev);
    const Tensor weight = Tensor::ones({4, 2}, dtypes::float32, dev);
    const Tensor logits = Tensor::ones({2, 3}, dtypes::float32, dev);
    // Unchecked (the default): nothing is read out of range, the position selects zeros.
    EXPECT_EQ(x.gather(1, bad).to_vector<float>(), (std::vector<float>{1, 0})) << dev;
    ScopedSetting checked("CHECK_INDICES", 1);
    std::string e = error_of([&] { x.gather(1, bad); });
    EXPECT_EQ(e.rfind("gather: index 3 (element 1", 0), 0u) << e;
    EXPECT_NE(e.find("dimension 1 of size 3"), std::string::npos) << e;
    e = error_of([&] { x.gather(1, negative); });
    EXPECT_EQ(e.rfind("gather: index -1", 0), 0u) << e;
    e = error_of([&] { Tensor(std::vector<int>{1, 4}, {2}, dev).embedding(weight); });
    EXPECT_EQ(e.rfind("embedding: index 4", 0), 0u) << e;
    e = error_of([&] { Tensor(std::vector<int>{5}, {1}, dev).one_hot(3); });
    EXPECT_EQ(e.rfind("one_hot: index 5", 0), 0u) << e;
    e = error_of([&] {
      logits.sparse_categorical_crossentropy(Tensor(std::vector<int>{0, 3}, {2}, dev));
    });
    EXPECT_EQ(e.rfind("sparse_categorical_crossentropy: index 3", 0), 0u) << e;
    e = error_of([&] { x.take(Tensor(std::vector<int>{6}, {1}, dev)); });
    EXPECT_EQ(e.rfind("take: index 6", 0), 0u) << e;
    e = error_of([&] { x.index_select(0, Tensor(std::vector<int>{0, 2}, {2}, dev)); });
    EXPECT_EQ(e.rfind("index_select: index 2", 0), 0u) << e;
    e = error_of([&] { x[{Slice{}, Tensor(std::vector<int>{-4}, {1}, dev)}]; });
    EXPECT_EQ(e.rfind("index: index -1", 0), 0u) << e;  // -4 counted from the end of 3
    e = error_of([&] { x.scatter_add(1, bad, x); });
    EXPECT_EQ(e.rfind("scatter_add: index 3", 0), 0u) << e;
    EXPECT_EQ(x.take(Tensor(std::vector<int>{-6}, {1}, dev)).to_vector<float>(),
              (std::vector<float>{1}));
    // In range, and the loss's ignore_index, pass.
    EXPECT_EQ(x.gather(1, Tensor(std::vector<int>{2, 0}, {2, 1}, dev)).to_vector<float>(),
              (std::vector<float>{3, 4}))
        << dev;
    EXPECT_EQ(error_of([&] {
                logits.sparse_categorical_crossentropy(Tensor(std::vector<int>{0, -1}, {2}, dev))
                    .realize();
              }),
              "")
        << dev;
  }
}
