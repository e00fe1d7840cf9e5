// Which queue family copies run on (vk/queue_families.hpp), over the families real drivers report,
// written out by hand; and that Lavapipe, with one family, runs the single-queue path in CI.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include <vkgrad/vk/device.hpp>
#include <vkgrad/vk/queue_families.hpp>

#include "support/vk_fixture.hpp"

namespace vkg::vk {
namespace {

constexpr VkQueueFlags G = VK_QUEUE_GRAPHICS_BIT, C = VK_QUEUE_COMPUTE_BIT,
                       T = VK_QUEUE_TRANSFER_BIT, S = VK_QUEUE_SPARSE_BINDING_BIT;

std::vector<VkQueueFamilyProperties> families(std::vector<std::pair<VkQueueFlags, uint32_t>> list) {
  std::vector<VkQueueFamilyProperties> out;
  for (auto [flags, count] : list) {
    VkQueueFamilyProperties p{};
    p.queueFlags = flags;
    p.queueCount = count;
    p.timestampValidBits = 64;
    out.push_back(p);
  }
  return out;
}

TEST(VkQueueFamilies, OneFamilyMeansCopiesShareTheComputeQueue) {
  // Lavapipe, Intel integrated GPUs: one family does everything.
  EXPECT_EQ(choose_transfer_family(families({{G | C | T, 1}}), 0), -1);
  EXPECT_EQ(choose_transfer_family(families({{G | C | T | S, 16}}), 0), -1);
}

TEST(VkQueueFamilies, ADiscreteGpusCopyEngineIsChosen) {
  // NVIDIA: graphics, a transfer-only copy engine, then compute-only (what kernels run on).
  EXPECT_EQ(choose_transfer_family(families({{G | C | T | S, 16}, {T | S, 2}, {C | T | S, 8}}), 2),
            1);
  // AMD (RADV): graphics, compute, then the SDMA engines.
  EXPECT_EQ(choose_transfer_family(families({{G | C | T | S, 1}, {C | T | S, 4}, {T | S, 2}}), 1),
            2);
}

TEST(VkQueueFamilies, AFamilyWithComputeIsNeverTheCopyEngine) {
  // A second compute family is another compute engine: copies stay on the compute queue.
  EXPECT_EQ(choose_transfer_family(families({{G | C | T, 1}, {C | T, 4}}), 1), -1);
  EXPECT_EQ(choose_transfer_family(families({{G | C | T, 1}, {C | T, 4}}), 0), -1);
}

TEST(VkQueueFamilies, TransferOnlyIsPreferredOverComputeLessGraphics) {
  // A graphics family without compute can copy, but a pure copy engine is the better choice.
  EXPECT_EQ(choose_transfer_family(families({{C | T, 1}, {G | T, 1}, {T, 1}}), 0), 2);
  EXPECT_EQ(choose_transfer_family(families({{C | T, 1}, {G | T, 1}}), 0), 1);
}

TEST(VkQueueFamilies, VideoFamiliesAreNeverTheCopyEngine) {
  constexpr VkQueueFlags Decode = 0x20, Encode = 0x40;  // VK_QUEUE_VIDEO_{DECODE,ENCODE}_BIT_KHR
  // NVIDIA with video: graphics, copy engine, compute, then decode and encode families that also
  // report transfer. The copy engine is chosen, wherever the video families are listed.
  EXPECT_EQ(choose_transfer_family(
                families({{G | C | T | S, 16}, {T | Decode, 1}, {T | S, 2}, {T | Encode, 1}}), 0),
            2);
  // Only video families besides compute: no copy engine.
  EXPECT_EQ(choose_transfer_family(families({{C | T, 1}, {T | Decode, 1}, {T | Encode, 1}}), 0),
            -1);
  EXPECT_EQ(choose_transfer_family(families({{C | T, 1}, {T | S | Decode | Encode, 2}}), 0), -1);
}

TEST(VkQueueFamilies, FamiliesWithoutQueuesOrTransferAreSkipped) {
  EXPECT_EQ(choose_transfer_family(families({{C | T, 1}, {T, 0}}), 0), -1);
  EXPECT_EQ(choose_transfer_family(families({{C | T, 1}, {S, 1}}), 0), -1);
  // The compute family itself is never its own copy engine, whatever its flags.
  EXPECT_EQ(choose_transfer_family(families({{T, 1}}), 0), -1);
  EXPECT_EQ(choose_transfer_family(families({}), -1), -1);
}

// What CI runs: Lavapipe has one queue family, so there is no copy-engine queue and copies go
// through the compute queue's timeline.
TEST(VkQueueFamilies, LavapipeRunsTheSingleQueuePath) {
  Device& d = test::vk_runtime().device;
  if (d.caps().type != VK_PHYSICAL_DEVICE_TYPE_CPU)
    GTEST_SKIP() << "not Lavapipe: " << d.caps().name;
  if (std::getenv("VKG_TRANSFER_QUEUE_ON_COMPUTE")) {  // the CTest entry tensor_copy_timeline
    EXPECT_EQ(d.caps().transfer_family, int(d.caps().compute_family));
    EXPECT_NE(d.transfer_timeline(), nullptr);
    EXPECT_NE(d.transfer_timeline(), &d.timeline());
    return;
  }
  EXPECT_EQ(d.caps().transfer_family, -1);
  EXPECT_EQ(d.transfer_timeline(), nullptr);
}

}  // namespace
}  // namespace vkg::vk
