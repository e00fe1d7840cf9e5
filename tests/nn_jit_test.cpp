// Training steps through vkg::Jit: a replayed Adam step must give the losses and weights an
// eager run of the same steps gives, with BatchNorm's running statistics and dropout's random
// masks advancing on every replay.
#include <gtest/gtest.h>

#include <vkgrad/core/counters.hpp>
#include <vkgrad/core/device.hpp>
#include <vkgrad/vkgrad.hpp>

using namespace vkg;

namespace {

struct Mlp : nn::Module {
  nn::Linear l1{64, 32};
  nn::BatchNorm bn{32};
  nn::Linear l2{32, 10};
  Tensor operator()(const Tensor& x) const { return l2(bn(l1(x)).relu().dropout(0.1)); }
  nn::StateDict state_dict() const override {
    return nn::named({{"l1", &l1}, {"bn", &bn}, {"l2", &l2}});
  }
};

// Batches that differ every step, the same for both runs.
std::pair<Tensor, Tensor> batch(int step) {
  std::vector<float> x(16 * 64);
  std::vector<int32_t> y(16);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = float(int((i * 7 + size_t(step) * 13) % 23) - 11) / 11.0f;
  for (size_t i = 0; i < y.size(); ++i) y[i] = int32_t((i * 3 + size_t(step)) % 10);
  return {Tensor(x, {16, 64}), Tensor(y, {16})};
}

// One Adam step of `net` on (images, labels), the BatchNorm statistics and the loss in its
// schedule: the function both tests run eagerly and through the JIT.
auto adam_step(Mlp& net, nn::Adam& adam) {
  return [&net, &adam](const std::vector<Tensor>& in) {
    adam.zero_grad();
    Tensor loss = net(in[0]).sparse_categorical_crossentropy(in[1]);
    loss.backward();
    std::vector<Tensor> extra = net.bn.buffers();
    extra.push_back(loss);
    adam.step(extra);
    return std::vector<Tensor>{loss};
  };
}

struct TrainingRun {
  std::vector<float> losses;
  std::vector<float> weights;  // l2.weight after the last step
};

TrainingRun train(bool jit, int steps) {
  Tensor::manual_seed(11);
  Mlp net;
  std::vector<Tensor> params = net.parameters();
  for (Tensor& p : params) p.realize();
  nn::Adam adam(params, 0.01);
  auto step = adam_step(net, adam);
  Jit jitted(step);
  TrainingRun run;
  Tensor::training = true;
  for (int s = 0; s < steps; ++s) {
    auto [x, y] = batch(s);
    run.losses.push_back((jit ? jitted({x, y}) : step({x, y}))[0].item<float>());
  }
  Tensor::training = false;
  run.weights = net.l2.weight.to_vector<float>();
  EXPECT_EQ(jitted.calls(), jit ? steps : 0);
  return run;
}

}  // namespace

TEST(JitTraining, AdamStepLossesAndWeightsEqualEagerOnes) {
  const int steps = 8;
  const TrainingRun eager = train(false, steps);
  const GlobalCounters before = global_counters();
  const TrainingRun jit = train(true, steps);
  const GlobalCounters after = global_counters();
  EXPECT_EQ(after.replays - before.replays, steps - 2);
  for (int s = 0; s < steps; ++s)
    EXPECT_NEAR(jit.losses[size_t(s)], eager.losses[size_t(s)], 1e-6) << "step " << s;
  ASSERT_EQ(jit.weights.size(), eager.weights.size());
  for (size_t i = 0; i < jit.weights.size(); ++i)
    EXPECT_NEAR(jit.weights[i], eager.weights[i], 1e-6) << i;
  EXPECT_LT(eager.losses.back(), eager.losses.front());
}

// Nothing keeps memory it no longer needs: 500 training steps, eager and through the JIT, and
// the device bytes in live buffers after step 100 are those after step 500.
TEST(JitTraining, FiveHundredStepsKeepDeviceMemoryFlat) {
  Device& vk = device("VK");
  for (bool jit : {false, true}) {
    Tensor::manual_seed(2);
    Mlp net;
    nn::Adam adam(net.parameters(), 0.01);
    auto step = adam_step(net, adam);
    Jit jitted(step);
    Tensor::training = true;
    int64_t at_100 = 0;
    float loss = 0;
    for (int s = 0; s < 500; ++s) {
      auto [x, y] = batch(s % 7);
      loss = (jit ? jitted({x, y}) : step({x, y}))[0].item<float>();
      if (s == 99) at_100 = vk.memory_counts().live_bytes;
    }
    Tensor::training = false;
    EXPECT_EQ(vk.memory_counts().live_bytes, at_100) << (jit ? "jit" : "eager");
    EXPECT_LT(loss, 2.0f);
  }
}

// A learning rate set outside the jitted function (set_lr writes the lr tensor in place) is what
// the replays read.
TEST(JitTraining, AnLrSetOutsideTheFunctionReachesTheReplays) {
  Tensor::manual_seed(4);
  nn::Linear l(4, 2);
  std::vector<Tensor> params = l.parameters();
  for (Tensor& p : params) p.realize();
  nn::SGD sgd(params, 0.1);
  Jit step([&](const std::vector<Tensor>& in) {
    sgd.zero_grad();
    Tensor loss = l(in[0]).square().mean();
    loss.backward();
    sgd.step({loss});
    return std::vector<Tensor>{loss};
  });
  const Tensor x(std::vector<float>{1, -2, 0.5f, 3, 2, 1, -1, 0}, {2, 4});
  for (int i = 0; i < 3; ++i) step({x});
  sgd.set_lr(0);
  const std::vector<float> frozen = l.weight.to_vector<float>();
  for (int i = 0; i < 2; ++i) step({x});
  EXPECT_EQ(l.weight.to_vector<float>(), frozen);
  sgd.set_lr(0.1);
  step({x});
  EXPECT_NE(l.weight.to_vector<float>(), frozen);
  EXPECT_EQ(step.calls(), 6);
}
