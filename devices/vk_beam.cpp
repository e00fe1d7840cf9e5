#include <vkgrad/devices/vk_beam.hpp>
#include <vkgrad/devices/vk_target.hpp>

#include <algorithm>

#include <vkgrad/codegen/glsl_launch.hpp>
#include <vkgrad/codegen/glsl_renderer.hpp>
#include <vkgrad/codegen/spirv_compiler.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/vk/program.hpp>

namespace vkg {

namespace {

struct VkCandidate final : BeamCandidate {
  Program program;
  ArgLayout layout;
  std::array<uint32_t, 3> dims{};
  std::unique_ptr<vk::Program> pipeline;
};

}  // namespace

VkBeamDevice::VkBeamDevice(vk::Runtime& rt, const GlslTarget& target, std::string device_key,
                           const std::vector<uint64_t>& buffer_bytes)
    : rt_(rt),
      target_(target),
      device_key_(std::move(device_key)),
      queue_(rt.device, rt.allocator, vk::QueueOptions{/*timing=*/true}) {
  if (!queue_.timing()) throw Error("BEAM needs GPU timestamps, which this Vulkan device lacks");
  for (uint64_t bytes : buffer_bytes) {
    scratch_.push_back(rt_.allocator.allocate(std::max<uint64_t>(bytes, 4)));
    // Zeros: garbage could hold nan or denormals, which run at other speeds on some devices.
    queue_.fill(scratch_.back(), 0);
  }
  queue_.finish();
  queue_.take_timings();
}

VkBeamDevice::~VkBeamDevice() { queue_.finish(); }

std::unique_ptr<BeamCandidate> VkBeamDevice::compile(const Program& program) {
  auto c = std::make_unique<VkCandidate>();
  c->program = program;
  const std::string glsl = render_glsl(program, target_);
  c->layout = arg_layout(program, target_);
  c->dims = launch_dims(program, target_);
  SpirvCompileOptions opts;
  opts.device_key = device_key_;
  opts.name = program.name;
  // Most candidates lose: keep them out of the SPIR-V cache (the winner is compiled again,
  // and cached, when the kernel runs).
  opts.disk_cache = false;
  const std::vector<uint32_t> spirv = compile_glsl(glsl, opts);
  c->pipeline =
      std::make_unique<vk::Program>(rt_.device, program.name, spirv, c->layout.push_constant_bytes,
                                    bindings_of(c->layout, program.buffers.size()));
  c->pipeline->pipeline();  // the driver's compile, here on the compile threads, not in timing
  return c;
}

double VkBeamDevice::run_ns(BeamCandidate& candidate) {
  auto& c = static_cast<VkCandidate&>(candidate);
  std::vector<uint64_t> addresses;
  std::vector<vk::BufferUse> uses;
  for (size_t slot = 0; slot < scratch_.size(); ++slot) {
    addresses.push_back(scratch_[slot].address());
    const bool written = slot < c.program.buffers.size() && c.program.buffers[slot].written;
    uses.push_back({&scratch_[slot], written ? vk::Access::ReadWrite : vk::Access::Read});
  }
  std::vector<std::byte> args = pack_args(c.program, c.layout, addresses);
  if (c.layout.spilled) args = pack_spill_address(queue_.spill(args));
  queue_.dispatch(*c.pipeline, vk::Groups{c.dims[0], c.dims[1], c.dims[2]}, args, uses,
                  c.program.name);
  queue_.finish();
  const std::vector<vk::KernelTime> times = queue_.take_timings();
  if (times.empty()) throw Error("BEAM: the device returned no timestamp for " + c.program.name);
  return times.back().ns;
}

}  // namespace vkg
