// Candidate opts for one scheduled kernel, measured through the same path the VK device takes
// (Kernel -> opts -> lower -> GLSL -> SPIR-V -> vk::Queue) but with the opts given by hand: how
// the heuristics' choices for Lavapipe were found, and how to check them again. Each variant is
// timed against the reference matmul in the same iteration (vs_ref), as BM_Tensor_Matmul_1024 is.
//
//   build-cg-perf/bench/bench_tensor --benchmark_filter=Opts
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

#include <vkgrad/codegen/glsl_launch.hpp>
#include <vkgrad/codegen/glsl_renderer.hpp>
#include <vkgrad/codegen/heuristics.hpp>
#include <vkgrad/codegen/lowerer.hpp>
#include <vkgrad/codegen/spirv_compiler.hpp>
#include <vkgrad/core/schedule.hpp>
#include <vkgrad/core/tensor.hpp>
#include <vkgrad/devices/vk_target.hpp>

#include "tensor_reference_kernels.hpp"

namespace vkg::bench {
namespace {

// One kernel compiled with the given opts, with its own buffers.
struct Variant {
  Program program;
  std::unique_ptr<vk::Program> pipeline;
  std::array<uint32_t, 3> dims{};
  std::vector<std::byte> args;
  std::vector<vk::Buffer> buffers;

  Variant(const ScheduleItem& item, const std::vector<Opt>& opts, int64_t workgroup) {
    ReferenceKernels& r = reference_kernels();
    const GlslTarget target = glsl_target_of(r.rt.device.caps());
    Kernel k(item.ast);
    for (const Opt& o : opts) k.apply(o);
    std::vector<int64_t> counts;
    for (const auto& b : item.buffers) counts.push_back(b->count());
    program = lower(k, counts, LowerOptions{workgroup});
    const std::string glsl = render_glsl(program, target);
    if (std::getenv("PRINT_GLSL")) std::printf("%s\n%s\n", k.describe().c_str(), glsl.c_str());
    const ArgLayout layout = arg_layout(program, target);
    SpirvCompileOptions o;
    o.name = program.name;
    pipeline = std::make_unique<vk::Program>(r.rt.device, program.name, compile_glsl(glsl, o),
                                             layout.push_constant_bytes,
                                             bindings_of(layout, program.buffers.size()));
    std::vector<uint64_t> addresses;
    for (const auto& b : item.buffers) {
      buffers.push_back(r.rt.allocator.allocate(std::max<VkDeviceSize>(b->nbytes(), 4)));
      std::vector<float> ones(size_t(b->nbytes() / 4), 0.5f);
      r.rt.transfer.upload(buffers.back(), std::as_bytes(std::span(ones)));
      addresses.push_back(buffers.back().address());
    }
    args = pack_args(program, layout, addresses);
    dims = launch_dims(program, target);
  }

  void run() {
    ReferenceKernels& r = reference_kernels();
    std::vector<vk::BufferUse> uses;
    for (size_t s = 0; s < buffers.size(); ++s)
      uses.push_back(
          {&buffers[s], program.buffers[s].written ? vk::Access::ReadWrite : vk::Access::Read});
    r.queue.dispatch(*pipeline, vk::Groups{dims[0], dims[1], dims[2]}, args, uses);
    r.queue.finish();
  }
};

// The reference matmul (its best variant) and its buffers, for the ratio.
struct Reference {
  vk::Buffer a, b, c;
  std::unique_ptr<vk::Program> p;
  int64_t n;
  explicit Reference(int64_t size) : n(size) {
    ReferenceKernels& r = reference_kernels();
    for (vk::Buffer* buf : {&a, &b, &c}) buf[0] = r.rt.allocator.allocate(VkDeviceSize(n * n * 4));
    p = r.matmul(4, 8);
  }
  void run() {
    ReferenceKernels& r = reference_kernels();
    const vk::BufferUse uses[] = {
        {&a, vk::Access::Read}, {&b, vk::Access::Read}, {&c, vk::Access::Write}};
    r.queue.dispatch(
        *p, vk::Groups::cover(uint64_t(n / 32) * uint64_t(n / 32), r.rt.device.caps().limits),
        vk::ArgPack().u32(uint32_t(n)).bytes(), uses);
    r.queue.finish();
  }
};

// The matmul's kernel is (G m, G n, R k); opts name axes as Kernel::apply numbers them. With
// `transposed_b`, B is stored n-major (a Linear layer's weight): B's columns are not contiguous.
void matmul_variant(benchmark::State& state, std::vector<Opt> opts, int64_t workgroup,
                    bool transposed_b = false) {
  ReferenceKernels& r = reference_kernels();
  // Its SHUFFLE tiles (and the reference's dispatch here) are laid out for Lavapipe's 8 lanes.
  if (!r.matmul_fits() || r.subgroup() != 8)
    return state.SkipWithError("needs 8-wide subgroups with shuffle (a Lavapipe study)");
  constexpr int64_t n = 1024;
  const std::vector<float> host(size_t(n * n), 0.5f);
  const Tensor a(host, {n, n}), b(host, {n, n});
  const Schedule s = create_schedule({a.matmul(transposed_b ? b.transpose() : b).node()});
  Variant v(s.items.back(), opts, workgroup);
  Reference ref(n);
  v.run();
  ref.run();
  double t_ref = 0, t_gen = 0;
  for (auto _ : state) {
    t_ref += seconds([&] { ref.run(); });
    const double t = seconds([&] { v.run(); });
    t_gen += t;
    state.SetIterationTime(t);
  }
  const double flops = 2.0 * double(n * n * n) * double(state.iterations());
  state.counters["GFLOPS"] = flops / t_gen * 1e-9;
  state.counters["vs_ref"] = t_ref / t_gen;
}

// The first kernel of a 16 Mi float sum (the core splits it into (G 256 contiguous, G 256,
// R 256 strided by 65536) and two small ones), with `opts`, against the opts the Lavapipe
// heuristics chose before SHUFFLE and GROUP existed (4 outputs per invocation as a vec4, the
// reduce unrolled by 4) in the same iteration: vs_base.
// With `rows`, the kernel is instead a (65536, 256) tensor's sum(1): the same reads and outputs,
// each output's 256 elements contiguous (what a split that gives each partial a contiguous chunk
// would read).
void sum_variant(benchmark::State& state, std::vector<Opt> opts, int64_t workgroup,
                 bool rows = false) {
  constexpr int64_t n = int64_t(16) << 20;
  const Tensor a(std::vector<float>(size_t(n), 1.0f), {n});
  const Schedule s = create_schedule({a.sum().node()});
  const Schedule by_rows = create_schedule({a.reshape({n / 256, 256}).sum(1).node()});
  Variant v(rows ? by_rows.items.front() : s.items.front(), opts, workgroup);
  Variant base(s.items.front(), {{OptOp::UPCAST, 0, 4}, {OptOp::UNROLL, 2, 4}}, 64);
  v.run();
  base.run();
  double t_base = 0, t_gen = 0;
  for (auto _ : state) {
    t_base += seconds([&] { base.run(); });
    const double t = seconds([&] { v.run(); });
    t_gen += t;
    state.SetIterationTime(t);
  }
  state.counters["GB/s"] = 4.0 * double(n) * double(state.iterations()) / t_gen * 1e-9;
  state.counters["vs_base"] = t_base / t_gen;
}

// Issue 9's MLP 784-128-10 step at batch 128: its first layer's forward (x[128, 784] times the
// weight w[128, 784] as stored: kernel (G b, G o, R i)) and its weight gradient (dy[128, 128]^T
// times x: kernel (G o, G i, R b), the reduce along the batch, neither operand contiguous
// there). Timed against each other's heuristics in the same run: the ms is what to compare.
// Process CPU seconds (Lavapipe's worker threads included) `f` takes: less sensitive than wall
// time to other processes on a shared machine.
template <class F>
double cpu_seconds(F&& f) {
  timespec a{}, b{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
  f();
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
  return double(b.tv_sec - a.tv_sec) + 1e-9 * double(b.tv_nsec - a.tv_nsec);
}

void mlp_variant(benchmark::State& state, int which, std::vector<Opt> opts, int64_t workgroup) {
  const std::vector<float> xs(size_t(128 * 784), 0.5f), ws(size_t(128 * 784), 0.25f),
      dys(size_t(128 * 128), 0.5f);
  const Tensor x(xs, {128, 784}), w(ws, {128, 784}), dy(dys, {128, 128});
  // which == 2: the weight gradient with x stored transposed (contiguous along the batch).
  const Tensor xt(xs, {784, 128});
  // which == 3: the weight gradient as the step computes it, through the relu's backward of
  // h + bias (h and the bias in buffers of their own).
  const Tensor h(dys, {128, 128}), bias(std::vector<float>(128, 0.25f), {128});
  const Tensor hb = h + bias;
  const Tensor g = hb.gt(0.0f).logical_or(hb.ne(hb)).where(dy, 0.0f);
  const Tensor out = which == 0   ? x.matmul(w.transpose())
                     : which == 1 ? dy.transpose().matmul(x)
                     : which == 2 ? dy.transpose().matmul(xt.transpose())
                                  : g.transpose().matmul(x);
  const Schedule s = create_schedule({out.node()});
  Variant v(s.items.back(), opts, workgroup);
  // The heuristics' choice (as DEBUG=3 printed it for Lavapipe) in the same iterations.
  const std::vector<Opt> base_opts = which == 0 ? std::vector<Opt>{{OptOp::UPCAST, 1, 4},
                                                                   {OptOp::LOCAL, 1, 8},
                                                                   {OptOp::SHUFFLE, 0, 8},
                                                                   {OptOp::UPCAST, 0, 4},
                                                                   {OptOp::UNROLL, 3, 4}}
                                                : std::vector<Opt>{{OptOp::UPCAST, 0, 4},
                                                                   {OptOp::LOCAL, 0, 8},
                                                                   {OptOp::SHUFFLE, 1, 8},
                                                                   {OptOp::UPCAST, 1, 2},
                                                                   {OptOp::UNROLL, 3, 4}};
  Variant base(s.items.back(), base_opts, 8);
  v.run();
  base.run();
  double t = 0, cpu = 0, cpu_base = 0;
  for (auto _ : state) {
    cpu_base += cpu_seconds([&] { base.run(); });
    double one = 0;
    cpu += cpu_seconds([&] { one = seconds([&] { v.run(); }); });
    t += one;
    state.SetIterationTime(one);
  }
  const double n = double(state.iterations());
  state.counters["GFLOPS"] = 2.0 * 128 * 128 * 784 * n / t * 1e-9;
  state.counters["cpu_ms"] = cpu / n * 1e3;
  state.counters["vs_base_cpu"] = cpu_base / cpu;
}

using O = OptOp;
#define VARIANT(name, wg, ...)                                               \
  BENCHMARK_CAPTURE(matmul_variant, name, std::vector<Opt>{__VA_ARGS__}, wg) \
      ->UseManualTime()                                                      \
      ->Unit(benchmark::kMillisecond)
// The register tile of GPUs and of Lavapipe without shuffles: 8 rows x vec4 per invocation.
VARIANT(global_8x4, 64, {O::UPCAST, 1, 4}, {O::UPCAST, 0, 8}, {O::UNROLL, 2, 4});
// The same with one subgroup per workgroup along n: A's loads are the same in every lane (but
// Lavapipe still loads them per lane: no faster).
VARIANT(lane8_16x4, 8, {O::UPCAST, 1, 4}, {O::LOCAL, 1, 8}, {O::UPCAST, 0, 16}, {O::UNROLL, 3, 4});
// Shuffle tiles: each lane loads 1, 2 or 3 rows of A and shuffles them to the others.
VARIANT(shuffle_8x4, 8, {O::UPCAST, 1, 4}, {O::LOCAL, 1, 8}, {O::SHUFFLE, 0, 8}, {O::UNROLL, 3, 4});
VARIANT(shuffle_16x4, 8, {O::UPCAST, 1, 4}, {O::LOCAL, 1, 8}, {O::SHUFFLE, 0, 8}, {O::UPCAST, 0, 2},
        {O::UNROLL, 3, 4});
VARIANT(shuffle_32x4, 8, {O::UPCAST, 1, 4}, {O::LOCAL, 1, 8}, {O::SHUFFLE, 0, 8}, {O::UPCAST, 0, 4},
        {O::UNROLL, 3, 4});
BENCHMARK_CAPTURE(matmul_variant, bt_global_8x4,
                  std::vector<Opt>{{O::UPCAST, 1, 4}, {O::UPCAST, 0, 8}, {O::UNROLL, 2, 4}}, 64,
                  true)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(matmul_variant, bt_shuffle_32x4,
                  std::vector<Opt>{{O::UPCAST, 1, 4},
                                   {O::LOCAL, 1, 8},
                                   {O::SHUFFLE, 0, 8},
                                   {O::UPCAST, 0, 4},
                                   {O::UNROLL, 3, 4}},
                  8, true)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
// What GPUs get (DeviceTraits defaults): 16x16 invocations of 4x4 register tiles, A and B tiles
// of 8 steps of k staged in shared memory.
VARIANT(staged_64x64, 256, {O::UPCAST, 1, 4}, {O::UPCAST, 0, 4}, {O::LOCAL, 1, 16},
        {O::LOCAL, 0, 16}, {O::UNROLL, 4, 8}, {O::STAGE, 5, 8});
VARIANT(shuffle_16x4_unroll8, 8, {O::UPCAST, 1, 4}, {O::LOCAL, 1, 8}, {O::SHUFFLE, 0, 8},
        {O::UPCAST, 0, 2}, {O::UNROLL, 3, 8});

#define MLP_VARIANT(name, which, wg, ...)                                        \
  BENCHMARK_CAPTURE(mlp_variant, name, which, std::vector<Opt>{__VA_ARGS__}, wg) \
      ->UseManualTime()                                                          \
      ->Unit(benchmark::kMillisecond)
// The forward: the heuristics' shuffle tile (32 x 4 per lane).
MLP_VARIANT(fwd_shuffle_32x4, 0, 8, {O::UPCAST, 1, 4}, {O::LOCAL, 1, 8}, {O::SHUFFLE, 0, 8},
            {O::UPCAST, 0, 4}, {O::UNROLL, 3, 4});
MLP_VARIANT(fwd_shuffle_16x4, 0, 8, {O::UPCAST, 1, 4}, {O::LOCAL, 1, 8}, {O::SHUFFLE, 0, 8},
            {O::UPCAST, 0, 2}, {O::UNROLL, 3, 4});
MLP_VARIANT(fwd_shuffle_32x4_u8, 0, 8, {O::UPCAST, 1, 4}, {O::LOCAL, 1, 8}, {O::SHUFFLE, 0, 8},
            {O::UPCAST, 0, 4}, {O::UNROLL, 3, 8});
// Bigger shuffle tiles: fewer loads per multiply-add (a load is a loop over the lanes).
MLP_VARIANT(fwd_shuffle_64x4, 0, 8, {O::UPCAST, 1, 4}, {O::LOCAL, 1, 8}, {O::SHUFFLE, 0, 8},
            {O::UPCAST, 0, 8}, {O::UNROLL, 3, 4});
MLP_VARIANT(fwd_shuffle_32x8, 0, 8, {O::UPCAST, 1, 8}, {O::LOCAL, 1, 8}, {O::SHUFFLE, 0, 8},
            {O::UPCAST, 0, 4}, {O::UNROLL, 3, 4});
MLP_VARIANT(fwd_shuffle_64x8, 0, 8, {O::UPCAST, 1, 8}, {O::LOCAL, 1, 8}, {O::SHUFFLE, 0, 8},
            {O::UPCAST, 0, 8}, {O::UNROLL, 3, 4});
MLP_VARIANT(fwd_shuffle_128x4, 0, 8, {O::UPCAST, 1, 4}, {O::LOCAL, 1, 8}, {O::SHUFFLE, 0, 8},
            {O::UPCAST, 0, 16}, {O::UNROLL, 3, 4});
MLP_VARIANT(fwd_global_8x4, 0, 64, {O::UPCAST, 1, 4}, {O::UPCAST, 0, 8}, {O::UNROLL, 2, 4});
// The weight gradient: the heuristics' tile (lanes along o, 2 rows of i per lane: 784 / 8 = 98)
MLP_VARIANT(dw_shuffle_16x4, 1, 8, {O::UPCAST, 0, 4}, {O::LOCAL, 0, 8}, {O::SHUFFLE, 1, 8},
            {O::UPCAST, 1, 2}, {O::UNROLL, 3, 4});
// ... 7 rows per lane (98 = 14 * 7)
MLP_VARIANT(dw_shuffle_56x4, 1, 8, {O::UPCAST, 0, 4}, {O::LOCAL, 0, 8}, {O::SHUFFLE, 1, 8},
            {O::UPCAST, 1, 7}, {O::UNROLL, 3, 4});
MLP_VARIANT(dw_shuffle_56x4_u2, 1, 8, {O::UPCAST, 0, 4}, {O::LOCAL, 0, 8}, {O::SHUFFLE, 1, 8},
            {O::UPCAST, 1, 7}, {O::UNROLL, 3, 2});
// Lanes along i (x contiguous there), 2 columns each (784 is no multiple of 8 vec4s), shuffles
// along o.
MLP_VARIANT(dw_ilanes_32x2, 1, 8, {O::UPCAST, 1, 2}, {O::LOCAL, 1, 8}, {O::SHUFFLE, 0, 8},
            {O::UPCAST, 0, 4}, {O::UNROLL, 3, 4});
MLP_VARIANT(dw_ilanes_32x2_u2, 1, 8, {O::UPCAST, 1, 2}, {O::LOCAL, 1, 8}, {O::SHUFFLE, 0, 8},
            {O::UPCAST, 0, 4}, {O::UNROLL, 3, 2});
MLP_VARIANT(dw_shuffle_56x4_u1, 1, 8, {O::UPCAST, 0, 4}, {O::LOCAL, 0, 8}, {O::SHUFFLE, 1, 8},
            {O::UPCAST, 1, 7});
MLP_VARIANT(dw_shuffle_16x4_u2, 1, 8, {O::UPCAST, 0, 4}, {O::LOCAL, 0, 8}, {O::SHUFFLE, 1, 8},
            {O::UPCAST, 1, 2}, {O::UNROLL, 3, 2});
MLP_VARIANT(dw_shuffle_16x4_u1, 1, 8, {O::UPCAST, 0, 4}, {O::LOCAL, 0, 8}, {O::SHUFFLE, 1, 8},
            {O::UPCAST, 1, 2});
MLP_VARIANT(dw_shuffle_112x4_u1, 1, 8, {O::UPCAST, 0, 4}, {O::LOCAL, 0, 8}, {O::SHUFFLE, 1, 8},
            {O::UPCAST, 1, 14});
MLP_VARIANT(dwt_shuffle_16x4, 2, 8, {O::UPCAST, 0, 4}, {O::LOCAL, 0, 8}, {O::SHUFFLE, 1, 8},
            {O::UPCAST, 1, 2}, {O::UNROLL, 3, 4});
MLP_VARIANT(dwmask_shuffle_16x4, 3, 8, {O::UPCAST, 0, 4}, {O::LOCAL, 0, 8}, {O::SHUFFLE, 1, 8},
            {O::UPCAST, 1, 2}, {O::UNROLL, 3, 4});
MLP_VARIANT(dwmask_shuffle_56x4, 3, 8, {O::UPCAST, 0, 4}, {O::LOCAL, 0, 8}, {O::SHUFFLE, 1, 8},
            {O::UPCAST, 1, 7}, {O::UNROLL, 3, 4});
MLP_VARIANT(dwmask_shuffle_56x4_u2, 3, 8, {O::UPCAST, 0, 4}, {O::LOCAL, 0, 8}, {O::SHUFFLE, 1, 8},
            {O::UPCAST, 1, 7}, {O::UNROLL, 3, 2});
MLP_VARIANT(dwmask_shuffle_112x4_u2, 3, 8, {O::UPCAST, 0, 4}, {O::LOCAL, 0, 8}, {O::SHUFFLE, 1, 8},
            {O::UPCAST, 1, 14}, {O::UNROLL, 3, 2});
MLP_VARIANT(dwmask_shuffle_28x4_u2, 3, 8, {O::UPCAST, 0, 4}, {O::LOCAL, 0, 8}, {O::SHUFFLE, 1, 8},
            {O::UPCAST, 1, 7}, {O::UPCAST, 1, 1}, {O::UNROLL, 3, 2});
// x read as vec2 along i (784 = 16 * 49) instead of one float per lane.
MLP_VARIANT(dwmask_ilanes_32x2, 3, 8, {O::UPCAST, 1, 2}, {O::LOCAL, 1, 8}, {O::SHUFFLE, 0, 8},
            {O::UPCAST, 0, 4}, {O::UNROLL, 3, 4});
MLP_VARIANT(dwmask_ilanes_32x14, 3, 8, {O::UPCAST, 1, 2}, {O::LOCAL, 1, 8}, {O::UPCAST, 1, 7},
            {O::SHUFFLE, 0, 8}, {O::UPCAST, 0, 4}, {O::UNROLL, 3, 4});
MLP_VARIANT(dwmask_ilanes_32x6, 3, 8, {O::UPCAST, 1, 2}, {O::LOCAL, 1, 8}, {O::SHUFFLE, 0, 8},
            {O::UPCAST, 0, 4}, {O::UPCAST, 1, 7}, {O::UNROLL, 3, 4});
MLP_VARIANT(dwmask_ilanes_32x14_v4, 3, 8, {O::UPCAST, 1, 2}, {O::LOCAL, 1, 8}, {O::UPCAST, 1, 7},
            {O::UPCAST, 0, 4}, {O::SHUFFLE, 0, 8}, {O::UNROLL, 3, 4});
// Lanes along o (4 each), x's vec2 pairs along i shuffled (lane s loads i = 2s, 2s + 1).
MLP_VARIANT(dwmask_olanes_v2_32x16, 3, 8, {O::UPCAST, 0, 4}, {O::LOCAL, 0, 8}, {O::UPCAST, 1, 2},
            {O::SHUFFLE, 1, 8}, {O::UNROLL, 3, 4});
MLP_VARIANT(dwmask_olanes_v2_32x112, 3, 8, {O::UPCAST, 0, 4}, {O::LOCAL, 0, 8}, {O::UPCAST, 1, 2},
            {O::SHUFFLE, 1, 8}, {O::UPCAST, 1, 7}, {O::UNROLL, 3, 4});
MLP_VARIANT(dwmask_olanes_v2_32x112_u2, 3, 8, {O::UPCAST, 0, 4}, {O::LOCAL, 0, 8},
            {O::UPCAST, 1, 2}, {O::SHUFFLE, 1, 8}, {O::UPCAST, 1, 7}, {O::UNROLL, 3, 2});
MLP_VARIANT(dwmask_olanes_v2_32x112_u8, 3, 8, {O::UPCAST, 0, 4}, {O::LOCAL, 0, 8},
            {O::UPCAST, 1, 2}, {O::SHUFFLE, 1, 8}, {O::UPCAST, 1, 7}, {O::UNROLL, 3, 8});
MLP_VARIANT(dwmask_olanes_v2_32x64_u8, 3, 8, {O::UPCAST, 0, 4}, {O::LOCAL, 0, 8}, {O::UPCAST, 1, 2},
            {O::SHUFFLE, 1, 8}, {O::UNROLL, 3, 8});
MLP_VARIANT(dwmask_ilanes_32x14_v4_u2, 3, 8, {O::UPCAST, 1, 2}, {O::LOCAL, 1, 8}, {O::UPCAST, 1, 7},
            {O::UPCAST, 0, 4}, {O::SHUFFLE, 0, 8}, {O::UNROLL, 3, 2});
MLP_VARIANT(dw_global_4x4, 1, 64, {O::UPCAST, 1, 4}, {O::UPCAST, 0, 4}, {O::UNROLL, 2, 4});
MLP_VARIANT(dw_global_8x4, 1, 64, {O::UPCAST, 1, 4}, {O::UPCAST, 0, 8}, {O::UNROLL, 2, 4});
MLP_VARIANT(dw_global_16x4, 1, 64, {O::UPCAST, 1, 4}, {O::UPCAST, 0, 16}, {O::UNROLL, 2, 4});
MLP_VARIANT(dw_global_7x4x4, 1, 64, {O::UPCAST, 1, 4}, {O::UPCAST, 1, 7}, {O::UPCAST, 0, 4},
            {O::UNROLL, 2, 4});

#define SUM_VARIANT(name, wg, ...)                                        \
  BENCHMARK_CAPTURE(sum_variant, name, std::vector<Opt>{__VA_ARGS__}, wg) \
      ->UseManualTime()                                                   \
      ->Unit(benchmark::kMillisecond)
SUM_VARIANT(vec4_outputs, 64, {O::UPCAST, 0, 4}, {O::UNROLL, 2, 4});
SUM_VARIANT(vec4x2_outputs, 64, {O::UPCAST, 0, 4}, {O::UPCAST, 0, 2}, {O::UNROLL, 2, 4});
SUM_VARIANT(vec4x4_outputs, 64, {O::UPCAST, 0, 4}, {O::UPCAST, 0, 4}, {O::UNROLL, 2, 4});
SUM_VARIANT(vec4x4_outputs_wg8, 8, {O::UPCAST, 0, 4}, {O::UPCAST, 0, 4}, {O::UNROLL, 2, 4});
SUM_VARIANT(vec4x4_outputs_wg16, 16, {O::UPCAST, 0, 4}, {O::UPCAST, 0, 4}, {O::UNROLL, 2, 4});
SUM_VARIANT(vec4x8_outputs_wg8, 8, {O::UPCAST, 0, 4}, {O::UPCAST, 0, 8}, {O::UNROLL, 2, 4});
SUM_VARIANT(vec4x8_outputs, 64, {O::UPCAST, 0, 4}, {O::UPCAST, 0, 8}, {O::UNROLL, 2, 4});
SUM_VARIANT(vec4x16_outputs, 64, {O::UPCAST, 0, 4}, {O::UPCAST, 0, 16}, {O::UNROLL, 2, 4});
SUM_VARIANT(vec4x16_outputs_wg8, 8, {O::UPCAST, 0, 4}, {O::UPCAST, 0, 16}, {O::UNROLL, 2, 4});
SUM_VARIANT(vec4x8_outputs_unroll2, 64, {O::UPCAST, 0, 4}, {O::UPCAST, 0, 8}, {O::UNROLL, 2, 2});
SUM_VARIANT(vec4x4_outputs_unroll8, 64, {O::UPCAST, 0, 4}, {O::UPCAST, 0, 4}, {O::UNROLL, 2, 8});
// (G 65536, R 256): rows of 4 or 16 outputs per invocation, each read as vec4s along the reduce.
BENCHMARK_CAPTURE(sum_variant, rows_4_outputs,
                  std::vector<Opt>{{O::UPCAST, 0, 4}, {O::UNROLL, 1, 4}}, 64, true)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(sum_variant, rows_16_outputs,
                  std::vector<Opt>{{O::UPCAST, 0, 4}, {O::UPCAST, 0, 4}, {O::UNROLL, 1, 4}}, 64,
                  true)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(sum_variant, rows_1_output, std::vector<Opt>{{O::UNROLL, 1, 4}}, 64, true)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
SUM_VARIANT(group16_vec4, 64, {O::UPCAST, 0, 4}, {O::GROUP, 2, 16}, {O::UNROLL, 2, 4});
SUM_VARIANT(group64, 64, {O::GROUP, 2, 64});

}  // namespace
}  // namespace vkg::bench
