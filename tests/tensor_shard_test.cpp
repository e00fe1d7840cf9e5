// Sharded tensors (Tensor::shard, core/multi.hpp): the seed's dot product, elementwise ops per
// shard, reductions over the sharded axis combined across devices, matmul with a sharded batch,
// gathering with to(), a data-parallel training step equal to the one-device step, and clear
// errors for what cannot be sharded.
#include <gtest/gtest.h>

#include <cmath>

#include <vkgrad/core/multi.hpp>
#include <vkgrad/nn/layers.hpp>
#include <vkgrad/nn/optim.hpp>
#include <vkgrad/vkgrad.hpp>

#include "support/error_of.hpp"

namespace vkg {
namespace {

using test::error_of;
const std::vector<std::string> two = {"VK", "VK:1"};

std::vector<float> iota(size_t n, float scale = 1, float shift = 0) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(i) * scale + shift;
  return v;
}

TEST(TensorShard, TheSeedsDotProductIs70) {
  Tensor a = Tensor({1.0f, 2.0f, 3.0f, 4.0f}).shard(two, 0);
  Tensor b = Tensor({5.0f, 6.0f, 7.0f, 8.0f}).shard(two, 0);
  EXPECT_EQ(a.device(), "VK,VK:1");
  EXPECT_EQ(a.shape(), (Shape{4}));
  EXPECT_EQ(a.dot(b).item<float>(), 70.0f);
  Tensor ai = Tensor({1, 2, 3, 4}).shard(two, 0), bi = Tensor({5, 6, 7, 8}).shard(two, 0);
  EXPECT_EQ(ai.dot(bi).item<int>(), 70);
}

TEST(TensorShard, EachShardLivesOnItsDeviceAndRealizesThere) {
  Tensor x = Tensor(iota(12), {4, 3}).shard(two, 0);
  Tensor y = (x * 2 + 1).realize();
  ASSERT_EQ(y.node()->op, Ops::MULTI);
  const Sharded s = lower_multi(y.node());
  ASSERT_EQ(s.shards.size(), 2u);
  EXPECT_EQ(s.axis, 0);
  EXPECT_EQ(s.shards[0]->device_node()->arg_as<std::string>(), "VK");
  EXPECT_EQ(s.shards[1]->device_node()->arg_as<std::string>(), "VK:1");
  EXPECT_EQ(*s.shards[1]->shape(), (Shape{2, 3}));
  EXPECT_EQ(Tensor(s.shards[1]).to_vector<float>(), (std::vector<float>{13, 15, 17, 19, 21, 23}));
  EXPECT_EQ(y.to("CPU").to_vector<float>(),
            (Tensor(iota(12), {4, 3}, "CPU") * 2 + 1).to_vector<float>());
}

TEST(TensorShard, ElementwiseWithReplicatedOperandsAgreesWithTheCpuDevice) {
  const std::vector<float> xs = iota(24, 0.25f, -3), ws = iota(6, 0.5f, -1);
  Tensor x = Tensor(xs, {4, 6}).shard(two, 0), w = Tensor(ws, {6}).shard(two);
  Tensor xc(xs, {4, 6}, "CPU"), wc(ws, {6}, "CPU");
  // The same kernels as on one Vulkan device (the CPU device's exp2 may differ by an ulp).
  Tensor xv(xs, {4, 6}), wv(ws, {6});
  EXPECT_EQ(((x * w).exp2() - x.abs()).to("CPU").to_vector<float>(),
            ((xv * wv).exp2() - xv.abs()).to_vector<float>());
  EXPECT_EQ((x.reshape({24}) * 3).to("CPU").to_vector<float>(),
            (xc.reshape({24}) * 3).to_vector<float>());
  // Sharded on the other axis, and moved: permute carries the axis, reshape regroups it.
  Tensor x1 = Tensor(xs, {4, 6}).shard(two, 1);
  EXPECT_EQ((x1.permute({1, 0}) + 1).to("CPU").to_vector<float>(),
            (xc.permute({1, 0}) + 1).to_vector<float>());
  EXPECT_EQ(x.reshape({2, 2, 6}).sum(2).to("VK").to_vector<float>(),
            xc.reshape({2, 2, 6}).sum(2).to_vector<float>());
  EXPECT_EQ(x.reshape({4, 2, 3}).to("CPU").to_vector<float>(), xs);
  EXPECT_EQ(x.shrink({{0, 4}, {1, 3}}).to("CPU").to_vector<float>(),
            xc.shrink({{0, 4}, {1, 3}}).to_vector<float>());
}

TEST(TensorShard, ReductionsOverTheShardedAxisCombineAcrossDevices) {
  const std::vector<float> xs = iota(32, 1, -9);  // small integers: every order sums exactly
  Tensor x = Tensor(xs, {8, 4}).shard(two, 0);
  Tensor xc(xs, {8, 4}, "CPU");
  EXPECT_EQ(x.sum(0).to("CPU").to_vector<float>(), xc.sum(0).to_vector<float>());
  EXPECT_EQ(x.max(0).to("CPU").to_vector<float>(), xc.max(0).to_vector<float>());
  EXPECT_EQ(x.sum().item<float>(), xc.sum().item<float>());
  EXPECT_EQ(x.mean().item<float>(), xc.mean().item<float>());
  EXPECT_EQ(x.sum(1).to("CPU").to_vector<float>(), xc.sum(1).to_vector<float>());  // stays sharded
  // The all-reduced result is replicated: both devices hold it, bit for bit.
  const Sharded total = lower_multi(x.sum(0).realize().node());
  EXPECT_EQ(total.axis, -1);
  EXPECT_EQ(Tensor(total.shards[0]).to_vector<float>(), Tensor(total.shards[1]).to_vector<float>());
  // Softmax over the batch axis: a reduce, an expand back over the sharded axis, another reduce.
  std::vector<float> a = x.softmax(0).to("CPU").to_vector<float>(),
                     e = xc.softmax(0).to_vector<float>();
  for (size_t i = 0; i < e.size(); ++i) EXPECT_NEAR(a[i], e[i], 1e-6f) << i;
}

TEST(TensorShard, MatmulWithAShardedBatch) {
  const std::vector<float> xs = iota(40, 1, -20), ws = iota(15, 1, -7);
  Tensor x = Tensor(xs, {8, 5}).shard(two, 0), w = Tensor(ws, {5, 3}).shard(two);
  Tensor xc(xs, {8, 5}, "CPU"), wc(ws, {5, 3}, "CPU");
  EXPECT_EQ(x.matmul(w).to("CPU").to_vector<float>(), xc.matmul(wc).to_vector<float>());
  // And the batch's gradient-style product, which reduces over the sharded batch.
  EXPECT_EQ(x.transpose(0, 1).matmul(x).to("CPU").to_vector<float>(),
            xc.transpose(0, 1).matmul(xc).to_vector<float>());
}

TEST(TensorShard, ShardingOnOneDeviceOrTheCpuDevice) {
  Tensor x = Tensor({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f});
  EXPECT_EQ(x.shard({"VK"}, 0).device(), "VK");  // one device: a plain tensor
  Tensor m = x.shard({"CPU", "VK:1", "VK"}, 0);
  EXPECT_EQ((m * m).sum().item<float>(), 91.0f);
  EXPECT_EQ((m + 1).to("VK:1").to_vector<float>(), (std::vector<float>{2, 3, 4, 5, 6, 7}));
}

TEST(TensorShard, BadInputIsAClearErrorAndTheLibraryStaysUsable) {
  Tensor x = Tensor(iota(15), {5, 3});
  std::string e = error_of([&] { x.shard(two, 0); });
  EXPECT_NE(e.find("axis 0 of size 5 does not split evenly over 2 devices"), std::string::npos)
      << e;
  EXPECT_NE(error_of([&] { x.shard(two, 2); }).find("out of range"), std::string::npos);
  EXPECT_NE(error_of([&] { x.shard({"VK", "vk:0"}); }).find("named twice"), std::string::npos);
  EXPECT_NE(error_of([&] {
              x.shard({"VK", "VK:8"});
            }).find("no Vulkan device VK:8"),
            std::string::npos);
  Tensor s = Tensor(iota(12), {4, 3}).shard(two, 0);
  e = error_of([&] { (s + Tensor(iota(12), {4, 3})).realize(); });
  EXPECT_NE(e.find("different devices (VK,VK:1 and VK)"), std::string::npos) << e;
  // A scatter of values sharded along the axis it scatters on (tensor_shard_scatter_test.cpp).
  const Tensor idx = Tensor({0, 2, 2, 1}).shard(two, 0),
               vals = Tensor({1.f, 2.f, 3.f, 4.f}).shard(two, 0);
  EXPECT_EQ(Tensor::zeros({3}, dtypes::float32, "VK,VK:1")
                .scatter_reduce(0, idx, vals, ScatterReduce::Amax)
                .to("CPU")
                .to_vector<float>(),
            (std::vector<float>{1, 4, 3}));
  EXPECT_EQ(Tensor::zeros({3}, dtypes::float32, "VK,VK:1")
                .scatter_add(0, idx, vals)
                .to("CPU")
                .to_vector<float>(),
            (std::vector<float>{1, 4, 5}));
  // Values sharded on an axis the scatter does not index, shorter there than the target: each
  // device's rows would land in only part of its shard's.
  e = error_of([&] {
    Tensor::zeros({4, 3}, dtypes::float32, "VK,VK:1")
        .scatter_add(1, Tensor({0, 2, 1, 1, 0, 2}).reshape({2, 3}).shard(two, 0),
                     Tensor(iota(6), {2, 3}).shard(two, 0))
        .realize();
  });
  EXPECT_NE(e.find("values sharded on axis 0 fill only part of it; gather them with to() first"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("of shape (4, 3) sharded over VK,VK:1"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { s.shard(two, 0); }).find("sharded already"), std::string::npos);
  EXPECT_NE(error_of([&] { s.to("VK,VK:1"); }).find("one device at a time"), std::string::npos);
  EXPECT_EQ((s * 2).sum().item<float>(), 132.0f);  // still usable
}

// Data parallelism: the batch split over two devices, the weights replicated; the gradients of
// the mean loss are all-reduced by the backward's sums over the batch, so every replica takes
// the one-device step.
TEST(TensorShard, DataParallelTrainingMatchesOneDevice) {
  const std::vector<float> xs = iota(8 * 6, 0.37f, -8), ys = iota(8 * 2, -0.21f, 1.5f);
  auto train = [&](bool parallel) {
    Tensor::manual_seed(7);
    nn::Linear l1(6, 5), l2(5, 2);
    std::vector<Tensor> params = nn::parameters(l1, l2);
    Tensor x(xs, {8, 6}), y(ys, {8, 2});
    if (parallel) {
      for (Tensor& p : params) p.shard_(two);
      x = x.shard(two, 0);
      y = y.shard(two, 0);
    }
    nn::SGD opt(params, 0.05, 0.9);
    for (int step = 0; step < 3; ++step) {
      opt.zero_grad();
      Tensor loss = (l2(l1(x).relu()) - y).square().mean();
      loss.backward();
      opt.step({loss});
    }
    std::vector<std::vector<float>> out;
    for (Tensor& p : params) {
      EXPECT_EQ(p.device(), parallel ? "VK,VK:1" : "VK");
      out.push_back(p.to("CPU").to_vector<float>());
    }
    return out;
  };
  Tensor::manual_seed(7);
  const std::vector<float> initial = nn::Linear(6, 5).weight.to_vector<float>();
  const auto one = train(false), dp = train(true);
  EXPECT_GT(std::abs(one[0][0] - initial[0]), 1e-4f);  // the steps moved the weights
  ASSERT_EQ(one.size(), dp.size());
  for (size_t i = 0; i < one.size(); ++i)
    for (size_t j = 0; j < one[i].size(); ++j)
      EXPECT_NEAR(dp[i][j], one[i][j], 1e-5f) << i << "," << j;
}

}  // namespace
}  // namespace vkg

namespace vkg {
namespace {

// Tensors made on the joined device name are replicated: host data is uploaded to each device,
// constants and counter-based random numbers are computed on each, the same everywhere.
TEST(TensorShardCreation, DataConstantsAndRandomNumbersOnSeveralDevicesAreReplicated) {
  Tensor d(std::vector<float>{1, 2, 3}, {3}, "VK,VK:1");
  EXPECT_EQ(d.device(), "VK,VK:1");
  EXPECT_EQ((d * 2).to("CPU").to_vector<float>(), (std::vector<float>{2, 4, 6}));
  const Sharded s = lower_multi((d + 1).realize().node());
  EXPECT_EQ(s.axis, -1);
  EXPECT_EQ(Tensor(s.shards[1]).to_vector<float>(), (std::vector<float>{2, 3, 4}));
  EXPECT_EQ(Tensor::arange(0, 4, 1, "VK,VK:1").sum().item<int>(), 6);
  EXPECT_EQ(Tensor::ones({2, 2}, dtypes::float32, "VK,VK:1").sum().item<float>(), 4.0f);
  Tensor::manual_seed(3);
  const std::vector<float> one = Tensor::rand({6}, dtypes::float32, "VK").to_vector<float>();
  Tensor::manual_seed(3);
  Tensor r = Tensor::rand({6}, dtypes::float32, "VK,VK:1").realize();
  const Sharded rs = lower_multi(r.node());
  EXPECT_EQ(Tensor(rs.shards[0]).to_vector<float>(), one);
  EXPECT_EQ(Tensor(rs.shards[1]).to_vector<float>(), one);
}

}  // namespace
}  // namespace vkg
