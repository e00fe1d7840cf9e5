// The allocator (suballocation, the freed-buffer cache, out-of-memory) and transfers through both
// the direct-mapped and the staging paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include <vkgrad/core/error.hpp>
#include <vkgrad/vk/allocator.hpp>
#include <vkgrad/vk/runtime.hpp>
#include <vkgrad/vk/transfer.hpp>

#include "support/scoped_env.hpp"
#include "support/vk_fixture.hpp"

namespace vkg::vk {
namespace {

constexpr VkDeviceSize kMiB = 1ull << 20;

std::vector<std::byte> pattern(size_t n, uint32_t seed) {
  std::vector<std::byte> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;  // distinct, non-repeating-looking content per size and seed
    v[i] = static_cast<std::byte>(x >> 24);
  }
  return v;
}

TEST(VkAllocator, BucketsRoundUpByAtMostAQuarter) {
  EXPECT_EQ(bucket_capacity(0), 256u);
  EXPECT_EQ(bucket_capacity(1), 256u);
  EXPECT_EQ(bucket_capacity(257), 512u);
  EXPECT_EQ(bucket_capacity(4096), 4096u);
  EXPECT_EQ(bucket_capacity(4097), 5120u);
  EXPECT_EQ(bucket_capacity(64 * kMiB), 64 * kMiB);
  EXPECT_EQ(bucket_capacity(64 * kMiB + 1), 80 * kMiB);
  EXPECT_EQ(bucket_capacity(300 * kMiB), 320 * kMiB);
  for (VkDeviceSize n : {5000ull, 123457ull, 9999999ull, 3000000000ull}) {
    EXPECT_GE(bucket_capacity(n), n);
    EXPECT_LE(bucket_capacity(n), n + n / 4 + 256);
    EXPECT_EQ(bucket_capacity(n) % 256, 0u);
  }
}

TEST(VkAllocator, ChoosesMemoryTypesByUse) {
  constexpr VkMemoryPropertyFlags DL = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
                                  HV = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT,
                                  HC = VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                                  CA = VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
  Capabilities discrete;
  discrete.type = VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
  discrete.heaps = {{8ull << 30, true}, {32ull << 30, false}, {256 * kMiB, true}};
  discrete.memory_types = {{0, DL}, {1, HV | HC}, {1, HV | HC | CA}, {2, DL | HV | HC}};
  EXPECT_EQ(choose_memory_type(discrete, 0xf, Usage::Device), 0);
  EXPECT_EQ(choose_memory_type(discrete, 0xf, Usage::Staging), 2);
  EXPECT_EQ(choose_memory_type(discrete, 0xf, Usage::Arguments), 3);
  EXPECT_EQ(choose_memory_type(discrete, 0x2, Usage::Device), -1);  // no device-local allowed

  Capabilities unified;
  unified.type = VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;
  unified.unified_memory = true;
  unified.heaps = {{16ull << 30, true}};
  unified.memory_types = {{0, DL}, {0, DL | HV | HC}, {0, DL | HV | HC | CA}};
  EXPECT_EQ(choose_memory_type(unified, 0x7, Usage::Device), 2);
  EXPECT_EQ(choose_memory_type(unified, 0x7, Usage::Staging), 2);
}

TEST(VkAllocator, SuballocatesSmallBuffersFromOneBlock) {
  Runtime& rt = test::vk_runtime();
  Allocator alloc(rt.device, AllocatorOptions{});
  std::vector<Buffer> buffers;
  for (int i = 0; i < 100; ++i) buffers.push_back(alloc.allocate(1000 + i));
  EXPECT_EQ(alloc.stats().memory_allocations, 1u);
  for (size_t i = 0; i < buffers.size(); ++i) {
    EXPECT_EQ(buffers[i].address() % 256, 0u);
    EXPECT_EQ(buffers[i].address(),
              buffers[0].address() - buffers[0].offset() + buffers[i].offset());
    EXPECT_EQ(buffers[i].block_id(), buffers[0].block_id());
    if (i) {
      EXPECT_GE(buffers[i].offset(), buffers[i - 1].offset() + buffers[i - 1].capacity());
    }
  }
}

TEST(VkAllocator, ReusesFreedBuffersFromItsCache) {
  Runtime& rt = test::vk_runtime();
  Allocator alloc(rt.device, AllocatorOptions{});
  uint64_t address;
  {
    Buffer a = alloc.allocate(3 * kMiB);
    address = a.address();
  }
  EXPECT_EQ(alloc.stats().cached_bytes, 3 * kMiB);
  Buffer b = alloc.allocate(3 * kMiB - 100);  // same bucket
  EXPECT_EQ(b.address(), address);
  EXPECT_EQ(alloc.stats().cache_hits, 1u);
  EXPECT_EQ(alloc.stats().cached_bytes, 0u);
  Buffer c = alloc.allocate(3 * kMiB);  // the cached one is taken: a new range
  EXPECT_NE(c.address(), address);
}

// Kernels read buffers through texel views (vk::BindingKind): one per range and format, shared by
// every buffer the range is lent to, gone when the range returns to its block.
TEST(VkAllocator, TexelViewsAreKeptPerRangeAndFormatUntilTheRangeReturns) {
  Runtime& rt = test::vk_runtime();
  Allocator alloc(rt.device, AllocatorOptions{});
  uint64_t address;
  VkBufferView first;
  {
    Buffer a = alloc.allocate(4000);
    address = a.address();
    first = alloc.texel_view(a, VK_FORMAT_R32_UINT, a.capacity());
    EXPECT_EQ(alloc.texel_view(a, VK_FORMAT_R32_UINT, a.capacity()), first);
    EXPECT_NE(alloc.texel_view(a, VK_FORMAT_R32G32B32A32_UINT, a.capacity()), first);
    EXPECT_EQ(alloc.stats().texel_views, 2u);
  }
  Buffer b = alloc.allocate(3900);  // the same cached range: its views are still there
  ASSERT_EQ(b.address(), address);
  EXPECT_EQ(alloc.texel_view(b, VK_FORMAT_R32_UINT, b.capacity()), first);
  EXPECT_EQ(alloc.stats().texel_views, 2u);
  b = Buffer();
  alloc.reclaim();  // the range goes back to its block, and its views with it
  EXPECT_EQ(alloc.stats().texel_views, 0u);
}

TEST(VkAllocator, GivesLargeBuffersTheirOwnBlock) {
  Runtime& rt = test::vk_runtime();
  Allocator alloc(rt.device, AllocatorOptions{.max_block_size = 64 * kMiB});
  Buffer small = alloc.allocate(kMiB);
  Buffer big = alloc.allocate(100 * kMiB);
  EXPECT_NE(small.block_id(), big.block_id());
  EXPECT_EQ(big.offset(), 0u);
  EXPECT_EQ(alloc.stats().blocks, 2u);
  big = Buffer();
  alloc.trim();
  EXPECT_EQ(alloc.stats().blocks, 1u);  // the dedicated block went back to the driver
}

// Device buffers come from one heap (an H100's 80 GB device-local one, not its 94 GB of system
// memory), and no one of them may be larger than maxMemoryAllocationSize (4 GiB there, 2 GiB on
// Lavapipe): the fill takes a quarter of the heap or that size at a time, until the heap runs out
// (3 on Lavapipe, about 19 on an H100). On a GPU it takes the whole heap: scripts/gpu/check.sh
// runs it apart from the sharded suites.
void fill_past_the_heap(Runtime& rt) {
  const Capabilities& caps = rt.device.caps();
  Allocator alloc(rt.device, AllocatorOptions{});
  const VkDeviceSize heap = caps.heaps[alloc.heap_of(Usage::Device)].size;
  try {
    alloc.allocate(heap + 1);
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(heap + 1)), std::string::npos) << e.what();
  }
  const VkDeviceSize largest =
      std::min(caps.limits.max_memory_allocation_size, caps.limits.max_buffer_size) / kMiB * kMiB;
  const VkDeviceSize piece = std::min(heap / 4 + kMiB, largest);
  const size_t most = size_t(heap / piece);  // all that fit when nothing else holds the heap
  // Many buffers that fit one by one but not together (nothing is touched, so this costs no RAM).
  std::vector<Buffer> held;
  bool threw = false;
  try {
    while (held.size() <= most) held.push_back(alloc.allocate(piece));
  } catch (const OutOfMemory& e) {
    threw = true;
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(threw) << held.size() << " buffers of " << piece << " bytes in a heap of " << heap;
  EXPECT_GE(held.size(), 2u);
  EXPECT_LE(held.size(), most);
  const size_t first = held.size();
  held.clear();

  // Usable again: the memory held by the failed attempt and the cache is recovered on demand, for
  // a request of another size while the cache holds pieces (which none of them serves: half a
  // piece is in another size bucket, where piece - 3 MiB rounded into a 256 MiB piece's own), and
  // as many pieces as before.
  const uint64_t misses = alloc.stats().cache_misses;
  Buffer other = alloc.allocate(piece / 2);
  EXPECT_EQ(alloc.stats().cache_misses, misses + 1) << "a cached piece served half a piece";
  for (size_t i = 0; i + 2 < first; ++i) held.push_back(alloc.allocate(piece));
  Buffer small = alloc.allocate(4096);
  std::vector<std::byte> data = pattern(4096, 9), back(4096);
  Transfer transfer(rt.device, alloc);
  transfer.upload(small, data);
  transfer.download(small, back);
  EXPECT_EQ(back, data);
}

TEST(VkAllocator, MoreThanTheHeapThrowsOutOfMemoryAndTheAllocatorStaysUsable) {
  fill_past_the_heap(test::vk_runtime());
}

// The H100's case on any device: a heap of many allocations (maxMemoryAllocationSize lowered to
// 256 MiB by VKG_MAX_ALLOCATION_SIZE; Lavapipe's one allocation may otherwise take its heap).
// Filled by quarters of the heap, the first request was past that size and failed as such, with
// nothing held. The heap is lowered to 2 GiB (VKG_MAX_HEAP_SIZE, Lavapipe's), so that on a GPU
// this fill leaves the memory of tests running beside it alone.
TEST(VkAllocator, AHeapOfManyAllocationsRunsOutAndStaysUsable) {
  const test::ScopedEnv allocation("VKG_MAX_ALLOCATION_SIZE", std::to_string(256u << 20)),
      heap("VKG_MAX_HEAP_SIZE", std::to_string(2ull << 30));
  Runtime rt;
  ASSERT_LE(rt.device.caps().limits.max_memory_allocation_size, 256u << 20);
  fill_past_the_heap(rt);
}

TEST(VkAllocator, FallsBackToTheExactSizeWhenTheRoundedOneDoesNotFit) {
  Runtime& rt = test::vk_runtime();
  if (rt.device.caps().heaps.size() != 1) GTEST_SKIP() << "sized for Lavapipe's single heap";
  const VkDeviceSize heap = rt.device.caps().heaps[0].size;
  Allocator alloc(rt.device, AllocatorOptions{});
  Buffer small = alloc.allocate(kMiB);        // a 32 MiB pooled block
  Buffer big = alloc.allocate(heap / 4 * 3);  // three quarters: its own bucket exactly
  const VkDeviceSize left = heap - alloc.stats().device_bytes;
  const VkDeviceSize ask = left - 10 * kMiB;  // fits, but its bucket does not
  ASSERT_GT(bucket_capacity(ask), left);
  Buffer last = alloc.allocate(ask);
  EXPECT_EQ(last.size(), ask);
  EXPECT_LT(last.capacity(), bucket_capacity(ask));
}

TEST(VkAllocator, ForcedStagingHidesDeviceMappings) {
  Runtime& rt = test::vk_runtime();
  Allocator staged(rt.device, AllocatorOptions{.force_staging = true});
  EXPECT_FALSE(staged.host_mapped(Usage::Device));
  EXPECT_TRUE(staged.host_mapped(Usage::Staging));
  EXPECT_TRUE(staged.host_mapped(Usage::Arguments));
  EXPECT_EQ(staged.allocate(64).mapped(), nullptr);
  Allocator direct(rt.device, AllocatorOptions{});
  EXPECT_EQ(direct.host_mapped(Usage::Device), rt.device.caps().unified_memory);
}

class VkRoundTrip : public testing::TestWithParam<bool> {};  // true: staging path

TEST_P(VkRoundTrip, BuffersOfEverySizeComeBackUnchanged) {
  Runtime& rt = test::vk_runtime();
  const bool staging = GetParam();
  Allocator alloc(rt.device, AllocatorOptions{.force_staging = staging});
  // A small staging area so that 64 MiB takes many chunks through both halves.
  Transfer transfer(rt.device, alloc, TransferOptions{.staging_bytes = 8 * kMiB});
  uint32_t seed = staging ? 100 : 0;
  for (size_t size : {size_t(0), size_t(1), size_t(3), size_t(4096), size_t(64 * kMiB)}) {
    SCOPED_TRACE(size);
    Buffer b = alloc.allocate(size);
    EXPECT_EQ(b.size(), size);
    if (!staging && rt.device.caps().unified_memory) {
      EXPECT_NE(b.mapped(), nullptr);
    }
    const std::vector<std::byte> data = pattern(size, ++seed);
    const uint64_t staged_before = transfer.staged_bytes();
    transfer.upload(b, data);
    std::vector<std::byte> back(size, std::byte{0xee});
    transfer.download(b, back);
    EXPECT_TRUE(back == data);
    EXPECT_EQ(transfer.staged_bytes() - staged_before, b.mapped() ? 0 : 2 * size);
  }
}

TEST_P(VkRoundTrip, PartialRangesAtOffsets) {
  Runtime& rt = test::vk_runtime();
  Allocator alloc(rt.device, AllocatorOptions{.force_staging = GetParam()});
  Transfer transfer(rt.device, alloc, TransferOptions{.staging_bytes = 4096});
  Buffer b = alloc.allocate(10000);
  const std::vector<std::byte> all = pattern(10000, 5), middle = pattern(5000, 6);
  transfer.upload(b, all);
  transfer.upload(b, middle, 2001);
  std::vector<std::byte> back(10000);
  transfer.download(b, back);
  std::vector<std::byte> expect = all;
  std::memcpy(expect.data() + 2001, middle.data(), middle.size());
  EXPECT_TRUE(back == expect);
  std::vector<std::byte> tail(7);
  transfer.download(b, tail, 9993);
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), expect.begin() + 9993));
  EXPECT_THROW(transfer.upload(b, middle, 6000), Error);
  EXPECT_THROW(transfer.download(b, tail, 9994), Error);
}

INSTANTIATE_TEST_SUITE_P(Paths, VkRoundTrip, testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Staging" : "Direct"; });

}  // namespace
}  // namespace vkg::vk
