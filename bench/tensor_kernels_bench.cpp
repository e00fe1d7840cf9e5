// Generated kernels against hand-written references (issue 4's benchmarks): a fused elementwise
// chain and a sum over 16 Mi floats in GB/s as ratios to the vec4 add, and a 1024 x 1024 matmul
// through Tensor::matmul in GFLOPS as a ratio to the subgroup-shuffle matmul, with the heuristics'
// opts and with BEAM=2's. Each iteration runs the reference and then the generated kernel, so
// the ratio counters (vs_*) compare runs seconds apart on a shared, noisy machine. Inputs are
// realized before timing and every program is compiled in a warm-up run; the timed part is
// Tensor::realize() of the output (schedule, dispatch, submit, wait) by wall clock.
#include <benchmark/benchmark.h>

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include <vkgrad/core/context.hpp>
#include <vkgrad/core/tensor.hpp>

#include "tensor_reference_kernels.hpp"

namespace vkg::bench {
namespace {

constexpr int64_t kStreamN = int64_t(16) << 20;
// A realize returns once its kernels are submitted: the timed realizes wait for their work
// (VKG_SYNC_REALIZE), or the wall clock would time the submission, and the generated kernels
// would still run through the reference's next timing.
constexpr const char* kSyncRealize = "VKG_SYNC_REALIZE";
constexpr double kAddBytes = 3.0 * kStreamN * 4;

// The reference add's buffers, made once.
struct AddBuffers {
  vk::Buffer x, y, z;
  AddBuffers() {
    ReferenceKernels& r = reference_kernels();
    std::vector<float> host(kStreamN, 1.5f);
    for (vk::Buffer* b : {&x, &y, &z}) {
      *b = r.rt.allocator.allocate(kStreamN * 4);
      r.rt.transfer.upload(*b, std::as_bytes(std::span(host)));
    }
  }
  // One add with buffers bound by push descriptor (by_address: by device address), waited for.
  void run(bool by_address = false) {
    ReferenceKernels& r = reference_kernels();
    const vk::Groups groups = vk::Groups::cover(kStreamN / 4 / 256, r.rt.device.caps().limits);
    const vk::BufferUse uses[] = {
        {&x, vk::Access::Read}, {&y, vk::Access::Read}, {&z, vk::Access::Write}};
    if (by_address)
      r.queue.dispatch(
          r.add_by_address, groups,
          vk::ArgPack().address(x).address(y).address(z).u32(uint32_t(kStreamN)).bytes(), uses);
    else
      r.queue.dispatch(r.add_bound, groups, vk::ArgPack().u32(uint32_t(kStreamN)).bytes(), uses);
    r.queue.finish();
  }
};

AddBuffers& add_buffers() {
  static AddBuffers b;
  return b;
}

Tensor filled(Shape shape, float v) {
  std::vector<float> host(size_t(prod(shape)), v);
  Tensor t(host, std::move(shape));
  t.realize();
  return t;
}

void BM_Reference_AddF32_16Mi(benchmark::State& state) {
  const bool by_address = state.range(0) != 0;
  add_buffers().run(by_address);  // pipeline creation
  for (auto _ : state) state.SetIterationTime(seconds([&] { add_buffers().run(by_address); }));
  state.SetLabel(by_address ? "by device address" : "push descriptors");
  state.counters["GB/s"] = benchmark::Counter(kAddBytes * 1e-9 * double(state.iterations()),
                                              benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Reference_AddF32_16Mi)->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMillisecond);

// Runs `make_output` (builds the lazy output and realizes it) against the reference add each
// iteration; reports the generated kernel's GB/s and its ratio to the add's.
template <class F>
void versus_add(benchmark::State& state, double bytes, F&& make_output) {
  const ScopedSetting sync(kSyncRealize, 1);
  make_output();  // compiles
  add_buffers().run();
  double t_ref = 0, t_gen = 0;
  for (auto _ : state) {
    t_ref += seconds([] { add_buffers().run(); });
    const double t = seconds(make_output);
    t_gen += t;
    state.SetIterationTime(t);
  }
  const double n = double(state.iterations());
  state.counters["GB/s"] = bytes * n / t_gen * 1e-9;
  state.counters["add_GB/s"] = kAddBytes * n / t_ref * 1e-9;
  state.counters["vs_add"] = (bytes / t_gen) / (kAddBytes / t_ref);
}

// ((a + b) * c).relu(): one fused kernel reading three buffers and writing one.
void BM_Tensor_FusedChain_16Mi(benchmark::State& state) {
  const Tensor a = filled({kStreamN}, 1.5f), b = filled({kStreamN}, -0.5f),
               c = filled({kStreamN}, 2.0f);
  versus_add(state, 4.0 * kStreamN * 4, [&] { ((a + b) * c).relu().realize(); });
}
BENCHMARK(BM_Tensor_FusedChain_16Mi)->UseManualTime()->Unit(benchmark::kMillisecond);

// The hand-written two-pass subgroup sum of kStreamN floats (subgroup_sum_glsl), waited for.
struct SumBuffers {
  vk::Buffer x, partials, result;
  SumBuffers() {
    ReferenceKernels& r = reference_kernels();
    std::vector<float> host(kStreamN, 1.0f);
    x = r.rt.allocator.allocate(kStreamN * 4);
    r.rt.transfer.upload(x, std::as_bytes(std::span(host)));
    partials = r.rt.allocator.allocate(r.sum_partials() * 4);
    result = r.rt.allocator.allocate(4);
  }
  void run() {
    ReferenceKernels& r = reference_kernels();
    const vk::BufferUse pass1[] = {{&x, vk::Access::Read}, {&partials, vk::Access::Write}};
    r.queue.dispatch(r.sum_pass1, vk::Groups{kSumWorkgroups, 1, 1},
                     vk::ArgPack().u32(uint32_t(kStreamN / 4)).bytes(), pass1);
    const vk::BufferUse pass2[] = {{&partials, vk::Access::Read}, {&result, vk::Access::Write}};
    r.queue.dispatch(r.sum_pass2, vk::Groups{1, 1, 1},
                     vk::ArgPack().u32(r.sum_partials() / 4).bytes(), pass2);
    r.queue.finish();
  }
  float value() {
    float v = 0;
    reference_kernels().rt.transfer.download(result, std::as_writable_bytes(std::span(&v, 1)));
    return v;
  }
};

// a.sum(): GB/s of the input read once (partial sums are not counted as traffic), as ratios to
// the add's GB/s and to the hand-written two-pass sum's time (vs_ref), measured alternately.
void BM_Tensor_Sum_16Mi(benchmark::State& state) {
  ReferenceKernels& r = reference_kernels();
  if (!r.matmul_fits())
    return state.SkipWithError("the reference sum needs subgroups of 4 to 64 lanes");
  const ScopedSetting sync(kSyncRealize, 1);
  static SumBuffers ref;
  ref.run();
  if (ref.value() != float(kStreamN)) return state.SkipWithError("the reference sum is wrong");
  const Tensor a = filled({kStreamN}, 1.0f);
  a.sum().realize();  // compiles
  add_buffers().run();
  double t_add = 0, t_ref = 0, t_gen = 0;
  for (auto _ : state) {
    t_add += seconds([] { add_buffers().run(); });
    t_ref += seconds([&] { ref.run(); });
    const double t = seconds([&] { a.sum().realize(); });
    t_gen += t;
    state.SetIterationTime(t);
  }
  const double n = double(state.iterations()), bytes = 4.0 * kStreamN;
  state.counters["GB/s"] = bytes * n / t_gen * 1e-9;
  state.counters["ref_GB/s"] = bytes * n / t_ref * 1e-9;
  state.counters["vs_add"] = (bytes / t_gen) / (kAddBytes / t_add);
  state.counters["vs_ref"] = t_ref / t_gen;
}
BENCHMARK(BM_Tensor_Sum_16Mi)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_Reference_Matmul(benchmark::State& state) {
  ReferenceKernels& r = reference_kernels();
  if (!r.matmul_fits())
    return state.SkipWithError("needs subgroups of 4 to 64 lanes with shuffle, push descriptors");
  const int64_t n = state.range(0);
  const int rpl = int(state.range(1)), wg = int(state.range(2));
  MatmulBuffers m(n);
  auto p = r.matmul(rpl, wg);
  m.run(*p, rpl, wg);
  if (!m.right()) return state.SkipWithError("the reference matmul is wrong on this device");
  state.SetLabel(std::to_string(r.subgroup()) + "-wide subgroups, workgroup " +
                 std::to_string(r.workgroup_of(wg)));
  for (auto _ : state) state.SetIterationTime(seconds([&] { m.run(*p, rpl, wg); }));
  state.counters["GFLOPS"] = benchmark::Counter(
      2.0 * double(n * n * n) * 1e-9 * double(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Reference_Matmul)
    ->ArgsProduct({{512, 1024}, {1, 2, 4}, {8, 64}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// Arg: the BEAM width (0: the heuristics). The BEAM variant's first realize searches (up to
// BEAM_TIMEOUT seconds, 60 unless set) and caches its choice in VKG_CACHE_DIR/beam; later runs of
// the benchmark read it from there.
void BM_Tensor_Matmul_1024(benchmark::State& state) {
  ReferenceKernels& r = reference_kernels();
  if (!r.matmul_fits())
    return state.SkipWithError("needs subgroups of 4 to 64 lanes with shuffle, push descriptors");
  ScopedSetting beam("BEAM", state.range(0)), timeout("BEAM_TIMEOUT", setting("BEAM_TIMEOUT", 60)),
      sync(kSyncRealize, 1);
  constexpr int64_t n = 1024;
  const Tensor a = filled({n, n}, 0.5f), b = filled({n, n}, 0.25f);
  MatmulBuffers m(n);
  auto p = r.matmul(kBestRowsPerLane, kBestWorkgroup);
  m.run(*p, kBestRowsPerLane, kBestWorkgroup);
  if (!m.right()) return state.SkipWithError("the reference matmul is wrong on this device");
  a.matmul(b).realize();  // compiles
  double t_ref = 0, t_gen = 0;
  for (auto _ : state) {
    t_ref += seconds([&] { m.run(*p, kBestRowsPerLane, kBestWorkgroup); });
    const double t = seconds([&] { a.matmul(b).realize(); });
    t_gen += t;
    state.SetIterationTime(t);
  }
  const double flops = 2.0 * double(n * n * n) * double(state.iterations());
  state.counters["GFLOPS"] = flops / t_gen * 1e-9;
  state.counters["ref_GFLOPS"] = flops / t_ref * 1e-9;
  state.counters["vs_ref"] = t_ref / t_gen;
}
BENCHMARK(BM_Tensor_Matmul_1024)
    ->ArgName("beam")
    ->Arg(0)
    ->Arg(2)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// a / b over 4 Mi random floats against a * b on the same inputs, alternating each iteration:
// correctly rounded division is a helper function (codegen/glsl_helpers_arithmetic.cpp), the
// product one instruction, so vs_mul is the division's cost in multiplies' time (both are mostly
// memory).
void BM_Tensor_Divide_4Mi(benchmark::State& state) {
  constexpr int64_t n = int64_t(4) << 20;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(0.5f, 4.0f);
  std::vector<float> ha(n), hb(n);
  for (int64_t i = 0; i < n; ++i) ha[size_t(i)] = u(rng), hb[size_t(i)] = u(rng);
  Tensor a(ha, {n}), b(hb, {n});
  a.realize();
  b.realize();
  (a / b).realize();  // compiles
  (a * b).realize();
  double t_div = 0, t_mul = 0;
  for (auto _ : state) {
    t_mul += seconds([&] { (a * b).realize(); });
    const double t = seconds([&] { (a / b).realize(); });
    t_div += t;
    state.SetIterationTime(t);
  }
  const double it = double(state.iterations());
  state.counters["mul_ms"] = t_mul / it * 1e3;
  state.counters["vs_mul"] = t_div / t_mul;
}
BENCHMARK(BM_Tensor_Divide_4Mi)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace vkg::bench
