// vkg::Jit on issue 9's workload: one Adam training step of an MLP 784-128-10 at batch 128,
// eager (traced, scheduled and recorded every step) against JIT (a replay of the captured
// command buffer), and the bare submission of that command buffer as the floor of a replay's
// host time. Each step takes a new batch from host memory, as a training loop does.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include <vkgrad/core/context.hpp>
#include <vkgrad/core/counters.hpp>
#include <vkgrad/core/device.hpp>
#include <vkgrad/vkgrad.hpp>

#include "process_cpu.hpp"

namespace vkg::bench {
namespace {

constexpr int64_t kBatch = 128;

struct MlpStep {
  nn::Linear l1{784, 128}, l2{128, 10};
  std::unique_ptr<nn::Adam> adam;
  std::vector<float> pixels = std::vector<float>(kBatch * 784);
  std::vector<int32_t> labels = std::vector<int32_t>(kBatch);

  MlpStep() {
    Tensor::manual_seed(0);
    std::vector<Tensor> params = nn::parameters(l1, l2);
    for (Tensor& p : params) p.realize();
    adam = std::make_unique<nn::Adam>(params, 1e-3);
    for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = float(int(i % 251) - 125) / 125.0f;
    for (size_t i = 0; i < labels.size(); ++i) labels[i] = int32_t(i % 10);
  }
  // A new batch from the host (the same numbers: the speed does not depend on them).
  std::vector<Tensor> batch() const {
    return {Tensor(pixels, {kBatch, 784}), Tensor(labels, {kBatch})};
  }
  std::vector<Tensor> operator()(const std::vector<Tensor>& in) {
    adam->zero_grad();
    Tensor loss = l2(l1(in[0]).relu()).sparse_categorical_crossentropy(in[1]);
    loss.backward();
    adam->step({loss});
    return {loss};
  }
};

void BM_MlpAdamStep_Eager(benchmark::State& state) {
  MlpStep step;
  step(step.batch());  // compiles every kernel
  step(step.batch());
  // A realize returns once its work is submitted: each step waits for its device, as a replay
  // does, so that the time is the step's and not the submission's.
  for (auto _ : state) {
    const std::vector<Tensor> out = step(step.batch());
    (void)device(out.at(0).device()).synchronize();
  }
}
BENCHMARK(BM_MlpAdamStep_Eager)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_MlpAdamStep_Jit(benchmark::State& state) {
  MlpStep step;
  Jit jit([&](const std::vector<Tensor>& in) { return step(in); });
  jit(step.batch());
  jit(step.batch());  // captured
  const double cpu0 = process_cpu_seconds();
  const int64_t dispatches0 = global_counters().dispatches;
  for (auto _ : state) benchmark::DoNotOptimize(jit(step.batch()));
  state.counters["kernels"] = double(jit.kernels());
  // Fewer than kernels where small ones share a dispatch (devices/vk_dispatch_groups.cpp).
  state.counters["dispatches"] =
      double(global_counters().dispatches - dispatches0) / double(state.iterations());
  state.counters["process_cpu_ms"] =
      (process_cpu_seconds() - cpu0) / double(state.iterations()) * 1e3;
}
BENCHMARK(BM_MlpAdamStep_Jit)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same replayed step, each waited for and timed alone: its percentiles. On a shared 2-core
// machine another process holding a core for a while stretches a few steps, which the mean
// above counts in full; the median is the step's time when the machine is the step's.
void BM_MlpAdamStep_JitStepTimes(benchmark::State& state) {
  MlpStep step;
  Jit jit([&](const std::vector<Tensor>& in) { return step(in); });
  jit(step.batch());
  jit(step.batch());
  Device& device = *jit.device();
  std::vector<double> ms;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(jit(step.batch()));
    (void)device.synchronize();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  for (const auto& [name, q] : {std::pair{"p10_ms", 0.1}, {"p50_ms", 0.5}, {"p90_ms", 0.9}})
    state.counters[name] = ms[size_t(q * double(ms.size() - 1))];
}
BENCHMARK(BM_MlpAdamStep_JitStepTimes)->Unit(benchmark::kMillisecond)->UseRealTime();

// The floor of a replay: the captured command buffer submitted, nothing else (no input copy, no
// random words, no DEBUG bookkeeping, no new buffer versions). A replay is not waited for, but
// the next one waits for it (a command buffer may not be pending twice): one step per iteration.
void BM_MlpAdamStep_BareSubmit(benchmark::State& state) {
  MlpStep step;
  Jit jit([&](const std::vector<Tensor>& in) { return step(in); });
  jit(step.batch());
  jit(step.batch());
  Device& device = *jit.device();
  Recording& recording = *jit.recording();
  for (auto _ : state) benchmark::DoNotOptimize(device.replay(recording));
}
BENCHMARK(BM_MlpAdamStep_BareSubmit)->Unit(benchmark::kMillisecond)->UseRealTime();

// Twenty independent small reduces replayed (the shape of a step's bias gradients and a loss's
// reduces), with dispatch groups (devices/vk_dispatch_groups.cpp) and without: on Lavapipe each
// dispatch costs its threads' hand-offs whatever it computes, so the groups' few dispatches
// against twenty is the figure.
void BM_JitSmallKernels(benchmark::State& state) {
  ScopedSetting groups("DISPATCH_GROUPS", state.range(0));
  std::vector<Tensor> xs;
  for (int i = 0; i < 20; ++i)
    xs.push_back(Tensor(std::vector<float>(128, float(i)), {128}, "VK").realize());
  Jit jit([&](const std::vector<Tensor>&) {
    std::vector<Tensor> out;
    for (const Tensor& x : xs) out.push_back((x * 2.0f).sum());
    return out;
  });
  jit({});
  jit({});
  Device& device = *jit.device();
  const int64_t dispatches0 = global_counters().dispatches;
  for (auto _ : state) benchmark::DoNotOptimize(jit({}));
  (void)device.synchronize();
  state.counters["kernels"] = double(jit.kernels());
  state.counters["dispatches"] =
      double(global_counters().dispatches - dispatches0) / double(state.iterations());
}
BENCHMARK(BM_JitSmallKernels)
    ->ArgName("groups")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
}  // namespace vkg::bench
