// Which queue family copies between host and device memory run on. A discrete GPU has copy
// engines (DMA) exposed as a family with the transfer bit and no compute: copies submitted there
// run while kernels run on the compute family, and timeline semaphores order the two (an upload
// signals a point that the next kernels wait for; a download waits for the kernels' point).
// Lavapipe, integrated GPUs and most mobile ones have a single family: everything then runs on the
// compute queue, in submission order.
#pragma once
#include <vulkan/vulkan.h>

#include <span>

namespace vkg::vk {

// The family for copies, other than `compute_family`, or -1 when the device has none and copies
// share the compute queue. A transfer-only family (transfer bit, neither compute nor graphics: a
// DMA engine) is preferred over one that has graphics but no compute; a family with compute is
// never chosen (it would be a second compute engine, not a copy engine), nor one with no queues.
// The sparse-binding and protected bits do not matter.
int choose_transfer_family(std::span<const VkQueueFamilyProperties> families, int compute_family);

}  // namespace vkg::vk
