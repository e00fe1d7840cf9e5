// Queue::wait_before_next: a submission that waits on a timeline semaphore the host signals (how
// a copy from another device tells a queue its data has arrived) does not run before the signal,
// and runs after it; commands recorded before the wait do not wait.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include <vkgrad/vk/queue.hpp>

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

}  // namespace
}  // namespace vkg::vk
