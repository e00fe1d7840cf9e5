// The device's one VkQueue and the timeline semaphore that numbers every submission to it. Each
// submit signals the next value, so "has point N completed" is one counter compare, the host can
// wait for any point, and the allocator can tell when a freed buffer's last user has finished.
#pragma once
#include <vulkan/vulkan.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <utility>

#include <vkgrad/vk/handle.hpp>

namespace vkg::vk {

// The order between a device's one host-signalled timeline (the bridge that tells its queue that
// data from another device has arrived, signalled by a host thread) and the host's reads of its
// timelines' values. The Khronos validation layer of Debian bookworm (1.3.239, January 2023)
// records a vkWaitSemaphores or vkGetSemaphoreCounterValue that returned holding its lock, and
// waits there until its own state reaches the value; when that value depends on a vkSignalSemaphore
// whose driver call has returned on another thread but whose record waits for that lock, both
// wait 10 s and it reports UNASSIGNED-VkSemaphore-state-timeout ("most likely a validation bug":
// KhronosGroup/Vulkan-ValidationLayers#4968, fixed upstream by #6138 in July 2023). Only
// synchronization validation stalled: it takes that lock around every call (core validation's
// locks are finer). So a query runs only between two signals, never during one, and a wait for a
// point first waits, on the host, for the bridge's values that the submissions up to that point
// wait on to have been signalled. On one queue neither delays the point: it cannot complete before
// those values are signalled anyway.
class HostSignals {
 public:
  void set_semaphore(VkSemaphore s) { semaphore_ = s; }
  bool is_semaphore(VkSemaphore s) const { return s != VK_NULL_HANDLE && s == semaphore_; }
  // The highest bridge value a submission waits on so far, `waits` (one submission's) included.
  uint64_t note_waits(std::span<const VkSemaphoreSubmitInfo> waits);
  // vkSignalSemaphore of the bridge, with no query of the device's semaphores during it.
  void signal(VkDevice device, uint64_t value);
  // Blocks until the bridge's value `value` has been signalled (the call returned), or timeout_ns
  // passes (false then).
  bool wait_signalled(uint64_t value, uint64_t timeout_ns = UINT64_MAX);
  // Held around each query of a semaphore's value.
  std::mutex& query_mutex() { return query_mutex_; }

 private:
  VkSemaphore semaphore_ = VK_NULL_HANDLE;
  std::atomic<uint64_t> waited_{0};
  std::mutex query_mutex_;
  std::mutex mu_;
  std::condition_variable signalled_cv_;
  uint64_t signalled_ = 0;  // under mu_
};

class Timeline {
 public:
  // `queue_mutex`, where given, is held around each submit too: two timelines on one VkQueue
  // (VKG_TRANSFER_QUEUE_ON_COMPUTE, vk/device.hpp) must not submit to it at once.
  // `host_signals`, where given, orders this timeline's queries after the bridge's signals (the
  // device's HostSignals); a timeline without a queue and with it is that bridge.
  Timeline(VkDevice device, VkQueue queue, std::mutex* queue_mutex = nullptr,
           HostSignals* host_signals = nullptr);

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
  // The highest bridge value that any submission of the device made up to `point` waits on
  // (HostSignals): a wait on another timeline's point may depend on one of them.
  uint64_t bridge_value_before(uint64_t point);

  VkDevice device_;
  VkQueue queue_;
  std::mutex* queue_mutex_;
  HostSignals* host_signals_;
  UniqueSemaphore semaphore_;
  std::mutex submit_mutex_;
  // Under submit_mutex_: (point, bridge_value_before(point)) where that value grew; the oldest
  // dropped once completed.
  std::deque<std::pair<uint64_t, uint64_t>> bridge_values_;
  std::atomic<uint64_t> submitted_{0};
  std::atomic<uint64_t> completed_{0};
  std::atomic<uint64_t> host_waits_{0};
};

}  // namespace vkg::vk
