// Threads for host work off the realizing thread. HostWorker runs it in the order it is given:
// what tells a device's queue that copies from other devices have arrived (devices/vk_device.cpp,
// in the order of the values it signals). HostPool runs each piece at once on a thread of its own:
// copies between devices (core/copy_item.cpp), each of which waits for its own buffers' writers,
// so that a copy waiting for a long kernel does not hold up a later copy of other buffers.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

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

// Runs each piece of work given as soon as it is given, on an idle thread or a new one; its
// threads stay for later work. Work that must follow other work waits for it itself.
class HostPool {
 public:
  HostPool() = default;
  // Runs what was given before returning.
  ~HostPool() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    ready_.notify_all();
    threads_.clear();  // joins: no thread is added once stopping_ is set
  }
  HostPool(const HostPool&) = delete;
  HostPool& operator=(const HostPool&) = delete;

  // Starts `work`; it must not throw (a task keeps its own error for whoever waits on it).
  void post(std::function<void()> work) {
    {
      std::lock_guard lock(mu_);
      work_.push_back(std::move(work));
      if (idle_ < work_.size()) threads_.emplace_back([this] { loop(); });
    }
    ready_.notify_one();
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

  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> work_;
  size_t idle_ = 0;  // threads waiting for work: a new one starts when there are fewer than work_
  bool stopping_ = false;
  std::vector<std::jthread> threads_;
};

}  // namespace vkg
