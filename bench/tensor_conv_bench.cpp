// The convolutions of tinygrad's beautiful_mnist model at batch 512
// (samples/beautiful_mnist_net.hpp), each layer's forward, input gradient and weight gradient
// realized on its own, in GFLOPS as a ratio to the best hand-written matmul
// (tensor_reference_kernels.hpp) run in the same iteration: the goal is at least 0.7 for
// every kernel over 5% of a training step. A realize may run more than one kernel (a weight
// gradient's partial sums, then their sum); the time is all of it, the FLOP count the
// convolution's.
#include <benchmark/benchmark.h>

#include <vector>

#include <vkgrad/core/context.hpp>
#include <vkgrad/core/tensor.hpp>

#include "tensor_reference_kernels.hpp"

namespace vkg::bench {
namespace {

struct ConvLayer {
  int64_t in, out, kernel, size;  // channels in and out, kernel side, input side
};
// beautiful_mnist's four convolutions: 28 -> 24 -> 20, then (after a pool) 10 -> 8 -> 6.
constexpr ConvLayer kLayers[] = {{1, 32, 5, 28}, {32, 32, 5, 24}, {32, 64, 3, 10}, {64, 64, 3, 8}};
constexpr int64_t kBatch = 512;
enum Pass { kForward, kInputGradient, kWeightGradient };
const char* const kPassNames[] = {"forward", "input gradient", "weight gradient"};

void BM_Tensor_BeautifulMnistConv(benchmark::State& state) {
  ReferenceKernels& r = reference_kernels();
  if (!r.matmul_fits())
    return state.SkipWithError("needs subgroups of 4 to 64 lanes with shuffle, push descriptors");
  // Each timed realize waits for its kernels (a realize returns once they are submitted).
  const ScopedSetting sync("VKG_SYNC_REALIZE", 1);
  const ConvLayer& c = kLayers[state.range(0)];
  const Pass pass = Pass(state.range(1));
  if (state.range(0) == 0 && pass == kInputGradient)
    return state.SkipWithError("a training step does not compute the first layer's input gradient");
  const int64_t o = c.size - c.kernel + 1;
  Tensor::manual_seed(0);
  const Tensor x = Tensor::randn({kBatch, c.in, c.size, c.size}).realize();
  const Tensor w = Tensor::randn({c.out, c.in, c.kernel, c.kernel}).realize();
  const Tensor g = Tensor::randn({kBatch, c.out, o, o}).realize();
  auto run = [&] {
    if (pass == kForward) return x.conv2d(w).realize();
    Tensor xl = x.detach(), wl = w.detach();
    (pass == kInputGradient ? xl : wl).requires_grad_();
    xl.conv2d(wl).backward(g);
    return (pass == kInputGradient ? xl : wl).grad()->realize();
  };
  constexpr int64_t n = 1024;
  MatmulBuffers m(n);
  auto p = r.matmul(kBestRowsPerLane, kBestWorkgroup);
  m.run(*p, kBestRowsPerLane, kBestWorkgroup);
  if (!m.right()) return state.SkipWithError("the reference matmul is wrong on this device");
  run();  // compiles
  double t_ref = 0, t_gen = 0;
  for (auto _ : state) {
    t_ref += seconds([&] { m.run(*p, kBestRowsPerLane, kBestWorkgroup); });
    const double t = seconds(run);
    t_gen += t;
    state.SetIterationTime(t);
  }
  const double iters = double(state.iterations());
  const double flops = 2.0 * double(kBatch * c.out * o * o * c.in * c.kernel * c.kernel);
  state.counters["GFLOPS"] = flops * iters / t_gen * 1e-9;
  state.counters["ref_GFLOPS"] = 2.0 * double(n * n * n) * iters / t_ref * 1e-9;
  state.counters["vs_ref"] = state.counters["GFLOPS"] / state.counters["ref_GFLOPS"];
  state.SetLabel("conv" + std::to_string(state.range(0) + 1) + " " + kPassNames[pass]);
}
BENCHMARK(BM_Tensor_BeautifulMnistConv)
    ->ArgsProduct({{0, 1, 2, 3}, {kForward, kInputGradient, kWeightGradient}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace vkg::bench
