// GPU timestamps around dispatches, for per-kernel profiling (DEBUG=2). One Timestamps object
// belongs to one command buffer of a Queue and is reused with it: its query pools grow to the
// most dispatches a submission has held and are reset, not recreated, on reuse.
#pragma once
#include <vulkan/vulkan.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <vkgrad/vk/handle.hpp>

namespace vkg::vk {

class Device;

// One timed command: its label (the program's name unless the caller gave one) and how long the
// GPU spent on it.
struct KernelTime {
  std::string label;
  double ns = 0;
};

class Timestamps {
 public:
  explicit Timestamps(Device& device);

  // Brackets one command in `cmd`. Every begin() is followed by its end() before the next begin().
  void begin(VkCommandBuffer cmd, std::string_view label);
  void end(VkCommandBuffer cmd);
  bool empty() const { return labels_.empty(); }

  // After the command buffer's submission has completed: appends one record per bracketed
  // command, in recording order, and forgets them so the object can be reused, unless
  // keep_labels (a command buffer submitted again, whose next run fills the same queries).
  void collect(std::vector<KernelTime>& out, bool keep_labels = false);

 private:
  static constexpr uint32_t kPairsPerPool = 256;

  Device& device_;
  std::vector<UniqueQueryPool> pools_;
  std::vector<std::string> labels_;  // one per bracketed command, since the last collect()
  std::vector<uint64_t> scratch_;
};

}  // namespace vkg::vk
