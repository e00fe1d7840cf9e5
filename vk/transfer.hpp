// Uploads and downloads between host memory and Buffers. When the host maps the buffer (unified
// memory, or any staging buffer) a transfer is a memcpy; otherwise it goes through a reused
// staging area in two halves, so the host copies one chunk while the GPU copies the other.
// Both are synchronous: they see everything submitted before them and are done on return.
#pragma once
#include <vulkan/vulkan.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <span>
#include <vector>

#include <vkgrad/vk/buffer.hpp>
#include <vkgrad/vk/handle.hpp>
#include <vkgrad/vk/host_import.hpp>

namespace vkg::vk {

class Allocator;
class Device;
class Timeline;

struct TransferOptions {
  VkDeviceSize staging_bytes = 32ull << 20;  // the whole staging area; each half carries a chunk
};

class Transfer {
 public:
  // The bytes of a VkBuffer that a copy may touch: a Buffer's range of its block, or host memory
  // imported as a buffer (vk/host_import.hpp).
  struct Range {
    VkBuffer handle = VK_NULL_HANDLE;
    VkDeviceSize offset = 0, size = 0;  // in handle
    Range(const Buffer& b) : handle(b.handle()), offset(b.offset()), size(b.size()) {}
    Range(const HostImport& h) : handle(h.handle()), offset(h.offset()), size(h.size()) {}
  };
  Transfer(Device& device, Allocator& allocator, const TransferOptions& options = {});
  ~Transfer();
  Transfer(const Transfer&) = delete;
  Transfer& operator=(const Transfer&) = delete;

  // Copies src into dst starting at dst_offset; throws vkg::Error if it does not fit. With
  // `wait_for_queue`, it first waits for the compute queue's work up to point `after` (which may
  // still read dst's old contents: the last submission that used dst where the caller tracks it,
  // else everything submitted) and returns once the bytes are in place. Without it (dst is fresh
  // memory nothing submitted uses), nothing earlier is waited for: a mapped dst is written at
  // once, and staged chunks are copied by commands that later submissions follow in timeline
  // order.
  // On a device with a copy engine (queue_families.hpp) the staged copies run on its queue: an
  // upload that did not wait returns the point of its own timeline that work reading dst must
  // wait for (Queue::wait_before_next); otherwise {VK_NULL_HANDLE, 0}.
  struct Pending {
    VkSemaphore semaphore = VK_NULL_HANDLE;
    uint64_t value = 0;
  };
  static constexpr uint64_t kAllSubmitted = UINT64_MAX;
  Pending upload(const Buffer& dst, std::span<const std::byte> src, VkDeviceSize dst_offset = 0,
                 bool wait_for_queue = true, uint64_t after = kAllSubmitted);
  // Copies src's bytes from src_offset into dst, once the compute queue's work up to `after` (what
  // writes src) has completed. On a single queue a staged download still follows everything
  // submitted before it (queue order).
  void download(const Buffer& src, std::span<std::byte> dst, VkDeviceSize src_offset = 0,
                uint64_t after = kAllSubmitted);

  // Bytes moved through the staging area so far (tests check which path ran).
  uint64_t staged_bytes() const { return staged_bytes_; }

  // A copy between two buffers, submitted now to the copy engine's queue (the compute queue where
  // the device has none) and not waited for: a copy between devices' half on this device
  // (devices/vk_device_copies.cpp). It starts once every semaphore of `waits` has reached its
  // value (`host_wrote`: one of them is signalled by the host after it wrote `src`) and after the
  // copies submitted before it. Returns its point on timeline(), which the caller's later work
  // on `dst` (and writes to `src`) must wait for. Its command buffer is reused once it is done.
  // `bytes` > 0 (Vulkan has no empty copy): vkg::Error otherwise.
  uint64_t queue_copy(Range src, VkDeviceSize src_offset, Range dst, VkDeviceSize dst_offset,
                      VkDeviceSize bytes, std::span<const VkSemaphoreSubmitInfo> waits,
                      bool host_wrote);
  // Several queue_copy's at once, in order, with every command buffer allocated and recorded
  // before the first is submitted: running out of memory there leaves nothing submitted (a
  // staged copy's chunks wait on host events that nobody sets once the copy gives up: submitted,
  // they would hold up the queue). `waits(i)` gives copy i's waits, asked just before its
  // submission. Appends each submitted copy's point to `points` as it goes, so a submission that
  // throws midway leaves the caller knowing which copies were submitted.
  // Test-only: VKG_TEST_FAIL_QUEUE_COPY=record:K or submit:K makes the recording or the
  // submission of copy K (from 0) of every call with more than K copies throw OutOfMemory.
  struct Copy {
    Range src;
    VkDeviceSize src_offset;  // from src.offset
    Range dst;
    VkDeviceSize dst_offset;
    VkDeviceSize bytes;
  };
  void queue_copies(std::span<const Copy> copies,
                    const std::function<std::vector<VkSemaphoreSubmitInfo>(size_t)>& waits,
                    bool host_wrote, std::vector<uint64_t>& points);
  // The timeline copies run on: the copy engine's where the device has one, else the compute
  // queue's (Device::transfer_timeline).
  Timeline& timeline() { return timeline_; }
  // Whether that is a timeline of its own, which the compute queue's work must wait on.
  bool own_timeline() const;

 private:
  struct Slot {
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    uint64_t point = 0;  // timeline_ point of its last copy
  };
  void ensure_staging();
  void create_pool();
  // Gives the staging area back (the allocator's out-of-memory reclaimer), unless a transfer on
  // another thread uses it now; the next transfer allocates it again.
  void release_staging();
  // Records and submits one copy in the slot's command buffer; returns its timeline point. On the
  // copy engine's queue it starts after the compute queue's point `after` (0: none).
  uint64_t submit_copy(Slot& slot, VkBuffer src, VkDeviceSize src_offset, VkBuffer dst,
                       VkDeviceSize dst_offset, VkDeviceSize bytes, uint64_t after);
  // `after`, with kAllSubmitted read as the compute queue's last submitted point.
  uint64_t compute_point(uint64_t after);
  // Records the copy with the barriers its queue needs around it (ends the command buffer).
  void record_copy(VkCommandBuffer cmd, VkBuffer src, VkDeviceSize src_offset, VkBuffer dst,
                   VkDeviceSize dst_offset, VkDeviceSize bytes, bool host_wrote);

  Device& device_;
  // The copy engine's timeline where the device has one, else the compute queue's.
  Timeline& timeline_;
  Allocator& allocator_;
  TransferOptions options_;
  // Recursive: the allocator's out-of-memory reclaimer (release_staging) may run on a thread that
  // is inside upload or download already (ensure_staging's allocation).
  std::recursive_mutex mutex_;
  Buffer staging_;
  UniqueCommandPool pool_;
  std::array<Slot, 2> slots_;
  std::deque<Slot> queued_;  // queue_copy's command buffers, oldest first
  uint64_t staged_bytes_ = 0;
};

}  // namespace vkg::vk
