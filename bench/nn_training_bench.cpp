// Training-step speed of the Fashion-MNIST CNN (samples/fashion_mnist.cpp's network) at batch 128:
// time per step (forward, backward and the Adam update, one schedule), images per second, and the
// kernels per step, forward alone and whole. Random data of the right shapes: the speed does not
// depend on the pixels. Kernels are compiled in a warm-up step before timing.
#include <benchmark/benchmark.h>

#include <vkgrad/core/counters.hpp>
#include <vkgrad/vkgrad.hpp>

namespace vkg::bench {
namespace {

// The sample's network (kept equal to samples/fashion_mnist.cpp by hand).
struct Net : nn::Module {
  nn::Conv2d conv1{1, 16, 5, {.padding = 2}};
  nn::BatchNorm2d bn1{16};
  nn::Conv2d conv2{16, 32, 5, {.padding = 2}};
  nn::BatchNorm2d bn2{32};
  nn::Linear fc{32 * 7 * 7, 10};
  Tensor operator()(const Tensor& x) const {
    Tensor h = bn1(conv1(x).relu()).max_pool2d();
    h = bn2(conv2(h).relu()).max_pool2d();
    return fc(h.flatten(1));
  }
  nn::StateDict state_dict() const override {
    return nn::named({{"conv1", &conv1}, {"bn1", &bn1}, {"conv2", &conv2}, {"bn2", &bn2}, {"fc", &fc}});
  }
};

void BM_FashionMnistCnnTrainStep(benchmark::State& state) {
  const int64_t batch = state.range(0);
  Tensor::manual_seed(0);
  Net net;
  nn::Adam adam(net.parameters(), 1e-3);
  Tensor x = Tensor::randn({batch, 1, 28, 28}).realize();
  Tensor y = Tensor::randint(0, 10, {batch}).realize();
  Tensor::training = true;
  auto step = [&] {
    adam.zero_grad();
    Tensor loss = net(x).sparse_categorical_crossentropy(y);
    loss.backward();
    std::vector<Tensor> extra{net.bn1.running_mean, net.bn1.running_var, net.bn2.running_mean, net.bn2.running_var, loss};
    adam.step(extra);
    return loss.item<float>();
  };
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
  Tensor::training = false;
}
BENCHMARK(BM_FashionMnistCnnTrainStep)->Arg(128)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace vkg::bench
