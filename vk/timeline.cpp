#include <vkgrad/vk/timeline.hpp>

#include <algorithm>
#include <chrono>

#include <vkgrad/vk/check.hpp>
#include <vkgrad/vk/structure.hpp>

namespace vkg::vk {

uint64_t HostSignals::note_waits(std::span<const VkSemaphoreSubmitInfo> waits) {
  for (const VkSemaphoreSubmitInfo& w : waits) {
    if (!is_semaphore(w.semaphore)) continue;
    uint64_t seen = waited_.load(std::memory_order_relaxed);
    while (w.value > seen && !waited_.compare_exchange_weak(seen, w.value)) {
    }
  }
  return waited_.load(std::memory_order_relaxed);
}

void HostSignals::signal(VkDevice device, uint64_t value) {
  {
    std::lock_guard queries(query_mutex_);
    VkSemaphoreSignalInfo info =
        structure<VkSemaphoreSignalInfo>(VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO);
    info.semaphore = semaphore_;
    info.value = value;
    check(vkSignalSemaphore(device, &info), "vkSignalSemaphore");
  }
  {
    std::lock_guard lock(mu_);
    signalled_ = std::max(signalled_, value);
  }
  signalled_cv_.notify_all();
}

bool HostSignals::wait_signalled(uint64_t value, uint64_t timeout_ns) {
  std::unique_lock lock(mu_);
  const auto reached = [&] { return signalled_ >= value; };
  if (timeout_ns == UINT64_MAX) {
    signalled_cv_.wait(lock, reached);
    return true;
  }
  return signalled_cv_.wait_for(lock, std::chrono::nanoseconds(timeout_ns), reached);
}

Timeline::Timeline(VkDevice device, VkQueue queue, std::mutex* queue_mutex,
                   HostSignals* host_signals)
    : device_(device), queue_(queue), queue_mutex_(queue_mutex), host_signals_(host_signals) {
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
  if (host_signals_ && queue_ == VK_NULL_HANDLE) host_signals_->set_semaphore(s);
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
  if (host_signals_) {
    const uint64_t bridge = host_signals_->note_waits(waits);
    if (bridge > (bridge_values_.empty() ? 0 : bridge_values_.back().second))
      bridge_values_.emplace_back(point, bridge);
  }
  return point;
}

uint64_t Timeline::bridge_value_before(uint64_t point) {
  std::lock_guard lock(submit_mutex_);
  // Entries of completed points only matter as the floor of later ones: keep the newest of them.
  const uint64_t done = completed_.load(std::memory_order_acquire);
  while (bridge_values_.size() > 1 && bridge_values_[1].first <= done) bridge_values_.pop_front();
  uint64_t value = 0;
  for (const auto& [p, v] : bridge_values_) {
    if (p > point) break;
    value = v;
  }
  return value;
}

void Timeline::signal(uint64_t value) {
  if (host_signals_) {
    host_signals_->signal(device_, value);
    return;
  }
  VkSemaphoreSignalInfo info =
      structure<VkSemaphoreSignalInfo>(VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO);
  info.semaphore = semaphore_.get();
  info.value = value;
  check(vkSignalSemaphore(device_, &info), "vkSignalSemaphore");
}

uint64_t Timeline::completed() {
  uint64_t value = 0;
  {
    std::unique_lock<std::mutex> queries;
    if (host_signals_) queries = std::unique_lock(host_signals_->query_mutex());
    check(vkGetSemaphoreCounterValue(device_, semaphore_.get(), &value),
          "vkGetSemaphoreCounterValue");
  }
  uint64_t seen = completed_.load(std::memory_order_relaxed);
  while (value > seen && !completed_.compare_exchange_weak(seen, value)) {
  }
  return value;
}

bool Timeline::wait(uint64_t point, uint64_t timeout_ns) {
  if (point <= completed_.load(std::memory_order_acquire) || point <= completed()) return true;
  host_waits_.fetch_add(1, std::memory_order_relaxed);
  if (host_signals_ && queue_ == VK_NULL_HANDLE) {
    // The bridge: its values come from the host, which knows them without asking the driver
    // (and a vkWaitSemaphores of it is the layer's deadlock itself).
    if (!host_signals_->wait_signalled(point, timeout_ns)) return false;
    uint64_t seen = completed_.load(std::memory_order_relaxed);
    while (point > seen && !completed_.compare_exchange_weak(seen, point)) {
    }
    return true;
  }
  if (host_signals_) {
    const uint64_t bridge = bridge_value_before(point);
    if (bridge && !host_signals_->wait_signalled(bridge, timeout_ns)) return false;
  }
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
