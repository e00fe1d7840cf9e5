// scaled_dot_product_attention against the same attention written from matmul and softmax
// (issue 10's goal: not slower, fewer kernels), 8 heads, 512 tokens, 64 dims, float32. Each
// iteration runs the written-out form and then sdpa, so the ratio counter (vs_manual) compares
// runs seconds apart on a shared, noisy machine; `kernels` counts what one realize ran. Inputs
// are realized and every kernel compiled in a warm-up run.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>

#include <vkgrad/core/context.hpp>
#include <vkgrad/core/counters.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg::bench {
namespace {

void BM_Tensor_Attention_8x512x64(benchmark::State& state) {
  // Each timed realize waits for its kernels (a realize returns once they are submitted).
  const ScopedSetting sync("VKG_SYNC_REALIZE", 1);
  Tensor::manual_seed(3);
  Tensor q = Tensor::randn({8, 512, 64}, dtypes::float32, "VK"), k = Tensor::randn({8, 512, 64}, dtypes::float32, "VK"),
         v = Tensor::randn({8, 512, 64}, dtypes::float32, "VK");
  q.realize(), k.realize(), v.realize();
  auto manual = [&] { return (q.matmul(k.transpose()) * (1 / std::sqrt(64.0))).softmax(-1).matmul(v); };
  auto sdpa = [&] { return q.scaled_dot_product_attention(k, v); };
  auto timed = [](auto make, int64_t& kernels) {
    Tensor out = make();
    const int64_t before = global_counters().kernels;
    const auto t0 = std::chrono::steady_clock::now();
    out.realize();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    kernels = global_counters().kernels - before;
    return s;
  };
  int64_t manual_kernels = 0, sdpa_kernels = 0;
  timed(manual, manual_kernels), timed(sdpa, sdpa_kernels);  // compile
  double manual_s = 0, sdpa_s = 0;
  for (auto _ : state) {
    manual_s += timed(manual, manual_kernels);
    const double s = timed(sdpa, sdpa_kernels);
    sdpa_s += s;
    state.SetIterationTime(s);
  }
  state.counters["vs_manual"] = manual_s / sdpa_s;
  state.counters["kernels"] = double(sdpa_kernels);
  state.counters["manual_kernels"] = double(manual_kernels);
}

BENCHMARK(BM_Tensor_Attention_8x512x64)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(10);

}  // namespace
}  // namespace vkg::bench
