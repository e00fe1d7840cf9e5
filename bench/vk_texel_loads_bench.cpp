// Does reading a kernel's operands through texel buffers beat storage buffers? The same
// hand-written float32 matmul (4x4 outputs a thread) reads A and B either as `readonly buffer`
// (SSBO), as `samplerBuffer` + texelFetch of an R32_SFLOAT or R32G32B32A32_SFLOAT view (uniform
// texel buffer), or as `imageBuffer` + imageLoad (storage texel buffer). Lavapipe compiles every
// SSBO load into a loop over the SIMD lanes; these numbers say whether its texel fetch does better.
// Shapes are the MLP 784-128-10 step's: forward 128x784 @ 784x128 and weight gradient x^T (784x128)
// @ dh (128x128). Each iteration records 8 dispatches in one command buffer, submits and waits.
// Compare process CPU time (the Lavapipe workers are other threads) between variants of one run.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <vkgrad/codegen/spirv_compiler.hpp>
#include <vkgrad/vk/check.hpp>
#include <vkgrad/vk/handle.hpp>
#include <vkgrad/vk/structure.hpp>

#include "vk_bench_runtime.hpp"

namespace vkg::bench {
namespace {

enum class Read { Ssbo, Utb, UtbVec4, Stb };

struct Shape {
  uint32_t m, n, k;
  bool a_transposed;  // A is stored k-major (x^T of a (k, m) tensor)
};
constexpr Shape kForward{128, 128, 784, false};
constexpr Shape kWeightGrad{784, 128, 128, true};

// The kernel: thread (i, j) writes C[4i..4i+3][4j..4j+3]. LD_A/LD_B read one float; with vec4
// views, B's 4 columns (and A^T's 4 rows) come as one texel.
std::string source(Read read, Shape s) {
  std::string decl, lda, ldb4;
  const std::string a_index = s.a_transposed ? "kk * M + m0 + r" : "(m0 + r) * K + kk";
  switch (read) {
    case Read::Ssbo:
      decl =
          "layout(set=0, binding=0) readonly buffer A_ { float a[]; };\n"
          "layout(set=0, binding=1) readonly buffer B_ { float b[]; };\n";
      lda = "a[{}]";
      ldb4 = "vec4(b[kk*N+n0], b[kk*N+n0+1], b[kk*N+n0+2], b[kk*N+n0+3])";
      break;
    case Read::Utb:
      decl =
          "layout(set=0, binding=0) uniform samplerBuffer a;\n"
          "layout(set=0, binding=1) uniform samplerBuffer b;\n";
      lda = "texelFetch(a, int({})).x";
      ldb4 =
          "vec4(texelFetch(b, kk*N+n0).x, texelFetch(b, kk*N+n0+1).x, texelFetch(b, kk*N+n0+2).x, "
          "texelFetch(b, kk*N+n0+3).x)";
      break;
    case Read::UtbVec4:
      decl =
          "layout(set=0, binding=0) uniform samplerBuffer a;\n"
          "layout(set=0, binding=1) uniform samplerBuffer b4;\n";
      lda = "texelFetch(a, int({})).x";
      ldb4 = "texelFetch(b4, (kk*N+n0) >> 2)";
      break;
    case Read::Stb:
      decl =
          "layout(set=0, binding=0, r32f) readonly uniform imageBuffer a;\n"
          "layout(set=0, binding=1, r32f) readonly uniform imageBuffer b;\n";
      lda = "imageLoad(a, int({})).x";
      ldb4 =
          "vec4(imageLoad(b, kk*N+n0).x, imageLoad(b, kk*N+n0+1).x, imageLoad(b, kk*N+n0+2).x, "
          "imageLoad(b, kk*N+n0+3).x)";
      break;
  }
  std::string body;
  for (int r = 0; r < 4; ++r) {
    std::string idx = a_index;
    idx.replace(idx.find('r'), 1, std::to_string(r));
    std::string load = lda;
    load.replace(load.find("{}"), 2, idx);
    body += "    acc[" + std::to_string(r) + "] += " + load + " * bv;\n";
  }
  return "#version 460\n"
         "layout(local_size_x = 8, local_size_y = 1) in;\n"
         "const int M = " +
         std::to_string(s.m) + ", N = " + std::to_string(s.n) + ", K = " + std::to_string(s.k) +
         ";\n" + decl +
         "layout(set=0, binding=2) writeonly buffer C_ { float c[]; };\n"
         "void main() {\n"
         "  int n0 = int(gl_GlobalInvocationID.x) * 4, m0 = int(gl_GlobalInvocationID.y) * 4;\n"
         "  vec4 acc[4] = vec4[4](vec4(0), vec4(0), vec4(0), vec4(0));\n"
         "  for (int kk = 0; kk < K; ++kk) {\n"
         "    vec4 bv = " +
         ldb4 + ";\n" + body +
         "  }\n"
         "  for (int r = 0; r < 4; ++r) for (int j = 0; j < 4; ++j) c[(m0 + r) * N + n0 + j] = "
         "acc[r][j];\n"
         "}\n";
}

struct Kernel {
  VkDevice dev = VK_NULL_HANDLE;
  vk::UniqueDescriptorSetLayout dsl;
  vk::UniquePipelineLayout pl;
  vk::UniqueShaderModule sm;
  vk::UniquePipeline pipe;
  vk::UniqueDescriptorPool pool;
  VkDescriptorSet set = VK_NULL_HANDLE;
  std::vector<VkBufferView> views;
  ~Kernel() {
    for (VkBufferView v : views) vkDestroyBufferView(dev, v, nullptr);
  }
};

VkDescriptorType input_type(Read read) {
  switch (read) {
    case Read::Ssbo:
      return VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    case Read::Utb:
    case Read::UtbVec4:
      return VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
    case Read::Stb:
      return VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER;
  }
  return VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
}

void make_kernel(Kernel& kn, Read read, Shape s, const vk::Buffer& a, const vk::Buffer& b,
                 const vk::Buffer& c) {
  VkDevice dev = kn.dev;
  const VkDescriptorType in = input_type(read);
  VkDescriptorSetLayoutBinding bindings[3] = {
      {0, in, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr},
      {1, in, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr},
      {2, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr}};
  auto dsl_info = vk::structure<VkDescriptorSetLayoutCreateInfo>(
      VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO);
  dsl_info.bindingCount = 3;
  dsl_info.pBindings = bindings;
  VkDescriptorSetLayout dsl;
  vk::check(vkCreateDescriptorSetLayout(dev, &dsl_info, nullptr, &dsl), "layout");
  kn.dsl = vk::UniqueDescriptorSetLayout(dev, dsl);
  auto pl_info =
      vk::structure<VkPipelineLayoutCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO);
  pl_info.setLayoutCount = 1;
  pl_info.pSetLayouts = &dsl;
  VkPipelineLayout pl;
  vk::check(vkCreatePipelineLayout(dev, &pl_info, nullptr, &pl), "pipeline layout");
  kn.pl = vk::UniquePipelineLayout(dev, pl);
  SpirvCompileOptions opts;
  opts.disk_cache = false;
  const std::vector<uint32_t> spirv = compile_glsl(source(read, s), opts);
  auto sm_info =
      vk::structure<VkShaderModuleCreateInfo>(VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO);
  sm_info.codeSize = spirv.size() * 4;
  sm_info.pCode = spirv.data();
  VkShaderModule sm;
  vk::check(vkCreateShaderModule(dev, &sm_info, nullptr, &sm), "module");
  kn.sm = vk::UniqueShaderModule(dev, sm);
  auto cp =
      vk::structure<VkComputePipelineCreateInfo>(VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO);
  cp.stage = vk::structure<VkPipelineShaderStageCreateInfo>(
      VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO);
  cp.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  cp.stage.module = sm;
  cp.stage.pName = "main";
  cp.layout = pl;
  VkPipeline pipe;
  vk::check(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &cp, nullptr, &pipe), "pipeline");
  kn.pipe = vk::UniquePipeline(dev, pipe);
  VkDescriptorPoolSize sizes[2] = {{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 3}, {in, 2}};
  auto dp_info =
      vk::structure<VkDescriptorPoolCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO);
  dp_info.maxSets = 1;
  dp_info.poolSizeCount = in == VK_DESCRIPTOR_TYPE_STORAGE_BUFFER ? 1 : 2;
  dp_info.pPoolSizes = sizes;
  VkDescriptorPool dp;
  vk::check(vkCreateDescriptorPool(dev, &dp_info, nullptr, &dp), "pool");
  kn.pool = vk::UniqueDescriptorPool(dev, dp);
  auto ds_info =
      vk::structure<VkDescriptorSetAllocateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO);
  ds_info.descriptorPool = dp;
  ds_info.descriptorSetCount = 1;
  ds_info.pSetLayouts = &dsl;
  vk::check(vkAllocateDescriptorSets(dev, &ds_info, &kn.set), "set");

  const VkDeviceSize a_bytes = VkDeviceSize(s.m) * s.k * 4, b_bytes = VkDeviceSize(s.k) * s.n * 4,
                     c_bytes = VkDeviceSize(s.m) * s.n * 4;
  VkDescriptorBufferInfo out{c.handle(), c.offset(), c_bytes};
  auto w_out = vk::structure<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
  w_out.dstSet = kn.set;
  w_out.dstBinding = 2;
  w_out.descriptorCount = 1;
  w_out.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
  w_out.pBufferInfo = &out;
  auto w_in = vk::structure<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
  w_in.dstSet = kn.set;
  w_in.dstBinding = 0;
  w_in.descriptorCount = 2;
  w_in.descriptorType = in;
  VkDescriptorBufferInfo ins[2] = {{a.handle(), a.offset(), a_bytes},
                                   {b.handle(), b.offset(), b_bytes}};
  if (read == Read::Ssbo) {
    w_in.pBufferInfo = ins;
  } else {
    for (int i = 0; i < 2; ++i) {
      auto v = vk::structure<VkBufferViewCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO);
      v.buffer = ins[i].buffer;
      v.offset = ins[i].offset;
      v.range = ins[i].range;
      v.format =
          read == Read::UtbVec4 && i == 1 ? VK_FORMAT_R32G32B32A32_SFLOAT : VK_FORMAT_R32_SFLOAT;
      VkBufferView view;
      vk::check(vkCreateBufferView(dev, &v, nullptr, &view), "buffer view");
      kn.views.push_back(view);
    }
    w_in.pTexelBufferView = kn.views.data();
  }
  VkWriteDescriptorSet writes[2] = {w_in, w_out};
  vkUpdateDescriptorSets(dev, 2, writes, 0, nullptr);
}

// Times `kPerSubmit` dispatches of `kn` recorded once and submitted per iteration, and reports
// each kernel's time.
constexpr int kPerSubmit = 8;
void time_dispatches(benchmark::State& state, VkBench& bench, const Kernel& kn, uint32_t groups_x,
                     uint32_t groups_y) {
  const VkDevice dev = kn.dev;
  auto pool_info =
      vk::structure<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
  pool_info.queueFamilyIndex = bench.rt.device.queue_family();
  VkCommandPool pool;
  vk::check(vkCreateCommandPool(dev, &pool_info, nullptr, &pool), "command pool");
  vk::UniqueCommandPool owned_pool(dev, pool);
  auto cb_info =
      vk::structure<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
  cb_info.commandPool = pool;
  cb_info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cb_info.commandBufferCount = 1;
  VkCommandBuffer cmd;
  vk::check(vkAllocateCommandBuffers(dev, &cb_info, &cmd), "command buffer");
  auto begin = vk::structure<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
  vk::check(vkBeginCommandBuffer(cmd, &begin), "begin");
  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, kn.pipe.get());
  vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, kn.pl.get(), 0, 1, &kn.set, 0,
                          nullptr);
  for (int i = 0; i < kPerSubmit; ++i) vkCmdDispatch(cmd, groups_x, groups_y, 1);
  vk::check(vkEndCommandBuffer(cmd), "end");
  // Lavapipe compiles a variant per texel format on the first dispatch: keep it out of the timing.
  bench.rt.device.timeline().wait(bench.rt.device.timeline().submit(cmd));
  for (auto _ : state) bench.rt.device.timeline().wait(bench.rt.device.timeline().submit(cmd));
  state.counters["per_kernel_us"] =
      benchmark::Counter(double(state.iterations()) * kPerSubmit / 1e6,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void matmul_bench(benchmark::State& state, Read read, Shape s) {
  VkBench& bench = vk_bench();
  VkDevice dev = bench.rt.device.get();
  vk::Buffer a = bench.rt.allocator.allocate(VkDeviceSize(s.m) * s.k * 4),
             b = bench.rt.allocator.allocate(VkDeviceSize(s.k) * s.n * 4),
             c = bench.rt.allocator.allocate(VkDeviceSize(s.m) * s.n * 4);
  std::vector<float> ha(size_t(s.m) * s.k), hb(size_t(s.k) * s.n);
  for (size_t i = 0; i < ha.size(); ++i) ha[i] = float(int(i % 7) - 3) * 0.25f;
  for (size_t i = 0; i < hb.size(); ++i) hb[i] = float(int(i % 5) - 2) * 0.5f;
  bench.rt.transfer.upload(a, std::as_bytes(std::span(ha)));
  bench.rt.transfer.upload(b, std::as_bytes(std::span(hb)));
  Kernel kn;
  kn.dev = dev;
  make_kernel(kn, read, s, a, b, c);

  time_dispatches(state, bench, kn, s.n / 4 / 8, s.m / 4);

  // Check one output against the host so a wrong kernel cannot look fast.
  std::vector<float> hc(size_t(s.m) * s.n);
  bench.rt.transfer.download(c, std::as_writable_bytes(std::span(hc)));
  for (uint32_t probe : {0u, s.m * s.n / 2 + 5, s.m * s.n - 1}) {
    const uint32_t i = probe / s.n, j = probe % s.n;
    double want = 0;
    for (uint32_t kk = 0; kk < s.k; ++kk)
      want += double(s.a_transposed ? ha[kk * s.m + i] : ha[i * s.k + kk]) * hb[kk * s.n + j];
    if (std::fabs(hc[probe] - want) > 1e-3 * (1 + std::fabs(want)))
      state.SkipWithError(("C[" + std::to_string(probe) + "] = " + std::to_string(hc[probe]) +
                           " but the host gives " + std::to_string(want))
                              .c_str());
  }
}

#define TEXEL_BENCH(name, read, shape)                             \
  void name(benchmark::State& s) { matmul_bench(s, read, shape); } \
  BENCHMARK(name)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond)

TEXEL_BENCH(BM_TexelLoads_Forward_Ssbo, Read::Ssbo, kForward);
TEXEL_BENCH(BM_TexelLoads_Forward_Utb, Read::Utb, kForward);
TEXEL_BENCH(BM_TexelLoads_Forward_UtbVec4, Read::UtbVec4, kForward);
TEXEL_BENCH(BM_TexelLoads_Forward_Stb, Read::Stb, kForward);
TEXEL_BENCH(BM_TexelLoads_WeightGrad_Ssbo, Read::Ssbo, kWeightGrad);
TEXEL_BENCH(BM_TexelLoads_WeightGrad_Utb, Read::Utb, kWeightGrad);
TEXEL_BENCH(BM_TexelLoads_WeightGrad_UtbVec4, Read::UtbVec4, kWeightGrad);
TEXEL_BENCH(BM_TexelLoads_WeightGrad_Stb, Read::Stb, kWeightGrad);

// ---- The generated kernels of the MLP step (DEBUG=4 output saved in bench/texel_loads/), with
// their readonly storage buffers rewritten into texel buffers. Vector loads (dataNxW.v[i]) become
// W texelFetches of the R32_SFLOAT view (Read::Utb) or one fetch of an RW32_SFLOAT view bound at
// binding 16 + N (Read::UtbVec4).

std::string read_text(const std::string& name) {
  std::ifstream in(std::string(VKG_BENCH_SOURCE_DIR) + "/texel_loads/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  if (ss.str().empty()) throw std::runtime_error("cannot read " + name);
  return ss.str();
}

struct Rewritten {
  std::string glsl;
  int buffers = 0;                   // bindings 0..buffers-1
  std::map<int, int> vector_widths;  // readonly buffer -> width of its vector view (texel vec mode)
};

Rewritten rewrite(const std::string& glsl, Read read) {
  Rewritten r;
  const std::regex decl(
      R"(layout\(std430, set = 0, binding = (\d+)\) (readonly )?buffer Data\d+(x(\d))? \{ \w+ v\[\]; \} \w+;\n)");
  std::string out;
  std::smatch m;
  std::string rest = glsl;
  std::map<int, bool> readonly;
  while (std::regex_search(rest, m, decl)) {
    out += m.prefix();
    const int b = std::stoi(m[1]);
    r.buffers = std::max(r.buffers, b + 1);
    readonly[b] = m[2].matched;
    const bool vec = m[3].matched;
    if (read == Read::Ssbo || !m[2].matched) {
      out += m.str();
    } else if (!vec) {
      out += "layout(set = 0, binding = " + std::to_string(b) + ") uniform samplerBuffer data" +
             std::to_string(b) + ";\n";
    } else if (read == Read::UtbVec4) {
      r.vector_widths[b] = std::stoi(m[4]);
      out += "layout(set = 0, binding = " + std::to_string(16 + b) +
             ") uniform samplerBuffer data" + std::to_string(b) + "x" + m[4].str() + ";\n";
    }
    rest = m.suffix();
  }
  out += rest;
  if (read == Read::Ssbo) {
    r.glsl = out;
    return r;
  }
  // Loads: dataN.v[E] and dataNxW.v[E] of readonly buffers (E has no brackets in these kernels).
  const std::regex load(R"(data(\d+)(x(\d))?\.v\[([^\]]*)\])");
  std::string done;
  rest = out;
  while (std::regex_search(rest, m, load)) {
    done += m.prefix();
    const int b = std::stoi(m[1]);
    const std::string e = m[4];
    if (!readonly[b]) {
      done += m.str();
    } else if (!m[2].matched) {
      done += "texelFetch(data" + m[1].str() + ", " + e + ").x";
    } else if (read == Read::UtbVec4) {
      done += "texelFetch(data" + m[1].str() + "x" + m[3].str() + ", " + e + ")." +
              std::string("xyzw").substr(0, std::stoi(m[3]));
    } else {
      const int w = std::stoi(m[3]);
      done += "vec" + m[3].str() + "(";
      for (int i = 0; i < w; ++i)
        done += (i ? ", " : "") + std::string("texelFetch(data") + m[1].str() + ", (" + e + ")*" +
                m[3].str() + "+" + std::to_string(i) + ").x";
      done += ")";
    }
    rest = m.suffix();
  }
  r.glsl = done + rest;
  return r;
}

VkFormat float_format(int width) {
  switch (width) {
    case 2:
      return VK_FORMAT_R32G32_SFLOAT;
    case 4:
      return VK_FORMAT_R32G32B32A32_SFLOAT;
    default:
      return VK_FORMAT_R32_SFLOAT;
  }
}

void generated_bench(benchmark::State& state, const char* file, Read read) {
  VkBench& bench = vk_bench();
  VkDevice dev = bench.rt.device.get();
  const Rewritten k = rewrite(read_text(file), read);
  constexpr uint32_t kFloats = 128 * 784;  // every operand of these kernels fits
  std::vector<vk::Buffer> bufs;
  std::vector<float> host(kFloats);
  for (int i = 0; i < k.buffers; ++i) {
    bufs.push_back(bench.rt.allocator.allocate(kFloats * 4));
    for (uint32_t j = 0; j < kFloats; ++j) host[j] = float(int((j * 7 + i) % 11) - 5) * 0.125f;
    bench.rt.transfer.upload(bufs.back(), std::as_bytes(std::span(host)));
  }
  Kernel kn;
  kn.dev = dev;
  std::vector<VkDescriptorSetLayoutBinding> bindings;
  std::vector<VkWriteDescriptorSet> writes;
  std::vector<VkDescriptorBufferInfo> infos(k.buffers);
  kn.views.reserve(64);
  auto add_view = [&](int b, VkFormat f, uint32_t binding) {
    auto v = vk::structure<VkBufferViewCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO);
    v.buffer = bufs[b].handle();
    v.offset = bufs[b].offset();
    v.range = kFloats * 4;
    v.format = f;
    VkBufferView view;
    vk::check(vkCreateBufferView(dev, &v, nullptr, &view), "buffer view");
    kn.views.push_back(view);
    bindings.push_back({binding, VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, 1,
                        VK_SHADER_STAGE_COMPUTE_BIT, nullptr});
    auto w = vk::structure<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
    w.dstBinding = binding;
    w.descriptorCount = 1;
    w.descriptorType = VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
    w.pTexelBufferView = &kn.views.back();
    writes.push_back(w);
  };
  for (int b = 0; b < k.buffers; ++b) {
    const bool texel = read != Read::Ssbo && b > 0;  // binding 0 is the output in these kernels
    if (texel) {
      add_view(b, VK_FORMAT_R32_SFLOAT, b);
      if (k.vector_widths.count(b)) add_view(b, float_format(k.vector_widths.at(b)), 16 + b);
      continue;
    }
    infos[b] = {bufs[b].handle(), bufs[b].offset(), kFloats * 4};
    bindings.push_back(
        {uint32_t(b), VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr});
    auto w = vk::structure<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
    w.dstBinding = uint32_t(b);
    w.descriptorCount = 1;
    w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    w.pBufferInfo = &infos[b];
    writes.push_back(w);
  }
  auto dsl_info = vk::structure<VkDescriptorSetLayoutCreateInfo>(
      VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO);
  dsl_info.bindingCount = uint32_t(bindings.size());
  dsl_info.pBindings = bindings.data();
  VkDescriptorSetLayout dsl;
  vk::check(vkCreateDescriptorSetLayout(dev, &dsl_info, nullptr, &dsl), "layout");
  kn.dsl = vk::UniqueDescriptorSetLayout(dev, dsl);
  auto pl_info =
      vk::structure<VkPipelineLayoutCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO);
  pl_info.setLayoutCount = 1;
  pl_info.pSetLayouts = &dsl;
  VkPipelineLayout pl;
  vk::check(vkCreatePipelineLayout(dev, &pl_info, nullptr, &pl), "pipeline layout");
  kn.pl = vk::UniquePipelineLayout(dev, pl);
  SpirvCompileOptions opts;
  opts.disk_cache = false;
  const std::vector<uint32_t> spirv = compile_glsl(k.glsl, opts);
  auto sm_info =
      vk::structure<VkShaderModuleCreateInfo>(VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO);
  sm_info.codeSize = spirv.size() * 4;
  sm_info.pCode = spirv.data();
  VkShaderModule sm;
  vk::check(vkCreateShaderModule(dev, &sm_info, nullptr, &sm), "module");
  kn.sm = vk::UniqueShaderModule(dev, sm);
  auto cp =
      vk::structure<VkComputePipelineCreateInfo>(VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO);
  cp.stage = vk::structure<VkPipelineShaderStageCreateInfo>(
      VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO);
  cp.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  cp.stage.module = sm;
  cp.stage.pName = "main";
  cp.layout = pl;
  VkPipeline pipe;
  vk::check(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &cp, nullptr, &pipe), "pipeline");
  kn.pipe = vk::UniquePipeline(dev, pipe);
  VkDescriptorPoolSize sizes[2] = {{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 16},
                                   {VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, 32}};
  auto dp_info =
      vk::structure<VkDescriptorPoolCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO);
  dp_info.maxSets = 1;
  dp_info.poolSizeCount = 2;
  dp_info.pPoolSizes = sizes;
  VkDescriptorPool dp;
  vk::check(vkCreateDescriptorPool(dev, &dp_info, nullptr, &dp), "pool");
  kn.pool = vk::UniqueDescriptorPool(dev, dp);
  auto ds_info =
      vk::structure<VkDescriptorSetAllocateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO);
  ds_info.descriptorPool = dp;
  ds_info.descriptorSetCount = 1;
  ds_info.pSetLayouts = &dsl;
  vk::check(vkAllocateDescriptorSets(dev, &ds_info, &kn.set), "set");
  for (VkWriteDescriptorSet& w : writes) w.dstSet = kn.set;
  vkUpdateDescriptorSets(dev, uint32_t(writes.size()), writes.data(), 0, nullptr);

  // Workgroup count: the kernels name it in a comment, `gl_WorkGroupID.x);  /* 16 */`.
  std::smatch m;
  std::regex_search(k.glsl, m, std::regex(R"(gl_WorkGroupID\.x\);  /\* (\d+) \*/)"));
  const uint32_t groups = uint32_t(std::stoul(m[1]));

  time_dispatches(state, bench, kn, groups, 1);

  // Every variant must write the SSBO variant's bits: same arithmetic, only the loads differ.
  std::vector<uint32_t> got(kFloats);
  bench.rt.transfer.download(bufs[0], std::as_writable_bytes(std::span(got)));
  static std::map<std::string, std::vector<uint32_t>> reference;
  if (read == Read::Ssbo)
    reference[file] = got;
  else if (reference.count(file) && reference[file] != got)
    state.SkipWithError("output bits differ from the SSBO variant's");
}

#define GENERATED_BENCH(name, file, read)                            \
  void name(benchmark::State& s) { generated_bench(s, file, read); } \
  BENCHMARK(name)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond)

GENERATED_BENCH(BM_TexelLoads_GenForward_Ssbo, "mlp_forward.comp", Read::Ssbo);
GENERATED_BENCH(BM_TexelLoads_GenForward_Utb, "mlp_forward.comp", Read::Utb);
GENERATED_BENCH(BM_TexelLoads_GenForward_UtbVec, "mlp_forward.comp", Read::UtbVec4);
GENERATED_BENCH(BM_TexelLoads_GenWeightGrad_Ssbo, "mlp_weight_grad.comp", Read::Ssbo);
GENERATED_BENCH(BM_TexelLoads_GenWeightGrad_Utb, "mlp_weight_grad.comp", Read::Utb);
GENERATED_BENCH(BM_TexelLoads_GenWeightGrad_UtbVec, "mlp_weight_grad.comp", Read::UtbVec4);
// Adam's update of the 784x128 weight, whose m, v and weight the kernel reads and writes: read
// through storage buffers (adam_ssbo.comp) or through texel views of copies (adam_texel.comp,
// as GlslTarget::texel_loads_written reads them; a copy times the same as an alias).
GENERATED_BENCH(BM_TexelLoads_GenAdam_Ssbo, "adam_ssbo.comp", Read::UtbVec4);
GENERATED_BENCH(BM_TexelLoads_GenAdam_Texel, "adam_texel.comp", Read::UtbVec4);

}  // namespace
}  // namespace vkg::bench
