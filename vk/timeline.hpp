// The device's one VkQueue and the timeline semaphore that numbers every submission to it. Each
// submit signals the next value, so "has point N completed" is one counter compare, the host can
// wait for any point, and the allocator can tell when a freed buffer's last user has finished.
#pragma once
#include <vulkan/vulkan.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>

#include <vkgrad/vk/handle.hpp>

namespace vkg::vk {

class Timeline {
 public:
  // `queue_mutex`, where given, is held around each submit too: two timelines on one VkQueue
  // (VKG_TRANSFER_QUEUE_ON_COMPUTE, vk/device.hpp) must not submit to it at once.
  Timeline(VkDevice device, VkQueue queue, std::mutex* queue_mutex = nullptr);

  // Submits one command buffer; returns the point it signals when done. Its commands start once
  // every semaphore of `waits` has reached its value (another device's bridge, signalled by the
  // host). Thread-safe (VkQueue needs external synchronization; a mutex serializes submitters).
  uint64_t submit(VkCommandBuffer cmd, std::span<const VkSemaphoreSubmitInfo> waits = {});

  // The last point handed out by submit(); 0 before any.
  uint64_t submitted() const { return submitted_.load(std::memory_order_acquire); }
  // The last point the device has finished (reads the semaphore).
  uint64_t completed();
  // True once `point` has completed; cheap when it had already been seen complete.
  bool done(uint64_t point) {
    return point <= completed_.load(std::memory_order_acquire) || point <= completed();
  }
  // Blocks until `point` completes or timeout_ns passes (false then). VK_ERROR_DEVICE_LOST throws
  // vkg::DeviceLost.
  bool wait(uint64_t point, uint64_t timeout_ns = UINT64_MAX);
  void wait_all() { wait(submitted()); }
  // How many wait() calls found their point not yet complete and blocked the host.
  uint64_t host_waits() const { return host_waits_.load(std::memory_order_relaxed); }
  // Signals `value` from the host, for a timeline that a host thread drives (a bridge that tells
  // a queue that data from another device has arrived); values must increase.
  void signal(uint64_t value);

  VkSemaphore semaphore() const { return semaphore_.get(); }

 private:
  VkDevice device_;
  VkQueue queue_;
  std::mutex* queue_mutex_;
  UniqueSemaphore semaphore_;
  std::mutex submit_mutex_;
  std::atomic<uint64_t> submitted_{0};
  std::atomic<uint64_t> completed_{0};
  std::atomic<uint64_t> host_waits_{0};
};

}  // namespace vkg::vk
