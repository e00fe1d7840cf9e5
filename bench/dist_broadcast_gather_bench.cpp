// vkg::dist::broadcast and all_gather of 64 MiB against MPI_Bcast and MPI_Allgather of host
// buffers of that size, in the same run (all_gather: 64 MiB from each rank). Run it on two ranks:
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

// Host buffers straight through MPI: the references.
// `nonblocking`: MPI_Ibcast / MPI_Iallgather and MPI_Wait, the calls vkg::dist makes (it polls
// with MPI_Test for its timeout); Open MPI runs them with other algorithms than the blocking ones.
double mpi_bcast_seconds(int reps, bool nonblocking) {
  std::vector<float> host(kBytes / 4, 1.0f);
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) {
    if (!nonblocking) {
      MPI_Bcast(host.data(), int(host.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
      continue;
    }
    MPI_Request r;
    MPI_Ibcast(host.data(), int(host.size()), MPI_FLOAT, 0, MPI_COMM_WORLD, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
  }
  return seconds_since(t0) / reps;
}

double mpi_allgather_seconds(int reps, bool nonblocking) {
  int ranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  std::vector<float> in(kBytes / 4, 1.0f), out(kBytes / 4 * size_t(ranks), 0.0f);
  const int n = int(in.size());
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) {
    if (!nonblocking) {
      MPI_Allgather(in.data(), n, MPI_FLOAT, out.data(), n, MPI_FLOAT, MPI_COMM_WORLD);
      continue;
    }
    MPI_Request r;
    MPI_Iallgather(in.data(), n, MPI_FLOAT, out.data(), n, MPI_FLOAT, MPI_COMM_WORLD, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
  }
  return seconds_since(t0) / reps;
}

template <class Collective>
void collective_bench(benchmark::State& state, const char* device, Collective&& run,
                      double (*reference)(int, bool), const char* name) {
  Tensor t = Tensor(std::vector<float>(kBytes / 4, 1.0f), {int64_t(kBytes / 4)}, device).realize();
  run(t).realize();  // starts MPI and touches the pages outside the timed loop
  double ours = 0;
  int reps = 0;
  for (auto _ : state) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    run(t).realize();
    ours += seconds_since(t0);
    ++reps;
  }
  const double ref = reference(reps, false), nonblocking = reference(reps, true);
  state.counters["ms"] = ours / reps * 1e3;
  state.counters[std::string(name) + "_ms"] = ref * 1e3;
  state.counters[std::string("vs_") + name] = ref / (ours / reps);
  state.counters["vs_nonblocking"] = nonblocking / (ours / reps);
  state.counters["rank"] = dist::rank();
}

void broadcast_bench(benchmark::State& s, const char* device) {
  collective_bench(
      s, device, [](const Tensor& t) { return dist::broadcast(t, 0); }, mpi_bcast_seconds,
      "MPI_Bcast");
}
void all_gather_bench(benchmark::State& s, const char* device) {
  collective_bench(
      s, device, [](const Tensor& t) { return dist::all_gather(t); }, mpi_allgather_seconds,
      "MPI_Allgather");
}

void BM_Broadcast64MiB_VK(benchmark::State& s) { broadcast_bench(s, "VK"); }
void BM_Broadcast64MiB_CPU(benchmark::State& s) { broadcast_bench(s, "CPU"); }
void BM_AllGather64MiB_VK(benchmark::State& s) { all_gather_bench(s, "VK"); }
void BM_AllGather64MiB_CPU(benchmark::State& s) { all_gather_bench(s, "CPU"); }
BENCHMARK(BM_Broadcast64MiB_VK)->Iterations(10)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Broadcast64MiB_CPU)->Iterations(10)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AllGather64MiB_VK)->Iterations(10)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AllGather64MiB_CPU)->Iterations(10)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace vkg
