// BEAM search's view of a Vulkan device (codegen/beam.hpp's BeamDevice): compiles a candidate
// program all the way to a pipeline (render, shaderc, the driver's pipeline compile; safe on
// several threads at once) and times one run of it with GPU timestamps on scratch buffers of the
// kernel's sizes, zero-filled, so that the search never touches a tensor's memory.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <vkgrad/codegen/beam.hpp>
#include <vkgrad/codegen/glsl_target.hpp>
#include <vkgrad/vk/buffer.hpp>
#include <vkgrad/vk/queue.hpp>
#include <vkgrad/vk/runtime.hpp>

namespace vkg {

class VkBeamDevice final : public BeamDevice {
 public:
  // `buffer_bytes[slot]`: the size of the kernel's buffer at that slot. `device_key` keeps the
  // SPIR-V apart from other devices' as the adapter's own compiles do.
  VkBeamDevice(vk::Runtime& rt, const GlslTarget& target, std::string device_key,
               const std::vector<uint64_t>& buffer_bytes);
  ~VkBeamDevice() override;

  std::unique_ptr<BeamCandidate> compile(const Program& program) override;
  double run_ns(BeamCandidate& candidate) override;

 private:
  vk::Runtime& rt_;
  GlslTarget target_;
  std::string device_key_;
  vk::Queue queue_;  // its own, with timestamps on, so the device's queue keeps its timings
  std::vector<vk::Buffer> scratch_;
};

}  // namespace vkg
