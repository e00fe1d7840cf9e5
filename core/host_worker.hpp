// Threads for host work off the realizing thread. HostWorker runs it in the order it is given:
// what tells a device's queue that copies from other devices have arrived (devices/vk_device.cpp,
// in the order of the values it signals). HostPool runs each piece at once on a thread of a pool:
// copies between devices (core/copy_item.cpp), each of which waits for its own buffers' writers,
// so that a copy waiting for a long kernel does not hold up a later copy of other buffers.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <vkgrad/core/error.hpp>

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
      ++posted_;
    }
    ready_.notify_one();
  }

  // Blocks until every piece of work posted before the call has returned, not only done what a
  // waiter can see: a device's bridge value is reached inside the driver's vkSignalSemaphore,
  // which may still be running on this thread (in the validation layer) when a wait for the value
  // returns; the exit wait must not let the drivers' statics be destroyed under it.
  void drain() {
    std::unique_lock lock(mu_);
    const uint64_t target = posted_;
    idle_.wait(lock, [&] { return finished_ >= target; });
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
      next = nullptr;  // what it holds goes before it counts as finished
      {
        std::lock_guard lock(mu_);
        ++finished_;
      }
      idle_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable ready_, idle_;
  std::deque<std::function<void()>> work_;
  uint64_t posted_ = 0, finished_ = 0;  // under mu_
  bool stopping_ = false;
  std::jthread thread_;  // last: joined before the queue it reads dies
};

// Runs each piece of work given as soon as it is given, on an idle thread or a new one, up to
// `max_threads`; past that, work waits its turn in the order it was given. Its threads stay for
// later work. Work that must follow other work waits for it itself, and may wait only for work
// given before it: then the oldest unfinished piece always has a thread, and a bounded pool
// cannot deadlock (a realize of 2,000 copies started 2,000 threads before the bound).
class HostPool {
 public:
  explicit HostPool(size_t max_threads = 32) : max_threads_(max_threads < 1 ? 1 : max_threads) {}
  // Runs what was given before returning. Nothing may be posted once destruction begins (the
  // copy pool is a function-local static: destroyed at exit, after every realize has returned).
  ~HostPool() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    ready_.notify_all();
    threads_.clear();  // joins
  }
  HostPool(const HostPool&) = delete;
  HostPool& operator=(const HostPool&) = delete;

  // Starts `work`; it must not throw (a task keeps its own error for whoever waits on it). A
  // thread that cannot be started leaves the work to the threads there are; with none, the work
  // is not taken and post throws a vkg::Error.
  void post(std::function<void()> work) {
    {
      std::lock_guard lock(mu_);
      if (idle_ <= work_.size() && threads_.size() < max_threads_) {
        try {
          threads_.emplace_back([this] { loop(); });
        } catch (const std::system_error& e) {
          if (threads_.empty())
            throw Error(std::string("cannot start a host thread for a copy between devices: ") +
                        e.what());
        }
      }
      work_.push_back(std::move(work));
    }
    ready_.notify_one();
  }

  size_t threads() {
    std::lock_guard lock(mu_);
    return threads_.size();
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> next;
      {
        std::unique_lock lock(mu_);
        ++idle_;
        ready_.wait(lock, [&] { return stopping_ || !work_.empty(); });
        --idle_;
        if (work_.empty()) return;  // stopping, and everything given has run
        next = std::move(work_.front());
        work_.pop_front();
      }
      next();
    }
  }

  const size_t max_threads_;
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> work_;
  size_t idle_ = 0;  // threads waiting for work: a new one starts when there are no more than work_
  bool stopping_ = false;
  std::vector<std::jthread> threads_;
};

}  // namespace vkg
