// Training-step speed of the Fashion-MNIST CNN (samples/fashion_mnist_net.hpp) at batch 128:
// time per step (forward, backward and the Adam update, one schedule), images per second, and the
// kernels per step, forward alone and whole. Random data of the right shapes: the speed does not
// depend on the pixels. Kernels are compiled in a warm-up step before timing.
#include <benchmark/benchmark.h>

#include <vkgrad/core/counters.hpp>
#include <vkgrad/vkgrad.hpp>

#include "../samples/beautiful_mnist_net.hpp"
#include "../samples/fashion_mnist_net.hpp"

namespace vkg::bench {
namespace {

using Net = samples::FashionNet;

// One training step as the samples take it: forward, backward, and Adam's update realized with
// the batchnorm statistics and the loss in one schedule. Returns the loss.
template <class Model>
float train_step(const Model& net, nn::Adam& adam, const Tensor& x, const Tensor& y) {
  adam.zero_grad();
  Tensor loss = net(x).sparse_categorical_crossentropy(y);
  loss.backward();
  std::vector<Tensor> extra = net.running_stats();
  extra.push_back(loss);
  adam.step(extra);
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
