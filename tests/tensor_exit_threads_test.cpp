// Threads that still use vkgrad when main returns. Exit waits for the work already submitted (the
// exit wait, core/realize.cpp); from then on a realize or read begun on another thread gets no
// device: it waits for the process to end, and after VKG_EXIT_THREAD_WAIT_MS (10 s) throws a
// vkg::Error, so that exit neither submits work under the drivers' teardown nor hangs on a thread
// it joins. Each case runs in a child process, whose atexit handler (which runs after the exit
// wait) checks what the other thread did and ends the child with status 3 if it is wrong.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <vkgrad/core/device.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/vkgrad.hpp>

#include "support/child_process.hpp"

namespace vkg {
namespace {

// Runs ExitThreadsChild.* with VKG_TEST_EXIT_THREAD=`mode` `runs` times: each child must exit with
// status 0 within 120 s and say that its check at exit passed.
void expect_clean_exits(const std::string& mode, int runs, std::vector<std::string> env = {}) {
  env.push_back("VKG_TEST_EXIT_THREAD=" + mode);
  env.push_back("DEBUG=1");
  for (int run = 0; run < runs; ++run) {
    const std::filesystem::path log =
        std::filesystem::temp_directory_path() /
        ("vkg_exit_thread_" + mode + "_" + std::to_string(::getpid()) + "_" + std::to_string(run));
    const int status = test::run_child("ExitThreadsChild.*", env, log.string(), 120);
    std::stringstream text;
    text << std::ifstream(log).rdbuf();
    EXPECT_EQ(status, 0) << "run " << run << ":\n" << text.str();
    EXPECT_NE(text.str().find("exit check: ok"), std::string::npos) << "run " << run << ":\n"
                                                                    << text.str();
    EXPECT_NE(text.str().find("exit: a realize or read begun on another thread during exit"),
              std::string::npos)
        << "run " << run << ":\n"
        << text.str();
    std::filesystem::remove(log);
  }
}

// A detached thread that realizes copies between two devices behind kernels, in a loop, while
// main returns: the child exits with status 0, every submission has completed when exit goes on
// past the exit wait, nothing is submitted after it, and the thread stays in the realize it began
// (before: it went on realizing, hundreds of times in the check's 500 ms, while the drivers'
// statics were destroyed). The thread running exit still realizes and reads.
TEST(ExitThreads, ADetachedThreadStillRealizingWhenMainReturnsStartsNoNewWork) {
  expect_clean_exits("detached", 2);
}

// A thread that exit joins (as a static thread pool's destructor joins its threads) and that
// realizes in a loop: its realize begun during exit throws a vkg::Error after the wait
// (VKG_EXIT_THREAD_WAIT_MS, here 300 ms), the thread ends, and exit completes (before: the thread
// went on realizing and the join never returned).
TEST(ExitThreads, AThreadJoinedAtExitGetsAnErrorInsteadOfHangingTheExit) {
  expect_clean_exits("joined", 1, {"VKG_EXIT_THREAD_WAIT_MS=300"});
}

// Shared by the child's threads and its atexit handler: atomics outlive every static destructor.
std::atomic<int> begun{0}, ended{0};
std::atomic<bool> failed_with_exit_error{false};
std::thread joined_at_exit;  // mode "joined"; joined by the atexit handler before its destructor

// Realizes kernels and copies between VK and VK:1 until a realize throws. Each step runs the
// kernels of the one before on new data: compiled once, so that a realize holds the engine
// briefly (the exit wait leaves alone a realize that holds it 2 s, compiling for instance).
void realize_until_an_error() {
  const std::vector<float> values(64 * 64, 1.0f / 64);
  const Tensor a(values, {64, 64}, "VK");
  const Tensor b(values, {64, 64}, "VK:1");
  Tensor x = a, y = b;
  for (;;) {
    Tensor next_x = y.to("VK").matmul(a) * 0.5f + a;
    Tensor next_y = x.to("VK:1").matmul(b) * 0.5f + b;
    Tensor* both[] = {&next_x, &next_y};
    ++begun;
    try {
      realize(both);
    } catch (const Error& e) {
      failed_with_exit_error = std::string(e.what()).find("exit began") != std::string::npos;
      if (!failed_with_exit_error) std::printf("unexpected error: %s\n", e.what());
      std::fflush(stdout);
      return;
    }
    ++ended;
    x = next_x;
    y = next_y;
  }
}

[[noreturn]] void fail_at_exit(const std::string& why) {
  std::printf("exit check: FAILED: %s (realizes begun %d, ended %d)\n", why.c_str(), begun.load(),
              ended.load());
  std::fflush(stdout);
  std::_Exit(3);
}

// After the exit wait: the devices are idle, take no new work, and the thread sits in its realize.
void check_detached_at_exit() {
  Device::QueueCounts counts[2] = {device("VK").queue_counts(), device("VK:1").queue_counts()};
  for (const Device::QueueCounts& q : counts)
    if (q.completed != q.submitted)
      fail_at_exit("work in flight after the exit wait: " + std::to_string(q.submitted) +
                   " submitted, " + std::to_string(q.completed) + " completed");
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (begun.load() == ended.load())
    if (std::chrono::steady_clock::now() > give_up) fail_at_exit("the thread began no realize");
  const int in_realize = begun.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  if (ended.load() >= in_realize) fail_at_exit("a realize begun during exit ran");
  if (device("VK").queue_counts().submitted != counts[0].submitted ||
      device("VK:1").queue_counts().submitted != counts[1].submitted)
    fail_at_exit("work submitted during exit");
  // The thread running exit still realizes and reads (a program's atexit handler may save).
  const std::vector<float> doubled =
      (Tensor(std::vector<float>{1, -2}, {2}, "VK") * 2).to_vector<float>();
  if (doubled != std::vector<float>{2, -4}) fail_at_exit("a read at exit gave wrong values");
  std::printf("exit check: ok\n");
  std::fflush(stdout);
}

// Joins the thread as a static pool's destructor would: it must end with the exit's error.
void check_joined_at_exit() {
  joined_at_exit.join();
  if (!failed_with_exit_error) fail_at_exit("the thread ended without the exit's error");
  std::printf("exit check: ok\n");
  std::fflush(stdout);
}

TEST(ExitThreadsChild, ReturnsWhileAnotherThreadRealizes) {
  const char* mode = std::getenv("VKG_TEST_EXIT_THREAD");
  if (!mode) GTEST_SKIP() << "runs only as an ExitThreads test's child";
  std::thread worker(realize_until_an_error);
  if (std::string(mode) == "joined") {
    joined_at_exit = std::move(worker);
  } else {
    worker.detach();
  }
  while (ended.load() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // Registered after the devices opened: runs after the exit wait, before the drivers' statics
  // built when they opened are destroyed.
  std::atexit(std::string(mode) == "joined" ? check_joined_at_exit : check_detached_at_exit);
}

}  // namespace
}  // namespace vkg
