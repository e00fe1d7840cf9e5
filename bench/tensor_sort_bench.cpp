// sort and topk (k = 10) of 1 Mi floats on a device, in elements/s, against std::sort of the same
// floats on the host (issue 10's goal: report the ratio), and topk also against std::partial_sort
// of its k largest. Each iteration sorts on the host and
// then on the device, so the ratio counter (vs_std_sort) compares runs seconds apart on a shared,
// noisy machine. The input is realized and every kernel compiled in a warm-up run; the timed part
// is realize() of the sorted values and positions (schedule, dispatch, submit, wait). The device
// is VK unless VKG_BENCH_DEVICE names another (CPU: the reference interpreter).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include <vkgrad/core/tensor.hpp>

namespace vkg::bench {
namespace {

constexpr int64_t kSortN = int64_t(1) << 20;

std::string bench_device() {
  const char* d = std::getenv("VKG_BENCH_DEVICE");
  return d && *d ? d : "VK";
}

std::vector<float> random_floats() {
  std::vector<float> v(static_cast<size_t>(kSortN));
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (float& x : v) x = normal(rng);
  return v;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Times `device_op` (k = 0: a full sort; otherwise topk(k)) against std::sort of a copy.
void run_sort(benchmark::State& state, int64_t k) {
  const std::vector<float> host = random_floats();
  Tensor x(host, {kSortN}, bench_device());
  x.realize();
  auto device_op = [&] {
    auto [values, positions] = k ? x.topk(k) : x.sort();
    values.realize();
    positions.realize();
  };
  device_op();  // compiles every step's kernels
  double host_seconds = 0, device_seconds = 0, partial_seconds = 0;
  for (auto _ : state) {
    std::vector<float> copy = host;
    auto t0 = std::chrono::steady_clock::now();
    std::sort(copy.begin(), copy.end());
    benchmark::DoNotOptimize(copy.data());
    const double h = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    device_op();
    const double d = seconds_since(t0);
    host_seconds += h;
    device_seconds += d;
    state.SetIterationTime(d);
    if (k) {  // topk's own host baseline: std::partial_sort of the k largest
      copy = host;
      t0 = std::chrono::steady_clock::now();
      std::partial_sort(copy.begin(), copy.begin() + k, copy.end(), std::greater<float>());
      benchmark::DoNotOptimize(copy.data());
      partial_seconds += seconds_since(t0);
    }
  }
  if (k) {
    state.counters["std_partial_sort_elements_per_s"] =
        double(kSortN) * double(state.iterations()) / partial_seconds;
    state.counters["vs_std_partial_sort"] = partial_seconds / device_seconds;
  }
  state.counters["elements_per_s"] = double(kSortN) * double(state.iterations()) / device_seconds;
  state.counters["std_sort_elements_per_s"] = double(kSortN) * double(state.iterations()) / host_seconds;
  state.counters["vs_std_sort"] = host_seconds / device_seconds;
}

void BM_Tensor_Sort_1Mi(benchmark::State& state) { run_sort(state, 0); }
void BM_Tensor_Topk10_1Mi(benchmark::State& state) { run_sort(state, 10); }

BENCHMARK(BM_Tensor_Sort_1Mi)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_Tensor_Topk10_1Mi)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
}  // namespace vkg::bench
