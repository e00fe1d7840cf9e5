// Multi-output kernels (core/schedule_multi_output.hpp): elementwise stores of one iteration space
// in one realize become one kernel of several outputs, with the values separate kernels give, on
// Vulkan and on the CPU device; an in-place write is never merged with a read of its old value;
// the memory planner gives each output memory of its own; a Jit replays the merged kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include <vkgrad/core/buffer.hpp>
#include <vkgrad/core/context.hpp>
#include <vkgrad/core/counters.hpp>
#include <vkgrad/core/memory_planner.hpp>
#include <vkgrad/core/schedule.hpp>
#include <vkgrad/vkgrad.hpp>

using namespace vkg;

namespace {

const Buffer& held(const Tensor& t) {
  const UOp* n = t.node().get();
  while (n->op != Ops::BUFFER) n = n->src[0].get();
  return buffer_of(*n);
}

// Realizes the tensors in one schedule; returns the kernels it ran.
int64_t realize_together(std::vector<Tensor*> tensors) {
  const int64_t before = global_counters().kernels;
  realize(std::span<Tensor* const>(tensors));
  return global_counters().kernels - before;
}

const std::vector<float> kX{1.5f, -2.0f, 3.25f, 0.5f, -1.0f, 4.0f};
const std::vector<float> kY{0.25f, 1.0f, -0.5f, 2.0f, 8.0f, -3.0f};

class MultiOutput : public testing::TestWithParam<std::string> {
 protected:
  Tensor make(const std::vector<float>& v) const { return Tensor(v, {6}, GetParam()).realize(); }
};

}  // namespace

TEST_P(MultiOutput, TwoElementwiseOutputsOfOneShapeAreOneKernel) {
  const Tensor x = make(kX), y = make(kY);
  for (const int on : {1, 0}) {
    SCOPED_TRACE(on ? "merged" : "MULTI_OUTPUT=0");
    ScopedSetting setting("MULTI_OUTPUT", on);
    Tensor a = x * 2 + y, b = x - y * 3;
    EXPECT_EQ(realize_together({&a, &b}), on ? 1 : 2);
    const std::vector<float> got_a = a.to_vector<float>(), got_b = b.to_vector<float>();
    for (size_t i = 0; i < kX.size(); ++i) {  // exact: halves and quarters of small numbers
      EXPECT_EQ(got_a[i], kX[i] * 2 + kY[i]) << i;
      EXPECT_EQ(got_b[i], kX[i] - kY[i] * 3) << i;
    }
  }
}

// Adam's shape: m is assigned, then the weight's update reads the new m at the element m's store
// writes. The merged kernel uses the value it computed, and both writes stay in place.
TEST_P(MultiOutput, ALaterOutputReadsTheNewValueOfAnEarlierOne) {
  Tensor m = make(kX), w = make(kY);
  const Tensor g = make({1, 2, 3, 4, 5, 6});
  const int64_t m_storage = held(m).storage_id(), w_storage = held(w).storage_id();
  std::vector<float> want_m = kX, want_w = kY;
  for (int step = 0; step < 3; ++step) {
    m.assign(m * 0.5f + g);
    w.assign(w - m * 0.25f);
    EXPECT_EQ(realize_together({&w, &m}), 1) << step;
    for (size_t i = 0; i < 6; ++i) {
      want_m[i] = want_m[i] * 0.5f + float(i + 1);
      want_w[i] = want_w[i] - want_m[i] * 0.25f;
    }
    EXPECT_EQ(m.to_vector<float>(), want_m) << step;
    EXPECT_EQ(w.to_vector<float>(), want_w) << step;
  }
  EXPECT_EQ(held(m).storage_id(), m_storage);
  EXPECT_EQ(held(w).storage_id(), w_storage);
}

// A kernel that reads w's old value (at another element, or at the same one) and w's in-place
// assign stay two kernels, the reader first: in one kernel the store of one element could land
// before another invocation's (or the same invocation's) read of it.
TEST_P(MultiOutput, AnInPlaceWriteIsNotMergedWithAReadOfTheOldValue) {
  for (const bool flipped : {true, false}) {
    SCOPED_TRACE(flipped ? "flipped" : "same element");
    Tensor w = make(kX);
    Tensor old = flipped ? w.flip({0}) * 2 : w * 2;
    w.assign(w + 1);
    EXPECT_EQ(realize_together({&old, &w}), 2);
    const std::vector<float> got_old = old.to_vector<float>(), got_w = w.to_vector<float>();
    for (size_t i = 0; i < 6; ++i) {
      EXPECT_EQ(got_old[i], (flipped ? kX[5 - i] : kX[i]) * 2) << i;
      EXPECT_EQ(got_w[i], kX[i] + 1) << i;
    }
  }
}

// A later output that reads an earlier one's output at another element (a flip of the new m)
// cannot take the value from registers: two kernels.
TEST_P(MultiOutput, AReadOfAnotherOutputAtAnotherElementIsTwoKernels) {
  Tensor m = make(kX);
  m.assign(m * 2);
  Tensor r = m.flip({0}) + 1;
  EXPECT_EQ(realize_together({&m, &r}), 2);
  const std::vector<float> got = r.to_vector<float>();
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(got[i], kX[5 - i] * 2 + 1) << i;
}

// Stores through different views (another shape, or a transposed order) are not one iteration
// space: separate kernels.
TEST_P(MultiOutput, StoresOfDifferentShapesStaySeparate) {
  const Tensor x = Tensor(kX, {2, 3}, GetParam()).realize();
  Tensor a = x + 1, b = x.reshape({6}) * 2, c = x.permute({1, 0}) - 1;
  EXPECT_EQ(realize_together({&a, &b, &c}), 3);
  EXPECT_EQ(a.to_vector<float>()[4], kX[4] + 1);
  EXPECT_EQ(b.to_vector<float>()[5], kX[5] * 2);
  EXPECT_EQ(c.to_vector<float>()[1], kX[3] - 1);  // c[0][1] = x[1][0]
}

// Vulkan and the CPU device agree bit for bit on a merged kernel with special values (the CPU
// device runs the same schedule, through its interpreter).
TEST(MultiOutputDevices, VulkanAndCpuAgreeOnSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const std::vector<float> v{inf, -inf, nan, -0.0f, 1e-40f, 3.4e38f, 1.0f, -2.5f};
  std::vector<std::vector<float>> got;
  for (const std::string dev : {"VK", "CPU"}) {
    const Tensor x = Tensor(v, {8}, dev).realize(), y = Tensor(v, {8}, dev).flip({0}).realize();
    Tensor a = x * y + x, b = (x - y).sqrt(), c = x.maximum(y) * 0;
    EXPECT_EQ(realize_together({&a, &b, &c}), 1) << dev;
    for (const Tensor* t : {&a, &b, &c}) got.push_back(t->to_vector<float>());
  }
  for (size_t k = 0; k < 3; ++k)
    for (size_t i = 0; i < v.size(); ++i) {
      const float vk = got[k][i], cpu = got[k + 3][i];
      if (std::isnan(vk) || std::isnan(cpu)) {
        EXPECT_TRUE(std::isnan(vk) && std::isnan(cpu)) << k << " " << i;
      } else {
        EXPECT_EQ(std::signbit(vk), std::signbit(cpu)) << k << " " << i;
        EXPECT_EQ(vk, cpu) << k << " " << i;
      }
    }
}

INSTANTIATE_TEST_SUITE_P(Devices, MultiOutput, testing::Values("VK", "CPU"));

// The planner never lends a block to one output of a kernel that another output or an input of
// the same kernel holds: the two outputs of the merged kernel have blocks of their own, and the
// value is the closed form's.
TEST(MultiOutputMemory, OutputsOfOneKernelHaveMemoryOfTheirOwn) {
  constexpr int64_t n = 1 << 12;
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(int(i % 17) - 8);
  const Tensor x = Tensor(v, {n}).realize();
  // Each reads the one before at other elements (a flip), so only p and q merge; t's block is
  // free again when they are written, and u is their input.
  const Tensor t = (x * 0.5f).contiguous();
  const Tensor u = (t.flip({0}) + 1).contiguous();
  const Tensor p = (u.flip({0}) + 1).contiguous(), q = (u.flip({0}) * 3).contiguous();
  Tensor out = (p * q.flip({0})).sum();
  const Schedule sched = create_schedule({out.node()});
  const std::unordered_set<int64_t> placed = plan_memory(sched, {out.node()}, {});
  int merged = 0;
  for (const ScheduleItem& item : sched.items) {
    if (item.outputs < 2) continue;
    ++merged;
    ASSERT_EQ(item.outputs, 2u);
    for (size_t o = 0; o < item.outputs; ++o) {
      ASSERT_TRUE(placed.count(item.buffers[o]->id()));
      for (size_t s = 0; s < item.buffers.size(); ++s)
        if (s != o) EXPECT_NE(item.buffers[o]->allocation, item.buffers[s]->allocation) << o << s;
    }
  }
  EXPECT_EQ(merged, 1);
  // And run: p = x/2 + 2, q = 3 (x/2 + 1), summed against the flip.
  double want = 0;
  for (int64_t i = 0; i < n; ++i)
    want += (v[size_t(i)] / 2 + 2) * 3 * (v[size_t(n - 1 - i)] / 2 + 1);
  EXPECT_NEAR(out.item<float>(), want, std::abs(want) * 1e-5 + 1e-3);
}

// A captured step whose kernels merge replays with the captured multi-output kernel: the body
// runs twice over four calls, and the values follow the recurrence.
TEST(MultiOutputJit, AMergedStepReplays) {
  Tensor m = Tensor(kX, {6}).realize(), w = Tensor(kY, {6}).realize();
  int traced = 0;
  Jit step([&](const std::vector<Tensor>& in) {
    ++traced;
    m.assign(m * 0.5f + in[0]);
    w.assign(w - m * 0.25f);
    std::vector<Tensor*> both{&w, &m};
    realize(std::span<Tensor* const>(both));
    return std::vector<Tensor>{w};
  });
  std::vector<float> want_m = kX, want_w = kY;
  for (int call = 0; call < 4; ++call) {
    std::vector<float> g(6);
    for (size_t i = 0; i < 6; ++i) g[i] = float(call) + float(i) * 0.5f;
    step({Tensor(g, {6})});
    for (size_t i = 0; i < 6; ++i) {
      want_m[i] = want_m[i] * 0.5f + g[i];
      want_w[i] = want_w[i] - want_m[i] * 0.25f;
    }
    EXPECT_EQ(m.to_vector<float>(), want_m) << call;
    EXPECT_EQ(w.to_vector<float>(), want_w) << call;
  }
  EXPECT_EQ(traced, 2);
  EXPECT_EQ(step.kernels(), 1u);
}
