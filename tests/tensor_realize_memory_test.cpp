// Reading and realizing tensors in a loop (a training loop reads its loss every step) must not
// grow what the library holds: the realized-node records, the device memory, the live nodes.
// Asserted on counts and bytes, not on timing.
#include <gtest/gtest.h>

#include <vkgrad/core/counters.hpp>
#include <vkgrad/core/schedule.hpp>
#include <vkgrad/vkgrad.hpp>

using namespace vkg;

namespace {

struct Held {
  size_t realized = realized_node_count();
  int64_t bytes = global_counters().mem_used;
  size_t nodes = live_uop_count();
};

}  // namespace

TEST(RealizeMemory, ReadingNewTensorsPinsNothing) {
  Tensor(std::vector<float>{0}, {1}, "VK").item<float>();  // opens the device
  const Held before;
  for (int i = 0; i < 10000; ++i) {
    Tensor t(std::vector<float>{float(i)}, {1}, "VK");
    ASSERT_EQ(t.item<float>(), float(i));
    ASSERT_EQ(t.to_vector<float>().size(), 1u);
    ASSERT_EQ(t.bytes().size(), 4u);
  }
  const Held after;
  EXPECT_EQ(after.realized, before.realized);
  EXPECT_EQ(after.bytes, before.bytes);
  EXPECT_EQ(after.nodes, before.nodes);
}

TEST(RealizeMemory, ReadingOneTensorOftenHoldsNothingMore) {
  Tensor t = (Tensor(std::vector<float>{1, 2, 3, 4}, {4}, "VK") * 2).realize();
  Tensor total = t.sum().realize();
  const Held before;
  for (int i = 0; i < 10000; ++i) {
    ASSERT_EQ(total.item<float>(), 20.0f);
    ASSERT_EQ(t.to_vector<float>()[3], 8.0f);
    ASSERT_EQ(t.bytes().size(), 16u);
  }
  const Held after;
  EXPECT_EQ(after.realized, before.realized);
  EXPECT_EQ(after.bytes, before.bytes);
}

// The shape of a training step: new values computed from the old ones, the loss read back. Once
// a step's lazy nodes are gone, so are the records and buffers of their values.
TEST(RealizeMemory, ALoopOfStepsHoldsOnlyTheLiveValues) {
  Tensor w = Tensor(std::vector<float>(64, 1.0f), {64}, "VK").realize();
  auto step = [&] {
    Tensor next = (w * 0.5f + 1.0f).contiguous();
    Tensor loss = (next * next).sum();
    std::vector<Tensor*> outs{&next, &loss};
    realize(outs);
    w = next;
    return loss.item<float>();
  };
  step();
  const Held before;
  float loss = 0;
  for (int i = 0; i < 2000; ++i) loss = step();
  const Held after;
  EXPECT_NEAR(loss, 64 * 4.0f, 1e-3f);  // w converges to 2
  EXPECT_EQ(after.realized, before.realized);
  EXPECT_EQ(after.bytes, before.bytes);
  EXPECT_EQ(after.nodes, before.nodes);
}
