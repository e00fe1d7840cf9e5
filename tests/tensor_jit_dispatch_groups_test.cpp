// Dispatch groups (devices/vk_dispatch_groups.cpp): a Jit replay on Vulkan runs small kernels that
// share no buffer one of them writes as one dispatch, a later kernel joining an earlier group
// across kernels it does not depend on (nor they on it). The replays give what
// eager calls give, bit for bit, with fewer dispatches than kernels; kernels that overwrite what
// another one reads, or read what it writes, keep their order; DISPATCH_GROUPS=0 turns it off.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <vkgrad/core/context.hpp>
#include <vkgrad/core/counters.hpp>
#include <vkgrad/core/device.hpp>
#include <vkgrad/devices/vk_device.hpp>
#include <vkgrad/vkgrad.hpp>

using namespace vkg;

namespace {

std::vector<float> wave(int n, float phase) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = std::sin(float(i) * 0.37f + phase) * 3.0f;
  return v;
}

// Four small kernels that read only the inputs: independent, so one dispatch can run them all.
std::vector<Tensor> four_reductions(const std::vector<Tensor>& in) {
  const Tensor& x = in[0];
  const Tensor& y = in[1];
  return {x.sum(0), y.max(1), (x * 2.0f - 1.0f).exp().sum(), (y * y).mean(0)};
}

std::vector<Tensor> inputs(int call, const std::string& dev) {
  return {Tensor(wave(48, float(call)), {6, 8}, dev), Tensor(wave(35, -float(call)), {5, 7}, dev)};
}

// The dispatches and kernels one replay of `jit` makes.
std::pair<int64_t, int64_t> counted_replay(Jit& jit, const std::vector<Tensor>& in,
                                           std::vector<std::vector<float>>* out = nullptr) {
  const GlobalCounters before = global_counters();
  const std::vector<Tensor> got = jit(in);
  if (out)
    for (const Tensor& t : got) out->push_back(t.to_vector<float>());
  const GlobalCounters after = global_counters();
  return {after.dispatches - before.dispatches, after.kernels - before.kernels};
}

TEST(JitDispatchGroups, IndependentSmallKernelsReplayInOneDispatchAsEagerComputesThem) {
  Jit jit(four_reductions);
  for (int call = 0; call < 2; ++call) jit(inputs(call, "VK"));
  ASSERT_EQ(jit.kernels(), 4u);
  for (int call = 2; call < 5; ++call) {
    std::vector<std::vector<float>> got;
    const auto [dispatches, kernels] = counted_replay(jit, inputs(call, "VK"), &got);
    EXPECT_EQ(kernels, 4);
    EXPECT_EQ(dispatches, 1);
    const std::vector<Tensor> eager = four_reductions(inputs(call, "VK"));
    const std::vector<Tensor> cpu = four_reductions(inputs(call, "CPU"));
    for (size_t i = 0; i < eager.size(); ++i) {
      EXPECT_EQ(got[i], eager[i].to_vector<float>()) << "output " << i << " call " << call;
      const std::vector<float> want = cpu[i].to_vector<float>();
      ASSERT_EQ(got[i].size(), want.size());
      for (size_t k = 0; k < want.size(); ++k)
        EXPECT_NEAR(got[i][k], want[k], 1e-5f * (1.0f + std::abs(want[k])))
            << "output " << i << " element " << k;
    }
  }
}

TEST(JitDispatchGroups, OffEveryKernelIsADispatchAndTheResultsAreTheSame) {
  Jit grouped(four_reductions);
  std::vector<std::vector<float>> on, off;
  for (int call = 0; call < 2; ++call) grouped(inputs(call, "VK"));
  counted_replay(grouped, inputs(7, "VK"), &on);
  ScopedSetting no_groups("DISPATCH_GROUPS", 0);
  Jit apart(four_reductions);
  for (int call = 0; call < 2; ++call) apart(inputs(call, "VK"));
  const auto [dispatches, kernels] = counted_replay(apart, inputs(7, "VK"), &off);
  EXPECT_EQ(dispatches, 4);
  EXPECT_EQ(kernels, 4);
  EXPECT_EQ(on, off);
}

// s reads w, then w is overwritten in place, then t reads the new w: three neighbouring small
// kernels that must run in order (a read before an overwrite, a read after it).
TEST(JitDispatchGroups, KernelsThatOverwriteOrReadWhatAnotherTouchesKeepTheirOrder) {
  for (const std::string dev : {"VK", "CPU"}) {
    Tensor w = Tensor(wave(40, 0.5f), {40}, dev).realize();
    Jit jit([&](const std::vector<Tensor>& in) {
      Tensor s = (w * in[0]).sum();
      w.assign(w + in[0]);
      Tensor t = (w * 2.0f).max();
      return std::vector<Tensor>{s, t};
    });
    std::vector<float> w_host = wave(40, 0.5f);
    for (int call = 0; call < 6; ++call) {
      const std::vector<float> x = wave(40, float(call));
      const GlobalCounters before = global_counters();
      const std::vector<Tensor> out = jit({Tensor(x, {40}, dev)});
      const GlobalCounters after = global_counters();
      // Each kernel touches what its neighbour writes: none may share a dispatch. (A race in one
      // dispatch need not show in the values: Lavapipe tends to run workgroups in order.)
      if (call >= 2) {
        EXPECT_EQ(after.kernels - before.kernels, 3) << dev;
        EXPECT_EQ(after.dispatches - before.dispatches, 3) << dev;
      }
      float s = 0, t = -INFINITY;
      for (size_t i = 0; i < 40; ++i) s += w_host[i] * x[i];
      for (size_t i = 0; i < 40; ++i) w_host[i] += x[i];
      for (size_t i = 0; i < 40; ++i) t = std::max(t, w_host[i] * 2.0f);
      EXPECT_NEAR(out[0].item<float>(), s, 1e-4f * (1 + std::abs(s))) << dev << " call " << call;
      EXPECT_EQ(out[1].item<float>(), t) << dev << " call " << call;
      EXPECT_EQ(w.to_vector<float>(), w_host) << dev << " call " << call;
    }
  }
}

// Eight small float64 matmuls, independent: under a GPU's heuristics (CTest
// tensor_gpu_heuristics) each stages its tiles in workgroup-shared memory (2 x 512 doubles), and
// all eight would ask twice a 32 KiB device's limit in one dispatch; the groups stay within it
// (the validation layer fails the test otherwise). On Lavapipe's own heuristics they are shuffle
// tiles. Either way the replay gives the CPU device's products.
TEST(JitDispatchGroups, ManySmallMatmulsReplayAsTheCpuComputesThemWithinSharedMemory) {
  auto products = [](const std::vector<Tensor>& in) {
    std::vector<Tensor> out;
    for (size_t i = 0; i + 1 < in.size(); i += 2) out.push_back(in[i].matmul(in[i + 1]));
    return out;
  };
  auto operands = [](int call, const std::string& dev) {
    std::vector<Tensor> in;
    for (int k = 0; k < 16; ++k) {
      std::vector<double> v(64 * 64);
      for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(double(i) * 0.01 + k + call) * 2.0;
      in.push_back(Tensor(v, {64, 64}, dev));
    }
    return in;
  };
  Jit jit(products);
  for (int call = 0; call < 4; ++call) {
    const GlobalCounters before = global_counters();
    const std::vector<Tensor> got = jit(operands(call, "VK"));
    const GlobalCounters after = global_counters();
    const std::vector<Tensor> want = products(operands(call, "CPU"));
    for (size_t i = 0; i < want.size(); ++i) {
      const std::vector<double> g = got[i].to_vector<double>(), w = want[i].to_vector<double>();
      ASSERT_EQ(g.size(), w.size());
      for (size_t k = 0; k < w.size(); ++k)
        ASSERT_NEAR(g[k], w[k], 1e-9 * (1 + std::abs(w[k]))) << "product " << i << " at " << k;
    }
    if (call >= 2) {
      EXPECT_EQ(after.kernels - before.kernels, 8);
      EXPECT_LT(after.dispatches - before.dispatches, 8);
    }
  }
}

// An MLP's Adam step (issue 9's workload, smaller): replays with dispatch groups give the
// weights eager steps give, bit for bit, in fewer dispatches than kernels.
TEST(JitDispatchGroups, AnAdamStepReplaysToTheWeightsOfEagerSteps) {
  auto run = [](bool jitted, int64_t* dispatches, int64_t* kernels) {
    Tensor::manual_seed(3);
    nn::Linear l1{64, 32}, l2{32, 10};
    std::vector<Tensor> params = nn::parameters(l1, l2);
    for (Tensor& p : params) p.realize();
    nn::Adam adam(params, 1e-2);
    auto step = [&](const std::vector<Tensor>& in) {
      adam.zero_grad();
      Tensor loss = l2(l1(in[0]).relu()).sparse_categorical_crossentropy(in[1]);
      loss.backward();
      adam.step({loss});
      return std::vector<Tensor>{loss};
    };
    Jit jit(step);
    std::vector<float> losses;
    for (int call = 0; call < 6; ++call) {
      std::vector<int32_t> labels(16);
      for (size_t i = 0; i < labels.size(); ++i) labels[i] = int32_t((i * 7 + size_t(call)) % 10);
      const std::vector<Tensor> in{Tensor(wave(16 * 64, float(call)), {16, 64}),
                                   Tensor(labels, {16})};
      const GlobalCounters before = global_counters();
      losses.push_back((jitted ? jit(in) : step(in))[0].item<float>());
      const GlobalCounters after = global_counters();
      if (call == 5) {
        *dispatches = after.dispatches - before.dispatches;
        *kernels = after.kernels - before.kernels;
      }
    }
    std::vector<float> weights;
    for (const Tensor& p : params)
      for (float v : p.to_vector<float>()) weights.push_back(v);
    return std::pair{losses, weights};
  };
  int64_t eager_dispatches = 0, eager_kernels = 0, jit_dispatches = 0, jit_kernels = 0;
  const auto eager = run(false, &eager_dispatches, &eager_kernels);
  const auto jitted = run(true, &jit_dispatches, &jit_kernels);
  EXPECT_EQ(jitted.first, eager.first);
  EXPECT_EQ(jitted.second, eager.second);
  EXPECT_EQ(eager_dispatches, eager_kernels);
  EXPECT_EQ(jit_kernels, eager_kernels);
  EXPECT_LT(jit_dispatches, jit_kernels);
}

// A large kernel between two small independent ones: the later small kernel runs before the
// large one, in the earlier one's dispatch, where it touches nothing the large one writes or
// reads as written (devices/vk_dispatch_groups.cpp).
std::vector<Tensor> small_large_small(const std::vector<Tensor>& in) {
  const Tensor a = in[0].sum(0);
  const Tensor big = in[1].matmul(in[1]);
  return {a, big, (in[2] * 3.0f).max(1)};
}

std::vector<Tensor> three_inputs(int call, const std::string& dev) {
  return {Tensor(wave(48, float(call)), {6, 8}, dev),
          Tensor(wave(256 * 256, 0.1f * float(call)), {256, 256}, dev),
          Tensor(wave(35, -float(call)), {5, 7}, dev)};
}

TEST(JitDispatchGroups, ASmallKernelJoinsAnEarlierGroupAcrossALargeKernelItDoesNotTouch) {
  Jit jit(small_large_small);
  for (int call = 0; call < 2; ++call) jit(three_inputs(call, "VK"));
  for (int call = 2; call < 4; ++call) {
    std::vector<std::vector<float>> got;
    const auto [dispatches, kernels] = counted_replay(jit, three_inputs(call, "VK"), &got);
    EXPECT_EQ(kernels, 3);
    EXPECT_EQ(dispatches, 2);
    const std::vector<Tensor> eager = small_large_small(three_inputs(call, "VK"));
    for (size_t i = 0; i < eager.size(); ++i)
      EXPECT_EQ(got[i], eager[i].to_vector<float>()) << "output " << i << " call " << call;
  }
}

// After a large kernel that reads w: a small one that reads its product (the top rows' maxima) and
// one that overwrites w (returned, so that the capture realizes the assign). Neither may run before
// it; they share a dispatch after it. Each replay's product is the one of that call's w.
TEST(JitDispatchGroups,
     SmallKernelsStayAfterALargeKernelWhoseOutputTheyReadOrWhoseInputTheyOverwrite) {
  constexpr int64_t kRows = 1024, kInner = 128, kCols = 64, kTop = 8;
  Tensor w = Tensor(wave(kInner * kCols, 0.3f), {kInner, kCols}, "VK").realize();
  std::vector<float> w_host = wave(kInner * kCols, 0.3f);
  Jit jit([&](const std::vector<Tensor>& in) {
    const Tensor a = in[0].sum(0);
    const Tensor big = in[1].matmul(w);
    const Tensor top = big.shrink({{0, kTop}, {0, kCols}}).max(0);
    w.assign(w * 0.5f + 1.0f);
    return std::vector<Tensor>{a, big, top, w};
  });
  for (int call = 0; call < 5; ++call) {
    const std::vector<float> x = wave(kRows * kInner, 0.2f * float(call));
    std::vector<std::vector<float>> got;
    const auto [dispatches, kernels] = counted_replay(
        jit, {Tensor(wave(48, float(call)), {6, 8}), Tensor(x, {kRows, kInner})}, &got);
    if (call >= 2) {
      EXPECT_EQ(kernels, 4);
      EXPECT_EQ(dispatches, 3);
    }
    std::vector<float> top(kCols, -INFINITY);
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t c = 0; c < kCols; ++c) {
        double s = 0;
        for (int64_t k = 0; k < kInner; ++k)
          s += double(x[size_t(r * kInner + k)]) * w_host[size_t(k * kCols + c)];
        const float g = got[1][size_t(r * kCols + c)];
        ASSERT_NEAR(g, s, 1e-4 * (1 + std::abs(s))) << "call " << call << " at " << r << ", " << c;
        if (r < kTop) top[size_t(c)] = std::max(top[size_t(c)], g);
      }
    EXPECT_EQ(got[2], top) << "call " << call;
    for (float& v : w_host) v = v * 0.5f + 1.0f;
    EXPECT_EQ(w.to_vector<float>(), w_host) << "call " << call;
  }
}

// Two elementwise kernels of 32 workgroups each (32768 floats, 256 invocations of 4 floats):
// where a merged kernel runs every member's code in each workgroup (Lavapipe, which runs both
// sides of a branch: VkDevice::max_group_workgroups) they stay apart; two of one workgroup each
// share a dispatch on any device. Either way a replay gives eager's values.
TEST(JitDispatchGroups, MembersTogetherHaveNoMoreWorkgroupsThanTheDeviceRunsWellMerged) {
  auto* vk = dynamic_cast<vkg::VkDevice*>(&device("VK"));
  ASSERT_NE(vk, nullptr);
  auto two = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0] * 3.0f + 1.0f, (in[1] * 2.0f - 1.0f).abs()};
  };
  for (const int64_t n : {int64_t(1024), int64_t(32768)}) {
    auto in = [&](int call) {
      return std::vector<Tensor>{Tensor(wave(int(n), float(call)), {n}),
                                 Tensor(wave(int(n), -float(call)), {n})};
    };
    Jit jit(two);
    for (int call = 0; call < 2; ++call) jit(in(call));
    std::vector<std::vector<float>> got;
    const auto [dispatches, kernels] = counted_replay(jit, in(2), &got);
    const int64_t workgroups = 2 * n / 1024;
    const int64_t cap = vk->max_group_workgroups();
    EXPECT_EQ(kernels, 2) << n;
    EXPECT_EQ(dispatches, cap > 0 && workgroups > cap ? 2 : 1) << n;
    const std::vector<Tensor> eager = two(in(2));
    for (size_t i = 0; i < eager.size(); ++i) EXPECT_EQ(got[i], eager[i].to_vector<float>()) << n;
  }
}

}  // namespace
