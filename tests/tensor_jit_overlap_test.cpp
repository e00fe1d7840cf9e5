// vkg::Jit replays over several devices without the host waiting between the recorded steps: a
// kernel step is submitted (Device::replay), a copy between devices waits on the copy thread for
// the buffers it reads and overwrites, and the device that reads the copy waits for it on its own
// queue (a timeline semaphore the copy thread signals). Pinned here: a replay returns with the
// second device's step submitted while the first device's long step, whose result it reads, is
// still running; every call's values are the closed form, the unjitted run's and the CPU
// device's. Run by hand under synchronization validation (VKG_VALIDATION=sync) it reports no
// hazard; CTest does not run it so: the layer's timeline tracking sometimes stalls on the
// host-signalled bridge (tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <vkgrad/core/device.hpp>
#include <vkgrad/vkgrad.hpp>

namespace vkg {
namespace {

std::vector<float> wave(size_t n, float scale, float shift) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(float(i) * scale) + shift;
  return v;
}

// `links` products with a matrix of 1/n keep a constant matrix exactly: start's value, + 1.
Tensor chain(const Tensor& start, const Tensor& avg, int links) {
  Tensor c = start;
  for (int i = 0; i < links; ++i) c = c.matmul(avg);
  return c + 1;
}

// Eighths of small integers: products with scale + 1 and their sums over a few calls are exact
// in float, so the accumulated values compare equal whatever order the device adds in.
std::vector<float> eighths(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(int(i % 17) - 8) / 8.0f;
  return v;
}

// A long chain on VK, its result copied to VK:1, multiplied there and added into a state on VK:1
// (assigned in place): VK:1's step reads VK's, and the state's final value depends on every
// call, including the ones nobody reads in between (a replay whose input upload did not wait for
// the previous replay's read of its input would add the wrong call's values).
TEST(AsyncJit, AReplayOverTwoDevicesSubmitsTheSecondBeforeTheFirstEnds) {
  constexpr int64_t n = 512;
  const Tensor avg = (Tensor::ones({n, n}) * (1.0f / float(n))).contiguous().realize();
  Tensor acc = Tensor::zeros({n, n}, dtypes::float32, "VK:1").contiguous().realize();
  Jit jit([&](const std::vector<Tensor>& in) {
    acc.assign(acc + chain(in[0], avg, 24).to("VK:1") * in[1]);
    return std::vector<Tensor>{acc * 1};
  });
  const std::vector<float> factor = eighths(size_t(n * n));
  std::vector<float> want(factor.size(), 0.0f);
  auto call = [&](float scale) {
    for (size_t i = 0; i < want.size(); ++i) want[i] += (scale + 1) * factor[i];
    return jit({Tensor(std::vector<float>(size_t(n * n), scale), {n, n}),
                Tensor(factor, {n, n}, "VK:1")})[0];
  };
  auto expect_values = [&](const Tensor& out, const std::vector<float>& expected,
                           const std::string& what) {
    EXPECT_EQ(out.device(), "VK:1");
    const std::vector<float> v = out.to_vector<float>();
    ASSERT_EQ(v.size(), expected.size());
    size_t wrong = 0;
    for (size_t i = 0; i < v.size(); ++i) wrong += v[i] != expected[i];
    EXPECT_EQ(wrong, 0u) << what;
  };
  expect_values(call(1), want, "call 1");  // runs the function
  expect_values(call(2), want, "call 2");  // captures it
  const auto t0 = std::chrono::steady_clock::now();
  expect_values(call(3), want, "call 3");  // the first replay
  // On Lavapipe the chain takes a few hundred milliseconds; a GPU may finish it at once. Where it
  // is slow enough to see, a blocker queued on VK before call 4 (the chain, repeated to take
  // about two seconds) keeps VK's step of call 4 from running while the counts are read: a margin
  // no descheduling of the host on a loaded machine eats.
  const double chain_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const bool observable = chain_ms > 50;
  Device &vk0 = device("VK"), &vk1 = device("VK:1");
  std::optional<Tensor> blocker;
  if (observable) {
    const int repeats = std::clamp(int(std::ceil(2000 / chain_ms)), 1, 8);
    blocker = chain(Tensor::ones({n, n}).contiguous(), avg, 24 * repeats).realize();
  }
  const Device::QueueCounts before0 = vk0.queue_counts(), before1 = vk1.queue_counts();
  const Tensor out = call(4);
  const Device::QueueCounts after0 = vk0.queue_counts(), after1 = vk1.queue_counts();
  EXPECT_GT(after0.submitted, before0.submitted);
  EXPECT_GT(after1.submitted, before1.submitted) << "VK:1's step was not submitted";
  if (observable) {
    // VK:1's step is on its queue, yet the chain it reads has not finished: it waits there.
    EXPECT_LT(after0.completed, after0.submitted) << "the replay waited for VK's step";
    EXPECT_LT(after1.completed, after1.submitted) << "VK:1's step ran before its input arrived";
  }
  // Call 4's output copied while call 4 may still run, then call 5 started: the copies keep call
  // 4's values (call 5's steps overwrite the output only after they read it), and the output
  // itself reads call 5's (the documented reuse of output buffers), once call 5 has written it.
  const std::vector<float> want4 = want;
  const Tensor to_cpu = out.to("CPU").realize(), to_vk = out.to("VK").realize();
  const Tensor cloned = out.clone().realize();
  const Tensor out5 = call(5);
  const std::vector<float> want5 = want;
  expect_values(out, want5, "call 4's output read after call 5");
  expect_values(cloned, want4, "a clone of call 4's output");
  EXPECT_EQ(to_cpu.to_vector<float>(), want4) << "call 4's output copied to CPU";
  EXPECT_EQ(to_vk.to_vector<float>(), want4) << "call 4's output copied to VK";
  // Replays that nobody reads in between, each one's input upload waiting for the previous
  // replay's read of the input (still behind VK's queue): the state sums every call.
  if (observable) blocker = chain(Tensor::ones({n, n}).contiguous(), avg, 48).realize();
  for (float scale : {6.0f, 7.0f, 8.0f}) (void)call(scale);
  expect_values(call(9), want, "call 9, after calls 6 to 8 unread");
  expect_values(acc, want, "the state");
  if (observable) {
    EXPECT_EQ(blocker->max().item<float>(), 2.0f);
  }
}

// Steps on VK, VK:1 and the CPU device, copies between each: every call of the jitted function
// gives the unjitted run's values, and those are the CPU device's (within float rounding).
std::vector<Tensor> three_devices(const std::vector<Tensor>& in, const Tensor& weight,
                                  const std::string& second, const std::string& host) {
  const Tensor a = (in[0].matmul(weight) + 1).relu();          // on in[0]'s device
  const Tensor b = a.to(second) * in[1] - in[1].sum(1, true);  // on `second`
  const Tensor c = (b.to(host) * 0.5f).exp2();                 // on `host`
  const Tensor d = (c.to(in[0].device()) + a).sum(0);          // back on in[0]'s
  return {b, c, d};
}

TEST(AsyncJit, ReplaysAcrossVkVk1AndCpuEqualTheUnjittedRunAndTheCpuDevice) {
  constexpr int64_t n = 24;
  const std::vector<float> w = wave(size_t(n * n), 0.07f, -0.1f);
  auto inputs = [&](int call, const std::string& first, const std::string& second) {
    return std::vector<Tensor>{
        Tensor(wave(size_t(n * n), 0.11f + 0.02f * float(call), 0.05f), {n, n}, first),
        Tensor(wave(size_t(n * n), 0.05f, 0.3f * float(call)), {n, n}, second)};
  };
  const Tensor weight_vk = Tensor(w, {n, n}).realize();
  const Tensor weight_cpu = Tensor(w, {n, n}, "CPU").realize();
  Jit jit(
      [&](const std::vector<Tensor>& in) { return three_devices(in, weight_vk, "VK:1", "CPU"); });
  for (int call = 0; call < 5; ++call) {
    const std::vector<Tensor> jitted = jit(inputs(call, "VK", "VK:1"));
    const std::vector<Tensor> eager =
        three_devices(inputs(call, "VK", "VK:1"), weight_vk, "VK:1", "CPU");
    const std::vector<Tensor> cpu =
        three_devices(inputs(call, "CPU", "CPU"), weight_cpu, "CPU", "CPU");
    ASSERT_EQ(jitted.size(), 3u);
    for (size_t k = 0; k < 3; ++k) {
      const std::vector<float> j = jitted[k].to_vector<float>(), e = eager[k].to_vector<float>(),
                               c = cpu[k].to_vector<float>();
      ASSERT_EQ(j.size(), e.size());
      ASSERT_EQ(c.size(), e.size());
      EXPECT_EQ(j, e) << "call " << call << ", output " << k;
      for (size_t i = 0; i < c.size(); ++i)
        EXPECT_NEAR(j[i], c[i], 1e-4f * std::max(1.0f, std::fabs(c[i])))
            << "call " << call << ", output " << k << ", element " << i;
    }
  }
  EXPECT_GT(jit.kernels(), 0u);
}

// A replay's copy between devices may still wait on the copy thread when the Jit is reset: it
// waits here for VK:1's long chain, which still reads the output's buffer. The plan's memory
// goes with the reset, and the ranges it held on VK are handed out again at once (VK's queue is
// idle), here to new tensors of the same size; the copy must still read what the replay
// wrote, not the new tensors' bytes.
TEST(AsyncJit, ACopyInFlightKeepsItsMemoryWhenTheJitIsReset) {
  constexpr int64_t n = 512;
  const Tensor avg1 =
      (Tensor::ones({n, n}, dtypes::float32, "VK:1") * (1.0f / float(n))).contiguous().realize();
  Jit jit([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{(in[0] * 2.0f + 1.0f).to("VK:1")};
  });
  const std::vector<float> x = wave(size_t(n * n), 0.021f, 0.25f);
  auto call = [&](float shift) {
    std::vector<float> v = x;
    for (float& e : v) e += shift;
    return jit({Tensor(v, {n, n})})[0];
  };
  (void)call(0).realize();                  // runs the function
  const Tensor captured = call(1);          // captures it
  Tensor busy = chain(captured, avg1, 48);  // VK:1 reads the output's buffer for a while
  busy.realize();
  const Tensor out = call(2);  // the replay's copy waits for `busy` on the copy thread
  jit.reset();
  const std::vector<float> junk(size_t(n * n), -7.0f);
  std::vector<Tensor> fills;  // enough to take every range of this size the allocator keeps
  for (int i = 0; i < 16; ++i) fills.push_back(Tensor(junk, {n, n}).realize());
  const std::vector<float> v = out.to_vector<float>();
  ASSERT_EQ(v.size(), x.size());
  size_t wrong = 0;
  for (size_t i = 0; i < v.size(); ++i) wrong += v[i] != (x[i] + 2.0f) * 2.0f + 1.0f;
  EXPECT_EQ(wrong, 0u) << "the copy read memory handed out again";
  for (const Tensor& f : fills) EXPECT_EQ(f.to_vector<float>(), junk);
  (void)busy.to_vector<float>();
}

}  // namespace
}  // namespace vkg
