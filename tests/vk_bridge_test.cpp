// Queue::wait_before_next: a submission that waits on a timeline semaphore the host signals (how
// a copy from another device tells a queue its data has arrived) does not run before the signal,
// and runs after it; commands recorded before the wait do not wait.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <vkgrad/vk/queue.hpp>
#include <vkgrad/vk/structure.hpp>

#include "support/vk_fixture.hpp"

namespace vkg::vk {
namespace {

uint32_t first_word(const Buffer& b) {
  uint32_t v = 0;
  test::vk_runtime().transfer.download(b, std::as_writable_bytes(std::span(&v, 1)));
  return v;
}

TEST(VkBridge, ASubmissionWaitsForTheHostSignalAndNoLonger) {
  Runtime& rt = test::vk_runtime();
  Timeline bridge(rt.device.get(), VK_NULL_HANDLE);
  Buffer before = rt.allocator.allocate(256), after = rt.allocator.allocate(256);
  {
    Queue q(rt.device, rt.allocator);
    q.fill(before, 7);
    q.wait_before_next(bridge.semaphore(), 1);
    const uint64_t ahead = q.last_submitted();  // the fill went before the wait
    q.fill(after, 9);
    const uint64_t waiting = q.submit();
    ASSERT_GT(waiting, ahead);
    EXPECT_TRUE(rt.device.timeline().wait(ahead, 5'000'000'000ull));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(rt.device.timeline().done(waiting)) << "ran before the bridge was signalled";
    std::thread signaller([&] { bridge.signal(1); });
    EXPECT_TRUE(rt.device.timeline().wait(waiting, 5'000'000'000ull));
    signaller.join();
    // Downloads after the signal: a transfer submitted behind the waiting submission would signal
    // the queue's timeline only after it.
    EXPECT_EQ(first_word(before), 7u);
    EXPECT_EQ(first_word(after), 9u);
  }
}

TEST(VkBridge, AWaitWithNothingRecordedAfterItStillHolds) {
  Runtime& rt = test::vk_runtime();
  Timeline bridge(rt.device.get(), VK_NULL_HANDLE);
  Queue q(rt.device, rt.allocator);
  q.wait_before_next(bridge.semaphore(), 3);
  const uint64_t point = q.submit();  // an empty submission carries the wait
  EXPECT_FALSE(rt.device.timeline().wait(point, 20'000'000ull));
  bridge.signal(3);
  EXPECT_TRUE(rt.device.timeline().wait(point, 5'000'000'000ull));
}

// Transfer::queue_copy, the copy engine's half of a copy between devices (devices/
// vk_device_copies.cpp): submitted at once, it waits for a semaphore the host signals once it has
// filled the source (written after the submit), copies those bytes, and does not block the host.
// On Lavapipe it runs on the compute queue, or on a timeline of its own there with
// VKG_TRANSFER_QUEUE_ON_COMPUTE=1; on a GPU with a copy engine, on that engine's queue.
TEST(VkBridge, AQueuedCopyWaitsForTheHostToFillItsSource) {
  Runtime& rt = test::vk_runtime();
  Timeline bridge(rt.device.get(), VK_NULL_HANDLE);
  constexpr size_t kWords = 1 << 16;
  Buffer staging = rt.allocator.allocate(kWords * 4, Usage::Staging);
  ASSERT_NE(staging.mapped(), nullptr);
  Buffer dst = rt.allocator.allocate(kWords * 4);
  VkSemaphoreSubmitInfo wait =
      structure<VkSemaphoreSubmitInfo>(VK_STRUCTURE_TYPE_SEMAPHORE_SUBMIT_INFO);
  wait.semaphore = bridge.semaphore();
  wait.value = 1;
  wait.stageMask = VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT;
  const uint64_t point = rt.transfer.queue_copy(staging, 0, dst, 0, kWords * 4, {&wait, 1},
                                                /*host_wrote=*/true);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(rt.transfer.timeline().done(point)) << "ran before the bridge was signalled";
  std::vector<uint32_t> words(kWords);
  for (uint32_t i = 0; i < kWords; ++i) words[i] = i * 2654435761u;
  std::memcpy(staging.mapped(), words.data(), kWords * 4);
  bridge.signal(1);
  EXPECT_TRUE(rt.transfer.timeline().wait(point, 5'000'000'000ull));
  std::vector<uint32_t> back(kWords);
  rt.transfer.download(dst, std::as_writable_bytes(std::span(back)));
  EXPECT_EQ(back, words);
  // A second copy, with no wait, after the first in queue order: its command buffer is the
  // first's again (done), and it sees the first's bytes (a copy of the copy, at an offset).
  Buffer twice = rt.allocator.allocate(kWords * 4);
  const uint64_t second = rt.transfer.queue_copy(dst, 4, twice, 0, kWords * 4 - 4, {}, false);
  EXPECT_GT(second, point);
  rt.transfer.timeline().wait(second);
  rt.transfer.download(twice, std::as_writable_bytes(std::span(back)));
  EXPECT_TRUE(std::equal(words.begin() + 1, words.end(), back.begin()));
}

}  // namespace
}  // namespace vkg::vk
