// What the SPIR-V disk cache saves: compile_glsl() on a typical small kernel, cold (shaderc and
// spirv-opt every time) against a disk-cache hit (one file read and a structural check).
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include <vkgrad/codegen/spirv_compiler.hpp>

namespace {

// The shapes the renderer emits: an elementwise kernel, and a row reduction through shared memory.
const std::string kElementwise = R"(#version 460
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(local_size_x = 64) in;
layout(buffer_reference, std430) buffer F32 { float v[]; };
layout(push_constant) uniform Args { uint64_t out0, in0, in1; uint n; } args;
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < args.n) {
    float a = F32(args.in0).v[i], b = F32(args.in1).v[i];
    F32(args.out0).v[i] = max(a * b + exp2(a), 0.0);
  }
}
)";

const std::string kReduce = R"(#version 460
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(local_size_x = 128) in;
layout(buffer_reference, std430) buffer F32 { float v[]; };
layout(push_constant) uniform Args { uint64_t out0, in0; uint cols; } args;
shared float partial[128];
void main() {
  uint row = gl_WorkGroupID.x, lid = gl_LocalInvocationID.x;
  float acc = 0.0;
  for (uint c = lid; c < args.cols; c += 128) acc += F32(args.in0).v[row * args.cols + c];
  partial[lid] = acc;
  barrier();
  for (uint s = 64; s > 0; s >>= 1) {
    if (lid < s) partial[lid] += partial[lid + s];
    barrier();
  }
  if (lid == 0) F32(args.out0).v[row] = partial[0];
}
)";

const std::string& kernel(const benchmark::State& state) { return state.range(0) == 0 ? kElementwise : kReduce; }

// The benchmarks read and write a private cache folder, removed at exit.
struct TempCacheDir {
  std::filesystem::path dir;
  TempCacheDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "vkg-bench-spirv-XXXXXX").string();
    if (mkdtemp(templ.data())) dir = templ;
    setenv("VKG_CACHE_DIR", dir.c_str(), 1);
  }
  ~TempCacheDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
} temp_cache_dir;

void BM_CompileCold(benchmark::State& state) {
  vkg::SpirvCompileOptions opts;
  opts.disk_cache = false;
  vkg::compile_glsl(kernel(state), opts);  // not timed: glslang's one-time built-in tables
  for (auto _ : state) benchmark::DoNotOptimize(vkg::compile_glsl(kernel(state), opts));
}
BENCHMARK(BM_CompileCold)->ArgName("reduce")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_CompileColdUnoptimized(benchmark::State& state) {
  vkg::SpirvCompileOptions opts;
  opts.disk_cache = false;
  opts.optimize = false;
  for (auto _ : state) benchmark::DoNotOptimize(vkg::compile_glsl(kernel(state), opts));
}
BENCHMARK(BM_CompileColdUnoptimized)->ArgName("reduce")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_CompileDiskCacheHit(benchmark::State& state) {
  vkg::compile_glsl(kernel(state));  // fills the cache
  for (auto _ : state) benchmark::DoNotOptimize(vkg::compile_glsl(kernel(state)));
}
BENCHMARK(BM_CompileDiskCacheHit)->ArgName("reduce")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace
