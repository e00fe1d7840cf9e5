#include <vkgrad/vk/queue_families.hpp>

namespace vkg::vk {

namespace {
// VK_QUEUE_VIDEO_DECODE_BIT_KHR and VK_QUEUE_VIDEO_ENCODE_BIT_KHR, by value: older headers lack
// them.
constexpr VkQueueFlags kVideoDecodeBit = 0x20, kVideoEncodeBit = 0x40;
}  // namespace

int choose_transfer_family(std::span<const VkQueueFamilyProperties> families, int compute_family) {
  int best = -1, best_score = 0;
  for (size_t i = 0; i < families.size(); ++i) {
    const VkQueueFamilyProperties& f = families[i];
    if (int(i) == compute_family || f.queueCount == 0) continue;
    if (!(f.queueFlags & VK_QUEUE_TRANSFER_BIT) || (f.queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    // A video decode or encode engine may report transfer too, but copies are not its work
    // (a driver may run them slowly there, or not at all for our buffers).
    if (f.queueFlags & (kVideoDecodeBit | kVideoEncodeBit)) continue;
    const int score = (f.queueFlags & VK_QUEUE_GRAPHICS_BIT) ? 1 : 2;
    if (score > best_score) best = int(i), best_score = score;
  }
  return best;
}

}  // namespace vkg::vk
