// The suballocating allocator. Memory comes from the driver in large blocks, one per
// vkAllocateMemory, each wrapped whole in one VkBuffer (storage, transfer, device-address usage);
// a Buffer is a 256-aligned range of a block, so making one costs no Vulkan call and its device
// address is the block's plus the offset. Buffers bigger than half a block get a block of their
// own. Freed buffers go to a cache bucketed by size (four buckets per power of two) and are handed
// out again once the GPU work submitted before their release has completed.
#pragma once
#include <vulkan/vulkan.h>

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <vkgrad/vk/buffer.hpp>
#include <vkgrad/vk/capabilities.hpp>

namespace vkg::vk {

class Device;

struct AllocatorOptions {
  // Keep device buffers unmapped even on unified-memory devices, so that uploads and downloads go
  // through the staging path a discrete GPU uses (tests and benchmarks use this on Lavapipe).
  bool force_staging = false;
  // Largest pooled block; 0 chooses from the heap size (heap/8, between 16 and 256 MiB).
  VkDeviceSize max_block_size = 0;
  // Freed buffers kept for reuse, at most; 0 means a quarter of the largest heap.
  VkDeviceSize max_cached_bytes = 0;

  // VKG_FORCE_STAGING=1 sets force_staging.
  static AllocatorOptions from_env();
};

struct AllocatorStats {
  VkDeviceSize device_bytes = 0;     // held from the driver, in all blocks
  VkDeviceSize live_bytes = 0;       // in buffers that exist now (capacities)
  VkDeviceSize peak_live_bytes = 0;  // the most live_bytes since the last reset_peak()
  VkDeviceSize cached_bytes = 0;     // in freed buffers kept for reuse
  uint32_t blocks = 0;               // vkAllocateMemory allocations alive
  uint64_t memory_allocations = 0;   // vkAllocateMemory calls that succeeded, ever
  uint64_t cache_hits = 0, cache_misses = 0;
  uint64_t texel_views = 0;  // VkBufferViews alive (texel_view)
};

// The rounded size a request of `bytes` reserves: a multiple of 256, and above 4 KiB one of four
// steps per power of two, so a freed buffer serves any later request of its bucket.
VkDeviceSize bucket_capacity(VkDeviceSize bytes);

// The memory type index for `usage` among `type_bits`, or -1. Device memory prefers device-local
// (and on unified devices mappable too); staging prefers host-cached system memory; arguments
// prefer host-visible device-local memory (the BAR on discrete GPUs).
int choose_memory_type(const Capabilities& caps, uint32_t type_bits, Usage usage);

class Allocator {
 public:
  explicit Allocator(Device& device) : Allocator(device, AllocatorOptions::from_env()) {}
  Allocator(Device& device, const AllocatorOptions& options);
  // Every Buffer must be gone by now. Waits for the GPU before freeing memory.
  ~Allocator();
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  // A buffer of at least `bytes` (0 is allowed and still gets a valid address). Throws
  // vkg::OutOfMemory naming the size when the device can never hold it (more than the heap,
  // maxBufferSize or maxMemoryAllocationSize), or when memory runs out even after waiting for the
  // GPU and dropping every cached buffer; the allocator stays usable after either.
  Buffer allocate(VkDeviceSize bytes, Usage usage = Usage::Device);

  // Memory held outside the cache (a Transfer's staging area) that its holder can let go of when
  // memory runs out: allocate() calls every reclaimer, without the allocator's lock, before its
  // last try. Removed by the same `owner` before it goes. Thread-safe.
  void add_reclaimer(const void* owner, std::function<void()> reclaim);
  void remove_reclaimer(const void* owner);

  // The memory heap (an index into Capabilities::heaps) that `usage` buffers come from.
  uint32_t heap_of(Usage usage) const;

  // Returns cached buffers whose last use has completed to their blocks and frees empty blocks.
  void trim();
  // Waits for all submitted GPU work, then trims everything.
  void reclaim();

  AllocatorStats stats() const;
  // Starts peak_live_bytes again from live_bytes.
  void reset_peak();
  // Whether buffers of this usage have mapped() memory.
  bool host_mapped(Usage usage) const { return mapped_for_[static_cast<int>(usage)]; }
  // A view of `range` bytes of b's memory from its start, as texels of `format`, for kernels
  // that read b through a texel buffer. Made on first use and kept with the memory: views of a
  // range go when the range returns to its block (its GPU use is over), so a recorded command
  // (a Jit's) that names one stays valid while it holds the Buffer. Queue asks for b's whole
  // capacity, so a range keeps at most one view per format however often it is lent.
  // Thread-safe.
  VkBufferView texel_view(const Buffer& b, VkFormat format, VkDeviceSize range);
  Device& device() { return device_; }

 private:
  friend class Buffer;
  struct Cached {
    detail::Block* block;
    VkDeviceSize offset, capacity;
    uint64_t ready_at;  // timeline point after which the GPU no longer uses it
    // The same on the copy engine's timeline (Device::transfer_timeline), 0 where there is none:
    // copies there use buffers too, and the compute queue's points say nothing of them.
    uint64_t copies_ready_at;
    uint64_t seq;  // release order, for evicting the oldest first
  };
  using CacheKey = std::pair<uint32_t, VkDeviceSize>;  // memory type, capacity

  Buffer allocate_once(VkDeviceSize bytes, Usage usage, uint32_t type);
  void release(detail::Block* block, VkDeviceSize offset, VkDeviceSize capacity) noexcept;
  bool take_cached(uint32_t type, VkDeviceSize capacity, detail::Block*& block,
                   VkDeviceSize& offset);
  // Both take mutex_'s lock, held: new_block lets go of it while it waits for the device after
  // a refusal (the work it waits for may release memory, which locks mutex_).
  void carve(std::unique_lock<std::mutex>& lock, uint32_t type, VkDeviceSize capacity, Usage usage,
             detail::Block*& block, VkDeviceSize& offset);
  detail::Block* new_block(std::unique_lock<std::mutex>& lock, uint32_t type, VkDeviceSize size,
                           bool dedicated, Usage usage);
  VkResult create_block(uint32_t type, VkDeviceSize size, bool dedicated,
                        std::unique_ptr<detail::Block>& out);
  void return_range(detail::Block* block, VkDeviceSize offset, VkDeviceSize capacity);
  void free_block(detail::Block* block);
  bool evict_oldest_ready();
  bool ready(const Cached& c);
  // Waits for all work submitted to the device's queues (compute and copy engine).
  void wait_for_device();
  void trim_locked();
  VkDeviceSize largest_request(uint32_t type) const;

  Device& device_;
  AllocatorOptions options_;
  std::array<int, 3> type_for_{};  // memory type per Usage
  std::array<bool, 3> mapped_for_{};
  VkDeviceSize max_block_size_ = 0;

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<detail::Block>> blocks_;
  std::map<CacheKey, std::deque<Cached>> cache_;
  std::vector<VkDeviceSize> heap_used_;
  uint64_t next_block_id_ = 1, next_seq_ = 0;
  AllocatorStats stats_;
  std::mutex reclaimers_mutex_;
  std::vector<std::pair<const void*, std::function<void()>>> reclaimers_;
};

}  // namespace vkg::vk
