// Hand-written GLSL forms of issue 9's two MLP matmuls, timed on their own runtime: what the
// kernel optimizer should aim for on Lavapipe. The shapes are the first layer of the MLP
// 784-128-10 at batch 128:
//   forward:         C[b, o] = sum_i X[b, i] W[o, i]   (X 128x784, W 128x784: both i-contiguous)
//   weight gradient: D[o, i] = sum_b G[b, o] X[b, i]   (G 128x128, X 128x784: the reduce strided)
// Every form is checked against a host matmul before it is timed; each timing is `kReps`
// dispatches in one submission, divided by kReps (a dispatch alone costs ~15 us of submission).
//
//   build-release/bench/bench_tensor --benchmark_filter=MatmulForm
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <ctime>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tensor_reference_kernels.hpp"

namespace vkg::bench {
namespace {

constexpr int kB = 128, kI = 784, kO = 128;
constexpr int kReps = 20;

// Process CPU seconds (Lavapipe's worker threads included) `f` takes: less sensitive than wall
// time to other processes on a shared machine.
template <class F>
double process_seconds(F&& f) {
  timespec a{}, b{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
  f();
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
  return double(b.tv_sec - a.tv_sec) + 1e-9 * double(b.tv_nsec - a.tv_nsec);
}

// One form: GLSL over buffers 0 (out), 1, 2 (inputs), and its workgroup count.
struct Form {
  std::string glsl;
  uint32_t groups;
};

// Lines of GLSL, joined.
struct Src {
  std::ostringstream s;
  template <class T>
  Src& operator<<(const T& v) {
    s << v;
    return *this;
  }
  std::string str() const { return s.str(); }
};

std::string header(int workgroup, bool int64) {
  std::string h =
      "#version 450\n#extension GL_KHR_shader_subgroup_basic : require\n"
      "#extension GL_KHR_shader_subgroup_shuffle : require\n";
  if (int64) h += "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require\n";
  h += "layout(local_size_x = " + std::to_string(workgroup) + ") in;\n";
  h += "layout(std430, set = 0, binding = 0) writeonly buffer O_ { float o[]; };\n";
  h += "layout(std430, set = 0, binding = 0) writeonly buffer O4_ { vec4 o4[]; };\n";
  for (int b = 1; b <= 2; ++b) {
    const std::string n = std::to_string(b);
    h += "layout(std430, set = 0, binding = " + n + ") readonly buffer I" + n + "_ { float i" + n +
         "[]; };\n";
    h += "layout(std430, set = 0, binding = " + n + ") readonly buffer I" + n + "x4_ { vec4 i" + n +
         "x4[]; };\n";
    h += "layout(std430, set = 0, binding = " + n + ") readonly buffer I" + n + "x2_ { vec2 i" + n +
         "x2[]; };\n";
    if (int64)
      h += "layout(std430, set = 0, binding = " + n + ") readonly buffer I" + n +
           "x8_ { u64vec4 i" + n + "x8[]; };\n";
  }
  return h;
}

std::string acc(int r, int c) { return "a" + std::to_string(r) + "_" + std::to_string(c); }

// Forward, shuffle tile: a subgroup (one 8-lane workgroup) owns 8*rpl rows b by 8*cpl columns o.
// Lane l loads rows b0 + 8j + l (j < rpl) of X and rows o0 + cpl*l + c (c < cpl) of W, `kw`
// floats of i at a time (4: vec4, 8: u64vec4 unpacked); subgroupShuffle hands X's rows around.
// `fused`: fma(); else a * b + c as the renderer writes it (llvmpipe then multiplies and adds).
Form fwd_shuffle(int rpl, int cpl, int kw, bool fused = true) {
  const int P = 8 * rpl, Q = 8 * cpl;
  Src s;
  s << header(8, kw == 8) << "void main() {\n  const uint l = gl_SubgroupInvocationID;\n"
    << "  const uint t = gl_WorkGroupID.x, b0 = (t / " << kO / Q << "u) * " << P << "u, o0 = (t % "
    << kO / Q << "u) * " << Q << "u;\n";
  for (int r = 0; r < P; ++r)
    for (int c = 0; c < cpl; ++c) s << "  float " << acc(r, c) << " = 0.0;\n";
  s << "  for (uint k = 0u; k < " << kI / kw << "u; ++k) {\n";
  auto load = [&](const std::string& name, int buf, const std::string& row) {
    if (kw == 4) {
      s << "    const vec4 " << name << " = i" << buf << "x4[(" << row << ") * " << kI / 4
        << "u + k];\n";
    } else {
      s << "    const u64vec4 " << name << "w = i" << buf << "x8[(" << row << ") * " << kI / 8
        << "u + k];\n";
      for (int h = 0; h < 2; ++h) {
        s << "    const vec4 " << name << h << " = vec4(";
        for (int q = 0; q < 2; ++q) {
          const char* comp = h == 0 ? (q == 0 ? "x" : "y") : (q == 0 ? "z" : "w");
          s << "uintBitsToFloat(unpack32(" << name << "w." << comp << "))" << (q ? "" : ", ");
        }
        s << ");\n";
      }
    }
  };
  for (int j = 0; j < rpl; ++j)
    load("x" + std::to_string(j), 1, "b0 + " + std::to_string(8 * j) + "u + l");
  for (int c = 0; c < cpl; ++c)
    load("w" + std::to_string(c), 2,
         "o0 + " + std::to_string(cpl) + "u * l + " + std::to_string(c) + "u");
  const int parts = kw / 4;
  for (int j = 0; j < rpl; ++j)
    for (int r = 0; r < 8; ++r)
      for (int h = 0; h < parts; ++h) {
        const std::string xs = "x" + std::to_string(j) + (parts > 1 ? std::to_string(h) : "");
        s << "    { const vec4 v = subgroupShuffle(" << xs << ", " << r << "u);\n";
        for (int c = 0; c < cpl; ++c) {
          const std::string ws = "w" + std::to_string(c) + (parts > 1 ? std::to_string(h) : "");
          const std::string a = acc(8 * j + r, c);
          if (fused)
            s << "      " << a << " = fma(v.w, " << ws << ".w, fma(v.z, " << ws << ".z, fma(v.y, "
              << ws << ".y, fma(v.x, " << ws << ".x, " << a << "))));\n";
          else
            s << "      " << a << " = (((" << a << " + v.x * " << ws << ".x) + v.y * " << ws
              << ".y) + v.z * " << ws << ".z) + v.w * " << ws << ".w;\n";
        }
        s << "    }\n";
      }
  s << "  }\n";
  for (int j = 0; j < rpl; ++j)
    for (int r = 0; r < 8; ++r) {
      const std::string row =
          "(b0 + " + std::to_string(8 * j + r) + "u) * " + std::to_string(kO) + "u";
      if (cpl == 4) {
        s << "  o4[(" << row << " + o0 + 4u * l) / 4u] = vec4(" << acc(8 * j + r, 0) << ", "
          << acc(8 * j + r, 1) << ", " << acc(8 * j + r, 2) << ", " << acc(8 * j + r, 3) << ");\n";
      } else {
        for (int c = 0; c < cpl; ++c)
          s << "  o[" << row << " + o0 + " << cpl << "u * l + " << c << "u] = " << acc(8 * j + r, c)
            << ";\n";
      }
    }
  s << "}\n";
  return {s.str(), uint32_t((kB / P) * (kO / Q))};
}

// The host result of one shape, and random inputs for it.
struct Problem {
  int which;  // 0 forward, 1 weight gradient
  std::vector<float> in1, in2, expect;
  Problem(int w) : which(w) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1, 1);
    in1.resize(which == 0 ? kB * kI : kB * kO);
    in2.resize(which == 0 ? kO * kI : kB * kI);
    for (float& v : in1) v = u(rng);
    for (float& v : in2) v = u(rng);
    if (which == 0) {
      expect.assign(kB * kO, 0);
      for (int b = 0; b < kB; ++b)
        for (int o = 0; o < kO; ++o) {
          double t = 0;
          for (int i = 0; i < kI; ++i) t += double(in1[b * kI + i]) * in2[o * kI + i];
          expect[b * kO + o] = float(t);
        }
    } else {
      expect.assign(kO * kI, 0);
      for (int o = 0; o < kO; ++o)
        for (int i = 0; i < kI; ++i) {
          double t = 0;
          for (int b = 0; b < kB; ++b) t += double(in1[b * kO + o]) * in2[b * kI + i];
          expect[o * kI + i] = float(t);
        }
    }
  }
};

void matmul_form(benchmark::State& state, int which, Form form) {
  ReferenceKernels& r = reference_kernels();
  // Its SHUFFLE tiles (and the reference's dispatch here) are laid out for Lavapipe's 8 lanes.
  if (!r.matmul_fits() || r.subgroup() != 8)
    return state.SkipWithError("needs 8-wide subgroups with shuffle (a Lavapipe study)");
  static Problem problems[2] = {Problem(0), Problem(1)};
  const Problem& p = problems[which];
  if (std::getenv("PRINT_GLSL")) std::printf("%s\n", form.glsl.c_str());
  SpirvCompileOptions o;
  o.name = "matmul_form";
  const vk::Program prog(r.rt.device, o.name, compile_glsl(form.glsl, o), 0, 3);
  vk::Buffer out = r.rt.allocator.allocate(VkDeviceSize(p.expect.size() * 4));
  vk::Buffer a = r.rt.allocator.allocate(VkDeviceSize(p.in1.size() * 4));
  vk::Buffer b = r.rt.allocator.allocate(VkDeviceSize(p.in2.size() * 4));
  r.rt.transfer.upload(a, std::as_bytes(std::span(p.in1)));
  r.rt.transfer.upload(b, std::as_bytes(std::span(p.in2)));
  const vk::BufferUse uses[] = {
      {&out, vk::Access::Write}, {&a, vk::Access::Read}, {&b, vk::Access::Read}};
  auto run = [&](int reps) {
    for (int i = 0; i < reps; ++i) r.queue.dispatch(prog, vk::Groups{form.groups, 1, 1}, {}, uses);
    r.queue.finish();
  };
  run(1);
  std::vector<float> got(p.expect.size());
  r.rt.transfer.download(out, std::as_writable_bytes(std::span(got)));
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, double(std::fabs(got[i] - p.expect[i])));
  if (!(worst < 1e-3))
    return state.SkipWithError(("wrong result, max error " + std::to_string(worst)).c_str());
  double cpu = 0;
  for (auto _ : state) {
    double t = 0;
    cpu += process_seconds([&] { t = seconds([&] { run(kReps); }); });
    state.SetIterationTime(t / kReps);
  }
  state.counters["cpu_us"] = cpu / kReps / double(state.iterations()) * 1e6;
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * kB * kO * kI, benchmark::Counter::kIsIterationInvariantRate);
}

#define FORM(name, which, ...)                             \
  BENCHMARK_CAPTURE(matmul_form, name, which, __VA_ARGS__) \
      ->UseManualTime()                                    \
      ->Unit(benchmark::kMicrosecond)

// Process CPU per dispatch (load ~9, 2026-11-27): 32x32 vec4 983 us, u64vec4 965, mul + add 997;
// perf samples of the 32x32 vec4 form: 52% in the per-lane load loops, 19% in the exec-mask
// blends of accumulator writes, 15% multiplies and adds (llvmpipe 22.3 emits fma() as both).
FORM(fwd_shuffle_32x32_vec4, 0, fwd_shuffle(4, 4, 4));
FORM(fwd_shuffle_32x32_u64, 0, fwd_shuffle(4, 4, 8));
FORM(fwd_shuffle_32x32_vec4_mul_add, 0, fwd_shuffle(4, 4, 4, false));
FORM(fwd_shuffle_16x32_vec4, 0, fwd_shuffle(2, 4, 4));
FORM(fwd_shuffle_64x32_vec4, 0, fwd_shuffle(8, 4, 4));
FORM(fwd_shuffle_32x16_vec4, 0, fwd_shuffle(4, 2, 4));
FORM(fwd_shuffle_8x32_vec4, 0, fwd_shuffle(1, 4, 4));

}  // namespace
}  // namespace vkg::bench
