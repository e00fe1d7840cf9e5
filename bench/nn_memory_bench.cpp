// The memory planner on the Fashion-MNIST CNN's training step (samples/fashion_mnist_net.hpp,
// batch 128, Adam): device bytes live at the step's peak, with the planner (intermediates with
// disjoint lifetimes share memory) and without (NO_MEMORY_PLANNER=1), eager and under vkg::Jit
// (whose capture keeps its buffers for good). Arg 1 plans, 0 does not. Time is reported too, but
// the counters are the point.
#include <benchmark/benchmark.h>

#include <vkgrad/core/device.hpp>
#include <vkgrad/vkgrad.hpp>

#include "../samples/fashion_mnist_net.hpp"

namespace vkg::bench {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

struct FashionStep {
  samples::FashionNet net;
  std::unique_ptr<nn::Adam> adam;
  Tensor x = Tensor::randn({128, 1, 28, 28}).realize();
  Tensor y = Tensor::randint(0, 10, {128}).realize();

  FashionStep() {
    std::vector<Tensor> params = net.parameters();
    for (Tensor& p : params) p.realize();
    adam = std::make_unique<nn::Adam>(params, 1e-3);
  }
  std::vector<Tensor> operator()(const std::vector<Tensor>& in) {
    adam->zero_grad();
    Tensor loss = net(in[0]).sparse_categorical_crossentropy(in[1]);
    loss.backward();
    std::vector<Tensor> extra = net.running_stats();
    extra.push_back(loss);
    adam->step(extra);
    return {loss};
  }
};

void BM_FashionMnistStepPeakMemory(benchmark::State& state) {
  ScopedSetting planner("NO_MEMORY_PLANNER", state.range(0) ? 0 : 1);
  Tensor::manual_seed(0);
  Tensor::training = true;
  FashionStep step;
  Device& dev = device(step.x.device());
  step({step.x, step.y});  // compiles, and gives the parameters their buffers
  step({step.x, step.y});
  double peak = 0, above = 0;
  for (auto _ : state) {
    step.adam->zero_grad();  // the last step's gradient graphs go, and with them what they hold
    const Device::MemoryCounts before = dev.memory_counts();
    dev.reset_peak_bytes();
    benchmark::DoNotOptimize(step({step.x, step.y}));
    const Device::MemoryCounts after = dev.memory_counts();
    peak = double(after.peak_bytes);
    above = double(after.peak_bytes - before.live_bytes);
  }
  state.counters["peak_MiB"] = peak / kMiB;
  state.counters["step_MiB"] = above / kMiB;  // the peak above the parameters and states
  Tensor::training = false;
}
BENCHMARK(BM_FashionMnistStepPeakMemory)
    ->Arg(0)
    ->Arg(1)
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_FashionMnistJitStepPeakMemory(benchmark::State& state) {
  ScopedSetting planner("NO_MEMORY_PLANNER", state.range(0) ? 0 : 1);
  Tensor::manual_seed(0);
  Tensor::training = true;
  FashionStep step;
  Device& dev = device(step.x.device());
  const int64_t start = dev.memory_counts().live_bytes;
  Jit jit([&](const std::vector<Tensor>& in) { return step(in); });
  dev.reset_peak_bytes();
  jit({step.x, step.y});
  jit({step.x, step.y});  // captured
  for (auto _ : state) benchmark::DoNotOptimize(jit({step.x, step.y}));
  const Device::MemoryCounts counts = dev.memory_counts();
  state.counters["peak_MiB"] = double(counts.peak_bytes) / kMiB;
  state.counters["held_MiB"] = double(counts.live_bytes - start) / kMiB;  // the capture's buffers
  Tensor::training = false;
}
BENCHMARK(BM_FashionMnistJitStepPeakMemory)
    ->Arg(0)
    ->Arg(1)
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace vkg::bench
