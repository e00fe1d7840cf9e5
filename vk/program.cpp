#include <vkgrad/vk/program.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include <vkgrad/core/error.hpp>
#include <vkgrad/vk/check.hpp>
#include <vkgrad/vk/device.hpp>
#include <vkgrad/vk/structure.hpp>

namespace vkg::vk {

namespace {

constexpr uint32_t kMagic = 0x07230203;
constexpr uint32_t kOpConstant = 43, kOpSpecConstant = 50, kOpExecutionMode = 16,
                   kOpExecutionModeId = 331;
constexpr uint32_t kModeLocalSize = 17, kModeLocalSizeId = 38;

}  // namespace

Groups Groups::cover(uint64_t count, const Limits& limits) {
  const uint64_t mx = limits.max_workgroup_count[0], my = limits.max_workgroup_count[1],
                 mz = limits.max_workgroup_count[2];
  Groups g;
  if (count == 0) return {0, 1, 1};
  g.x = static_cast<uint32_t>(std::min(count, mx));
  uint64_t rows = (count + g.x - 1) / g.x;
  g.y = static_cast<uint32_t>(std::min(rows, my));
  uint64_t planes = (rows + g.y - 1) / g.y;
  if (planes > mz)
    throw Error(fmt::format("{} workgroups do not fit a {} x {} x {} grid", count, mx, my, mz));
  g.z = static_cast<uint32_t>(planes);
  return g;
}

std::array<uint32_t, 3> spirv_local_size(std::span<const uint32_t> spirv) {
  if (spirv.size() < 5 || spirv[0] != kMagic) throw Error("not a SPIR-V module (bad magic number)");
  std::map<uint32_t, uint32_t> constants;  // result id -> value, for LocalSizeId
  std::array<uint32_t, 3> ids{}, size{};
  bool literal = false, by_id = false;
  for (size_t i = 5; i < spirv.size();) {
    const uint32_t count = spirv[i] >> 16, op = spirv[i] & 0xffff;
    if (count == 0 || i + count > spirv.size()) throw Error("truncated SPIR-V module");
    const uint32_t* w = &spirv[i];
    if ((op == kOpConstant || op == kOpSpecConstant) && count >= 4) constants[w[2]] = w[3];
    if (op == kOpExecutionMode && count >= 6 && w[2] == kModeLocalSize) {
      size = {w[3], w[4], w[5]};
      literal = true;
    }
    if (op == kOpExecutionModeId && count >= 6 && w[2] == kModeLocalSizeId) {
      ids = {w[3], w[4], w[5]};
      by_id = true;
    }
    i += count;
  }
  if (literal) return size;
  if (by_id) {
    for (int d = 0; d < 3; ++d) {
      auto it = constants.find(ids[d]);
      if (it == constants.end()) throw Error("SPIR-V LocalSizeId names no integer constant");
      size[d] = it->second;
    }
    return size;
  }
  throw Error("SPIR-V module declares no workgroup size (LocalSize)");
}

namespace {

std::vector<Binding> storage_bindings(uint32_t n) {
  std::vector<Binding> b;
  for (uint32_t i = 0; i < n; ++i) b.push_back({i, i, BindingKind::Storage});
  return b;
}

VkDescriptorType descriptor_type(BindingKind k) {
  return k == BindingKind::Storage ? VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
                                   : VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
}

}  // namespace

Program::Program(Device& device, std::string name, std::span<const uint32_t> spirv,
                 uint32_t push_constant_bytes, uint32_t bound_buffers)
    : Program(device, std::move(name), spirv, push_constant_bytes,
              storage_bindings(bound_buffers)) {}

Program::Program(Device& device, std::string name, std::span<const uint32_t> spirv,
                 uint32_t push_constant_bytes, std::vector<Binding> bindings)
    : device_(device),
      name_(std::move(name)),
      spirv_(spirv.begin(), spirv.end()),
      push_constant_bytes_(push_constant_bytes),
      bound_buffers_(0),
      bindings_(std::move(bindings)) {
  const Limits& l = device_.caps().limits;
  uint32_t storage = 0, texel = 0;
  for (const Binding& b : bindings_) {
    bound_buffers_ = std::max(bound_buffers_, b.use + 1);
    storage += b.kind == BindingKind::Storage;
    texel += b.kind != BindingKind::Storage;
  }
  try {
    local_size_ = spirv_local_size(spirv_);
  } catch (const Error& e) {
    throw Error(fmt::format("program '{}': {}", name_, e.what()));
  }
  const uint64_t invocations = uint64_t(local_size_[0]) * local_size_[1] * local_size_[2];
  for (int d = 0; d < 3; ++d)
    if (local_size_[d] == 0 || local_size_[d] > l.max_workgroup_size[d] ||
        invocations > l.max_workgroup_invocations)
      throw Error(fmt::format(
          "program '{}': workgroup size {} x {} x {} exceeds the device's limits ({} x {} x {}, "
          "{} invocations)",
          name_, local_size_[0], local_size_[1], local_size_[2], l.max_workgroup_size[0],
          l.max_workgroup_size[1], l.max_workgroup_size[2], l.max_workgroup_invocations));
  if (push_constant_bytes_ % 4 != 0)
    throw Error(fmt::format("program '{}': push constants must be a multiple of 4 bytes, not {}",
                            name_, push_constant_bytes_));
  if (push_constant_bytes_ > l.max_push_constants_size)
    throw Error(fmt::format(
        "program '{}': {} bytes of push constants exceed the device's {} (maxPushConstantsSize); "
        "pass the arguments in a buffer from Queue::spill and push its address",
        name_, push_constant_bytes_, l.max_push_constants_size));
  if (bindings_.size() > l.max_push_descriptors || storage > l.max_storage_buffers_per_stage)
    throw Error(fmt::format(
        "program '{}': {} descriptors ({} storage buffers) bound by push descriptor exceed the "
        "device's {} (push descriptors) or {} (storage buffers per stage); pass device addresses "
        "instead",
        name_, bindings_.size(), storage, l.max_push_descriptors, l.max_storage_buffers_per_stage));
  // Uniform texel buffers are sampled images to the descriptor limits (codegen's arg_layout keeps
  // under max_texel_descriptors, which is this limit).
  if (texel > l.max_sampled_images_per_stage)
    throw Error(fmt::format(
        "program '{}': {} uniform texel buffers exceed the device's {} sampled images per stage "
        "(maxPerStageDescriptorSampledImages, maxDescriptorSetSampledImages); read the rest as "
        "storage buffers",
        name_, texel, l.max_sampled_images_per_stage));
}

Program::~Program() {
  if (!created_) return;
  try {
    device_.timeline().wait_all();
  } catch (...) {
  }
}

void Program::create() const {
  VkDevice dev = device_.get();
  UniqueDescriptorSetLayout owned_set_layout;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  if (!bindings_.empty()) {
    std::vector<VkDescriptorSetLayoutBinding> bindings;
    for (const Binding& b : bindings_)
      bindings.push_back(
          {b.binding, descriptor_type(b.kind), 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr});
    VkDescriptorSetLayoutCreateInfo info = structure<VkDescriptorSetLayoutCreateInfo>(
        VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO);
    info.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
    info.bindingCount = uint32_t(bindings.size());
    info.pBindings = bindings.data();
    check(vkCreateDescriptorSetLayout(dev, &info, nullptr, &set_layout),
          "vkCreateDescriptorSetLayout");
    owned_set_layout = UniqueDescriptorSetLayout(dev, set_layout);
  }
  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_constant_bytes_};
  VkPipelineLayoutCreateInfo layout =
      structure<VkPipelineLayoutCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO);
  layout.pushConstantRangeCount = push_constant_bytes_ ? 1 : 0;
  layout.pPushConstantRanges = &range;
  layout.setLayoutCount = set_layout ? 1 : 0;
  layout.pSetLayouts = &set_layout;
  VkPipelineLayout pl;
  check(vkCreatePipelineLayout(dev, &layout, nullptr, &pl), "vkCreatePipelineLayout");
  UniquePipelineLayout owned_layout(dev, pl);

  VkShaderModuleCreateInfo module =
      structure<VkShaderModuleCreateInfo>(VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO);
  module.codeSize = spirv_.size() * sizeof(uint32_t);
  module.pCode = spirv_.data();
  VkShaderModule sm;
  check(vkCreateShaderModule(dev, &module, nullptr, &sm), "vkCreateShaderModule");
  UniqueShaderModule owned_module(dev, sm);  // not needed once the pipeline exists

  VkComputePipelineCreateInfo info =
      structure<VkComputePipelineCreateInfo>(VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO);
  info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = sm;
  info.stage.pName = "main";
  info.layout = pl;
  VkPipeline p;
  VkResult r = vkCreateComputePipelines(dev, device_.pipeline_cache().get(), 1, &info, nullptr, &p);
  if (r < 0)
    throw_result(r, fmt::format("vkCreateComputePipelines for program '{}'", name_).c_str());
  set_layout_ = std::move(owned_set_layout);
  layout_ = std::move(owned_layout);
  pipeline_ = UniquePipeline(dev, p);
  created_ = true;
}

VkPipeline Program::pipeline() const {
  std::call_once(once_, [this] { create(); });
  return pipeline_.get();
}

VkPipelineLayout Program::layout() const {
  std::call_once(once_, [this] { create(); });
  return layout_.get();
}

}  // namespace vkg::vk
