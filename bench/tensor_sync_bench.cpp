// What the host waits for. ReadBehindLongWork: reading a small tensor whose kernel was submitted
// just before a long matmul chain (the read waits for its buffer's writer only, or for the whole
// queue). ReadBehindLongCopy: reading a small tensor on VK:1 while a copy VK -> VK:1 of another
// tensor is in flight, waiting for the long chain that writes its source (the read waits for the
// copies its buffer depends on only, or for every copy in flight). TwoDeviceJitStep: a jitted step
// with independent chains on VK:1 and VK, joined on VK:1 by a copy, called and read each iteration;
// "call_ms" is the host's time inside the call alone (the replay's submissions, or every step
// waited for in turn).
#include <benchmark/benchmark.h>

#include <chrono>
#include <vector>

#include <vkgrad/vkgrad.hpp>

namespace vkg {
namespace {

// `links` products with a matrix of 1/n: a constant matrix stays exactly itself.
Tensor chain(const Tensor& start, const Tensor& avg, int links) {
  Tensor c = start;
  for (int i = 0; i < links; ++i) c = c.matmul(avg);
  return c + 1;
}

Tensor averaging(int64_t n, const std::string& device) {
  return (Tensor::ones({n, n}, dtypes::float32, device) * (1.0f / float(n))).contiguous().realize();
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void BM_ReadBehindLongWork(benchmark::State& state) {
  const int64_t n = 512;
  const Tensor avg = averaging(n, "VK");
  const Tensor ones = Tensor::ones({n, n}).contiguous().realize();
  const Tensor seed(std::vector<float>{1, 2, 3, 4}, {4});
  (void)(seed * 2).to_vector<float>();  // compiles the kernels
  (void)chain(ones * 2, avg, 16).max().item<float>();
  float scale = 3;
  double chain_ms = 0;
  for (auto _ : state) {
    state.PauseTiming();
    Tensor y = (seed * scale).realize();                // the small kernel, submitted first
    Tensor x = chain(ones * scale, avg, 16).realize();  // the long chain, queued behind it
    state.ResumeTiming();
    benchmark::DoNotOptimize(y.to_vector<float>());
    state.PauseTiming();
    const auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(x.max().item<float>());  // the chain's rest, outside the timing
    chain_ms += ms_since(t0);
    scale += 1;
    state.ResumeTiming();
  }
  state.counters["chain_rest_ms"] = chain_ms / double(state.iterations());
}
BENCHMARK(BM_ReadBehindLongWork)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(12);

void BM_ReadBehindLongCopy(benchmark::State& state) {
  const int64_t n = 512;
  const Tensor avg = averaging(n, "VK");
  const Tensor ones = Tensor::ones({n, n}).contiguous().realize();
  const Tensor seed(std::vector<float>{1, 2, 3, 4}, {4}, "VK:1");
  (void)(seed * 2).to_vector<float>();  // compiles the kernels
  (void)chain(ones * 2, avg, 16).to("VK:1").max().item<float>();
  float scale = 3;
  double chain_ms = 0;
  for (auto _ : state) {
    state.PauseTiming();
    Tensor y = (seed * scale).realize();  // the small kernel on VK:1, submitted first
    // The long chain on VK and its copy to VK:1, whose thread waits for the chain.
    Tensor x = chain(ones * scale, avg, 16).to("VK:1").realize();
    state.ResumeTiming();
    benchmark::DoNotOptimize(y.to_vector<float>());
    state.PauseTiming();
    const auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(x.max().item<float>());  // the chain's and copy's rest, untimed
    chain_ms += ms_since(t0);
    scale += 1;
    state.ResumeTiming();
  }
  state.counters["chain_rest_ms"] = chain_ms / double(state.iterations());
}
BENCHMARK(BM_ReadBehindLongCopy)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(12);

void BM_TwoDeviceJitStep(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int links = int(state.range(1));
  const Tensor avg0 = averaging(n, "VK"), avg1 = averaging(n, "VK:1");
  // Realized in this order, the capture's steps are: VK:1's chain, VK's chain, the copy, VK:1's
  // sum. The two chains are independent: a replay may run them at once.
  Jit step([&](const std::vector<Tensor>& in) {
    const Tensor c1 = chain(in[1], avg1, links).realize();
    const Tensor c0 = chain(in[0], avg0, links).realize();
    return std::vector<Tensor>{(c0.to("VK:1") + c1).sum()};
  });
  const Tensor x0 = (Tensor::ones({n, n}) * 2).contiguous().realize();
  const Tensor x1 = (Tensor::ones({n, n}, dtypes::float32, "VK:1") * 3).contiguous().realize();
  for (int call = 0; call < 3; ++call) (void)step({x0, x1})[0].item<float>();  // runs, captures
  double call_ms = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<Tensor> out = step({x0, x1});
    call_ms += ms_since(t0);
    if (out[0].item<float>() != 7.0f * float(n * n)) state.SkipWithError("wrong sum");
  }
  state.counters["call_ms"] = call_ms / double(state.iterations());
}
BENCHMARK(BM_TwoDeviceJitStep)
    ->Args({64, 16})
    ->Args({256, 8})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace vkg
