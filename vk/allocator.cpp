#include <vkgrad/vk/allocator.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <iterator>
#include <tuple>

#include <vkgrad/core/error.hpp>
#include <vkgrad/vk/check.hpp>
#include <vkgrad/vk/device.hpp>
#include <vkgrad/vk/env.hpp>
#include <vkgrad/vk/handle.hpp>
#include <vkgrad/vk/structure.hpp>

namespace vkg::vk {

namespace detail {

// One vkAllocateMemory, bound whole to one VkBuffer, persistently mapped when host-visible.
struct Block {
  uint64_t id = 0;
  uint32_t type = 0, heap = 0;
  bool dedicated = false;
  VkDeviceSize size = 0;         // of the VkBuffer
  VkDeviceSize memory_size = 0;  // of the allocation (counted against the heap)
  UniqueBuffer buffer;
  UniqueMemory memory;
  uint64_t address = 0;
  std::byte* mapped = nullptr;
  std::map<VkDeviceSize, VkDeviceSize> free;  // offset -> size; disjoint, neighbours merged
  VkDeviceSize used = 0;
  // Texel views of ranges in use, by (offset, range, format); after `buffer`, so destroyed first.
  std::map<std::tuple<VkDeviceSize, VkDeviceSize, VkFormat>, UniqueBufferView> views;
};

}  // namespace detail

namespace {

// 256 covers every alignment a kernel needs (vec4 loads, 64-bit atomics) and a cache line.
constexpr VkDeviceSize kAlign = 256;
constexpr VkDeviceSize kMiB = 1ull << 20;

// Indirect: argument rings also hold the workgroup counts of Queue::dispatch_indirect. Texel
// buffers: kernels may read an operand through a VkBufferView of its block.
constexpr VkBufferUsageFlags kBlockUsage =
    VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
    VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT |
    VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT |
    VK_BUFFER_USAGE_STORAGE_TEXEL_BUFFER_BIT;

VkDeviceSize align_up(VkDeviceSize n, VkDeviceSize a) { return (n + a - 1) / a * a; }

const char* usage_name(Usage u) {
  switch (u) {
    case Usage::Device:
      return "device";
    case Usage::Staging:
      return "staging";
    case Usage::Arguments:
      return "argument";
  }
  return "?";
}

std::string bytes_text(VkDeviceSize b) {
  if (b >= kMiB) return fmt::format("{} bytes ({:.1f} MiB)", b, double(b) / double(kMiB));
  return fmt::format("{} bytes", b);
}

}  // namespace

VkDeviceSize bucket_capacity(VkDeviceSize bytes) {
  VkDeviceSize n = std::max(align_up(bytes, kAlign), kAlign);
  if (n <= 4096) return n;
  // Round up to a multiple of a quarter of the highest power of two in n: waste stays under 25%.
  VkDeviceSize step = std::bit_floor(n) / 4;
  return align_up(n, step);
}

int choose_memory_type(const Capabilities& caps, uint32_t type_bits, Usage usage) {
  constexpr VkMemoryPropertyFlags DL = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  constexpr VkMemoryPropertyFlags HV = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT;
  constexpr VkMemoryPropertyFlags HC = VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  constexpr VkMemoryPropertyFlags CACHED = VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
  VkMemoryPropertyFlags required = 0, preferred = 0, avoided = 0;
  switch (usage) {
    case Usage::Device:
      required = caps.unified_memory ? DL | HV | HC : DL;
      preferred = caps.unified_memory ? CACHED : 0;
      avoided = caps.unified_memory ? 0 : HV;  // keep the small BAR window for arguments
      break;
    case Usage::Staging:
      required = HV | HC;
      preferred = CACHED;  // downloads read it
      avoided = caps.unified_memory ? 0 : DL;
      break;
    case Usage::Arguments:
      required = HV | HC;
      preferred = DL;
      break;
  }
  int best = -1;
  long best_score = 0;
  for (size_t i = 0; i < caps.memory_types.size(); ++i) {
    if (!(type_bits & (1u << i))) continue;
    const VkMemoryPropertyFlags f = caps.memory_types[i].flags;
    if ((f & required) != required) continue;
    // Preferences decide; the bigger heap breaks ties.
    long score = 4L * std::popcount(f & preferred) - 4L * std::popcount(f & avoided);
    VkDeviceSize heap = caps.heaps[caps.memory_types[i].heap].size;
    if (best < 0 || score > best_score ||
        (score == best_score && heap > caps.heaps[caps.memory_types[best].heap].size))
      best = static_cast<int>(i), best_score = score;
  }
  return best;
}

AllocatorOptions AllocatorOptions::from_env() {
  AllocatorOptions o;
  o.force_staging = env_flag("VKG_FORCE_STAGING");
  return o;
}

Allocator::Allocator(Device& device, const AllocatorOptions& options)
    : device_(device), options_(options) {
  const Capabilities& caps = device_.caps();
  heap_used_.assign(caps.heaps.size(), 0);

  VkBufferCreateInfo probe = structure<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
  probe.size = kMiB;
  probe.usage = kBlockUsage;
  VkDeviceBufferMemoryRequirements query = structure<VkDeviceBufferMemoryRequirements>(
      VK_STRUCTURE_TYPE_DEVICE_BUFFER_MEMORY_REQUIREMENTS);
  query.pCreateInfo = &probe;
  VkMemoryRequirements2 reqs =
      structure<VkMemoryRequirements2>(VK_STRUCTURE_TYPE_MEMORY_REQUIREMENTS_2);
  vkGetDeviceBufferMemoryRequirements(device_.get(), &query, &reqs);
  const uint32_t bits = reqs.memoryRequirements.memoryTypeBits;

  for (Usage u : {Usage::Device, Usage::Staging, Usage::Arguments}) {
    int t = choose_memory_type(caps, bits, u);
    if (t < 0 && u == Usage::Device) t = std::countr_zero(bits);  // any type the buffer takes
    if (t < 0)
      throw Error(fmt::format("{} has no host-visible coherent memory for {} buffers", caps.name,
                              usage_name(u)));
    const int i = static_cast<int>(u);
    type_for_[i] = t;
    const bool host_visible = caps.memory_types[t].flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT;
    mapped_for_[i] = host_visible && !(u == Usage::Device && options_.force_staging);
    if (u == Usage::Device) mapped_for_[i] = mapped_for_[i] && caps.unified_memory;
  }

  VkDeviceSize heap = caps.heaps[caps.memory_types[type_for_[0]].heap].size;
  max_block_size_ = options_.max_block_size
                        ? align_up(options_.max_block_size, kAlign)
                        : std::clamp<VkDeviceSize>(std::bit_floor(heap / 8), 16 * kMiB, 256 * kMiB);
  max_block_size_ = std::min({max_block_size_, caps.limits.max_buffer_size / kAlign * kAlign,
                              caps.limits.max_memory_allocation_size / kAlign * kAlign});
  if (!options_.max_cached_bytes) {
    VkDeviceSize largest = 0;
    for (const auto& h : caps.heaps) largest = std::max(largest, h.size);
    options_.max_cached_bytes = largest / 4;
  }
}

Allocator::~Allocator() {
  try {
    wait_for_device();
  } catch (...) {
    // A lost device runs nothing any more; freeing is safe.
  }
  std::lock_guard lock(mutex_);
  cache_.clear();
  blocks_.clear();
}

VkDeviceSize Allocator::largest_request(uint32_t type) const {
  const Capabilities& caps = device_.caps();
  return std::min({caps.limits.max_buffer_size, caps.limits.max_memory_allocation_size,
                   caps.heaps[caps.memory_types[type].heap].size});
}

uint32_t Allocator::heap_of(Usage usage) const {
  return device_.caps().memory_types[type_for_[static_cast<int>(usage)]].heap;
}

Buffer Allocator::allocate(VkDeviceSize bytes, Usage usage) {
  const Capabilities& caps = device_.caps();
  const uint32_t type = static_cast<uint32_t>(type_for_[static_cast<int>(usage)]);
  const VkDeviceSize heap = caps.heaps[caps.memory_types[type].heap].size;
  auto never = [&](const char* what, VkDeviceSize limit) {
    return OutOfMemory(fmt::format("cannot allocate a {} buffer of {}: {} {} is {}",
                                   usage_name(usage), bytes_text(bytes), caps.name, what,
                                   bytes_text(limit)));
  };
  if (bytes > heap) throw never("memory heap", heap);
  if (bytes > caps.limits.max_buffer_size)
    throw never("maxBufferSize", caps.limits.max_buffer_size);
  if (bytes > caps.limits.max_memory_allocation_size)
    throw never("maxMemoryAllocationSize", caps.limits.max_memory_allocation_size);

  try {
    return allocate_once(bytes, usage, type);
  } catch (const OutOfMemory&) {
    // Memory held outside the cache (a Transfer's staging area, allocated by the first read after
    // an earlier out-of-memory) would otherwise stay out of every later fill for good.
    std::vector<std::function<void()>> reclaimers;
    {
      std::lock_guard lock(reclaimers_mutex_);
      for (auto& r : reclaimers_) reclaimers.push_back(r.second);
    }
    if (reclaimers.empty()) throw;
    for (auto& r : reclaimers) r();
  }
  return allocate_once(bytes, usage, type);
}

void Allocator::add_reclaimer(const void* owner, std::function<void()> reclaim) {
  std::lock_guard lock(reclaimers_mutex_);
  reclaimers_.emplace_back(owner, std::move(reclaim));
}

void Allocator::remove_reclaimer(const void* owner) {
  std::lock_guard lock(reclaimers_mutex_);
  std::erase_if(reclaimers_, [&](const auto& r) { return r.first == owner; });
}

Buffer Allocator::allocate_once(VkDeviceSize bytes, Usage usage, uint32_t type) {
  VkDeviceSize capacity = bucket_capacity(bytes);
  if (capacity > largest_request(type)) capacity = std::max(align_up(bytes, kAlign), kAlign);

  std::unique_lock lock(mutex_);
  detail::Block* block = nullptr;
  VkDeviceSize offset = 0;
  if (take_cached(type, capacity, block, offset)) {
    ++stats_.cache_hits;
  } else {
    ++stats_.cache_misses;
    try {
      carve(lock, type, capacity, usage, block, offset);
    } catch (const OutOfMemory&) {
      // The bucket's rounding (up to a quarter) may be what does not fit: try the exact size.
      const VkDeviceSize exact = std::max(align_up(bytes, kAlign), kAlign);
      if (exact == capacity) throw;
      capacity = exact;
      carve(lock, type, capacity, usage, block, offset);
    }
  }
  stats_.live_bytes += capacity;
  stats_.peak_live_bytes = std::max(stats_.peak_live_bytes, stats_.live_bytes);

  Buffer b;
  b.owner_ = this;
  b.block_ = block;
  b.handle_ = block->buffer.get();
  b.offset_ = offset;
  b.size_ = bytes;
  b.capacity_ = capacity;
  b.address_ = block->address + offset;
  b.mapped_ =
      (block->mapped && mapped_for_[static_cast<int>(usage)]) ? block->mapped + offset : nullptr;
  b.block_id_ = block->id;
  b.usage_ = usage;
  return b;
}

bool Allocator::take_cached(uint32_t type, VkDeviceSize capacity, detail::Block*& block,
                            VkDeviceSize& offset) {
  auto it = cache_.find({type, capacity});
  if (it == cache_.end() || it->second.empty()) return false;
  // The front entry was released first, so it is the first to become ready.
  const Cached& c = it->second.front();
  if (!ready(c)) return false;
  block = c.block;
  offset = c.offset;
  stats_.cached_bytes -= capacity;
  it->second.pop_front();
  if (it->second.empty()) cache_.erase(it);
  return true;
}

void Allocator::carve(std::unique_lock<std::mutex>& lock, uint32_t type, VkDeviceSize capacity,
                      Usage usage, detail::Block*& block, VkDeviceSize& offset) {
  auto take = [&](detail::Block* b) {
    for (auto it = b->free.begin(); it != b->free.end(); ++it) {
      if (it->second < capacity) continue;  // first fit: blocks hold few free ranges
      offset = it->first;
      VkDeviceSize rest = it->second - capacity;
      b->free.erase(it);
      if (rest) b->free.emplace(offset + capacity, rest);
      b->used += capacity;
      block = b;
      return true;
    }
    return false;
  };
  if (capacity > max_block_size_ / 2) {
    block = new_block(lock, type, capacity, /*dedicated=*/true, usage);
    take(block);
    return;
  }
  for (auto& b : blocks_)
    if (b->type == type && !b->dedicated && take(b.get())) return;
  // Blocks grow 32, 64, 128 MiB ... up to the maximum, so a program that needs little memory
  // (and the staging and argument types) does not reserve a maximum-size block.
  size_t same_type = 0;
  for (auto& b : blocks_) same_type += (b->type == type && !b->dedicated);
  VkDeviceSize size = std::min(max_block_size_, (32 * kMiB) << std::min<size_t>(same_type, 8));
  size = std::max(size, capacity);
  detail::Block* fresh = nullptr;
  try {
    fresh = new_block(lock, type, size, /*dedicated=*/false, usage);
  } catch (const OutOfMemory&) {
    if (size == capacity) throw;
    fresh =
        new_block(lock, type, capacity, /*dedicated=*/false, usage);  // what is left may fit this
  }
  take(fresh);
}

detail::Block* Allocator::new_block(std::unique_lock<std::mutex>& lock, uint32_t type,
                                    VkDeviceSize size, bool dedicated, Usage usage) {
  const Capabilities& caps = device_.caps();
  const uint32_t heap = caps.memory_types[type].heap;
  for (int attempt = 0;; ++attempt) {
    VkResult r = VK_ERROR_OUT_OF_DEVICE_MEMORY;
    std::unique_ptr<detail::Block> block;
    // The heap size is a budget the driver may not enforce itself (Lavapipe does not); keeping to
    // it turns over-subscription into OutOfMemory instead of swapping or a later crash.
    if (stats_.blocks < caps.limits.max_memory_allocation_count &&
        heap_used_[heap] + size <= caps.heaps[heap].size)
      r = create_block(type, size, dedicated, block);
    if (r == VK_SUCCESS) {
      heap_used_[heap] += block->memory_size;
      stats_.device_bytes += block->memory_size;
      ++stats_.blocks;
      ++stats_.memory_allocations;
      blocks_.push_back(std::move(block));
      return blocks_.back().get();
    }
    if (r != VK_ERROR_OUT_OF_DEVICE_MEMORY && r != VK_ERROR_OUT_OF_HOST_MEMORY)
      throw_result(r, "vkAllocateMemory");
    if (attempt == 1)
      throw OutOfMemory(fmt::format(
          "out of memory allocating a {} buffer block of {} ({}): heap {} has {} of {} in use by "
          "vkgrad in {} allocations, after waiting for the GPU and freeing all cached buffers",
          usage_name(usage), bytes_text(size), result_name(r), heap, bytes_text(heap_used_[heap]),
          bytes_text(caps.heaps[heap].size), stats_.blocks));
    // Waiting lets every cached buffer go back to its block, and empty blocks back to the driver.
    // Not under mutex_: what the queues wait for may need it (a copy between devices sets the
    // host events they wait on, and its thread releases memory; core/copy_item.cpp), so the wait
    // is for what was submitted before it, with the lock let go meanwhile.
    const uint64_t compute = device_.timeline().submitted();
    Timeline* copies = device_.transfer_timeline();
    const uint64_t copied = copies ? copies->submitted() : 0;
    lock.unlock();
    device_.timeline().wait(compute);
    if (copies) copies->wait(copied);
    lock.lock();
    trim_locked();
  }
}

VkResult Allocator::create_block(uint32_t type, VkDeviceSize size, bool dedicated,
                                 std::unique_ptr<detail::Block>& out) {
  VkDevice dev = device_.get();
  auto block = std::make_unique<detail::Block>();
  block->type = type;
  block->heap = device_.caps().memory_types[type].heap;
  block->dedicated = dedicated;
  block->size = size;

  VkBufferCreateInfo info = structure<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
  info.size = size;
  info.usage = kBlockUsage;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  // Copies on the copy engine's queue use the blocks too: shared by both families, so no
  // ownership transfer is needed between them (the semaphores order the accesses).
  const std::array<uint32_t, 2> families{device_.queue_family(), device_.transfer_family()};
  if (device_.transfer_timeline() && families[0] != families[1]) {
    info.sharingMode = VK_SHARING_MODE_CONCURRENT;
    info.queueFamilyIndexCount = 2;
    info.pQueueFamilyIndices = families.data();
  }
  VkBuffer buffer;
  VkResult r = vkCreateBuffer(dev, &info, nullptr, &buffer);
  if (r != VK_SUCCESS) return r;
  block->buffer = UniqueBuffer(dev, buffer);

  VkMemoryRequirements reqs;
  vkGetBufferMemoryRequirements(dev, buffer, &reqs);
  if (!(reqs.memoryTypeBits & (1u << type)))
    throw Error("the driver will not place a buffer in the memory type it offered for buffers");
  VkMemoryAllocateFlagsInfo flags =
      structure<VkMemoryAllocateFlagsInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO);
  flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  VkMemoryDedicatedAllocateInfo dedicated_info =
      structure<VkMemoryDedicatedAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO);
  dedicated_info.buffer = buffer;
  if (dedicated) flags.pNext = &dedicated_info;  // lets drivers place big buffers better
  VkMemoryAllocateInfo alloc =
      structure<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
  alloc.pNext = &flags;
  alloc.allocationSize = reqs.size;
  alloc.memoryTypeIndex = type;
  VkDeviceMemory memory;
  r = vkAllocateMemory(dev, &alloc, nullptr, &memory);
  if (r != VK_SUCCESS) return r;
  block->memory = UniqueMemory(dev, memory);
  block->memory_size = reqs.size;
  check(vkBindBufferMemory(dev, buffer, memory, 0), "vkBindBufferMemory");

  if (device_.caps().memory_types[type].flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) {
    void* p = nullptr;
    r = vkMapMemory(dev, memory, 0, VK_WHOLE_SIZE, 0, &p);
    if (r == VK_ERROR_MEMORY_MAP_FAILED) return VK_ERROR_OUT_OF_HOST_MEMORY;  // address space
    check(r, "vkMapMemory");
    block->mapped = static_cast<std::byte*>(p);
  }
  VkBufferDeviceAddressInfo addr =
      structure<VkBufferDeviceAddressInfo>(VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO);
  addr.buffer = buffer;
  block->address = vkGetBufferDeviceAddress(dev, &addr);
  block->id = next_block_id_++;
  block->free.emplace(0, size);
  out = std::move(block);
  return VK_SUCCESS;
}

void Allocator::release(detail::Block* block, VkDeviceSize offset, VkDeviceSize capacity) noexcept {
  std::lock_guard lock(mutex_);
  stats_.live_bytes -= capacity;
  try {
    const uint64_t ready_at = device_.timeline().submitted();
    const uint64_t copies_ready_at =
        device_.transfer_timeline() ? device_.transfer_timeline()->submitted() : 0;
    cache_[{block->type, capacity}].push_back(
        {block, offset, capacity, ready_at, copies_ready_at, next_seq_++});
    stats_.cached_bytes += capacity;
    while (stats_.cached_bytes > options_.max_cached_bytes && evict_oldest_ready()) {
    }
  } catch (...) {
    // Out of host memory for the cache's bookkeeping: the range is lost until the block is freed.
  }
}

bool Allocator::ready(const Cached& c) {
  Timeline* copies = device_.transfer_timeline();
  return device_.timeline().done(c.ready_at) && (!copies || copies->done(c.copies_ready_at));
}

void Allocator::wait_for_device() {
  device_.timeline().wait_all();
  if (Timeline* copies = device_.transfer_timeline()) copies->wait_all();
}

bool Allocator::evict_oldest_ready() {
  auto oldest = cache_.end();
  for (auto it = cache_.begin(); it != cache_.end(); ++it)
    if (!it->second.empty() &&
        (oldest == cache_.end() || it->second.front().seq < oldest->second.front().seq))
      oldest = it;
  if (oldest == cache_.end() || !ready(oldest->second.front())) return false;
  Cached c = oldest->second.front();
  oldest->second.pop_front();
  if (oldest->second.empty()) cache_.erase(oldest);
  stats_.cached_bytes -= c.capacity;
  return_range(c.block, c.offset, c.capacity);
  return true;
}

void Allocator::return_range(detail::Block* block, VkDeviceSize offset, VkDeviceSize capacity) {
  block->used -= capacity;
  auto first = block->views.lower_bound({offset, 0, VkFormat(0)}),
       last = block->views.lower_bound({offset + capacity, 0, VkFormat(0)});
  stats_.texel_views -= uint64_t(std::distance(first, last));
  block->views.erase(first, last);
  auto [it, inserted] = block->free.emplace(offset, capacity);
  if (auto next = std::next(it); next != block->free.end() && offset + capacity == next->first) {
    it->second += next->second;
    block->free.erase(next);
  }
  if (it != block->free.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      block->free.erase(it);
    }
  }
  if (block->used != 0) return;
  // Keep one empty pooled block per memory type so that a loop that frees and reallocates does
  // not call vkAllocateMemory every time; dedicated blocks fit one size and go back at once.
  if (!block->dedicated) {
    for (const auto& b : blocks_)
      if (b.get() != block && b->type == block->type && !b->dedicated && b->used == 0) {
        free_block(block);
        return;
      }
    return;
  }
  free_block(block);
}

void Allocator::free_block(detail::Block* block) {
  auto it = std::find_if(blocks_.begin(), blocks_.end(), [&](auto& b) { return b.get() == block; });
  heap_used_[block->heap] -= block->memory_size;
  stats_.device_bytes -= block->memory_size;
  --stats_.blocks;
  blocks_.erase(it);  // unmapping is implied by vkFreeMemory
}

void Allocator::trim_locked() {
  while (evict_oldest_ready()) {
  }
  for (size_t i = blocks_.size(); i-- > 0;)
    if (blocks_[i]->used == 0) free_block(blocks_[i].get());
}

void Allocator::trim() {
  std::lock_guard lock(mutex_);
  trim_locked();
}

void Allocator::reclaim() {
  wait_for_device();
  trim();
}

AllocatorStats Allocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void Allocator::reset_peak() {
  std::lock_guard lock(mutex_);
  stats_.peak_live_bytes = stats_.live_bytes;
}

VkBufferView Allocator::texel_view(const Buffer& b, VkFormat format, VkDeviceSize range) {
  if (b.owner_ != this) return b.owner_->texel_view(b, format, range);  // its block is there
  std::lock_guard lock(mutex_);
  auto& slot = b.block_->views[{b.offset(), range, format}];
  if (!slot.get()) {
    auto info = structure<VkBufferViewCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO);
    info.buffer = b.handle();
    info.offset = b.offset();
    info.range = range;
    info.format = format;
    VkBufferView view;
    check(vkCreateBufferView(device_.get(), &info, nullptr, &view), "vkCreateBufferView");
    slot = UniqueBufferView(device_.get(), view);
    ++stats_.texel_views;
  }
  return slot.get();
}

}  // namespace vkg::vk
