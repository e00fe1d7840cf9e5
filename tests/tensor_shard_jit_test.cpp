// vkg::Jit over several devices: a captured function that copies between devices (sharding,
// all-reduces, gathers with to()) replays its kernels per device and its copies in between, in
// the captured order. Each call is checked against the same function run eagerly.
#include <gtest/gtest.h>

#include <cmath>

#include <vkgrad/core/counters.hpp>
#include <vkgrad/nn/layers.hpp>
#include <vkgrad/nn/optim.hpp>
#include <vkgrad/vkgrad.hpp>

#include "support/error_of.hpp"

namespace vkg {
namespace {

using test::error_of;
const std::vector<std::string> two = {"VK", "VK:1"};

std::vector<float> wave(size_t n, float scale, float shift) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(float(i) * scale) + shift;
  return v;
}

// Data-parallel training with the parameters on one device, sharded inside the step: jitted, the
// body runs on calls 1 and 2 only, and every call's loss and the final weights are the eager
// run's.
TEST(TensorShardJit, AShardedTrainingStepReplaysWithNewInputsAndMatchesEager) {
  std::vector<Tensor> xs, ys;
  for (int call = 0; call < 3; ++call) {
    xs.emplace_back(wave(8 * 6, 0.37f + 0.1f * float(call), 0.2f), Shape{8, 6});
    ys.emplace_back(wave(8 * 2, 0.21f, -0.3f * float(call)), Shape{8, 2});
  }
  struct Run {
    std::vector<float> losses;
    std::vector<std::vector<float>> weights;
    int bodies = 0;
    size_t kernels = 0;
  };
  auto train = [&](bool jitted) {
    Tensor::manual_seed(7);
    nn::Linear l1(6, 5), l2(5, 2);
    std::vector<Tensor> params = nn::parameters(l1, l2);
    nn::SGD opt(params, 0.05, 0.9);
    Run run;
    auto body = [&](const std::vector<Tensor>& in) {
      ++run.bodies;
      opt.zero_grad();
      const Tensor x = in[0].shard(two, 0), y = in[1].shard(two, 0);
      const Tensor h = x.linear(l1.weight.shard(two), l1.bias->shard(two)).relu();
      Tensor loss = (h.linear(l2.weight.shard(two), l2.bias->shard(two)) - y).square().mean();
      loss.backward();
      opt.step({loss});
      return std::vector<Tensor>{loss};
    };
    Jit step(body);
    for (int call = 0; call < 3; ++call) {
      const std::vector<Tensor> out = jitted ? step({xs[size_t(call)], ys[size_t(call)]})
                                             : body({xs[size_t(call)], ys[size_t(call)]});
      EXPECT_EQ(out[0].device(), "VK,VK:1");
      run.losses.push_back(out[0].item<float>());
    }
    for (const Tensor& p : params) run.weights.push_back(p.to_vector<float>());
    run.kernels = step.kernels();
    return run;
  };
  const Run eager = train(false), jitted = train(true);
  EXPECT_EQ(eager.bodies, 3);
  EXPECT_EQ(jitted.bodies, 2);
  EXPECT_GT(jitted.kernels, 0u);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(jitted.losses[i], eager.losses[i], 1e-6f) << i;
  EXPECT_NE(eager.losses[2], eager.losses[1]);  // new inputs, new losses
  ASSERT_EQ(jitted.weights.size(), eager.weights.size());
  for (size_t i = 0; i < eager.weights.size(); ++i)
    for (size_t j = 0; j < eager.weights[i].size(); ++j)
      EXPECT_NEAR(jitted.weights[i][j], eager.weights[i][j], 1e-6f) << i << "," << j;
}

// A function of a sharded input that moves rows between devices and gathers its result: every
// call, replays included, gives the value computed on the CPU device.
TEST(TensorShardJit, ShardedInputsAndGatheredOutputsReplay) {
  int bodies = 0;
  Jit f([&](const std::vector<Tensor>& in) {
    ++bodies;
    const Tensor flipped = (in[0] * 2).flip({0}) + in[1].shard(two, 0);
    return std::vector<Tensor>{flipped.to("VK"), (in[0] * in[0]).sum(0)};
  });
  for (int call = 0; call < 4; ++call) {
    const std::vector<float> a = wave(16, 0.5f, float(call)), b = wave(16, 0.9f, -float(call));
    const std::vector<Tensor> out = f({Tensor(a, {4, 4}).shard(two, 0), Tensor(b, {4, 4}, "VK:1")});
    const Tensor ac(a, {4, 4}, "CPU"), bc(b, {4, 4}, "CPU");
    EXPECT_EQ(out[0].device(), "VK");
    EXPECT_EQ(out[0].to_vector<float>(), ((ac * 2).flip({0}) + bc).to_vector<float>()) << call;
    const std::vector<float> sums = out[1].to("CPU").to_vector<float>(),
                             want = (ac * ac).sum(0).to_vector<float>();
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(sums[i], want[i], 1e-5f) << call;
  }
  EXPECT_EQ(bodies, 2);
  // One more replay counts once, however many recorded steps it runs.
  const GlobalCounters before = global_counters();
  f({Tensor(wave(16, 0.5f, 0), {4, 4}).shard(two, 0), Tensor(wave(16, 0.9f, 0), {4, 4}, "VK:1")});
  EXPECT_EQ(global_counters().replays - before.replays, 1);
  // A replay needs the captured split.
  const std::string e = error_of([&] {
    f({Tensor(wave(16, 0.5f, 0), {4, 4}).shard(two, 1), Tensor(wave(16, 0.9f, 0), {4, 4}, "VK:1")});
  });
  EXPECT_NE(e.find("sharded on axis 1, the captured call's was sharded on axis 0"),
            std::string::npos)
      << e;
}

// A replicated input made from host data each call is a buffer on the joined device, not yet
// replicas: every replica gets the call's data (the second half of the result is computed from
// VK:1's replica, the first from VK's).
TEST(TensorShardJit, ReplicatedInputsFromHostDataReachEveryReplica) {
  int bodies = 0;
  Jit f([&](const std::vector<Tensor>& in) {
    ++bodies;
    const Tensor halves = Tensor(std::vector<float>{1, 2, 3, 4}).shard(two, 0);
    return std::vector<Tensor>{(in[0] * halves + 1).to("VK")};
  });
  for (int call = 0; call < 4; ++call) {
    const std::vector<float> a = wave(4, 0.7f, float(call));
    const std::vector<Tensor> out = f({Tensor(a, {4}, "VK,VK:1")});
    const std::vector<float> got = out[0].to_vector<float>();
    ASSERT_EQ(got.size(), 4u);
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(got[i], a[i] * float(i + 1) + 1) << call << "," << i;
  }
  EXPECT_EQ(bodies, 2);
}

// A capture made of copies only replays (and counts as a replay) like any other.
TEST(TensorShardJit, ACaptureOfCopiesOnlyCountsItsReplays) {
  int bodies = 0;
  Jit f([&](const std::vector<Tensor>& in) {
    ++bodies;
    return std::vector<Tensor>{in[0].to("VK:1")};
  });
  for (int call = 0; call < 4; ++call) {
    const std::vector<float> a = wave(6, 0.3f, float(call));
    const GlobalCounters before = global_counters();
    const std::vector<Tensor> out = f({Tensor(a, {6}, "VK")});
    EXPECT_EQ(global_counters().replays - before.replays, call >= 2 ? 1 : 0) << call;
    EXPECT_EQ(out[0].device(), "VK:1");
    EXPECT_EQ(out[0].to_vector<float>(), a) << call;
  }
  EXPECT_EQ(bodies, 2);
}

}  // namespace
}  // namespace vkg
