// Barrier placement as pure bookkeeping: which command sequences need a barrier and of what kind.
#include <gtest/gtest.h>

#include <vector>

#include <vkgrad/vk/hazards.hpp>

namespace vkg::vk {
namespace {

Range read(uint64_t res, uint64_t b, uint64_t e) { return {res, b, e, Access::Read}; }
Range write(uint64_t res, uint64_t b, uint64_t e) { return {res, b, e, Access::Write}; }
Range read_write(uint64_t res, uint64_t b, uint64_t e) { return {res, b, e, Access::ReadWrite}; }

Hazard next(HazardTracker& t, std::vector<Range> uses) { return t.next(uses); }

TEST(VkRangeSet, MergesTouchingAndOverlappingRanges) {
  RangeSet s;
  s.add(1, 0, 10);
  s.add(1, 10, 20);  // touches: merged
  s.add(1, 30, 40);
  EXPECT_EQ(s.size(), 2u);
  s.add(1, 15, 35);  // bridges both
  EXPECT_EQ(s.size(), 1u);
  EXPECT_TRUE(s.overlaps(1, 39, 50));
  EXPECT_FALSE(s.overlaps(1, 40, 50));
  EXPECT_FALSE(s.overlaps(2, 0, 100));  // another resource
  s.add(0, 100, 200);
  EXPECT_FALSE(s.overlaps(1, 100, 200));
  EXPECT_TRUE(s.overlaps(0, 199, 300));
  EXPECT_FALSE(s.overlaps(1, 5, 5));  // empty range
}

TEST(VkHazards, IndependentCommandsNeedNoBarrier) {
  HazardTracker t;
  EXPECT_EQ(next(t, {read(1, 0, 256), read(1, 256, 512), write(1, 512, 768)}), Hazard::None);
  EXPECT_EQ(next(t, {read(1, 0, 256), read(2, 0, 256), write(1, 768, 1024)}), Hazard::None);
  EXPECT_EQ(next(t, {write(3, 0, 64)}), Hazard::None);
}

TEST(VkHazards, ReadAfterWriteNeedsAMemoryBarrier) {
  HazardTracker t;
  EXPECT_EQ(next(t, {write(1, 0, 256)}), Hazard::None);
  EXPECT_EQ(next(t, {read(1, 128, 132)}), Hazard::Memory);
  // The barrier published the write: reading it again is free.
  EXPECT_EQ(next(t, {read(1, 0, 256)}), Hazard::None);
}

TEST(VkHazards, WriteAfterWriteNeedsAMemoryBarrier) {
  HazardTracker t;
  EXPECT_EQ(next(t, {write(1, 0, 256)}), Hazard::None);
  EXPECT_EQ(next(t, {write(1, 255, 256)}), Hazard::Memory);
}

TEST(VkHazards, WriteAfterReadNeedsOnlyOrdering) {
  HazardTracker t;
  EXPECT_EQ(next(t, {read(1, 0, 256)}), Hazard::None);
  EXPECT_EQ(next(t, {write(1, 0, 256)}), Hazard::Execution);
}

TEST(VkHazards, OrderingBarrierStillPublishesPendingWrites) {
  HazardTracker t;
  EXPECT_EQ(next(t, {write(1, 0, 256)}), Hazard::None);  // pending write of A
  EXPECT_EQ(next(t, {read(2, 0, 256)}), Hazard::None);
  // WAR on B; an execution-only barrier here would forget A's write unpublished.
  EXPECT_EQ(next(t, {write(2, 0, 256)}), Hazard::Memory);
  EXPECT_EQ(next(t, {read(1, 0, 256)}), Hazard::None);
}

TEST(VkHazards, InPlaceUpdateChainsNeedOneBarrierPerLink) {
  HazardTracker t;
  int barriers = 0;
  for (int i = 0; i < 100; ++i) barriers += next(t, {read_write(7, 0, 4096)}) != Hazard::None;
  EXPECT_EQ(barriers, 99);
}

TEST(VkHazards, InterleavedChainsShareBarriers) {
  // Four independent chains, stepped round-robin: a barrier before each step of chain 0 orders
  // all four chains at once, so 4 x 25 steps need 24 barriers.
  HazardTracker t;
  int barriers = 0;
  for (int step = 0; step < 25; ++step)
    for (uint64_t chain = 0; chain < 4; ++chain)
      barriers += next(t, {read_write(1, chain * 256, chain * 256 + 256)}) != Hazard::None;
  EXPECT_EQ(barriers, 24);
}

TEST(VkHazards, ResetForgetsEverything) {
  HazardTracker t;
  next(t, {write(1, 0, 256)});
  t.reset();
  EXPECT_EQ(next(t, {read(1, 0, 256)}), Hazard::None);
}

}  // namespace
}  // namespace vkg::vk
