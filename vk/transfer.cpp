#include <vkgrad/vk/transfer.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include <vkgrad/core/error.hpp>
#include <vkgrad/vk/allocator.hpp>
#include <vkgrad/vk/barriers.hpp>
#include <vkgrad/vk/check.hpp>
#include <vkgrad/vk/device.hpp>
#include <vkgrad/vk/structure.hpp>
#include <vkgrad/vk/timeline.hpp>

namespace vkg::vk {

namespace {

void check_range(const Transfer::Range& b, VkDeviceSize offset, size_t bytes, const char* what) {
  if (!b.handle) throw Error(fmt::format("{} with an empty Buffer", what));
  if (offset > b.size || bytes > b.size - offset)
    throw Error(fmt::format("{} of {} bytes at offset {} does not fit a buffer of {} bytes", what,
                            bytes, offset, b.size));
}

}  // namespace

Transfer::Transfer(Device& device, Allocator& allocator, const TransferOptions& options)
    : device_(device),
      timeline_(device.transfer_timeline() ? *device.transfer_timeline() : device.timeline()),
      allocator_(allocator),
      options_(options) {
  options_.staging_bytes = std::max<VkDeviceSize>(options_.staging_bytes / 512 * 512, 512);
  // 32 MiB held for the device's life would keep a tensor's worth of a full heap out of every
  // fill after the first read: memory running out takes it back.
  allocator_.add_reclaimer(this, [this] { release_staging(); });
}

void Transfer::release_staging() {
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock() || !staging_) return;
  try {
    for (const Slot& s : slots_) timeline_.wait(s.point);  // an upload may still read it
  } catch (...) {
    return;  // a lost device: keep it, as the destructor's wait would
  }
  staging_ = Buffer{};
}

Transfer::~Transfer() {
  allocator_.remove_reclaimer(this);
  try {
    for (const Slot& s : slots_) timeline_.wait(s.point);
    for (const Slot& s : queued_) timeline_.wait(s.point);
  } catch (...) {
  }
}

void Transfer::ensure_staging() {
  if (staging_) return;
  if (!pool_) create_pool();
  staging_ = allocator_.allocate(options_.staging_bytes, Usage::Staging);
}

void Transfer::create_pool() {
  VkCommandPoolCreateInfo info =
      structure<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
  info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  info.queueFamilyIndex =
      device_.transfer_timeline() ? device_.transfer_family() : device_.queue_family();
  VkCommandPool pool;
  check(vkCreateCommandPool(device_.get(), &info, nullptr, &pool), "vkCreateCommandPool");
  pool_ = UniqueCommandPool(device_.get(), pool);
  VkCommandBufferAllocateInfo alloc =
      structure<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
  alloc.commandPool = pool;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  for (Slot& s : slots_)
    check(vkAllocateCommandBuffers(device_.get(), &alloc, &s.cmd), "vkAllocateCommandBuffers");
}

uint64_t Transfer::compute_point(uint64_t after) {
  return std::min(after, device_.timeline().submitted());
}

bool Transfer::own_timeline() const { return &timeline_ != &device_.timeline(); }

void Transfer::record_copy(VkCommandBuffer cmd, VkBuffer src, VkDeviceSize src_offset, VkBuffer dst,
                           VkDeviceSize dst_offset, VkDeviceSize bytes, bool host_wrote) {
  VkCommandBufferBeginInfo begin =
      structure<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(vkBeginCommandBuffer(cmd, &begin), "vkBeginCommandBuffer");
  // A copy-engine queue supports transfer stages only; the semaphores order it with kernels.
  const bool own_queue = own_timeline();
  if (own_queue)
    record_barrier(cmd, host_wrote ? kCopyQueueStartAfterHost : kCopyQueueStart);
  else
    record_barrier(cmd, host_wrote ? kSubmissionStartAfterHost : kSubmissionStart);
  VkBufferCopy region{src_offset, dst_offset, bytes};
  vkCmdCopyBuffer(cmd, src, dst, 1, &region);
  record_barrier(cmd, own_queue ? kCopyQueueEnd : kSubmissionEnd);
  check(vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
}

uint64_t Transfer::queue_copy(Range src, VkDeviceSize src_offset, Range dst,
                              VkDeviceSize dst_offset, VkDeviceSize bytes,
                              std::span<const VkSemaphoreSubmitInfo> waits, bool host_wrote) {
  const Copy copy{src, src_offset, dst, dst_offset, bytes};
  std::vector<uint64_t> points;
  queue_copies(
      {&copy, 1},
      [waits](size_t) { return std::vector<VkSemaphoreSubmitInfo>(waits.begin(), waits.end()); },
      host_wrote, points);
  return points.back();
}

namespace {

// VKG_TEST_FAIL_QUEUE_COPY (transfer.hpp): the copy index at which `stage` ("record" or "submit")
// throws, or SIZE_MAX.
size_t test_failure_at(std::string_view stage) {
  const char* v = std::getenv("VKG_TEST_FAIL_QUEUE_COPY");
  if (!v) return SIZE_MAX;
  const std::string_view s(v);
  if (s.size() <= stage.size() + 1 || s.substr(0, stage.size()) != stage || s[stage.size()] != ':')
    return SIZE_MAX;
  return std::strtoull(v + stage.size() + 1, nullptr, 10);
}

}  // namespace

void Transfer::queue_copies(std::span<const Copy> copies,
                            const std::function<std::vector<VkSemaphoreSubmitInfo>(size_t)>& waits,
                            bool host_wrote, std::vector<uint64_t>& points) {
  for (const Copy& c : copies) {
    check_range(c.src, c.src_offset, c.bytes, "copy");
    check_range(c.dst, c.dst_offset, c.bytes, "copy");
    if (c.bytes == 0)
      throw Error("a queued copy of 0 bytes (internal: Vulkan copies at least one)");
  }
  const size_t fail_record = test_failure_at("record"), fail_submit = test_failure_at("submit");
  std::lock_guard lock(mutex_);
  if (!pool_) create_pool();
  std::vector<Slot> slots;
  slots.reserve(copies.size());
  // Unsubmitted slots go back to the front of the free list: their command buffers are reused.
  auto give_back = [&](size_t from) {
    for (size_t i = slots.size(); i-- > from;) {
      slots[i].point = 0;
      queued_.push_front(slots[i]);
    }
  };
  try {
    for (size_t i = 0; i < copies.size(); ++i) {
      Slot slot;
      if (!queued_.empty() && timeline_.done(queued_.front().point)) {
        slot = queued_.front();
        queued_.pop_front();
      } else {
        VkCommandBufferAllocateInfo alloc =
            structure<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
        alloc.commandPool = pool_.get();
        alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
        alloc.commandBufferCount = 1;
        check(vkAllocateCommandBuffers(device_.get(), &alloc, &slot.cmd),
              "vkAllocateCommandBuffers");
      }
      slots.push_back(slot);
      if (i == fail_record)
        throw OutOfMemory("recording a queued copy (VKG_TEST_FAIL_QUEUE_COPY, a test's failure)");
      const Copy& c = copies[i];
      record_copy(slot.cmd, c.src.handle, c.src.offset + c.src_offset, c.dst.handle,
                  c.dst.offset + c.dst_offset, c.bytes, host_wrote);
    }
  } catch (...) {
    give_back(0);
    throw;
  }
  for (size_t i = 0; i < slots.size(); ++i) {
    try {
      if (i == fail_submit)
        throw OutOfMemory("submitting a queued copy (VKG_TEST_FAIL_QUEUE_COPY, a test's failure)");
      slots[i].point = timeline_.submit(slots[i].cmd, waits(i));
    } catch (...) {
      give_back(i);
      throw;
    }
    queued_.push_back(slots[i]);
    points.push_back(slots[i].point);
  }
}

uint64_t Transfer::submit_copy(Slot& slot, VkBuffer src, VkDeviceSize src_offset, VkBuffer dst,
                               VkDeviceSize dst_offset, VkDeviceSize bytes, uint64_t after) {
  record_copy(slot.cmd, src, src_offset, dst, dst_offset, bytes, /*host_wrote=*/false);
  const bool own_queue = own_timeline();
  // On its own queue, a copy starts after the compute queue's point `after` (what writes a
  // download's source, or still reads an upload's destination).
  VkSemaphoreSubmitInfo wait =
      structure<VkSemaphoreSubmitInfo>(VK_STRUCTURE_TYPE_SEMAPHORE_SUBMIT_INFO);
  wait.semaphore = device_.timeline().semaphore();
  wait.value = after;
  wait.stageMask = VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT;
  slot.point =
      own_queue && after > 0 ? timeline_.submit(slot.cmd, {&wait, 1}) : timeline_.submit(slot.cmd);
  return slot.point;
}

Transfer::Pending Transfer::upload(const Buffer& dst, std::span<const std::byte> src,
                                   VkDeviceSize dst_offset, bool wait_for_queue, uint64_t after) {
  check_range(dst, dst_offset, src.size(), "upload");
  if (src.empty()) return {};
  std::lock_guard lock(mutex_);
  after = wait_for_queue ? compute_point(after) : 0;  // fresh memory: nothing submitted uses it
  if (dst.mapped()) {
    // Kernels submitted earlier may still read this memory: let them finish first.
    device_.timeline().wait(after);
    std::memcpy(dst.mapped() + dst_offset, src.data(), src.size());
    return {};
  }
  ensure_staging();
  const VkDeviceSize half = staging_.size() / 2;
  uint64_t last = 0;
  for (VkDeviceSize done = 0, i = 0; done < src.size(); done += half, ++i) {
    Slot& slot = slots_[i % 2];
    const VkDeviceSize n = std::min<VkDeviceSize>(half, src.size() - done);
    const VkDeviceSize at = (i % 2) * half;
    timeline_.wait(slot.point);  // the GPU has finished reading this half
    std::memcpy(staging_.mapped() + at, src.data() + done, n);
    last = submit_copy(slot, staging_.handle(), staging_.offset() + at, dst.handle(),
                       dst.offset() + dst_offset + done, n, after);
  }
  staged_bytes_ += src.size();
  if (wait_for_queue) {
    timeline_.wait(last);
    return {};
  }
  if (&timeline_ == &device_.timeline()) return {};  // later kernels follow it on the queue
  return {timeline_.semaphore(), last};
}

void Transfer::download(const Buffer& src, std::span<std::byte> dst, VkDeviceSize src_offset,
                        uint64_t after) {
  check_range(src, src_offset, dst.size(), "download");
  if (dst.empty()) return;
  std::lock_guard lock(mutex_);
  after = compute_point(after);
  if (src.mapped()) {
    device_.timeline().wait(after);  // the results of the submissions that wrote it
    std::memcpy(dst.data(), src.mapped() + src_offset, dst.size());
    return;
  }
  ensure_staging();
  const VkDeviceSize half = staging_.size() / 2;
  const VkDeviceSize chunks = (dst.size() + half - 1) / half;
  auto issue = [&](VkDeviceSize i) {
    // An upload that returned before its copies finished may still use this slot's command
    // buffer and staging half: both are reused only once it is done.
    timeline_.wait(slots_[i % 2].point);
    const VkDeviceSize n = std::min<VkDeviceSize>(half, dst.size() - i * half);
    submit_copy(slots_[i % 2], src.handle(), src.offset() + src_offset + i * half,
                staging_.handle(), staging_.offset() + (i % 2) * half, n, after);
  };
  // Keep both halves busy: while the host copies chunk i out, the GPU fills chunk i + 1.
  for (VkDeviceSize i = 0; i < std::min<VkDeviceSize>(chunks, 2); ++i) issue(i);
  for (VkDeviceSize i = 0; i < chunks; ++i) {
    const VkDeviceSize n = std::min<VkDeviceSize>(half, dst.size() - i * half);
    timeline_.wait(slots_[i % 2].point);
    std::memcpy(dst.data() + i * half, staging_.mapped() + (i % 2) * half, n);
    if (i + 2 < chunks) issue(i + 2);
  }
  staged_bytes_ += dst.size();
}

}  // namespace vkg::vk
