// Which queue family copies run on (vk/queue_families.hpp), over the families real drivers report,
// written out by hand; that Lavapipe, with one family, runs the single-queue path in CI; and, on a
// GPU with a copy engine, that an upload there overlaps kernels.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include <vkgrad/shaders/embedded.hpp>
#include <vkgrad/vk/args.hpp>
#include <vkgrad/vk/device.hpp>
#include <vkgrad/vk/queue.hpp>
#include <vkgrad/vk/queue_families.hpp>
#include <vkgrad/vk/runtime.hpp>

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

// On a device with a copy engine (a discrete GPU), an upload into fresh memory runs on its queue
// while a long chain of kernels runs on the compute queue: the upload's point completes before the
// chain's. Skipped where copies share the compute queue (Lavapipe in CI): one queue runs them in
// order. The chain, 20,000 dependent dispatches over 4 MiB, takes 100 ms or more on a GPU; the
// upload of 16 MiB a few ms.
TEST(VkQueueFamilies, OnACopyEngineAnUploadRunsWhileKernelsRun) {
  Runtime& rt = test::vk_runtime();
  Device& d = rt.device;
  if (!d.transfer_timeline() || d.caps().transfer_family == int(d.caps().compute_family))
    GTEST_SKIP() << d.caps().name << " has no copy-engine queue";
  constexpr uint32_t kWords = 1 << 20, kSteps = 20000;
  Buffer counter = rt.allocator.allocate(kWords * 4);
  if (counter.mapped()) GTEST_SKIP() << "device memory is mapped: uploads are a memcpy";
  const std::vector<uint32_t> zeros(kWords, 0);
  rt.transfer.upload(counter, std::as_bytes(std::span(zeros)));
  Program inc(d, "inc_u32", shaders::get("inc_u32").spirv, 12);
  Queue q(d, rt.allocator);
  for (uint32_t s = 0; s < kSteps; ++s)
    q.dispatch(inc, Groups::cover(kWords / 64, d.caps().limits),
               ArgPack().address(counter).u32(kWords).bytes(), {{&counter, Access::ReadWrite}});
  const uint64_t chain = q.submit();
  std::vector<uint32_t> data(4 << 20);
  for (uint32_t i = 0; i < data.size(); ++i) data[i] = i * 2654435761u;
  Buffer fresh = rt.allocator.allocate(data.size() * 4);
  const Transfer::Pending up =
      rt.transfer.upload(fresh, std::as_bytes(std::span(data)), 0, /*wait_for_queue=*/false);
  ASSERT_NE(up.semaphore, VkSemaphore(VK_NULL_HANDLE))
      << "the upload did not go to the copy engine";
  d.transfer_timeline()->wait(up.value);
  EXPECT_FALSE(d.timeline().done(chain)) << "the kernels ended before the upload: no overlap seen";
  q.wait(chain);
  std::vector<uint32_t> back(data.size()), count(kWords);
  rt.transfer.download(fresh, std::as_writable_bytes(std::span(back)));
  rt.transfer.download(counter, std::as_writable_bytes(std::span(count)));
  EXPECT_EQ(back, data);
  EXPECT_EQ(count, std::vector<uint32_t>(kWords, kSteps));
}

}  // namespace
}  // namespace vkg::vk
