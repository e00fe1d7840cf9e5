// The compiled-kernel cache (devices/kernel_cache.hpp) is bounded: past its capacity, trim()
// drops the least recently used kernels, and one still held elsewhere (by a JIT) lives on.
#include <gtest/gtest.h>

#include <vkgrad/core/buffer.hpp>
#include <vkgrad/devices/kernel_cache.hpp>
#include <vkgrad/vkgrad.hpp>

using namespace vkg;

namespace {

// A distinct (fake) kernel AST per number.
ScheduleItem item(int64_t n) {
  return ScheduleItem{UOp::make(Ops::SINK, dtypes::void_, {}, n),
                      {std::make_shared<Buffer>("VK", dtypes::float32, 4)},
                      {}};
}

}  // namespace

TEST(KernelCache, TrimDropsTheLeastRecentlyUsedPastItsCapacity) {
  KernelCache<int64_t> cache(4);
  int64_t made = 0;
  auto get = [&](int64_t n, const ScheduleItem& it) {
    return cache.get(it, RunOptions{}, [&] {
      ++made;
      return n;
    });
  };
  std::vector<ScheduleItem> items;
  for (int64_t n = 0; n < 6; ++n) items.push_back(item(n));
  const std::shared_ptr<int64_t> held = get(0, items[0]);
  for (int64_t n = 1; n < 6; ++n) get(n, items[size_t(n)]);
  get(5, items[5]);  // 5 and 4 are the most recent
  get(4, items[4]);
  EXPECT_EQ(made, 6);
  EXPECT_EQ(cache.size(), 6u);
  cache.trim();  // down to 3 of capacity 4
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_TRUE(cache.contains(items[5], RunOptions{}));
  EXPECT_TRUE(cache.contains(items[4], RunOptions{}));
  EXPECT_TRUE(cache.contains(items[3], RunOptions{}));
  EXPECT_FALSE(cache.contains(items[0], RunOptions{}));
  EXPECT_EQ(*held, 0);  // dropped from the cache, alive where it is held
  EXPECT_EQ(*get(0, items[0]), 0);
  EXPECT_EQ(made, 7);  // compiled again
}

// A kernel over symbolic sizes is one entry for every binding, except that buffers too large to
// bind by descriptor (past the device's range) get an entry of their own: that program binds
// them by address, where one compiled for small buffers would bind them by descriptor.
TEST(KernelCache, SymbolicKernelsSplitOnlyWhereBuffersOutgrowTheDescriptorRange) {
  KernelCache<int64_t> cache(16, /*bind_limit=*/100);
  const UOpPtr ast = UOp::make(Ops::SINK, dtypes::void_, {}, int64_t(-1));
  auto symbolic = [&](int64_t count, int64_t max_count, bool reserve) {
    auto b = std::make_shared<Buffer>("VK", dtypes::float32, count);
    b->set_max_count(max_count);
    if (reserve) b->reserve_max();
    return ScheduleItem{ast, {b}, {{"n", count}}};
  };
  int64_t made = 0;
  auto get = [&](const ScheduleItem& it) {
    return *cache.get(it, RunOptions{}, [&] { return ++made; });
  };
  EXPECT_EQ(get(symbolic(4, 1000, false)), 1);   // 16 bytes
  EXPECT_EQ(get(symbolic(20, 1000, false)), 1);  // 80 bytes: the same kernel
  EXPECT_EQ(get(symbolic(4, 1000, true)), 2);    // room for 1000: 4000 bytes
  EXPECT_EQ(get(symbolic(30, 1000, false)), 2);  // 120 bytes
  EXPECT_EQ(made, 2);
}
