#include <vkgrad/vk/timeline.hpp>

#include <vkgrad/vk/check.hpp>
#include <vkgrad/vk/structure.hpp>

namespace vkg::vk {

Timeline::Timeline(VkDevice device, VkQueue queue, std::mutex* queue_mutex)
    : device_(device), queue_(queue), queue_mutex_(queue_mutex) {
  VkSemaphoreTypeCreateInfo type =
      structure<VkSemaphoreTypeCreateInfo>(VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO);
  type.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  type.initialValue = 0;
  VkSemaphoreCreateInfo info =
      structure<VkSemaphoreCreateInfo>(VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO);
  info.pNext = &type;
  VkSemaphore s;
  check(vkCreateSemaphore(device_, &info, nullptr, &s), "vkCreateSemaphore");
  semaphore_ = UniqueSemaphore(device_, s);
}

uint64_t Timeline::submit(VkCommandBuffer cmd, std::span<const VkSemaphoreSubmitInfo> waits) {
  VkCommandBufferSubmitInfo cb =
      structure<VkCommandBufferSubmitInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_SUBMIT_INFO);
  cb.commandBuffer = cmd;
  VkSemaphoreSubmitInfo signal =
      structure<VkSemaphoreSubmitInfo>(VK_STRUCTURE_TYPE_SEMAPHORE_SUBMIT_INFO);
  signal.semaphore = semaphore_.get();
  signal.stageMask = VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT;
  VkSubmitInfo2 submit = structure<VkSubmitInfo2>(VK_STRUCTURE_TYPE_SUBMIT_INFO_2);
  submit.commandBufferInfoCount = 1;
  submit.pCommandBufferInfos = &cb;
  submit.signalSemaphoreInfoCount = 1;
  submit.pSignalSemaphoreInfos = &signal;
  submit.waitSemaphoreInfoCount = uint32_t(waits.size());
  submit.pWaitSemaphoreInfos = waits.data();

  // The value is taken and submitted under one lock so the semaphore is signalled in increasing
  // order, as timeline semaphores require.
  std::lock_guard lock(submit_mutex_);
  std::unique_lock<std::mutex> queue_lock;
  if (queue_mutex_) queue_lock = std::unique_lock(*queue_mutex_);
  const uint64_t point = submitted_.load(std::memory_order_relaxed) + 1;
  signal.value = point;
  check(vkQueueSubmit2(queue_, 1, &submit, VK_NULL_HANDLE), "vkQueueSubmit2");
  submitted_.store(point, std::memory_order_release);
  return point;
}

void Timeline::signal(uint64_t value) {
  VkSemaphoreSignalInfo info =
      structure<VkSemaphoreSignalInfo>(VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO);
  info.semaphore = semaphore_.get();
  info.value = value;
  check(vkSignalSemaphore(device_, &info), "vkSignalSemaphore");
}

uint64_t Timeline::completed() {
  uint64_t value = 0;
  check(vkGetSemaphoreCounterValue(device_, semaphore_.get(), &value),
        "vkGetSemaphoreCounterValue");
  uint64_t seen = completed_.load(std::memory_order_relaxed);
  while (value > seen && !completed_.compare_exchange_weak(seen, value)) {
  }
  return value;
}

bool Timeline::wait(uint64_t point, uint64_t timeout_ns) {
  if (point <= completed_.load(std::memory_order_acquire) || point <= completed()) return true;
  host_waits_.fetch_add(1, std::memory_order_relaxed);
  VkSemaphore s = semaphore_.get();
  VkSemaphoreWaitInfo info = structure<VkSemaphoreWaitInfo>(VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO);
  info.semaphoreCount = 1;
  info.pSemaphores = &s;
  info.pValues = &point;
  if (check(vkWaitSemaphores(device_, &info, timeout_ns), "vkWaitSemaphores") == VK_TIMEOUT)
    return false;
  uint64_t seen = completed_.load(std::memory_order_relaxed);
  while (point > seen && !completed_.compare_exchange_weak(seen, point)) {
  }
  return true;
}

}  // namespace vkg::vk
