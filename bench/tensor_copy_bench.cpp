// Tensor::to between devices, end to end (schedule, allocate, copy, wait), in GB/s beside a host
// memcpy of the same bytes measured in the same run: "GB/s", "memcpy_GB/s" and "vs_memcpy".
// On Lavapipe every device's memory is host-visible, so VK -> CPU and VK -> VK:1 are one memcpy
// on the copy thread plus the two devices' waits (core/copy_item.hpp).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <vector>

#include <vkgrad/vkgrad.hpp>

namespace vkg {
namespace {

double memcpy_gbps(size_t bytes) {
  std::vector<std::byte> a(bytes, std::byte{1}), b(bytes, std::byte{2});
  size_t reps = 0;
  const auto start = std::chrono::steady_clock::now();
  std::chrono::duration<double> elapsed{};
  do {
    std::memcpy(b.data(), a.data(), bytes);
    benchmark::ClobberMemory();
    ++reps;
    elapsed = std::chrono::steady_clock::now() - start;
  } while (elapsed.count() < 0.1);
  return double(bytes) * double(reps) / elapsed.count() / 1e9;
}

void copy_bench(benchmark::State& state, const char* from, const char* to) {
  const size_t bytes = size_t(state.range(0));
  Tensor x = Tensor(std::vector<float>(bytes / 4, 1.5f), {int64_t(bytes / 4)}, from).realize();
  x.to(to).realize();  // opens the devices and touches the pages outside the timed loop
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    Tensor y = x.to(to);  // a new COPY node each time: its realized value dies with y
    y.realize();
  }
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  const double gbps = double(bytes) * double(state.iterations()) / elapsed.count() / 1e9;
  const double host_gbps = memcpy_gbps(bytes);
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes));
  state.counters["GB/s"] = gbps;
  state.counters["memcpy_GB/s"] = host_gbps;
  state.counters["vs_memcpy"] = gbps / host_gbps;
}

void BM_Copy_VK_to_CPU(benchmark::State& s) { copy_bench(s, "VK", "CPU"); }
void BM_Copy_CPU_to_VK(benchmark::State& s) { copy_bench(s, "CPU", "VK"); }
void BM_Copy_VK0_to_VK1(benchmark::State& s) { copy_bench(s, "VK", "VK:1"); }

#define VKG_COPY_SIZES \
  ->Arg(1 << 20)->Arg(16 << 20)->Arg(64 << 20)->UseRealTime()->Unit(benchmark::kMillisecond)
BENCHMARK(BM_Copy_VK_to_CPU) VKG_COPY_SIZES;
BENCHMARK(BM_Copy_CPU_to_VK) VKG_COPY_SIZES;
BENCHMARK(BM_Copy_VK0_to_VK1) VKG_COPY_SIZES;

}  // namespace
}  // namespace vkg
