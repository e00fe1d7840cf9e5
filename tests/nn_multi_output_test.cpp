// Multi-output kernels (core/schedule_multi_output.hpp) in training steps: the kernel counts they
// save are pinned against the same step with MULTI_OUTPUT=0, and the parameters come out with the
// same bits either way.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include <vkgrad/core/context.hpp>
#include <vkgrad/core/counters.hpp>
#include <vkgrad/vkgrad.hpp>

#include "../samples/beautiful_mnist_net.hpp"

using namespace vkg;

namespace {

struct StepResult {
  int64_t kernels;                         // of the last step
  std::vector<std::vector<float>> params;  // after it
};

// SGD with momentum on an MLP with a weight of 1,024 elements: the velocity's assign and the
// parameter's, one iteration space per parameter.
StepResult sgd_momentum_steps(bool merged) {
  ScopedSetting setting("MULTI_OUTPUT", merged ? 1 : 0);
  Tensor::manual_seed(4);
  nn::Linear l1(32, 32), l2(32, 4);
  const Tensor x = Tensor::randn({16, 32}).realize();
  const Tensor y = Tensor::randint(0, 4, {16}).realize();
  nn::SGD sgd(nn::parameters(l1, l2), 0.05, 0.9);
  int64_t kernels = 0;
  for (int step = 0; step < 3; ++step) {
    sgd.zero_grad();
    Tensor loss = l2(l1(x).relu()).sparse_categorical_crossentropy(y);
    loss.backward();
    const int64_t before = global_counters().kernels;
    sgd.step({loss});
    kernels = global_counters().kernels - before;
  }
  StepResult out{kernels, {}};
  for (const Tensor& p : nn::parameters(l1, l2)) out.params.push_back(p.to_vector<float>());
  return out;
}

void expect_same_bits(const StepResult& a, const StepResult& b) {
  ASSERT_EQ(a.params.size(), b.params.size());
  for (size_t i = 0; i < a.params.size(); ++i) {
    ASSERT_EQ(a.params[i].size(), b.params[i].size());
    EXPECT_EQ(0, std::memcmp(a.params[i].data(), b.params[i].data(), a.params[i].size() * 4)) << i;
  }
}

}  // namespace

// NOT merged (pinned so that a change shows): each velocity's kernel holds its gradient's reduce
// (the weight gradient's matmul, the bias's batch sum), and only kernels without a reduce merge.
// The parameter's update reads the new velocity from its buffer. 15 -> 14 either way: the two
// biases' updates are one kernel (core/schedule_horizontal.hpp).
TEST(MultiOutputSteps, SgdMomentumVelocityKeepsItsReduceAndIsNotMerged) {
  const StepResult merged = sgd_momentum_steps(true), apart = sgd_momentum_steps(false);
  EXPECT_EQ(apart.kernels, 14);
  EXPECT_EQ(merged.kernels, 14);
  expect_same_bits(merged, apart);
}

// tinygrad's beautiful_mnist step (Adam, BatchNorm's running statistics) at batch 32, issue 9's
// kernel budget (at most 103): 65 kernels; 77 before multi-output kernels (each parameter over
// 4096 elements, conv2-4 and fc, had one kernel for its (2, n) moments and one for its update).
// With MULTI_OUTPUT=0 the m and v that Adam now keeps apart are a kernel each: 81. The small
// parameters' updates (each conv's and BatchNorm's parameters, fc's bias) in fewer kernels
// (core/schedule_horizontal.hpp): 67 -> 65, and 81 -> 74.
TEST(MultiOutputSteps, BeautifulMnistBatch32StepKernelCountIsPinned) {
  auto run = [](bool merged) {
    ScopedSetting setting("MULTI_OUTPUT", merged ? 1 : 0);
    Tensor::manual_seed(0);
    samples::BeautifulMnistNet net;
    std::vector<Tensor> params = net.parameters();
    for (Tensor& p : params) p.realize();
    nn::Adam adam(params, 1e-3);
    const Tensor x = Tensor::rand({32, 1, 28, 28}).realize();
    const Tensor y = Tensor::randint(0, 10, {32}).realize();
    Tensor::training = true;
    int64_t kernels = 0;
    for (int step = 0; step < 3; ++step) {
      adam.zero_grad();
      Tensor loss = net(x).sparse_categorical_crossentropy(y);
      loss.backward();
      std::vector<Tensor> extra = net.running_stats();
      extra.push_back(loss);
      const int64_t before = global_counters().kernels;
      adam.step(extra);
      kernels = global_counters().kernels - before;
    }
    Tensor::training = false;
    StepResult out{kernels, {}};
    for (const Tensor& p : params) out.params.push_back(p.to_vector<float>());
    for (const Tensor& s : net.running_stats())
      out.params.push_back(s.cast(dtypes::float32).to_vector<float>());
    return out;
  };
  const StepResult merged = run(true), apart = run(false);
  EXPECT_EQ(apart.kernels, 74);
  EXPECT_EQ(merged.kernels, 65);
  expect_same_bits(merged, apart);
}
