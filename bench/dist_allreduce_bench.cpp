// vkg::dist::all_reduce of 64 MiB against MPI_Allreduce of a host buffer of that size, in the
// same run. Run it on two ranks:
//   OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 2 build/bench/bench_dist
// The iteration counts are fixed: every rank must make the same collectives.
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <chrono>
#include <vector>

#include <vkgrad/dist/dist.hpp>
#include <vkgrad/vkgrad.hpp>

namespace vkg {
namespace {

constexpr size_t kBytes = size_t(64) << 20;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A host buffer straight through MPI: the reference.
double mpi_allreduce_seconds(int reps) {
  std::vector<float> host(kBytes / 4, 1.0f);
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i)
    MPI_Allreduce(MPI_IN_PLACE, host.data(), int(host.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  return seconds_since(t0) / reps;
}

// The same into a second host buffer, as vkg::dist hands MPI the input and the result's memory
// where the device maps it: Open MPI's out-of-place path may copy less than its in-place one.
double mpi_allreduce_out_of_place_seconds(int reps) {
  std::vector<float> in(kBytes / 4, 1.0f), out(kBytes / 4, 0.0f);
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i)
    MPI_Allreduce(in.data(), out.data(), int(in.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  return seconds_since(t0) / reps;
}

void allreduce_bench(benchmark::State& state, const char* device) {
  Tensor t = Tensor(std::vector<float>(kBytes / 4, 1.0f), {int64_t(kBytes / 4)}, device).realize();
  dist::all_reduce(t).realize();  // starts MPI and touches the pages outside the timed loop
  double ours = 0;
  int reps = 0;
  for (auto _ : state) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    dist::all_reduce(t).realize();  // device -> host -> MPI -> host -> device
    ours += seconds_since(t0);
    ++reps;
  }
  const double reference = mpi_allreduce_seconds(reps);
  const double out_of_place = mpi_allreduce_out_of_place_seconds(reps);
  state.counters["ms"] = ours / reps * 1e3;
  state.counters["MPI_Allreduce_ms"] = reference * 1e3;
  state.counters["vs_MPI_Allreduce"] = reference / (ours / reps);
  state.counters["vs_out_of_place"] = out_of_place / (ours / reps);
  state.counters["rank"] = dist::rank();
}

void BM_AllReduce64MiB_VK(benchmark::State& s) { allreduce_bench(s, "VK"); }
void BM_AllReduce64MiB_CPU(benchmark::State& s) { allreduce_bench(s, "CPU"); }
BENCHMARK(BM_AllReduce64MiB_VK)->Iterations(10)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AllReduce64MiB_CPU)->Iterations(10)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace vkg
