// Gradients through Tensor::shard (core/multi.hpp, multi_gradient): a loss computed from tensors
// sharded inside the computation sends each source its gradient, checked against the same loss
// unsharded on the CPU device; replicated weights get the sum of their replicas' gradients; and
// data-parallel training whose parameters live on one device and are sharded inside each step
// takes the one-device steps.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include <vkgrad/nn/layers.hpp>
#include <vkgrad/nn/optim.hpp>
#include <vkgrad/vkgrad.hpp>

namespace vkg {
namespace {

const std::vector<std::string> two = {"VK", "VK:1"};

std::vector<float> wave(size_t n, float scale, float shift) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(float(i) * scale) + shift;
  return v;
}

struct Input {
  std::vector<float> data;
  Shape shape;
};

// The loss of leaves holding `inputs` (float32), sharded by `shard` (the identity for the
// reference), and the leaves' gradients, read back.
using Loss = std::function<Tensor(const std::vector<Tensor>& leaves)>;
std::vector<std::vector<float>> gradients(const std::vector<Input>& inputs,
                                          const std::string& device, const Loss& loss) {
  std::vector<Tensor> leaves;
  for (const Input& in : inputs) {
    leaves.emplace_back(in.data, in.shape, device);
    leaves.back().requires_grad_();
  }
  loss(leaves).backward();
  std::vector<std::vector<float>> out;
  for (const Tensor& leaf : leaves) {
    EXPECT_TRUE(leaf.grad().has_value());
    if (!leaf.grad()) return {};
    EXPECT_EQ(leaf.grad()->device(), device);
    out.push_back(leaf.grad()->to("CPU").to_vector<float>());
  }
  return out;
}

// Compares the gradients of `sharded` (leaves on VK, sharded inside) with those of `plain`
// (the same loss, nothing sharded, on the CPU device).
void expect_same_gradients(const std::vector<Input>& inputs, const Loss& sharded, const Loss& plain,
                           float tolerance = 2e-5f) {
  const auto got = gradients(inputs, "VK", sharded), want = gradients(inputs, "CPU", plain);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size());
    for (size_t j = 0; j < want[i].size(); ++j)
      EXPECT_NEAR(got[i][j], want[i][j], tolerance * std::max(1.0f, std::abs(want[i][j])))
          << "input " << i << " element " << j;
  }
}

TEST(TensorShardGrad, AShardedBatchAndAReplicatedWeight) {
  // w's gradient sums over the sharded batch (an all-reduce): it comes back from the first
  // device's replica; x's is split as x is.
  const std::vector<Input> in = {{wave(12, 0.7f, 0.1f), {4, 3}}, {wave(3, 1.3f, -0.2f), {3}}};
  auto loss = [](bool sharded) {
    return [sharded](const std::vector<Tensor>& t) {
      const Tensor x = sharded ? t[0].shard(two, 0) : t[0], w = sharded ? t[1].shard(two) : t[1];
      return ((x * w).sin() + x.square() * w).sum();
    };
  };
  expect_same_gradients(in, loss(true), loss(false));
}

TEST(TensorShardGrad, ReplicatedWeightsGetTheSumOfTheReplicasGradients) {
  // w has the batch's shape, so its gradient is sharded as the batch is: each replica's part,
  // zero-padded, adds up at the source.
  const std::vector<Input> in = {{wave(12, 0.7f, 0.1f), {4, 3}}, {wave(12, 0.4f, 0.3f), {4, 3}}};
  auto loss = [](bool sharded) {
    return [sharded](const std::vector<Tensor>& t) {
      const Tensor x = sharded ? t[0].shard(two, 0) : t[0], w = sharded ? t[1].shard(two) : t[1];
      return (x * w).exp().sum() + w.sum();
    };
  };
  expect_same_gradients(in, loss(true), loss(false));
  // Over a Vulkan device and the CPU device too.
  const auto got = gradients(in, "VK", [](const std::vector<Tensor>& t) {
    return (t[0].shard({"VK:1", "CPU"}, 0) * t[1].shard({"VK:1", "CPU"})).exp().sum();
  });
  const auto want =
      gradients(in, "CPU", [](const std::vector<Tensor>& t) { return (t[0] * t[1]).exp().sum(); });
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < 2; ++i)
    for (size_t j = 0; j < want[i].size(); ++j)
      EXPECT_NEAR(got[i][j], want[i][j], 2e-5f * std::max(1.0f, std::abs(want[i][j])));
}

TEST(TensorShardGrad, OperandsShardedOnDifferentAxesAreReshardedBothWays) {
  const std::vector<Input> in = {{wave(24, 0.3f, 0.5f), {4, 6}}, {wave(24, 0.9f, -0.1f), {4, 6}}};
  auto loss = [](bool sharded) {
    return [sharded](const std::vector<Tensor>& t) {
      const Tensor x = sharded ? t[0].shard(two, 0) : t[0], z = sharded ? t[1].shard(two, 1) : t[1];
      return (x * z).tanh().sum() + (x.square() * z).sum(1).square().sum();
    };
  };
  expect_same_gradients(in, loss(true), loss(false));
}

TEST(TensorShardGrad, ThroughPadShrinkAndFlipAcrossTheShardedAxis) {
  const std::vector<Input> in = {{wave(24, 0.5f, 0.2f), {8, 3}}, {wave(30, 0.8f, 0.0f), {10, 3}}};
  auto loss = [](bool sharded) {
    return [sharded](const std::vector<Tensor>& t) {
      const Tensor x = sharded ? t[0].shard(two, 0) : t[0];
      const Tensor c = sharded ? t[1].shard(two, 0) : t[1];
      return (x.pad({{1, 1}, {0, 0}}) * c).sum() +                     // sharded result
             (x.shrink({{1, 4}, {0, 3}}).square() * 2).sum() +         // replicated result
             (x.flip({0}) * c.shrink({{2, 10}, {0, 3}})).exp().sum();  // the mirror shards
    };
  };
  expect_same_gradients(in, loss(true), loss(false));
}

TEST(TensorShardGrad, ThroughEmbeddingsWithShardedIndicesOrAShardedTable) {
  // Indices sharded, the table replicated: each device scatters its rows' gradients, and the
  // partial tables are all-reduced. The table sharded by rows: gathered for the read.
  const std::vector<Input> in = {{wave(18, 0.6f, 0.4f), {6, 3}}};
  const std::vector<int> ids = {4, 0, 4, 2, 5, 1, 1, 3};
  auto loss = [&](bool sharded, bool table) {
    return [=](const std::vector<Tensor>& t) {
      const std::string dev = sharded ? "VK" : "CPU";
      Tensor idx(ids, {8}, dev), w = t[0];
      if (sharded) idx = table ? idx.shard(two) : idx.shard(two, 0);
      if (sharded) w = table ? w.shard(two, 0) : w.shard(two);
      const Tensor e = idx.embedding(w);
      return (e.square() * e.sin()).sum();
    };
  };
  expect_same_gradients(in, loss(true, false), loss(false, false));
  expect_same_gradients(in, loss(true, true), loss(false, true));
}

TEST(TensorShardGrad, AShardedLossRealizedBeforeTheBackwardStillCarriesIt) {
  const std::vector<float> ws = wave(12, 0.7f, 0.1f);
  Tensor w(ws, {4, 3});
  w.requires_grad_();
  Tensor loss = (w.shard(two, 0).square() * 3).sum();
  loss.realize();  // a MULTI of buffer views now, standing for its graph
  EXPECT_NEAR(loss.item<float>(), (Tensor(ws, {4, 3}, "CPU").square() * 3).sum().item<float>(),
              1e-5f);
  loss.backward();
  ASSERT_TRUE(w.grad().has_value());
  const std::vector<float> g = w.grad()->to_vector<float>();
  for (size_t i = 0; i < ws.size(); ++i) EXPECT_NEAR(g[i], 6 * ws[i], 1e-6f) << i;
}

TEST(TensorShardGrad, GatheringWithToSendsTheGradientBackSplit) {
  const std::vector<float> ws = wave(12, 0.7f, 0.1f);
  // From a realized sharded value back to the unsharded leaf it was computed from.
  Tensor w(ws, {4, 3});
  w.requires_grad_();
  Tensor p = w.shard(two, 0) * 2;
  p.realize();
  p.to("VK:1").square().sum().backward();
  ASSERT_TRUE(w.grad().has_value());
  std::vector<float> g = w.grad()->to_vector<float>();
  for (size_t i = 0; i < ws.size(); ++i) EXPECT_NEAR(g[i], 8 * ws[i], 1e-5f) << i;
  // To a sharded leaf (shard_), whose gradient is sharded alike.
  Tensor v(ws, {4, 3});
  v.shard_(two, 0);
  v.requires_grad_();
  (v.to("CPU").exp() * v.to("CPU")).sum().backward();
  ASSERT_TRUE(v.grad().has_value());
  EXPECT_EQ(v.grad()->device(), "VK,VK:1");
  g = v.grad()->to("CPU").to_vector<float>();
  for (size_t i = 0; i < ws.size(); ++i)
    EXPECT_NEAR(g[i], std::exp(ws[i]) * (1 + ws[i]), 2e-5f * std::exp(ws[i])) << i;
}

// The gradients of the shards (and of split's pieces) are joined by pads filled with -0.0, as
// cat's: a -0.0 gradient stays -0.0, as it is unsharded (+0.0 fills turned it into +0.0). A lone
// shrink's gradient still reads +0.0 where nothing flows.
TEST(TensorShardGrad, ANegativeZeroGradientKeepsItsSignThroughShardAndSplit) {
  auto signs = [](const Tensor& x) {
    std::vector<bool> out;
    for (float v : x.grad()->to("CPU").to_vector<float>()) {
      EXPECT_EQ(v, 0.0f);
      out.push_back(std::signbit(v));
    }
    return out;
  };
  const std::vector<bool> negative{true, true}, positive{false, false};
  Tensor plain(std::vector<float>{1.f, 2.f}, {2}, "CPU");
  plain.requires_grad_();
  (plain * Tensor(std::vector<float>{-0.f, -0.f}, {2}, "CPU")).sum().backward();
  EXPECT_EQ(signs(plain), negative);  // the reference
  Tensor x(std::vector<float>{1.f, 2.f});
  x.requires_grad_();
  const Tensor c = Tensor(std::vector<float>{-0.f, -0.f}).shard(two, 0);
  (x.shard(two, 0) * c).sum().backward();
  EXPECT_EQ(signs(x), negative);
  // The same from the CPU device, whose shard gradients are padded and summed there.
  const std::vector<std::string> cpu_first{"CPU", "VK"};
  Tensor w(std::vector<float>{1.f, 2.f}, {2}, "CPU");
  w.requires_grad_();
  (w.shard(cpu_first, 0) * Tensor(std::vector<float>{-0.f, -0.f}, {2}, "CPU").shard(cpu_first, 0))
      .sum()
      .backward();
  EXPECT_EQ(signs(w), negative);
  for (const std::string device : {"CPU", "VK"}) {
    Tensor y(std::vector<float>{1.f, 2.f}, {2}, device);
    y.requires_grad_();
    const std::vector<Tensor> pieces = y.split(1);
    (pieces[0] * -0.f + pieces[1] * -0.f).sum().backward();
    EXPECT_EQ(signs(y), negative) << device;
    // Pieces that do not cover the whole tensor keep the +0.0 fills: the uncovered position's
    // gradient must read +0.0 (as torch's), and the covered ones then read +0.0 too.
    Tensor z(std::vector<float>{1.f, 2.f, 3.f}, {3}, device);
    z.requires_grad_();
    const std::vector<Tensor> some = z.split(1);
    (some[0] * -0.f + some[2] * -0.f).sum().backward();
    EXPECT_EQ(signs(z), std::vector<bool>(3, false)) << device;
  }
}

// Data parallelism with the parameters on one device: each step shards them (replicated) and the
// batch (split), and the gradients reach the parameters, summed over the replicas.
TEST(TensorShardGrad, DataParallelTrainingWithParametersShardedInsideTheStep) {
  const std::vector<float> xs = wave(8 * 6, 0.37f, 0.2f), ys = wave(8 * 2, 0.21f, -0.3f);
  auto train = [&](bool parallel) {
    Tensor::manual_seed(7);
    nn::Linear l1(6, 5), l2(5, 2);
    std::vector<Tensor> params = nn::parameters(l1, l2);
    const Tensor x(xs, {8, 6}), y(ys, {8, 2});
    auto on = [&](const Tensor& p) { return parallel ? p.shard(two) : p; };
    nn::SGD opt(params, 0.05, 0.9);
    std::vector<std::vector<float>> first_grads;
    for (int step = 0; step < 3; ++step) {
      opt.zero_grad();
      const Tensor xb = parallel ? x.shard(two, 0) : x, yb = parallel ? y.shard(two, 0) : y;
      const Tensor h = xb.linear(on(l1.weight), on(*l1.bias)).relu();
      Tensor loss = (h.linear(on(l2.weight), on(*l2.bias)) - yb).square().mean();
      loss.backward();
      if (step == 0)
        for (const Tensor& p : params) first_grads.push_back(p.grad()->to_vector<float>());
      opt.step({loss});
    }
    std::vector<std::vector<float>> out = first_grads;
    for (Tensor& p : params) {
      EXPECT_EQ(p.device(), "VK");  // the parameters stay where they were made
      out.push_back(p.to_vector<float>());
    }
    return out;
  };
  const auto one = train(false), dp = train(true);
  ASSERT_EQ(one.size(), dp.size());
  ASSERT_EQ(one.size(), 8u);  // four gradients, then four parameters
  for (size_t i = 0; i < one.size(); ++i)
    for (size_t j = 0; j < one[i].size(); ++j)
      EXPECT_NEAR(dp[i][j], one[i][j], 1e-5f) << i << "," << j;
  EXPECT_GT(std::abs(one[0][0]), 1e-4f);  // a gradient that moves the weights
}

}  // namespace
}  // namespace vkg
