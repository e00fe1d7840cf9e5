// HostPool (core/host_worker.hpp), the threads copies between devices run on: every piece of work
// runs, at most max_threads at once and in the order given once the bound is reached, and the
// pool keeps no more threads than its bound however much work it is given. HostWorker's drain.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include <vkgrad/core/host_worker.hpp>

namespace vkg {
namespace {

TEST(HostPool, RunsEveryPieceWithAtMostItsBoundOfThreads) {
  constexpr int kWork = 200;
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  int running = 0, most_running = 0, finished = 0;
  std::vector<int> order;
  {
    HostPool pool(4);
    for (int i = 0; i < kWork; ++i)
      pool.post([&, i] {
        std::unique_lock lock(mu);
        most_running = std::max(most_running, ++running);
        order.push_back(i);
        cv.notify_all();  // the test waits for the first four to be running
        cv.wait(lock, [&] { return open; });
        --running;
        ++finished;
        cv.notify_all();
      });
    EXPECT_EQ(pool.threads(), 4u);  // 200 pieces, 4 threads (before the bound: 200)
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return running == 4; });
      open = true;
    }
    cv.notify_all();
  }  // the destructor runs what was given
  EXPECT_EQ(finished, kWork);
  EXPECT_EQ(most_running, 4);
  // Each piece is taken in the order given (several threads may record theirs a little apart).
  for (int i = 0; i < kWork; ++i) EXPECT_LE(order[size_t(i)], i + 3) << "piece " << i;
}

TEST(HostPool, WorkThatWaitsForEarlierWorkFinishesAtABoundOfOne) {
  // A copy waits only for copies given before it: with one thread they run in order, no deadlock.
  std::atomic<int> done{0};
  {
    HostPool pool(1);
    for (int i = 0; i < 50; ++i)
      pool.post([&, i] {
        while (done.load() != i) std::this_thread::yield();
        done.fetch_add(1);
      });
  }
  EXPECT_EQ(done.load(), 50);
}

}  // namespace
}  // namespace vkg

// drain() returns once the work posted before it has returned, not once it has made its result
// visible: a device's exit wait sees its bridge value reached while the thread that signalled it
// is still inside the driver, and must not let the drivers' statics go under that thread.
namespace vkg {
namespace {

TEST(HostWorker, DrainWaitsForWorkToReturnNotOnlyForWhatItSignals) {
  HostWorker worker;
  std::promise<void> signalled;
  std::atomic<bool> returned{false};
  worker.post([&] {
    signalled.set_value();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // still "in the driver"
    returned = true;
  });
  signalled.get_future().wait();
  worker.drain();
  EXPECT_TRUE(returned);
  worker.drain();  // nothing posted since: returns at once
}

}  // namespace
}  // namespace vkg
