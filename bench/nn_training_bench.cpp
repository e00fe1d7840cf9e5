// Training-step speed of the Fashion-MNIST CNN (samples/fashion_mnist_net.hpp) at batch 128:
// time per step (forward, backward and the Adam update, one schedule), images per second, and the
// kernels per step, forward alone and whole. Random data of the right shapes: the speed does not
// depend on the pixels. Kernels are compiled in a warm-up step before timing.
#include <benchmark/benchmark.h>

#include <random>

#include <vkgrad/core/counters.hpp>
#include <vkgrad/vkgrad.hpp>

#include "../samples/beautiful_mnist_net.hpp"
#include "../samples/fashion_mnist_net.hpp"
#include "process_cpu.hpp"

namespace vkg::bench {
namespace {

using Net = samples::FashionNet;

// One training step as the samples take it: forward, backward, and Adam's update realized with
// the batchnorm statistics and the loss in one schedule. Returns the loss tensor (realized).
template <class Model>
Tensor train_loss(const Model& net, nn::Adam& adam, const Tensor& x, const Tensor& y) {
  adam.zero_grad();
  Tensor loss = net(x).sparse_categorical_crossentropy(y);
  loss.backward();
  std::vector<Tensor> extra = net.running_stats();
  extra.push_back(loss);
  adam.step(extra);
  return loss;
}

// The same step, with its loss read back.
template <class Model>
float train_step(const Model& net, nn::Adam& adam, const Tensor& x, const Tensor& y) {
  const Tensor loss = train_loss(net, adam, x, y);
  return loss.item<float>();
}

void BM_FashionMnistCnnTrainStep(benchmark::State& state) {
  const int64_t batch = state.range(0);
  Tensor::manual_seed(0);
  Net net;
  nn::Adam adam(net.parameters(), 1e-3);
  Tensor x = Tensor::randn({batch, 1, 28, 28}).realize();
  Tensor y = Tensor::randint(0, 10, {batch}).realize();
  Tensor::training = true;
  auto step = [&] { return train_step(net, adam, x, y); };
  step();  // compiles every kernel
  GlobalCounters before = global_counters();
  for (auto _ : state) benchmark::DoNotOptimize(step());
  GlobalCounters after = global_counters();
  state.counters["kernels_per_step"] = double(after.kernels - before.kernels) / double(state.iterations());
  state.counters["images_per_s"] = benchmark::Counter(double(batch) * double(state.iterations()), benchmark::Counter::kIsRate);

  // The forward pass alone (eval mode, no gradient): its kernel count.
  Tensor::training = false;
  {
    NoGrad no_grad;
    Tensor out = net(x);
    before = global_counters();
    out.realize();
    after = global_counters();
  }
  state.counters["forward_kernels"] = double(after.kernels - before.kernels);
}
BENCHMARK(BM_FashionMnistCnnTrainStep)->Arg(128)->Unit(benchmark::kMillisecond)->UseRealTime();

// The Fashion-MNIST sample's own loop (samples/fashion_mnist.cpp, its defaults) with the JIT
// (jit:1: the second call captures, later calls replay its command buffer) and without it (jit:0,
// the sample's --no-jit): batch 128, Adam at lr 3e-3 under the cosine schedule stepped outside the
// step, a new batch from host memory every step and its loss read back (the benchmark above times
// the eager step alone on one resident batch). Random pixels: the speed does not depend on them. steps_per_s is wall time; process_cpu_ms (Lavapipe's threads included) is the
// steadier figure on a shared machine. Issue 9's figure is jit:1 over jit:0 in one run:
//   bench_nn --benchmark_filter=FashionMnistSampleStep --benchmark_repetitions=5
//            --benchmark_enable_random_interleaving=true
void BM_FashionMnistSampleStep(benchmark::State& state) {
  const bool use_jit = state.range(0) != 0;
  constexpr int64_t kBatch = 128;  // the sample's --batch
  constexpr double kLr = 3e-3;     // its --lr
  Tensor::manual_seed(42);
  Net net;
  nn::Adam adam(net.parameters(), kLr);
  nn::CosineAnnealingLR schedule(adam, 1200, kLr * 0.05);  // its --steps and floor
  std::mt19937 rng(42);
  std::normal_distribution<float> pixel;
  std::vector<float> pixels(size_t(kBatch) * 28 * 28);
  std::vector<int32_t> labels(static_cast<size_t>(kBatch));
  for (float& p : pixels) p = pixel(rng);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = int32_t(rng() % 10);

  auto step = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{train_loss(net, adam, in[0], in[1])};
  };
  Jit jit_step(step);
  Tensor::training = true;
  auto sample_step = [&] {
    const std::vector<Tensor> in{Tensor(pixels, {kBatch, 1, 28, 28}), Tensor(labels, {kBatch})};
    const Tensor loss = (use_jit ? jit_step(in) : step(in))[0];
    schedule.step();
    return loss.item<float>();
  };
  for (int i = 0; i < 3; ++i) sample_step();  // compiles every kernel; the JIT captures and replays
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state) benchmark::DoNotOptimize(sample_step());
  state.counters["steps_per_s"] =
      benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["process_cpu_ms"] =
      (process_cpu_seconds() - cpu0) / double(state.iterations()) * 1e3;
  if (use_jit) state.counters["kernels_per_step"] = double(jit_step.kernels());
}
BENCHMARK(BM_FashionMnistSampleStep)
    ->ArgName("jit")
    ->Arg(0)
    ->Arg(1)
    ->MinTime(5.0)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// tinygrad's beautiful_mnist model (samples/beautiful_mnist_net.hpp) at its batch of 512: the
// time of one Adam training step, images/s and GFLOPS (78.4 MFLOP per training image), kernels
// per step. Random data of the right shapes. Issue 14's goal: at most 2.0 s per step on Lavapipe.
void BM_BeautifulMnistTrainStep(benchmark::State& state) {
  using Model = samples::BeautifulMnistNet;
  const int64_t batch = state.range(0);
  Tensor::manual_seed(0);
  Model net;
  nn::Adam adam(net.parameters(), 1e-3);
  Tensor x = Tensor::rand({batch, 1, 28, 28}).realize();
  Tensor y = Tensor::randint(0, 10, {batch}).realize();
  Tensor::training = true;
  auto step = [&] { return train_step(net, adam, x, y); };
  step();  // compiles every kernel
  step();
  const GlobalCounters before = global_counters();
  for (auto _ : state) benchmark::DoNotOptimize(step());
  const GlobalCounters after = global_counters();
  const double iters = double(state.iterations());
  state.counters["kernels_per_step"] = double(after.kernels - before.kernels) / iters;
  state.counters["images_per_s"] = benchmark::Counter(double(batch) * iters, benchmark::Counter::kIsRate);
  state.counters["GFLOPS"] =
      benchmark::Counter(double(batch) * iters * Model::kFlopsPerImage * 1e-9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_BeautifulMnistTrainStep)->Arg(512)->Iterations(5)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace vkg::bench
