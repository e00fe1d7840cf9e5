// vkg::dist::broadcast and all_gather of 64 MiB against MPI_Bcast and MPI_Allgather of host
// buffers of that size, in the same run, iteration by iteration (all_gather: 64 MiB from each
// rank). The reported time ("ms") is ours alone; the wall time includes the references. Run it on
// two ranks:
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
// The references' host buffers, made once and touched before the timed loop.
struct Host {
  std::vector<float> in, out;
};

// One call on host buffers, timed from a barrier: MPI_Bcast / MPI_Allgather, or (nonblocking)
// MPI_Ibcast / MPI_Iallgather and MPI_Wait, the calls vkg::dist makes (it polls with MPI_Test for
// its timeout); Open MPI runs those with other algorithms than the blocking ones.
double mpi_bcast_seconds(Host& h, bool nonblocking) {
  const int n = int(h.in.size());
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = std::chrono::steady_clock::now();
  if (nonblocking) {
    MPI_Request r;
    MPI_Ibcast(h.in.data(), n, MPI_FLOAT, 0, MPI_COMM_WORLD, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
  } else {
    MPI_Bcast(h.in.data(), n, MPI_FLOAT, 0, MPI_COMM_WORLD);
  }
  return seconds_since(t0);
}

double mpi_allgather_seconds(Host& h, bool nonblocking) {
  const int n = int(h.in.size());
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = std::chrono::steady_clock::now();
  if (nonblocking) {
    MPI_Request r;
    MPI_Iallgather(h.in.data(), n, MPI_FLOAT, h.out.data(), n, MPI_FLOAT, MPI_COMM_WORLD, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
  } else {
    MPI_Allgather(h.in.data(), n, MPI_FLOAT, h.out.data(), n, MPI_FLOAT, MPI_COMM_WORLD);
  }
  return seconds_since(t0);
}

// Each iteration times ours, then the two references, so that a load that changes during the run
// weighs on all three alike.
template <class Collective>
void collective_bench(benchmark::State& state, const char* device, Collective&& run,
                      double (*reference)(Host&, bool), const char* name) {
  Tensor t = Tensor(std::vector<float>(kBytes / 4, 1.0f), {int64_t(kBytes / 4)}, device).realize();
  Host host{std::vector<float>(kBytes / 4, 1.0f),
            std::vector<float>(kBytes / 4 * size_t(dist::world_size()), 0.0f)};
  run(t).realize();  // starts MPI and touches the pages outside the timed loop
  reference(host, false);
  reference(host, true);
  double ours = 0, blocking = 0, nonblocking = 0;
  int reps = 0;
  for (auto _ : state) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    run(t).realize();
    ours += seconds_since(t0);
    blocking += reference(host, false);
    nonblocking += reference(host, true);
    ++reps;
  }
  state.counters["ms"] = ours / reps * 1e3;
  state.counters[std::string(name) + "_ms"] = blocking / reps * 1e3;
  state.counters[std::string("vs_") + name] = blocking / ours;
  state.counters["vs_nonblocking"] = nonblocking / ours;
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
