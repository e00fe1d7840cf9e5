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
#include <cmath>
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

// What the library prints (DEBUG=1) when another thread's realize begins to wait during exit.
constexpr const char* kWaitLine = "exit: a realize or read begun on another thread during exit";

// Runs ExitThreadsChild.* with VKG_TEST_EXIT_THREAD=`mode` `runs` times: each child must exit with
// status 0 within 120 s and say that its check at exit passed (and, with `another_thread_waits`,
// that a realize of another thread waited). The exit wait waits up to 60 s for a worker that holds
// the engine (VKG_EXIT_LOCK_WAIT_MS; 2 s by default): on a loaded machine a worker held it past
// 2 s, the wait left the devices alone, and the check found work in flight.
void expect_clean_exits(const std::string& mode, int runs, std::vector<std::string> env = {},
                        bool another_thread_waits = true) {
  env.push_back("VKG_TEST_EXIT_THREAD=" + mode);
  env.push_back("DEBUG=1");
  env.push_back("VKG_EXIT_LOCK_WAIT_MS=60000");
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
    if (another_thread_waits)
      EXPECT_NE(text.str().find(kWaitLine), std::string::npos) << "run " << run << ":\n"
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

// A joined thread that catches each realize's error and goes on, as a pool thread does with each
// task's, until it has had 5: one deadline, measured from when exit began, holds for all of them,
// so its errors 2 to 5 come at once (before: each realize waited the whole 1000 ms again, and the
// join took 5 s; a pool of N tasks held the exit N times the wait).
TEST(ExitThreads, AThreadThatCatchesTheErrorAndGoesOnGetsTheNextAtOnce) {
  expect_clean_exits("pool", 1, {"VKG_EXIT_THREAD_WAIT_MS=1000"});
}

// The thread running exit realizes in an atexit handler that runs after the exit wait: new
// kernels (compiled now, which Lavapipe does on its queue thread as they first run), a copy
// between devices and a Jit replay, none of them read. Each has completed when it returns, as
// nothing else waits for it before the drivers' statics are destroyed (before: it returned once
// submitted, and the handler found the work still in flight).
TEST(ExitThreads, WorkTheExitingThreadStartsIsDoneBeforeItsRealizeReturns) {
  expect_clean_exits("atexit", 2, {}, false);
}

// Shared by the child's threads and its atexit handler: atomics outlive every static destructor.
std::atomic<int> begun{0}, ended{0};
std::atomic<bool> failed_with_exit_error{false};
std::thread joined_at_exit;  // modes "joined", "pool"; joined by the atexit handler
// Mode "pool": the errors the thread caught, and when the first and the last came.
std::atomic<int> exit_errors{0};
std::atomic<std::chrono::steady_clock::rep> first_error_at{0}, last_error_at{0};

// Realizes kernels and copies between VK and VK:1 until a realize throws `errors` times (catching
// all but the last, as a pool thread catches each task's). Each step runs the kernels of the one
// before on new data: compiled once, so that a realize holds the engine briefly.
void realize_until_an_error(int errors) {
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
      const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
      if (exit_errors++ == 0) first_error_at = now;
      last_error_at = now;
      if (!failed_with_exit_error || exit_errors.load() >= errors) return;
      continue;
    }
    ++ended;
    x = next_x;
    y = next_y;
  }
}

// Whether this child's output so far (a file: test::run_child's log) holds `line`.
bool log_says(const char* line) {
  std::fflush(stdout);
  std::stringstream text;
  text << std::ifstream("/proc/self/fd/1").rdbuf();
  return text.str().find(line) != std::string::npos;
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
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (begun.load() == ended.load()) {
    if (std::chrono::steady_clock::now() > give_up) fail_at_exit("the thread began no realize");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // a loaded machine has 2 cores
  }
  const int in_realize = begun.load();
  // Until the library says the thread's realize waits (it prints to this child's log): a fixed
  // sleep was too short on a loaded machine, and the child ended before the thread got there.
  while (!log_says(kWaitLine)) {
    if (std::chrono::steady_clock::now() > give_up)
      fail_at_exit("the thread's realize never waited");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
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

// Mode "pool": the thread ends after its fifth error, all past the one deadline.
void check_pool_at_exit() {
  joined_at_exit.join();
  if (!failed_with_exit_error || exit_errors.load() != 5)
    fail_at_exit("the thread had " + std::to_string(exit_errors.load()) + " errors, not 5 of exit");
  const auto spread = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::duration(last_error_at.load() - first_error_at.load()));
  // Waiting again would take 4 x 1000 ms; throwing at once takes what building 4 graphs takes.
  if (spread >= std::chrono::milliseconds(1000))
    fail_at_exit("errors 2 to 5 came " + std::to_string(spread.count()) +
                 " ms after the first: each waited again");
  std::printf("exit check: ok\n");
  std::fflush(stdout);
}

// Mode "atexit": the Jit that the handler replays, captured (two calls) while main ran: a kernel
// on VK, a copy to VK:1 and a kernel there.
std::unique_ptr<Jit> jit_at_exit;

// Whether the devices have run everything submitted to them.
void expect_idle(const std::string& after) {
  for (const char* name : {"VK", "VK:1"}) {
    const Device::QueueCounts q = device(name).queue_counts();
    if (q.submitted == 0 || q.completed != q.submitted)
      fail_at_exit(std::string(name) + " has work in flight after " + after + ": " +
                   std::to_string(q.submitted) + " submitted, " + std::to_string(q.completed) +
                   " completed");
  }
}

void check_realizes_at_exit() {
  // Kernels not compiled before (exp2, a matmul of this size), then a copy and a kernel on VK:1.
  std::vector<float> values(96 * 96);
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(i % 7) * 0.125f;
  const Tensor a(values, {96, 96}, "VK");
  Tensor on_vk = (a.exp2() * 0.25f).matmul(a);
  Tensor on_vk1 = on_vk.to("VK:1").sum(1) - 1.0f;
  Tensor* both[] = {&on_vk, &on_vk1};
  realize(both);
  expect_idle("a realize");
  const std::vector<Tensor> out = (*jit_at_exit)({Tensor::full({128, 128}, 2.0f, {}, "VK")});
  expect_idle("a Jit replay");
  // What they computed: the Jit's sum of (3 * 3 * 128) over 128 x 128 (exact in float), and the
  // first entry of the realize's matmul.
  if (out[0].to_vector<float>() != std::vector<float>{18874368}) fail_at_exit("the replay's value");
  double row0 = 0;
  for (int k = 0; k < 96; ++k)
    row0 += double(std::exp2(values[size_t(k)]) * 0.25f) * double(values[size_t(k) * 96]);
  const float got = on_vk.to_vector<float>()[0];
  if (std::abs(double(got) - row0) > 1e-4 * std::abs(row0))
    fail_at_exit("the realize's value " + std::to_string(got) + ", not " + std::to_string(row0));
  // Here, not as a static: its recording's command buffers go before the drivers' statics do.
  jit_at_exit.reset();
  std::printf("exit check: ok\n");
  std::fflush(stdout);
}

TEST(ExitThreadsChild, ReturnsWhileAnotherThreadRealizes) {
  const char* mode = std::getenv("VKG_TEST_EXIT_THREAD");
  if (!mode) GTEST_SKIP() << "runs only as an ExitThreads test's child";
  if (std::string(mode) == "atexit") {
    jit_at_exit = std::make_unique<Jit>([](const std::vector<Tensor>& in) {
      const Tensor x = (in[0] + 1).to("VK:1");
      return std::vector<Tensor>{x.matmul(x).sum()};
    });
    // x = v + 1 everywhere: each entry of x @ x is 128 (v + 1)^2, the sum 128^3 (v + 1)^2.
    for (float v : {0.0f, 1.0f}) {
      const std::vector<Tensor> out = (*jit_at_exit)({Tensor::full({128, 128}, v, {}, "VK")});
      EXPECT_EQ(out[0].to_vector<float>(), std::vector<float>{2097152.0f * (v + 1) * (v + 1)});
    }
    std::atexit(check_realizes_at_exit);
    return;
  }
  std::thread worker(realize_until_an_error, std::string(mode) == "pool" ? 5 : 1);
  if (std::string(mode) == "joined" || std::string(mode) == "pool") {
    joined_at_exit = std::move(worker);
  } else {
    worker.detach();
  }
  while (ended.load() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // Registered after the devices opened: runs after the exit wait, before the drivers' statics
  // built when they opened are destroyed.
  std::atexit(std::string(mode) == "joined" ? check_joined_at_exit
              : std::string(mode) == "pool" ? check_pool_at_exit
                                            : check_detached_at_exit);
}

}  // namespace
}  // namespace vkg
