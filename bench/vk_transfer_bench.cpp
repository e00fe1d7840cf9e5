// Upload and download bandwidth, direct-mapped and staged, each reported beside a host memcpy of
// the same size measured in the same run: "GB/s" for the transfer, "memcpy_GB/s", and their ratio.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "vk_bench_runtime.hpp"

namespace vkg::bench {
namespace {

double memcpy_gbps(size_t bytes) {
  std::vector<std::byte> a(bytes, std::byte{1}), b(bytes, std::byte{2});
  size_t reps = 0;
  auto start = std::chrono::steady_clock::now();
  std::chrono::duration<double> elapsed{};
  do {
    std::memcpy(b.data(), a.data(), bytes);
    benchmark::ClobberMemory();
    ++reps;
    elapsed = std::chrono::steady_clock::now() - start;
  } while (elapsed.count() < 0.05);
  return double(bytes) * double(reps) / elapsed.count() / 1e9;
}

void transfer_bench(benchmark::State& state, bool upload, bool staged) {
  VkBench& b = vk_bench();
  const size_t bytes = size_t(state.range(0));
  vk::Allocator& alloc = staged ? b.staged_alloc : b.rt.allocator;
  vk::Transfer& transfer = staged ? b.staged : b.rt.transfer;
  vk::Buffer buf = alloc.allocate(bytes);
  std::vector<std::byte> host(bytes, std::byte{7});
  transfer.upload(buf, host);  // first touch of the pages, outside the timed loop
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    if (upload)
      transfer.upload(buf, host);
    else
      transfer.download(buf, host);
    benchmark::ClobberMemory();
  }
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  const double gbps = double(bytes) * double(state.iterations()) / elapsed.count() / 1e9;
  const double host_gbps = memcpy_gbps(bytes);
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes));
  state.counters["GB/s"] = gbps;
  state.counters["memcpy_GB/s"] = host_gbps;
  state.counters["vs_memcpy"] = gbps / host_gbps;
}

void BM_Upload(benchmark::State& s) { transfer_bench(s, true, false); }
void BM_Download(benchmark::State& s) { transfer_bench(s, false, false); }
void BM_UploadStaged(benchmark::State& s) { transfer_bench(s, true, true); }
void BM_DownloadStaged(benchmark::State& s) { transfer_bench(s, false, true); }

#define VKG_SIZES ->Arg(64 << 10)->Arg(1 << 20)->Arg(16 << 20)->Arg(256 << 20)->UseRealTime()
BENCHMARK(BM_Upload) VKG_SIZES;
BENCHMARK(BM_Download) VKG_SIZES;
BENCHMARK(BM_UploadStaged) VKG_SIZES;
BENCHMARK(BM_DownloadStaged) VKG_SIZES;

}  // namespace
}  // namespace vkg::bench
