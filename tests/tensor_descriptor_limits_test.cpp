// Kernels that bind their buffers by descriptor, at device limits lowered so that small tensors
// reach them (CTest tensor_descriptor_limits and tensor_descriptor_limits_storage set
// VKG_MAX_STORAGE_BUFFER_RANGE=4096, VKG_MAX_TEXEL_ELEMENTS=64, VKG_MAX_SAMPLED_IMAGES=8; without
// them these run at the device's own limits):
//   - the memory planner lends a small intermediate a block past maxStorageBufferRange and
//     maxTexelBufferElements: its descriptors span what the kernel touches, not the block;
//   - a kernel reads more operands than uniform texel buffers fit in the sampled-image limit.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include <vkgrad/core/context.hpp>
#include <vkgrad/core/memory_planner.hpp>
#include <vkgrad/core/schedule.hpp>
#include <vkgrad/vkgrad.hpp>

using namespace vkg;

namespace {

constexpr int64_t kN = 4096;  // 16 KiB of float32: past both lowered limits
constexpr int64_t kK = 16;    // 64 bytes: within both

struct Graph {
  Tensor a, t, out;
};

// x (realized, big) -> a = 2x + 1 (big intermediate) -> s = a[:K] + 0.25 (small) -> t = 3s
// (small; a's block is free by then, the only one, so the planner lends it) -> out = t + j.
// t's kernel writes t into the big block (a storage buffer); out's kernel reads it (a texel
// buffer, or a storage buffer with VKG_TEXEL_LOADS=0).
Graph planner_graph(const Tensor& x) {
  const Tensor a = (x * 2.0f + 1.0f).contiguous();
  const Tensor s = (a.shrink({{0, kK}}) + 0.25f).contiguous();
  const Tensor t = (s * 3.0f).contiguous();
  return {a, t, t.reshape({kK, 1}) + Tensor::arange(3).cast(dtypes::float32).reshape({1, 3})};
}

Tensor big_input() {
  return (Tensor::arange(kN).cast(dtypes::float32) * 0.5f).contiguous().realize();
}

}  // namespace

// The scenario itself: t's memory is a's block, kN * 4 bytes.
TEST(DescriptorLimits, ThePlannerLendsTheSmallIntermediateTheBigBlock) {
  const Tensor x = big_input();
  const Graph g = planner_graph(x);
  const Schedule sched = create_schedule({g.out.node()});
  plan_memory(sched, {g.out.node()}, {});
  // a is the only kN-element output; t the last kK-element one (s comes before it).
  const Allocation* a_block = nullptr;
  const Allocation* t_block = nullptr;
  for (const ScheduleItem& item : sched.items) {
    const Buffer& b = *item.buffers[0];
    if (b.count() == kN) a_block = b.allocation.get();
    if (b.count() == kK) t_block = b.allocation.get();
  }
  ASSERT_NE(a_block, nullptr);
  EXPECT_EQ(t_block, a_block);
}

// Threw "buffer 1 of 16384 bytes ... cannot be a texel buffer" (texel loads) or "exceeds
// maxStorageBufferRange" (t's storage descriptor) under the lowered limits: the range came from
// the block, not the tensor.
TEST(DescriptorLimits, ASmallIntermediateInABlockPastTheLimitsBindsItsOwnBytes) {
  const Tensor x = big_input();
  for (const int planned : {1, 0}) {
    SCOPED_TRACE(planned ? "planned" : "NO_MEMORY_PLANNER=1");
    ScopedSetting setting("NO_MEMORY_PLANNER", planned ? 0 : 1);
    const Graph g = planner_graph(x * 1.0f);  // a new graph each time
    const std::vector<float> v = g.out.to_vector<float>();
    ASSERT_EQ(v.size(), size_t(kK * 3));
    for (int64_t i = 0; i < kK; ++i)
      for (int64_t j = 0; j < 3; ++j)  // t[i] = 3 (2 * i / 2 + 1 + 0.25) = 3i + 3.75
        EXPECT_EQ(v[size_t(i * 3 + j)], float(3 * i) + 3.75f + float(j)) << i << "," << j;
  }
}

// out = x_0 + ... + x_19, twenty realized tensors in one kernel: with 8 sampled images, 8 are
// texel buffers and 12 storage buffers (the Program refused 20 texel buffers).
TEST(DescriptorLimits, TwentyReadOnlyOperandsPastTheSampledImageLimit) {
  constexpr int kOperands = 20;
  std::vector<Tensor> xs;
  std::vector<float> want(kK, 0.0f);
  for (int k = 0; k < kOperands; ++k) {
    std::vector<float> v(kK);
    for (int64_t i = 0; i < kK; ++i) want[size_t(i)] += v[size_t(i)] = float((k + 1) * (i + 2));
    xs.push_back(Tensor(v, {kK}).realize());
  }
  Tensor sum = xs[0];
  for (int k = 1; k < kOperands; ++k) sum = sum + xs[size_t(k)];
  const Schedule sched = create_schedule({sum.node()});
  ASSERT_EQ(sched.items.size(), 1u);  // one kernel reads all twenty
  EXPECT_EQ(sum.to_vector<float>(), want);
}
