// The threading rule (README, "Threads"): one device is shared by every thread, tensors that
// belong to different threads may be used at the same time (autograd included), and realized
// tensors may be shared for reading. Two threads doing independent work on the Vulkan device must
// get exactly what each gets alone. Run under ThreadSanitizer too (README: VKG_TSAN).
#include <gtest/gtest.h>

#include <barrier>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <vkgrad/vkgrad.hpp>

using namespace vkg;

namespace {

struct Training {
  std::vector<float> losses, weights;
  std::vector<float> column_sums;
};

// A linear regression fitted with Adam, the loss read every step as a training loop does. `k`
// makes each thread's data its own.
Training fit(int k) {
  const int64_t n = 64, d = 8;
  std::vector<float> xs(n * d), ys(n), w0(d, 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    float y = 0.5f * float(k);
    for (int64_t j = 0; j < d; ++j) {
      xs[i * d + j] = float((i * 7 + j * 3 + k) % 11) / 11.0f - 0.5f;
      y += xs[i * d + j] * float(j - 3) * 0.25f;
    }
    ys[i] = y;
  }
  const Tensor x(xs, {n, d}, "VK"), y(ys, {n, 1}, "VK");
  Tensor w = Tensor(w0, {d, 1}, "VK").requires_grad_();
  Tensor b = Tensor(std::vector<float>{0.0f}, {1}, "VK").requires_grad_();
  nn::Adam opt({w, b}, 0.1);
  Training out;
  for (int step = 0; step < 40; ++step) {
    Tensor loss = (x.matmul(w) + b - y).square().mean();
    opt.zero_grad();
    loss.backward();
    opt.step();
    out.losses.push_back(loss.item<float>());
  }
  out.weights = w.to_vector<float>();
  out.column_sums = x.sum(0).to_vector<float>();
  return out;
}

// Runs `work(t)` on `threads` threads at once; an exception in one fails the test.
template <class Work>
void on_threads(int threads, Work work) {
  std::mutex mu;
  std::vector<std::string> errors;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      try {
        work(t);
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        errors.push_back(e.what());
      }
    });
  for (auto& th : pool) th.join();
  for (const auto& e : errors) ADD_FAILURE() << "a thread threw: " << e;
}

}  // namespace

TEST(Threads, TwoThreadsTrainIndependentModelsOnOneDevice) {
  const Training alone[2] = {fit(1), fit(2)};
  for (const Training& t : alone) EXPECT_LT(t.losses.back(), 0.02f * t.losses.front());
  Training together[2];
  on_threads(2, [&](int t) { together[t] = fit(t + 1); });
  for (int t = 0; t < 2; ++t) {
    SCOPED_TRACE(t);
    EXPECT_EQ(together[t].losses, alone[t].losses);
    EXPECT_EQ(together[t].weights, alone[t].weights);
    EXPECT_EQ(together[t].column_sums, alone[t].column_sums);
  }
}

// A realized tensor shared for reading, each thread building its own graphs on it under its own
// settings (ScopedSetting is per thread): NOOPT in one thread only.
TEST(Threads, ARealizedTensorIsSharedForReading) {
  std::vector<float> v(4096);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i % 13);
  const Tensor shared = (Tensor(v, {64, 64}, "VK") * 2).realize();
  // Made from host data and never read yet: the first read allocates and uploads each, once,
  // though both threads read it at the same moment.
  std::vector<Tensor> fresh;
  for (int i = 0; i < 32; ++i)
    fresh.emplace_back(std::vector<float>(64, float(i)), Shape{64}, "VK");
  std::barrier both(2);
  float expect_sum = 0;
  for (float x : v) expect_sum += 2 * x;
  std::vector<float> sums(2), maxes(2);
  std::vector<std::vector<float>> fresh_seen(2);
  std::vector<std::vector<float>> rows(2);
  on_threads(2, [&](int t) {
    ScopedSetting noopt("NOOPT", t);
    for (const Tensor& f : fresh) {
      both.arrive_and_wait();
      fresh_seen[t].push_back(f.to_vector<float>().back());
    }
    for (int i = 0; i < 20; ++i) {
      sums[t] = shared.sum().item<float>();
      maxes[t] = (shared + float(i)).max().item<float>() - float(i);
      rows[t] = shared.sum(1).to_vector<float>();
    }
  });
  for (int t = 0; t < 2; ++t) {
    ASSERT_EQ(fresh_seen[t].size(), fresh.size());
    for (size_t i = 0; i < fresh.size(); ++i) EXPECT_EQ(fresh_seen[t][i], float(i));
    EXPECT_EQ(sums[t], expect_sum);
    EXPECT_EQ(maxes[t], 24.0f);
    EXPECT_EQ(rows[t], rows[0]);
  }
}
