#include <vkgrad/vk/timestamps.hpp>

#include <algorithm>

#include <vkgrad/vk/check.hpp>
#include <vkgrad/vk/device.hpp>
#include <vkgrad/vk/structure.hpp>

namespace vkg::vk {

Timestamps::Timestamps(Device& device) : device_(device) {}

void Timestamps::begin(VkCommandBuffer cmd, std::string_view label) {
  const uint32_t pair = static_cast<uint32_t>(labels_.size());
  const uint32_t pool = pair / kPairsPerPool;
  if (pool == pools_.size()) {
    VkQueryPoolCreateInfo info =
        structure<VkQueryPoolCreateInfo>(VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO);
    info.queryType = VK_QUERY_TYPE_TIMESTAMP;
    info.queryCount = 2 * kPairsPerPool;
    VkQueryPool p;
    check(vkCreateQueryPool(device_.get(), &info, nullptr, &p), "vkCreateQueryPool");
    pools_.emplace_back(device_.get(), p);
  }
  // Queries must be reset before each use; doing it in the command buffer needs no host feature.
  if (pair % kPairsPerPool == 0) vkCmdResetQueryPool(cmd, pools_[pool].get(), 0, 2 * kPairsPerPool);
  labels_.emplace_back(label);
  // ALL_COMMANDS: the stamp is taken once everything before it has finished, so a command's
  // interval does not include the tail of the one before.
  vkCmdWriteTimestamp2(cmd, VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT, pools_[pool].get(),
                       2 * (pair % kPairsPerPool));
}

void Timestamps::end(VkCommandBuffer cmd) {
  const uint32_t pair = static_cast<uint32_t>(labels_.size()) - 1;
  vkCmdWriteTimestamp2(cmd, VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT,
                       pools_[pair / kPairsPerPool].get(), 2 * (pair % kPairsPerPool) + 1);
}

void Timestamps::collect(std::vector<KernelTime>& out, bool keep_labels) {
  const Limits& l = device_.caps().limits;
  const uint64_t mask =
      l.timestamp_valid_bits >= 64 ? ~0ull : ((1ull << l.timestamp_valid_bits) - 1);
  const uint32_t pairs = static_cast<uint32_t>(labels_.size());
  for (uint32_t first = 0; first < pairs; first += kPairsPerPool) {
    const uint32_t n = std::min(kPairsPerPool, pairs - first);
    scratch_.resize(2 * n);
    check(
        vkGetQueryPoolResults(device_.get(), pools_[first / kPairsPerPool].get(), 0, 2 * n,
                              scratch_.size() * sizeof(uint64_t), scratch_.data(), sizeof(uint64_t),
                              VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
        "vkGetQueryPoolResults");
    for (uint32_t i = 0; i < n; ++i) {
      const uint64_t ticks = (scratch_[2 * i + 1] - scratch_[2 * i]) & mask;  // survives wrap
      out.push_back({labels_[first + i], double(ticks) * l.timestamp_period});
    }
  }
  if (!keep_labels) labels_.clear();
}

}  // namespace vkg::vk
