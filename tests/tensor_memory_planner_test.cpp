// The memory planner: intermediates of one schedule whose lifetimes do not overlap share device
// memory, and the values are those of a run without it (NO_MEMORY_PLANNER=1).
#include <gtest/gtest.h>

#include <set>

#include <vkgrad/core/buffer.hpp>
#include <vkgrad/core/context.hpp>
#include <vkgrad/core/device.hpp>
#include <vkgrad/core/memory_planner.hpp>
#include <vkgrad/vkgrad.hpp>

using namespace vkg;

namespace {

constexpr int64_t kN = 1 << 15;  // 128 KiB of float32 per intermediate, one kernel to sum

// Six intermediates in a chain, each read only by the next, then their sum.
Tensor chain(const Tensor& x) {
  Tensor y = x;
  for (int i = 0; i < 6; ++i) y = (y * 0.5f + float(i)).contiguous();
  return y.sum();
}

Tensor input() {
  std::vector<float> v(static_cast<size_t>(kN));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(int(i % 97) - 48) * 0.125f;
  return Tensor(v, {kN}).realize();
}

}  // namespace

TEST(MemoryPlanner, AChainOfIntermediatesTakesTwoBlocks) {
  const Tensor x = input();
  const Tensor out = chain(x);
  const Schedule sched = create_schedule({out.node()});
  const std::unordered_set<int64_t> placed = plan_memory(sched, {out.node()}, {});
  EXPECT_EQ(placed.size(), 6u);
  std::set<const Allocation*> blocks;
  for (const ScheduleItem& item : sched.items)
    if (placed.count(item.buffers[0]->id())) blocks.insert(item.buffers[0]->allocation.get());
  EXPECT_EQ(blocks.size(), 2u);
}

TEST(MemoryPlanner, ValuesAreThoseWithoutItAndThePeakIsLower) {
  Device& vk = device("VK");
  const Tensor x = input();
  auto run = [&](bool planned, int64_t& peak_above) {
    ScopedSetting setting("NO_MEMORY_PLANNER", planned ? 0 : 1);
    Tensor out = chain(x * 1.0f);  // a new graph: nothing of it is in the realized-node cache
    const int64_t before = vk.memory_counts().live_bytes;
    vk.reset_peak_bytes();
    out.realize();
    peak_above = vk.memory_counts().peak_bytes - before;
    return out.item<float>();
  };
  int64_t with = 0, without = 0;
  const float unplanned = run(false, without);
  const float planned = run(true, with);
  EXPECT_EQ(planned, unplanned);
  double want = 0;  // the chain in closed form: y6 = x / 64 + c, c = sum_i i / 2^(5 - i)
  const double c = 0.0 / 32 + 1.0 / 16 + 2.0 / 8 + 3.0 / 4 + 4.0 / 2 + 5.0;
  for (int64_t i = 0; i < kN; ++i) want += double(int(i % 97) - 48) * 0.125 / 64 + c;
  EXPECT_NEAR(planned, want, std::abs(want) * 1e-3);  // float32 sums of 32768 terms
  // Six intermediates of 128 KiB without the planner, two blocks with it.
  EXPECT_GE(without - with, 3 * kN * 4) << "with " << with << " without " << without;
}

// A scatter's result is its target copy's storage under a new version id. When the planner lends
// that storage to a later intermediate, the realized-node cache must forget the scatter too: a
// second graph reading it then computes it again, not the later intermediate's bytes.
TEST(MemoryPlanner, AScatterWhoseMemoryWasLentIsComputedAgain) {
  for (const std::string dev : {"VK", "CPU"}) {
    SCOPED_TRACE(dev);
    std::vector<int32_t> to(static_cast<size_t>(kN));
    for (size_t i = 0; i < to.size(); ++i) to[i] = int32_t((i * 7) % size_t(kN));
    const Tensor y =
        Tensor::zeros({kN}, dtypes::float32, dev)
            .scatter_add(0, Tensor(to, {kN}, dev), Tensor::full({kN}, 2.0f, dtypes::float32, dev));
    // y's memory goes to the third intermediate, once the second has read y.
    Tensor first = (((y + 1).contiguous() * 3).contiguous() - 5).contiguous().sum();
    EXPECT_EQ(first.item<float>(), float(kN * 4));
    EXPECT_EQ((y * 10).sum().item<float>(), float(kN * 20));
  }
}

// Nothing keeps memory it no longer needs: a tensor made from host data drops its host copy once
// the device has it.
TEST(HostData, IsDroppedOnceUploaded) {
  Tensor t(std::vector<float>{1, 2, 3}, {3});
  const UOp* n = t.node().get();
  while (n->op != Ops::BUFFER) n = n->src[0].get();
  const Buffer& b = buffer_of(*n);
  ASSERT_TRUE(b.initial_data);
  EXPECT_EQ((t * 2).to_vector<float>(), (std::vector<float>{2, 4, 6}));
  EXPECT_FALSE(b.initial_data);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 2, 3}));
}
