// vkg::dist on two MPI ranks (CTest runs `mpirun -np 2`): all_reduce, broadcast and all_gather
// give the values every rank can compute by hand; gradients are averaged in buckets; a
// data-parallel step on half batches equals the full-batch step; a rank that does not come is a
// timeout error, not a hang.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <tuple>

#include <vkgrad/core/context.hpp>
#include <vkgrad/core/counters.hpp>
#include <vkgrad/core/mapped_memory.hpp>
#include <vkgrad/dist/dist.hpp>
#include <vkgrad/nn/layers.hpp>
#include <vkgrad/nn/optim.hpp>
#include <vkgrad/vkgrad.hpp>

#include "support/error_of.hpp"

namespace vkg {
namespace {

TEST(Dist, TwoRanks) {
  ASSERT_TRUE(dist::available());
  ASSERT_EQ(dist::world_size(), 2) << "run under mpirun -np 2";
  EXPECT_TRUE(dist::rank() == 0 || dist::rank() == 1);
}

TEST(Dist, AllReduceSumsAndAveragesOnTheTensorsDevice) {
  const float r = float(dist::rank() + 1);  // 1 and 2
  for (const char* device : {"VK", "CPU"}) {
    Tensor t(std::vector<float>{r, 10 * r, -r}, {3}, device);
    Tensor s = dist::all_reduce(t);
    EXPECT_EQ(s.device(), device);
    EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{3, 30, -3}));
    EXPECT_EQ(dist::all_reduce(t, dist::ReduceOp::Mean).to_vector<float>(),
              (std::vector<float>{1.5f, 15, -1.5f}));
  }
  Tensor i = Tensor({dist::rank(), 7}).reshape({1, 2});
  EXPECT_EQ(dist::all_reduce(i).to_vector<int>(), (std::vector<int>{1, 14}));
  EXPECT_EQ(dist::all_reduce(i).shape(), (Shape{1, 2}));
}

// Where the device maps its memory (Lavapipe, the CPU device), MPI reads the input and writes
// the result's buffer in place: no upload, the input untouched, the result read by later kernels.
TEST(Dist, AllReduceWritesTheResultInTheDevicesMemory) {
  const float r = float(dist::rank() + 1);  // 1 and 2
  for (const char* device : {"VK", "CPU"}) {
    Tensor t =
        (Tensor::arange(0, 6, 1, device).reshape({2, 3}).cast(dtypes::float32) * r).permute({1, 0});
    t.realize();
    // A discrete GPU's memory is not mapped: all_reduce goes through a host copy and an upload.
    Tensor probe = t.contiguous();
    const bool mapped = mapped_memory(probe).data != nullptr;
    const int64_t uploads = global_counters().uploads;
    Tensor s = dist::all_reduce(t);
    EXPECT_EQ(s.shape(), (Shape{3, 2}));
    EXPECT_EQ((s * 2 + 1).to_vector<float>(), (std::vector<float>{1, 19, 7, 25, 13, 31})) << device;
    // Counted once a kernel has read the result: a host copy is uploaded only then.
    if (mapped) {
      EXPECT_EQ(global_counters().uploads, uploads) << device;
    }
    EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{0, 3 * r, r, 4 * r, 2 * r, 5 * r}))
        << device;
    EXPECT_EQ(dist::all_reduce(t, dist::ReduceOp::Mean).to_vector<float>(),
              (std::vector<float>{0, 4.5f, 1.5f, 6, 3, 7.5f}))
        << device;
  }
}

TEST(Dist, BroadcastAndAllGather) {
  const float r = float(dist::rank());
  Tensor t(std::vector<float>{r, r + 0.5f}, {1, 2});
  EXPECT_EQ(dist::broadcast(t, 1).to_vector<float>(), (std::vector<float>{1, 1.5f}));
  Tensor g = dist::all_gather(t);
  EXPECT_EQ(g.shape(), (Shape{2, 2}));
  EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{0, 0.5f, 1, 1.5f}));
}

// Where the device maps its memory, MPI reads the root's (or each rank's) tensor and writes the
// result's fresh buffer in place: no upload; the input untouched; the result read by later
// kernels, and its own buffer on the root too (an assign to the input leaves it alone).
TEST(Dist, BroadcastAndAllGatherWriteInTheDevicesMemory) {
  const int r = dist::rank();
  auto value = [](int rank) {  // rank r's t (3 x 2, a transpose): row j is {j, j + 3} * (r + 1)
    std::vector<float> v;
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 2; ++k) v.push_back(float((j + 3 * k) * (rank + 1) + 10 * rank));
    return v;
  };
  for (const char* device : {"VK", "CPU"}) {
    SCOPED_TRACE(device);
    Tensor t =
        (Tensor::arange(0, 6, 1, device).reshape({2, 3}).cast(dtypes::float32) * float(r + 1) +
         float(10 * r))
            .permute({1, 0});
    t.realize();
    Tensor probe = t.contiguous();
    const bool mapped = mapped_memory(probe).data != nullptr;
    EXPECT_EQ(maps_memory(device), mapped);  // what broadcast and all_gather ask first
    EXPECT_FALSE(maps_memory(std::string(device) + "," + device + ":1"));
    Tensor in = t;  // realized, the transpose is a buffer of its own, read in place
    EXPECT_EQ(mapped_memory(in).data != nullptr, mapped);
    for (int root : {0, 1}) {
      const int64_t uploads = global_counters().uploads;
      Tensor b = dist::broadcast(t, root);
      EXPECT_EQ(b.shape(), (Shape{3, 2}));
      EXPECT_EQ(b.device(), device);
      std::vector<float> want = value(root);
      for (float& x : want) x = x * 2 + 1;
      EXPECT_EQ((b * 2 + 1).to_vector<float>(), want) << "root " << root;
      // After a kernel read the result: a host copy would have been uploaded by now.
      if (mapped) {
        EXPECT_EQ(global_counters().uploads, uploads) << "root " << root;
      }
      EXPECT_EQ(t.to_vector<float>(), value(r));
    }
    const int64_t uploads = global_counters().uploads;
    Tensor g = dist::all_gather(t);
    EXPECT_EQ(g.shape(), (Shape{6, 2}));
    std::vector<float> want = value(0), second = value(1);
    want.insert(want.end(), second.begin(), second.end());
    EXPECT_EQ((g + 0).to_vector<float>(), want);
    if (mapped) {
      EXPECT_EQ(global_counters().uploads, uploads);
    }
    // The root's result is a buffer of its own: writing its input in place leaves it as it was.
    Tensor own = t.contiguous().realize();
    Tensor b = dist::broadcast(own, 0);
    b.realize();
    own.assign(own * 0).realize();
    EXPECT_EQ(b.to_vector<float>(), value(0));
  }
}

// An input that views part of another tensor's buffer: realized first, it gets a buffer of its
// own, read in place like any other (no host copy), and the results are its values.
TEST(Dist, BroadcastAndAllGatherOfAView) {
  const float r = float(dist::rank());
  for (const char* device : {"VK", "CPU"}) {
    SCOPED_TRACE(device);
    Tensor whole = (Tensor::arange(0, 6, 1, device).cast(dtypes::float32) + 10 * r).realize();
    const bool mapped = mapped_memory(whole).data != nullptr;
    Tensor part = whole.shrink({{2, 5}});
    part.realize();
    const int64_t uploads = global_counters().uploads;
    EXPECT_EQ((dist::broadcast(part, 1) + 0).to_vector<float>(), (std::vector<float>{12, 13, 14}));
    EXPECT_EQ((dist::all_gather(part) + 0).to_vector<float>(),
              (std::vector<float>{2, 3, 4, 12, 13, 14}));
    // Kernels read both results: host copies would have been uploaded by now.
    if (mapped) {
      EXPECT_EQ(global_counters().uploads, uploads);
      EXPECT_NE(mapped_memory(part).data, nullptr);
    }
  }
}

// A large broadcast and all_gather (int64, 3 MiB a rank) arrive whole, in rank order: in place
// and through host copies, as MPI_BYTEs and (VKG_DIST_MAX_COUNT below 3 MiB, as past 2^31 - 1
// bytes) as one value of a datatype of 1 MiB blocks, or of 1000003-byte blocks and a rest.
TEST(Dist, LargeBroadcastAndAllGatherArriveWhole) {
  const int64_t n = 3 << 17;  // 393216 int64s
  for (auto [device, staged, limit] : {std::tuple{"VK", 0, 0},
                                       {"CPU", 0, 0},
                                       {"VK", 0, 1 << 20},
                                       {"VK", 1, 1 << 20},
                                       {"CPU", 0, 1000003},
                                       {"CPU", 1, 1000003}}) {
    SCOPED_TRACE(std::string(device) + (staged ? " staged" : "") + " limit " +
                 std::to_string(limit));
    ScopedSetting stage("VKG_DIST_STAGED", staged), max_count("VKG_DIST_MAX_COUNT", limit);
    // No byte zero (fresh memory may be): a byte MPI left out shows.
    const int64_t high = 0x0102030405060708;
    const Tensor t =
        Tensor::arange(0, n, 1, device).cast(dtypes::int64) * (dist::rank() + 1) + high;
    const std::vector<int64_t> b = dist::broadcast(t, 1).to_vector<int64_t>();
    ASSERT_EQ(b.size(), size_t(n));
    const std::vector<int64_t> g = dist::all_gather(t.reshape({n / 3, 3})).to_vector<int64_t>();
    ASSERT_EQ(g.size(), size_t(2 * n));
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i)
      bad += (b[size_t(i)] != 2 * i + high) + (g[size_t(i)] != i + high) +
             (g[size_t(n + i)] != 2 * i + high);
    EXPECT_EQ(bad, 0);
  }
}

// The path a device whose memory the host does not map takes (VKG_DIST_STAGED=1 forces it):
// device -> host -> MPI -> host -> device, one upload per result, the same values.
TEST(Dist, CollectivesThroughHostCopiesGiveTheSameValues) {
  ScopedSetting staged("VKG_DIST_STAGED", 1);
  const float r = float(dist::rank() + 1);  // 1 and 2
  for (const char* device : {"VK", "CPU"}) {
    SCOPED_TRACE(device);
    Tensor t = (Tensor::arange(0, 4, 1, device).cast(dtypes::float32) * r).reshape({2, 2});
    t.realize();
    const int64_t uploads = global_counters().uploads;
    EXPECT_EQ(dist::all_reduce(t).to_vector<float>(), (std::vector<float>{0, 3, 6, 9}));
    EXPECT_EQ(dist::broadcast(t, 1).to_vector<float>(), (std::vector<float>{0, 2, 4, 6}));
    EXPECT_EQ(dist::broadcast(t, 0).to_vector<float>(), (std::vector<float>{0, 1, 2, 3}));
    const Tensor g = dist::all_gather(t);
    EXPECT_EQ(g.shape(), (Shape{4, 2}));
    EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 0, 2, 4, 6}));
    EXPECT_EQ(global_counters().uploads, uploads + 4);
  }
}

TEST(Dist, BadInputIsAClearError) {
  Tensor h = Tensor(std::vector<float>{1, 2}, {2}).cast(dtypes::float16);
  EXPECT_NE(test::error_of([&] { dist::all_reduce(h); }).find("float32, float64, int32 or int64"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] {
              dist::broadcast(h.cast(dtypes::float32), 5);
            }).find("there are 2 ranks"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] {
              dist::all_reduce(Tensor({1, 2}), dist::ReduceOp::Mean);
            }).find("the mean needs"),
            std::string::npos);
}

TEST(Dist, GradientsAreAveragedInBuckets) {
  const float r = float(dist::rank() + 1);
  std::vector<Tensor> params = {Tensor(std::vector<float>{0, 0, 0}, {3}),
                                Tensor(std::vector<float>{0}, {1}),
                                Tensor(std::vector<float>{0, 0}, {2})};
  for (Tensor& p : params) p.requires_grad_();
  // d/dp of sum(p * c) is c: rank-dependent gradients.
  ((params[0] * Tensor(std::vector<float>{r, 2 * r, 3 * r}, {3})).sum() +
   (params[1] * (4 * r)).sum() + (params[2] * Tensor(std::vector<float>{-r, r * r}, {2})).sum())
      .backward();
  dist::all_reduce_gradients(params, dist::ReduceOp::Mean, /*bucket_bytes=*/12);  // two buckets
  EXPECT_EQ(params[0].grad()->to_vector<float>(), (std::vector<float>{1.5f, 3, 4.5f}));
  EXPECT_EQ(params[1].grad()->to_vector<float>(), (std::vector<float>{6}));
  EXPECT_EQ(params[2].grad()->to_vector<float>(), (std::vector<float>{-1.5f, 2.5f}));
}

// Each rank takes half the batch; the mean loss's gradients averaged over ranks are the full
// batch's, so both ranks reach the weights one process reaches on the whole batch.
TEST(Dist, DataParallelStepsMatchTheFullBatch) {
  std::vector<float> xs(8 * 6), ys(8 * 2);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = float(i) * 0.37f - 8;
  for (size_t i = 0; i < ys.size(); ++i) ys[i] = float(i) * -0.21f + 1.5f;
  auto train = [&](bool parallel) {
    Tensor::manual_seed(11);
    nn::Linear l1(6, 5), l2(5, 2);
    std::vector<Tensor> params = nn::parameters(l1, l2);
    Tensor x(xs, {8, 6}), y(ys, {8, 2});
    if (parallel) {
      const int64_t half = 4 * dist::rank();
      x = x.shrink({{half, half + 4}, {0, 6}});
      y = y.shrink({{half, half + 4}, {0, 2}});
    }
    nn::SGD opt(params, 0.05, 0.9);
    for (int step = 0; step < 3; ++step) {
      opt.zero_grad();
      (l2(l1(x).relu()) - y).square().mean().backward();
      if (parallel) dist::all_reduce_gradients(params);
      opt.step();
    }
    std::vector<std::vector<float>> out;
    for (Tensor& p : params) out.push_back(p.to_vector<float>());
    return out;
  };
  const auto one = train(false), dp = train(true);
  for (size_t i = 0; i < one.size(); ++i)
    for (size_t j = 0; j < one[i].size(); ++j)
      EXPECT_NEAR(dp[i][j], one[i][j], 1e-5f) << i << "," << j;
}

// Rank 1 comes 3 s late to a broadcast it sends and an all_gather; rank 0 waits 1 s for each and
// gets the errors. Both collectives still complete when rank 1 arrives (rank 0's next collective
// moves them on), and rank 1 receives the memory rank 0 kept for the abandoned all_gather.
TEST(Dist, ALateRankIsATimeoutErrorForBroadcastAndAllGather) {
  Tensor t(std::vector<float>{float(dist::rank() + 1), 5}, {1, 2});
  t.realize();
  if (dist::rank() == 0) {
    setenv("VKG_DIST_TIMEOUT", "1", 1);
    const std::string eb = test::error_of([&] { dist::broadcast(t, 1); });
    const std::string eg = test::error_of([&] { dist::all_gather(t); });
    unsetenv("VKG_DIST_TIMEOUT");
    EXPECT_NE(eb.find("broadcast from rank 1 of a tensor of shape (1, 2) (float32) on rank 0 of 2 "
                      "waited 1 s (VKG_DIST_TIMEOUT)"),
              std::string::npos)
        << eb;
    EXPECT_NE(eg.find("all_gather of a tensor of shape (1, 2) (float32) on rank 0 of 2 waited 1 s"),
              std::string::npos)
        << eg;
    EXPECT_EQ((t * 2).to_vector<float>(), (std::vector<float>{2, 10}));  // local work goes on
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    EXPECT_EQ(dist::broadcast(t, 1).to_vector<float>(), (std::vector<float>{2, 5}));
    EXPECT_EQ(dist::all_gather(t).to_vector<float>(), (std::vector<float>{1, 5, 2, 5}));
  }
  EXPECT_EQ(dist::all_reduce(t).to_vector<float>(), (std::vector<float>{3, 10}));
}

// Last: rank 1 comes 3 s late to an all_reduce that rank 0 waits 1 s for. Rank 0 gets the error;
// the collective still completes when rank 1 arrives, so the run ends cleanly.
TEST(Dist, ALateRankIsATimeoutErrorNotAHang) {
  Tensor t(std::vector<float>{1}, {1});
  if (dist::rank() == 0) {
    setenv("VKG_DIST_TIMEOUT", "1", 1);
    const std::string e = test::error_of([&] { dist::all_reduce(t); });
    unsetenv("VKG_DIST_TIMEOUT");
    EXPECT_NE(e.find("waited 1 s (VKG_DIST_TIMEOUT) for the other ranks"), std::string::npos) << e;
    EXPECT_EQ((t * 2).item<float>(), 2.0f);  // local work goes on
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    EXPECT_EQ(dist::all_reduce(t).item<float>(), 2.0f);
  }
}

}  // namespace
}  // namespace vkg
