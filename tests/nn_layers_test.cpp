// Layers: their outputs against hand computation, their parameters and state-dict names as torch
// has them, their default initializations' ranges, and BatchNorm's two modes.
#include <gtest/gtest.h>

#include <cmath>

#include <vkgrad/vkgrad.hpp>

#include <vkgrad/core/schedule.hpp>

#include "../samples/beautiful_mnist_net.hpp"
#include "support/error_of.hpp"

using namespace vkg;
using vkg::test::error_of;

namespace {
std::vector<std::string> names(const nn::StateDict& sd) {
  std::vector<std::string> out;
  for (auto& [n, t] : sd) out.push_back(n);
  return out;
}
}  // namespace

TEST(Layers, LinearComputesXWtPlusB) {
  nn::Linear l(3, 2);
  l.weight.assign(Tensor(std::vector<float>{1, 2, 3, -1, 0, 1}, {2, 3}));
  l.bias->assign(Tensor(std::vector<float>{0.5f, -0.5f}, {2}));
  Tensor x(std::vector<float>{1, 1, 1, 2, 0, -1}, {2, 3});
  EXPECT_EQ(l(x).to_vector<float>(), (std::vector<float>{6.5f, -0.5f, -0.5f, -3.5f}));
  EXPECT_EQ(names(l.state_dict()), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(l.parameters().size(), 2u);
  EXPECT_EQ(nn::Linear(3, 2, false).parameters().size(), 1u);
}

TEST(Layers, DefaultInitializationsStayInTorchsBounds) {
  Tensor::manual_seed(3);
  nn::Linear l(100, 50);
  const double bound = 1.0 / std::sqrt(100.0);
  for (float w : l.weight.to_vector<float>()) ASSERT_LE(std::abs(w), bound + 1e-6);
  for (float b : l.bias->to_vector<float>()) ASSERT_LE(std::abs(b), bound + 1e-6);
  // Not all equal: random.
  const std::vector<float> w = l.weight.to_vector<float>();
  EXPECT_NE(w.front(), w.back());

  nn::Conv2d c(4, 8, 3);
  EXPECT_EQ(c.weight.shape(), (Shape{8, 4, 3, 3}));
  const double cb = 1.0 / std::sqrt(4.0 * 9.0);
  for (float v : c.weight.to_vector<float>()) ASSERT_LE(std::abs(v), cb + 1e-6);
  EXPECT_EQ(nn::ConvTranspose2d(4, 6, 3, {.groups = 2}).weight.shape(), (Shape{4, 3, 3, 3}));
}

TEST(Layers, Conv2dLayerMatchesTheFunctionalForm) {
  nn::Conv2d c(2, 3, {3, 2}, {.stride = {1, 2}, .padding = 1});
  Tensor x = Tensor::randn({2, 2, 5, 6});
  std::vector<float> a = c(x).to_vector<float>();
  std::vector<float> b = x.conv2d(c.weight, c.bias, c.options).to_vector<float>();
  EXPECT_EQ(a, b);
  EXPECT_EQ(c(x).shape(), (Shape{2, 3, 5, 4}));  // width (6 + 2 - 2) / 2 + 1
}

TEST(Layers, BatchNormTrainsOnBatchStatisticsAndEvaluatesOnRunningOnes) {
  nn::BatchNorm2d bn(2);
  // Channel 0 holds 1..4, channel 1 holds 10 everywhere: N=1, H=2, W=2.
  Tensor x(std::vector<float>{1, 2, 3, 4, 10, 10, 10, 10}, {1, 2, 2, 2});
  Tensor::training = true;
  std::vector<float> y = bn(x).to_vector<float>();
  nn::realize_all(bn.buffers());
  Tensor::training = false;
  const double var0 = 1.25, inv0 = 1.0 / std::sqrt(var0 + 1e-5);  // biased variance of 1..4
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[size_t(i)], (i + 1 - 2.5) * inv0, 1e-5);
  for (int i = 4; i < 8; ++i) EXPECT_NEAR(y[size_t(i)], 0.0, 1e-5);
  // running = 0.9 * initial + 0.1 * batch, with the unbiased variance (5/3 for 1..4, 0 for 10s).
  std::vector<float> rm = bn.running_mean.to_vector<float>(),
                     rv = bn.running_var.to_vector<float>();
  EXPECT_NEAR(rm[0], 0.25, 1e-6);
  EXPECT_NEAR(rm[1], 1.0, 1e-6);
  EXPECT_NEAR(rv[0], 0.9 + 0.1 * 5.0 / 3.0, 1e-6);
  EXPECT_NEAR(rv[1], 0.9, 1e-6);
  // Eval mode: (x - running_mean) / sqrt(running_var + eps).
  std::vector<float> e = bn(x).to_vector<float>();
  EXPECT_NEAR(e[0], (1 - 0.25) / std::sqrt(rv[0] + 1e-5), 1e-5);
  EXPECT_NEAR(e[4], (10 - 1.0) / std::sqrt(0.9 + 1e-5), 1e-4);
  EXPECT_EQ(bn.num_batches_tracked.item<int32_t>(), 1);
  EXPECT_EQ(names(bn.state_dict()),
            (std::vector<std::string>{"weight", "bias", "running_mean", "running_var",
                                      "num_batches_tracked"}));
  EXPECT_EQ(bn.parameters().size(), 2u);  // the running statistics are buffers, not parameters
  EXPECT_NE(error_of([&] {
              bn(Tensor::ones({1, 3, 2, 2}));
            }).find("(1, 3, 2, 2)"),
            std::string::npos);
}

TEST(Layers, LayerNormEmbeddingDropout) {
  nn::LayerNorm ln({4});
  Tensor x(std::vector<float>{1, 2, 3, 4, 2, 2, 2, 2}, {2, 4});
  std::vector<float> y = ln(x).to_vector<float>();
  const double inv = 1.0 / std::sqrt(1.25 + 1e-5);
  EXPECT_NEAR(y[0], -1.5 * inv, 1e-5);
  EXPECT_NEAR(y[3], 1.5 * inv, 1e-5);
  EXPECT_NEAR(y[5], 0.0, 1e-5);
  EXPECT_NE(error_of([&] {
              ln(Tensor::ones({2, 3}));
            }).find("normalized_shape"),
            std::string::npos);

  nn::Embedding emb(5, 3);
  emb.weight.assign(Tensor::arange(15).reshape({5, 3}).cast(dtypes::float32));
  EXPECT_EQ(emb(Tensor({4, 0})).to_vector<float>(), (std::vector<float>{12, 13, 14, 0, 1, 2}));

  nn::Dropout drop(0.5);
  Tensor::training = false;
  EXPECT_EQ(drop(x).to_vector<float>(), x.to_vector<float>());
}

TEST(Layers, StateDictNamesNestAndLoadAssigns) {
  struct Net : nn::Module {
    nn::Linear a{2, 3}, b{3, 1};
    nn::StateDict state_dict() const override { return nn::named({{"a", &a}, {"b", &b}}); }
  } net;
  EXPECT_EQ(names(net.state_dict()),
            (std::vector<std::string>{"a.weight", "a.bias", "b.weight", "b.bias"}));
  EXPECT_EQ(net.parameters().size(), 4u);
  nn::StateDict values = net.state_dict();
  values[0].second = Tensor::ones({3, 2});
  net.load_state_dict(values);
  EXPECT_EQ(net.a.weight.to_vector<float>(), std::vector<float>(6, 1.0f));
  EXPECT_TRUE(net.a.weight.requires_grad());
  // A bad dict changes nothing.
  values[1].second = Tensor::ones({4});
  EXPECT_NE(error_of([&] { net.load_state_dict(values); }).find("a.bias"), std::string::npos);
  values.pop_back();
  values[1].second = Tensor::zeros({3});
  EXPECT_NE(error_of([&] { net.load_state_dict(values); }).find("b.bias"), std::string::npos);
  net.load_state_dict(values, false);
  EXPECT_EQ(net.a.bias->to_vector<float>(), std::vector<float>(3, 0.0f));
}

// tinygrad's beautiful_mnist model at its batch of 512 (samples/beautiful_mnist_net.hpp): the
// forward pass, the loss and every parameter's gradient schedule as a pinned number of kernels
// (scheduled, not run). A change that splits or fuses differently shows up here first. Of the
// 62, 7 are channels-last copies (core/tensor_conv.cpp's convolve): the weights of the three convs
// with 32 or 64 input channels twice (as is and flipped) and conv3's input (a max pool's
// reduce). The other inputs are stored channels-last by the kernel that computes them (a relu,
// a batchnorm's backward), and so are the output gradients the input gradients read, which the
// weight gradients then reduce into (co, ci, kh, kw) directly. BatchNorm's variance centers on
// the detached mean (no reduce for a zero gradient), the loss is one reduce over every logit, and
// the linear layer's weight gradient comes out in the weight's layout (no transposing copy). The
// loss's gradient is written out (core/tensor_loss.cpp): no reduce over the classes (63 -> 62).
TEST(Layers, BeautifulMnistStepKernelCountIsPinned) {
  Tensor::manual_seed(0);
  samples::BeautifulMnistNet net;
  for (Tensor& p : net.parameters()) p.realize();
  const Tensor x = Tensor::rand({512, 1, 28, 28}).realize();
  const Tensor y = Tensor::randint(0, 10, {512}).realize();
  Tensor::training = true;
  Tensor loss = net(x).sparse_categorical_crossentropy(y);
  loss.backward();
  std::vector<UOpPtr> outputs{loss.node()};
  for (const Tensor& p : net.parameters()) outputs.push_back(p.grad()->node());
  Tensor::training = false;
  EXPECT_EQ(create_schedule(outputs).items.size(), 62u);
}
