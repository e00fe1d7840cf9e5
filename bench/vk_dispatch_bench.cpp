// What a dispatch costs: one empty dispatch recorded, submitted and waited for; the per-dispatch
// cost when 1000 are batched into one submission; and the streaming elementwise add of 16 Mi floats
// (vec4 loads, 256-wide workgroups) that generated kernels are held to, in GB/s moved.
#include <benchmark/benchmark.h>

#include <vector>

#include <vkgrad/shaders/embedded.hpp>
#include <vkgrad/vk/args.hpp>
#include <vkgrad/vk/check.hpp>
#include <vkgrad/vk/handle.hpp>
#include <vkgrad/vk/queue.hpp>
#include <vkgrad/vk/structure.hpp>

#include "vk_bench_runtime.hpp"

namespace vkg::bench {
namespace {

void BM_EmptyDispatchSubmitWait(benchmark::State& state) {
  VkBench& b = vk_bench();
  vk::Program empty(b.rt.device, "empty", shaders::get("empty").spirv, 0);
  vk::Queue q(b.rt.device, b.rt.allocator);
  for (auto _ : state) {
    q.dispatch(empty, {1}, {}, std::span<const vk::BufferUse>());
    q.finish();
  }
  state.counters["per_submit"] = benchmark::Counter(
      double(state.iterations()), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_EmptyDispatchSubmitWait)->UseRealTime();

void BM_BatchedEmptyDispatches(benchmark::State& state) {
  VkBench& b = vk_bench();
  vk::Program empty(b.rt.device, "empty", shaders::get("empty").spirv, 0);
  vk::Queue q(b.rt.device, b.rt.allocator);
  const int64_t n = state.range(0);
  for (auto _ : state) {
    for (int64_t i = 0; i < n; ++i) q.dispatch(empty, {1}, {}, std::span<const vk::BufferUse>());
    q.finish();
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["per_dispatch"] = benchmark::Counter(
      double(state.iterations() * n), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_BatchedEmptyDispatches)->Arg(1000)->UseRealTime();

// Records only (no submit): the host cost of one dispatch with three buffers and a barrier check.
void BM_RecordDispatch(benchmark::State& state) {
  VkBench& b = vk_bench();
  vk::Program add(b.rt.device, "add_f32", shaders::get("add_f32").spirv, 28);
  vk::Buffer x = b.rt.allocator.allocate(4096), y = b.rt.allocator.allocate(4096),
             z = b.rt.allocator.allocate(4096);
  vk::Queue q(b.rt.device, b.rt.allocator);
  const auto args = vk::ArgPack().address(x).address(y).address(z).u32(0);
  int64_t recorded = 0;
  for (auto _ : state) {
    q.dispatch(add, {1}, args.bytes(),
               {{&x, vk::Access::Read}, {&y, vk::Access::Read}, {&z, vk::Access::Write}});
    if (++recorded % 10000 == 0) {
      state.PauseTiming();
      q.finish();
      state.ResumeTiming();
    }
  }
  q.finish();
  state.counters["per_dispatch"] = benchmark::Counter(
      double(state.iterations()), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_RecordDispatch);

void add_bench(benchmark::State& state, int per_submit) {
  VkBench& b = vk_bench();
  const uint32_t n = 16u << 20;
  vk::Program add(b.rt.device, "add_f32", shaders::get("add_f32").spirv, 28);
  vk::Buffer x = b.rt.allocator.allocate(n * 4ull), y = b.rt.allocator.allocate(n * 4ull),
             z = b.rt.allocator.allocate(n * 4ull);
  std::vector<float> host(n, 1.5f);
  b.rt.transfer.upload(x, std::as_bytes(std::span(host)));
  b.rt.transfer.upload(y, std::as_bytes(std::span(host)));
  b.rt.transfer.upload(z, std::as_bytes(std::span(host)));
  vk::Queue q(b.rt.device, b.rt.allocator);
  const auto args = vk::ArgPack().address(x).address(y).address(z).u32(n);
  const vk::Groups groups = vk::Groups::cover(n / 4 / 256, b.rt.device.caps().limits);
  for (auto _ : state) {
    for (int i = 0; i < per_submit; ++i)
      q.dispatch(add, groups, args.bytes(),
                 {{&x, vk::Access::Read}, {&y, vk::Access::Read}, {&z, vk::Access::Write}});
    q.finish();
  }
  const double moved = 3.0 * n * 4 * per_submit;
  state.SetBytesProcessed(int64_t(double(state.iterations()) * moved));
}
void BM_AddF32_16Mi(benchmark::State& s) { add_bench(s, 1); }
void BM_AddF32_16Mi_10PerSubmit(benchmark::State& s) { add_bench(s, 10); }
BENCHMARK(BM_AddF32_16Mi)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AddF32_16Mi_10PerSubmit)->UseRealTime()->Unit(benchmark::kMillisecond);

// The same add with its buffers bound as storage-buffer descriptors: the runtime never does this;
// it is here to show, on each device, what binding by device address costs or saves.
void BM_AddF32_16Mi_DescriptorsForComparison(benchmark::State& state) {
  VkBench& b = vk_bench();
  VkDevice dev = b.rt.device.get();
  const uint32_t n = 16u << 20;
  vk::Buffer x = b.rt.allocator.allocate(n * 4ull), y = b.rt.allocator.allocate(n * 4ull),
             z = b.rt.allocator.allocate(n * 4ull);
  std::vector<float> host(n, 1.5f);
  for (vk::Buffer* buf : {&x, &y, &z}) b.rt.transfer.upload(*buf, std::as_bytes(std::span(host)));

  VkDescriptorSetLayoutBinding bindings[3];
  for (uint32_t i = 0; i < 3; ++i)
    bindings[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  auto dsl_info = vk::structure<VkDescriptorSetLayoutCreateInfo>(
      VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO);
  dsl_info.bindingCount = 3;
  dsl_info.pBindings = bindings;
  VkDescriptorSetLayout dsl;
  vk::check(vkCreateDescriptorSetLayout(dev, &dsl_info, nullptr, &dsl), "layout");
  vk::UniqueDescriptorSetLayout owned_dsl(dev, dsl);
  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, 4};
  auto pl_info =
      vk::structure<VkPipelineLayoutCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO);
  pl_info.setLayoutCount = 1;
  pl_info.pSetLayouts = &dsl;
  pl_info.pushConstantRangeCount = 1;
  pl_info.pPushConstantRanges = &range;
  VkPipelineLayout pl;
  vk::check(vkCreatePipelineLayout(dev, &pl_info, nullptr, &pl), "pipeline layout");
  vk::UniquePipelineLayout owned_pl(dev, pl);
  const auto spirv = shaders::get("add_f32_ssbo").spirv;
  auto sm_info =
      vk::structure<VkShaderModuleCreateInfo>(VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO);
  sm_info.codeSize = spirv.size_bytes();
  sm_info.pCode = spirv.data();
  VkShaderModule sm;
  vk::check(vkCreateShaderModule(dev, &sm_info, nullptr, &sm), "module");
  vk::UniqueShaderModule owned_sm(dev, sm);
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
  vk::UniquePipeline owned_pipe(dev, pipe);
  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 3};
  auto dp_info =
      vk::structure<VkDescriptorPoolCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO);
  dp_info.maxSets = 1;
  dp_info.poolSizeCount = 1;
  dp_info.pPoolSizes = &size;
  VkDescriptorPool dp;
  vk::check(vkCreateDescriptorPool(dev, &dp_info, nullptr, &dp), "pool");
  vk::UniqueDescriptorPool owned_dp(dev, dp);
  auto ds_info =
      vk::structure<VkDescriptorSetAllocateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO);
  ds_info.descriptorPool = dp;
  ds_info.descriptorSetCount = 1;
  ds_info.pSetLayouts = &dsl;
  VkDescriptorSet ds;
  vk::check(vkAllocateDescriptorSets(dev, &ds_info, &ds), "set");
  VkDescriptorBufferInfo infos[3] = {{x.handle(), x.offset(), n * 4ull},
                                     {y.handle(), y.offset(), n * 4ull},
                                     {z.handle(), z.offset(), n * 4ull}};
  auto write = vk::structure<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
  write.dstSet = ds;
  write.descriptorCount = 3;
  write.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
  write.pBufferInfo = infos;
  vkUpdateDescriptorSets(dev, 1, &write, 0, nullptr);
  auto pool_info =
      vk::structure<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
  pool_info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool_info.queueFamilyIndex = b.rt.device.queue_family();
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

  const vk::Groups groups = vk::Groups::cover(n / 4 / 256, b.rt.device.caps().limits);
  for (auto _ : state) {
    auto begin =
        vk::structure<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
    vk::check(vkBeginCommandBuffer(cmd, &begin), "begin");
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
    vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1, &ds, 0, nullptr);
    vkCmdPushConstants(cmd, pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &n);
    vkCmdDispatch(cmd, groups.x, groups.y, groups.z);
    vk::check(vkEndCommandBuffer(cmd), "end");
    b.rt.device.timeline().wait(b.rt.device.timeline().submit(cmd));
  }
  const double moved = 3.0 * n * 4;
  state.SetBytesProcessed(int64_t(double(state.iterations()) * moved));
}
BENCHMARK(BM_AddF32_16Mi_DescriptorsForComparison)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace vkg::bench
