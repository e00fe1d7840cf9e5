// A thread that runs host work in the order it is given: what moves bytes between two devices'
// memories (core/copy_item.cpp) and what tells a device's queue that they have arrived
// (devices/vk_device.cpp), without the realizing thread waiting for either.
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace vkg {

class HostWorker {
 public:
  HostWorker() : thread_([this](std::stop_token stop) { loop(stop); }) {}
  // Runs what was given before returning.
  ~HostWorker() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    ready_.notify_all();
  }
  HostWorker(const HostWorker&) = delete;
  HostWorker& operator=(const HostWorker&) = delete;

  // Queues `work`; it must not throw (a task keeps its own error for whoever waits on it).
  void post(std::function<void()> work) {
    {
      std::lock_guard lock(mu_);
      work_.push_back(std::move(work));
    }
    ready_.notify_one();
  }

 private:
  void loop(std::stop_token) {
    for (;;) {
      std::function<void()> next;
      {
        std::unique_lock lock(mu_);
        ready_.wait(lock, [&] { return stopping_ || !work_.empty(); });
        if (work_.empty()) return;  // stopping, and everything given has run
        next = std::move(work_.front());
        work_.pop_front();
      }
      next();
    }
  }

  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> work_;
  bool stopping_ = false;
  std::jthread thread_;  // last: joined before the queue it reads dies
};

}  // namespace vkg
