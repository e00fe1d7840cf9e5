// Hand-written reference kernels that generated kernels are held to, run through vk::Queue
// directly on their own runtime: the streaming vec4 add (shaders/add_f32*.comp) and the best
// matmul found for Lavapipe (below). Benchmarks report generated/reference ratios measured in the
// same run, since the machine is shared and noisy.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <vkgrad/codegen/spirv_compiler.hpp>
#include <vkgrad/shaders/embedded.hpp>
#include <vkgrad/vk/args.hpp>
#include <vkgrad/vk/queue.hpp>
#include <vkgrad/vk/runtime.hpp>

namespace vkg::bench {

// C = A B for n x n row-major float32 matrices (n a multiple of 4 * SG and of SG * RPL), without
// shared memory, laid out for SG-wide subgroups: designed for CPU-like devices with 8-wide ones
// (Lavapipe), and rendered for the device's own width elsewhere (an H100's 32), so that the
// benchmarks give a ratio on any device. Each subgroup owns a block of SG * RPL rows by 4 * SG
// columns. Per 4 steps of k, lane l loads one vec4 of A from each of its RPL rows (row l, l + SG,
// ...) and one vec4 of B from each of 4 rows of B (columns 4l..4l+3); subgroupShuffle hands every
// lane's A values to the others, so each invocation keeps an (SG * RPL) x 4 register block and
// each loaded value feeds SG * RPL or 4 multiply-adds. On Lavapipe
// every storage load whose address differs per lane costs a per-lane loop, while a shuffle with a
// constant lane is one vector permute: trading loads for shuffles is the whole idea. Shared-memory
// tiling is 5-10x slower there (non-uniform shared accesses and barrier() are per-lane loops and
// coroutine switches).
inline std::string subgroup_matmul_glsl(int rows_per_lane, int workgroup = 64,
                                        uint32_t subgroup = 8) {
  return "#version 450\n#define RPL " + std::to_string(rows_per_lane) + "\n#define WG " +
         std::to_string(workgroup) + "\n#define SG_WIDTH " + std::to_string(subgroup) + "u\n" +
         R"(
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
layout(local_size_x = WG) in;
layout(std430, set = 0, binding = 0) restrict readonly buffer A_ { vec4 A[]; };
layout(std430, set = 0, binding = 1) restrict readonly buffer B_ { vec4 B[]; };
layout(std430, set = 0, binding = 2) restrict writeonly buffer C_ { vec4 C[]; };
layout(push_constant) uniform Args { uint n; } args;
const uint SG = SG_WIDTH;  // subgroup width the block is laid out for (checked by the host)
void main() {
  const uint n4 = args.n / 4u, lane = gl_SubgroupInvocationID;
  const uint sg = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID;
  const uint col_blocks = args.n / (4u * SG);
  // Neighbouring subgroups share rows of A and sweep columns of B.
  const uint row0 = (sg / col_blocks) * SG * RPL, col4 = (sg % col_blocks) * SG + lane;
  vec4 acc[SG * RPL];
  for (uint i = 0u; i < SG * RPL; ++i) acc[i] = vec4(0.0);
  for (uint k4 = 0u; k4 < n4; ++k4) {
    vec4 a[RPL];
    for (uint j = 0u; j < RPL; ++j) a[j] = A[(row0 + j * SG + lane) * n4 + k4];
    const uint k = 4u * k4;
    const vec4 b0 = B[k * n4 + col4], b1 = B[(k + 1u) * n4 + col4];
    const vec4 b2 = B[(k + 2u) * n4 + col4], b3 = B[(k + 3u) * n4 + col4];
    for (uint j = 0u; j < RPL; ++j)
      for (uint r = 0u; r < SG; ++r) {
        const vec4 ar = subgroupShuffle(a[j], r);
        acc[j * SG + r] = fma(vec4(ar.x), b0, fma(vec4(ar.y), b1, fma(vec4(ar.z), b2, fma(vec4(ar.w), b3, acc[j * SG + r]))));
      }
  }
  for (uint j = 0u; j < RPL; ++j)
    for (uint r = 0u; r < SG; ++r) C[(row0 + j * SG + r) * n4 + col4] = acc[j * SG + r];
}
)";
}

// The sum of n floats (n a multiple of 4 * 64 * kSumWorkgroups), two passes. Pass 1: each of
// kSumWorkgroups workgroups of 64 invocations; each invocation sums its own contiguous run of
// vec4s (on Lavapipe every lane's load is its own scalar load anyway, and a run per lane streams
// through the cache), subgroupAdd combines a subgroup's lanes and its first lane writes one
// partial. Pass 2: one workgroup of one subgroup (`subgroup` wide: 8 on Lavapipe, 32 on an H100)
// sums the partials the same way. No shared memory or barriers: both are per-lane loops on
// Lavapipe.
constexpr uint32_t kSumWorkgroups = 256;
inline std::string subgroup_sum_glsl(bool second_pass, uint32_t subgroup = 8) {
  return "#version 450\n#define WG " + std::to_string(second_pass ? subgroup : 64u) + R"(
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = WG) in;
layout(std430, set = 0, binding = 0) restrict readonly buffer In_ { vec4 x[]; };
layout(std430, set = 0, binding = 1) restrict writeonly buffer Out_ { float partial[]; };
layout(push_constant) uniform Args { uint n4; } args;  // vec4s to sum
void main() {
  const uint invocations = gl_NumWorkGroups.x * WG, id = gl_GlobalInvocationID.x;
  const uint run = args.n4 / invocations, start = id * run;
  vec4 acc = vec4(0.0);
  for (uint i = 0u; i < run; ++i) acc += x[start + i];
  const float total = subgroupAdd(acc.x + acc.y + acc.z + acc.w);
  if (subgroupElect()) partial[gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID] = total;
}
)";
}

struct ReferenceKernels {
  vk::Runtime rt;
  vk::Queue queue{rt.device, rt.allocator};

  // The vec4 add, 256-wide workgroups, buffers by device address (the runtime's original path).
  vk::Program add_by_address{rt.device, "add_f32", shaders::get("add_f32").spirv, 28};
  // The same add with its buffers bound by push descriptor.
  vk::Program add_bound{rt.device, "add_f32_ssbo", shaders::get("add_f32_ssbo").spirv, 4, 3};

  // The device's subgroup width, which the reference kernels are laid out for.
  uint32_t subgroup() const { return rt.device.caps().limits.subgroup_size; }
  // A workgroup of at least `workgroup` invocations made of whole subgroups (8 is one subgroup on
  // Lavapipe; on a 32-wide device it becomes 32).
  int workgroup_of(int workgroup) const {
    const int sg = int(subgroup());
    return std::max(workgroup, sg) / sg * sg;
  }
  std::unique_ptr<vk::Program> matmul(int rows_per_lane, int workgroup = 64) {
    SpirvCompileOptions o;
    o.name = "subgroup_matmul";
    const std::string glsl =
        subgroup_matmul_glsl(rows_per_lane, workgroup_of(workgroup), subgroup());
    return std::make_unique<vk::Program>(rt.device, o.name, compile_glsl(glsl, o), 4, 3);
  }
  // The two passes of the reference sum (subgroup_sum_glsl).
  vk::Program sum_pass1{rt.device, "subgroup_sum",
                        compile_glsl(subgroup_sum_glsl(false, subgroup())), 4, 2};
  vk::Program sum_pass2{rt.device, "subgroup_sum_2",
                        compile_glsl(subgroup_sum_glsl(true, subgroup())), 4, 2};
  // One partial per subgroup of pass 1.
  uint32_t sum_partials() const { return kSumWorkgroups * 64 / subgroup(); }

  // Whether the reference kernels can run: subgroups of 4 to 64 lanes (the sum's passes assume
  // whole subgroups in a 64-wide workgroup) with shuffles, and push descriptors.
  bool matmul_fits() const {
    const auto& c = rt.device.caps();
    return subgroup() >= 4 && subgroup() <= 64 &&
           (c.features.subgroup_operations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT) &&
           c.limits.max_push_descriptors >= 3;
  }
};

inline ReferenceKernels& reference_kernels() {
  static ReferenceKernels k;
  return k;
}

// Wall-clock seconds `f` takes.
template <class F>
double seconds(F&& f) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  f();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The reference matmul's buffers for one n.
struct MatmulBuffers {
  int64_t n;
  vk::Buffer a, b, c;
  explicit MatmulBuffers(int64_t size) : n(size) {
    ReferenceKernels& r = reference_kernels();
    std::vector<float> host(size_t(n * n), 0.5f);
    for (vk::Buffer* buf : {&a, &b, &c}) {
      *buf = r.rt.allocator.allocate(VkDeviceSize(n * n * 4));
      r.rt.transfer.upload(*buf, std::as_bytes(std::span(host)));
    }
  }
  void run(const vk::Program& p, int rows_per_lane, int workgroup = 64) {
    ReferenceKernels& r = reference_kernels();
    const int64_t sg = r.subgroup();
    const uint64_t subgroups = uint64_t(n / (sg * rows_per_lane)) * uint64_t(n / (4 * sg));
    const vk::BufferUse uses[] = {
        {&a, vk::Access::Read}, {&b, vk::Access::Read}, {&c, vk::Access::Write}};
    const uint64_t per_group = uint64_t(r.workgroup_of(workgroup) / sg);
    r.queue.dispatch(p, vk::Groups::cover(subgroups / per_group, r.rt.device.caps().limits),
                     vk::ArgPack().u32(uint32_t(n)).bytes(), uses);
    r.queue.finish();
  }
  // Whether the last run's C is A B (every element 0.5 * 0.5 * n): a pipeline whose subgroups are
  // not the width the kernel is laid out for gives other numbers.
  bool right() const {
    std::vector<float> host(size_t(n * n));
    reference_kernels().rt.transfer.download(c, std::as_writable_bytes(std::span(host)));
    for (float v : host)
      if (v != 0.25f * float(n)) return false;
    return true;
  }
};

// The reference matmul variant used in the ratio: the best BM_Reference_Matmul measures (n, rows
// per lane, workgroup). 4 rows per lane (a 32 x 4 block per invocation) beat 2 by ~1.3x at 1024.
constexpr int kBestRowsPerLane = 4, kBestWorkgroup = 8;

}  // namespace vkg::bench
