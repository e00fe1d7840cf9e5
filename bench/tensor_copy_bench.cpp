// Tensor::to between devices, end to end (schedule, allocate, copy, wait), in GB/s beside a host
// memcpy of the same bytes measured in the same run: "GB/s", "memcpy_GB/s" and "vs_memcpy".
// Each iteration times one copy and then one memcpy, and the figures are the medians of each: on
// a shared machine the two then see the same load, and a ratio of medians ignores the outliers
// that one slow iteration of either would make of a ratio of totals.
// On Lavapipe every device's memory is host-visible, so VK -> CPU and VK -> VK:1 are one memcpy
// on the copy thread plus the two devices' waits (core/copy_item.hpp); on a discrete GPU (or with
// VKG_FORCE_STAGING=1) the source's queue copies into the host bridge's slots and VK:1's queue
// copies out of them (core/host_bridge.hpp; VKG_NO_HOST_IMPORT=1: through a staging buffer on
// each side that the copy thread copies between). Into and out of the CPU device, the copy
// thread copies between its memory and the slots that VK's queue empties or fills.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include <vkgrad/core/device.hpp>
#include <vkgrad/vkgrad.hpp>

namespace vkg {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void copy_bench(benchmark::State& state, const char* from, const char* to) {
  using clock = std::chrono::steady_clock;
  const size_t bytes = size_t(state.range(0));
  Tensor x = Tensor(std::vector<float>(bytes / 4, 1.5f), {int64_t(bytes / 4)}, from).realize();
  x.to(to).realize();  // opens the devices and touches the pages outside the timed loop
  std::vector<std::byte> a(bytes, std::byte{1}), b(bytes, std::byte{2});  // touched
  std::vector<double> copy_s, memcpy_s;
  for (auto _ : state) {
    auto t0 = clock::now();
    {
      Tensor y = x.to(to);  // a new COPY node each time: its realized value dies with y
      y.realize();  // returns with the copy in flight (core/copy_item.hpp): wait for it here,
      device(to).synchronize();    // so that the copy is timed whole and the memcpy below does not
      device(from).synchronize();  // run beside it
    }
    const std::chrono::duration<double> copy = clock::now() - t0;
    t0 = clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    benchmark::ClobberMemory();
    const std::chrono::duration<double> host = clock::now() - t0;
    copy_s.push_back(copy.count());
    memcpy_s.push_back(host.count());
    state.SetIterationTime(copy.count());
  }
  const double gbps = double(bytes) / median(copy_s) / 1e9;
  const double host_gbps = double(bytes) / median(memcpy_s) / 1e9;
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes));
  state.counters["GB/s"] = gbps;
  state.counters["memcpy_GB/s"] = host_gbps;
  state.counters["vs_memcpy"] = gbps / host_gbps;
}

void BM_Copy_VK_to_CPU(benchmark::State& s) { copy_bench(s, "VK", "CPU"); }
void BM_Copy_CPU_to_VK(benchmark::State& s) { copy_bench(s, "CPU", "VK"); }
void BM_Copy_VK0_to_VK1(benchmark::State& s) { copy_bench(s, "VK", "VK:1"); }

// A copy while a kernel runs. A chain of `steps` n x n matmuls is queued on VK (a realize returns
// once it is submitted), then `bytes` of host data are uploaded into a fresh buffer on VK, which
// goes to the copy engine's queue where the device has one (vk/queue_families.hpp, vk/transfer.hpp)
// and waits for nothing the kernels do; then the host waits for both. Each is also timed alone.
// "overlap" = (kernel_ms + copy_ms - both_ms) / min(kernel_ms, copy_ms): about 1 when the shorter
// runs entirely under the longer, about 0 when they run one after the other (one queue, as on
// Lavapipe or with VKG_NO_TRANSFER_QUEUE=1, where the upload's staged copies follow the kernels).
// Lavapipe maps its memory (no staged upload at all): only VKG_FORCE_STAGING=1 gives it one.
void BM_CopyOverlapsKernel(benchmark::State& state) {
  const int64_t n = state.range(0);
  const size_t bytes = size_t(state.range(1));
  constexpr int steps = 4;
  const std::vector<float> host(bytes / 4, 0.25f);
  Tensor a = (Tensor::ones({n, n}) * (1.0f / float(n))).realize();
  Device& vk = device("VK");
  auto kernels = [&] {
    Tensor c = a;
    for (int i = 0; i < steps; ++i) c = c.matmul(a);
    return c.realize();  // submitted, not waited for
  };
  auto upload = [&] { return Tensor(host, {int64_t(host.size())}, "VK").realize(); };
  using clock = std::chrono::steady_clock;
  auto ms_since = [](clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  };
  kernels(), upload(), vk.synchronize();  // compiles, and touches the pages
  double kernel_ms = 0, copy_ms = 0, both_ms = 0;
  for (auto _ : state) {
    auto t0 = clock::now();
    Tensor k1 = kernels();
    vk.synchronize();
    kernel_ms += ms_since(t0);
    t0 = clock::now();
    Tensor u1 = upload();
    vk.synchronize();
    copy_ms += ms_since(t0);
    t0 = clock::now();
    Tensor k2 = kernels();
    Tensor u2 = upload();
    vk.synchronize();
    const double both = ms_since(t0);
    both_ms += both;
    state.SetIterationTime(both / 1e3);
  }
  const double iters = double(state.iterations());
  kernel_ms /= iters, copy_ms /= iters, both_ms /= iters;
  state.counters["kernel_ms"] = kernel_ms;
  state.counters["copy_ms"] = copy_ms;
  state.counters["both_ms"] = both_ms;
  state.counters["overlap"] = (kernel_ms + copy_ms - both_ms) / std::min(kernel_ms, copy_ms);
  state.counters["copy_GB/s"] = double(bytes) / copy_ms / 1e6;
}
// {matmul side, upload bytes}: a Lavapipe-sized pair, and a GPU-sized one (4 matmuls of 4096^2,
// 0.55 TFLOP, against 256 MiB).
BENCHMARK(BM_CopyOverlapsKernel)
    ->Args({256, 16 << 20})
    ->Args({4096, 256 << 20})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

#define VKG_COPY_SIZES \
  ->Arg(1 << 20)->Arg(16 << 20)->Arg(64 << 20)->UseManualTime()->Unit(benchmark::kMillisecond)
BENCHMARK(BM_Copy_VK_to_CPU) VKG_COPY_SIZES;
BENCHMARK(BM_Copy_CPU_to_VK) VKG_COPY_SIZES;
BENCHMARK(BM_Copy_VK0_to_VK1) VKG_COPY_SIZES;

}  // namespace
}  // namespace vkg
