// Errors of the asynchronous realize that a real device meets rarely (a lost device, a copy that
// failed on the copy thread), through a device that queues its kernels until a wait and can be
// told to fail: every device of a failed realize is waited for, a copy's error names the copy and
// the realize that started it, and the host never reads memory a failed copy was to fill. Also
// that the exit wait does not hang on a realize another thread holds.
#include <gtest/gtest.h>

#include <unistd.h>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include <vkgrad/codegen/cpu_interpreter.hpp>
#include <vkgrad/codegen/get_program.hpp>
#include <vkgrad/core/device.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/jit_capture.hpp>
#include <vkgrad/core/mapped_memory.hpp>
#include <vkgrad/vkgrad.hpp>

#include "support/child_process.hpp"

namespace vkg {
namespace {

// Its bytes outlive it: a copy thread may still read or write them after the realize that freed
// the buffer returned (a Vulkan allocator holds freed memory until the queue passed its use).
struct FlakyMemory final : Allocation {
  std::shared_ptr<std::vector<std::byte>> kept;
  std::span<std::byte> bytes;
};

// Runs its queued kernels on the reference interpreter at synchronize(); its memory is host
// memory, so copies to and from it run on the copy thread (core/copy_item.hpp), after the events
// it is given (wait_for), as a GPU's queue does.
class FlakyDevice final : public Device {
 public:
  explicit FlakyDevice(std::string name) : name_(std::move(name)) {}
  const std::string& name() const override { return name_; }
  std::shared_ptr<Allocation> allocate(const Buffer& buffer) override {
    auto a = std::make_shared<FlakyMemory>();
    a->kept = std::make_shared<std::vector<std::byte>>(buffer.capacity_bytes());
    a->bytes = *a->kept;
    kept_.push_back(a->kept);  // a few bytes per test: never freed
    return a;
  }
  void copy_in(Allocation& dst, std::span<const std::byte> src) override {
    synchronize();
    std::copy(src.begin(), src.end(), static_cast<FlakyMemory&>(dst).bytes.begin());
  }
  void copy_out(Allocation& src, std::span<std::byte> dst) override {
    synchronize();
    const auto& b = static_cast<FlakyMemory&>(src).bytes;
    std::copy(b.begin(), b.begin() + std::ptrdiff_t(dst.size()), dst.begin());
  }
  void run(const ScheduleItem& item, std::span<Allocation* const> memory,
           const RunOptions& options) override {
    std::vector<std::span<std::byte>> m;  // kept_ holds them
    for (Allocation* a : memory) m.push_back(static_cast<FlakyMemory*>(a)->bytes);
    queued_.push_back({item, options, std::move(m)});
  }
  // A lost device throws from the throttle's wait, after its batch was submitted: here it stays
  // queued, as an unsubmitted batch would.
  std::vector<RunStat> flush() override {
    if (std::exchange(fail_next_flush, false))
      throw DeviceLost(name_ + ": lost while the realize waited for an earlier one");
    return {};
  }
  std::vector<RunStat> synchronize() override {
    for (const auto& e : std::exchange(events_, {})) e.wait();
    for (const Queued& q : std::exchange(queued_, {})) {
      const Program p = get_program(q.item, DeviceTraits{}, q.options);
      std::vector<HostBuffer> buffers;
      for (std::span<std::byte> m : q.memory) buffers.emplace_back(m);
      run_program(p, buffers, var_values(p, q.item));
    }
    return {};
  }
  std::byte* host_pointer(Allocation& memory) override {
    return static_cast<FlakyMemory&>(memory).bytes.data();
  }
  // The copy thread waits for what is queued: run here, on the realizing thread. Armed, the
  // copy fails on the copy thread once `gate` is ready (as if the device was lost meanwhile).
  std::function<void()> when_queued_done() override {
    synchronize();
    if (!std::exchange(fail_next_copy, false)) return [] {};
    return [this, gate = gate] {
      gate.wait();
      copy_failed = true;
      throw DeviceLost(name_ + ": lost before the copy read it");
    };
  }
  void wait_for(std::shared_future<void> event) override { events_.push_back(std::move(event)); }

  size_t queued() const { return queued_.size(); }

  bool fail_next_flush = false, fail_next_copy = false;
  std::shared_future<void> gate = ready();
  std::atomic<bool> copy_failed{false};

  static std::shared_future<void> ready() {
    std::promise<void> p;
    p.set_value();
    return p.get_future().share();
  }

 private:
  struct Queued {
    ScheduleItem item;
    RunOptions options;
    std::vector<std::span<std::byte>> memory;
  };
  std::string name_;
  std::vector<Queued> queued_;
  std::vector<std::shared_future<void>> events_;
  std::vector<std::shared_ptr<std::vector<std::byte>>> kept_;
};

const bool flaky_registered = register_device(
    "FLAKY", [](const std::string& name) { return std::make_unique<FlakyDevice>(name); });

FlakyDevice& flaky(int i) {
  return static_cast<FlakyDevice&>(device("FLAKY:" + std::to_string(i)));
}

// One realize on two devices, the first of which is lost at its flush: the other is still
// flushed and waited for before the error leaves, so no kernel of the failed realize stays queued
// to write memory the allocator hands out again.
TEST(AsyncRealizeErrors, ALostDeviceAtFlushLeavesNoOtherDevicesKernelsQueued) {
  Tensor x(std::vector<float>{1, 2, 3}, {3}, "FLAKY:1");
  Tensor y(std::vector<float>{4, 5, 6}, {3}, "FLAKY:2");
  for (int lost : {1, 2}) {  // whichever of the two is flushed first
    Tensor a = x * 2, b = y * 3;
    flaky(lost).fail_next_flush = true;
    std::vector<Tensor*> both{&a, &b};
    try {
      realize(both);
      ADD_FAILURE() << "the lost device's error was not raised";
    } catch (const DeviceLost& e) {
      EXPECT_NE(std::string(e.what()).find("FLAKY:" + std::to_string(lost) + ": lost"),
                std::string::npos)
          << e.what();
    }
    EXPECT_EQ(flaky(1).queued(), 0u) << "lost " << lost;
    EXPECT_EQ(flaky(2).queued(), 0u) << "lost " << lost;
    // Nothing was realized: the same tensors realize again, whole.
    EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{2, 4, 6}));
    EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{12, 15, 18}));
  }
}

// A copy that failed on the copy thread after its realize returned: the next realize raises its
// error once, naming the copy and the realize that started it, not as its own; that realize's
// tensor is then either realized or realizes again (whichever moment the error surfaced at).
TEST(AsyncRealizeErrors, AnEarlierCopysErrorNamesTheCopy) {
  Tensor x(std::vector<float>{1, 2, 3}, {3}, "FLAKY:1");
  Tensor w(std::vector<float>{7, 8, 9}, {3}, "FLAKY:2");
  flaky(1).copy_failed = false;
  flaky(1).fail_next_copy = true;
  // The copy fails on its thread once the gate opens, after its realize returned (else that
  // realize's end may take its error first).
  std::promise<void> open;
  flaky(1).gate = open.get_future().share();
  Tensor moved = (x + 1).to("FLAKY:2").realize();
  open.set_value();
  flaky(1).gate = FlakyDevice::ready();
  for (int i = 0; i < 2000 && !flaky(1).copy_failed; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(flaky(1).copy_failed);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // its future is set just after
  Tensor z = w * 2;
  try {
    z.realize();
    ADD_FAILURE() << "the copy's error was not raised";
  } catch (const DeviceLost& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("copy 12, FLAKY:2 <- FLAKY:1 (started by realize #"), std::string::npos)
        << what;
    EXPECT_NE(what.find("FLAKY:1: lost before the copy read it"), std::string::npos) << what;
  }
  EXPECT_EQ(z.to_vector<float>(), (std::vector<float>{14, 16, 18}));  // raised once only
  EXPECT_EQ((x * 3).to("FLAKY:2").to_vector<float>(), (std::vector<float>{3, 6, 9}));  // usable
}

// mapped_memory (vkg::dist's way to MPI) of a tensor whose copy fails while it waits: the copy's
// error, not the stale bytes of the memory it did not fill.
TEST(AsyncRealizeErrors, MappedMemoryRaisesTheErrorOfTheCopyThatFedIt) {
  Tensor x(std::vector<float>{1, 2, 3}, {3}, "FLAKY:1");
  std::promise<void> open;
  flaky(1).gate = open.get_future().share();
  flaky(1).fail_next_copy = true;
  Tensor moved = x.to("FLAKY:2").realize();
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    open.set_value();
  });
  try {
    (void)mapped_memory(moved);
    ADD_FAILURE() << "mapped_memory handed out the memory a failed copy was to fill";
  } catch (const DeviceLost& e) {
    EXPECT_NE(std::string(e.what()).find("copy 12, FLAKY:2 <- FLAKY:1"), std::string::npos)
        << e.what();
  }
  opener.join();
  flaky(1).gate = FlakyDevice::ready();
}

// The exit wait takes the engine, so that it does not use a device's queue while another thread
// records a realize; a thread that holds the engine at exit (here forever) delays the exit by the
// wait's limit, once, and the devices are then left alone (DEBUG=1 says so).
TEST(AsyncRealizeErrors, ExitDoesNotHangOnAHeldEngine) {
  const std::filesystem::path log = std::filesystem::temp_directory_path() /
                                    ("vkg_exit_held_" + std::to_string(::getpid()) + ".log");
  const auto t0 = std::chrono::steady_clock::now();
  const int status = test::run_child("AsyncRealizeErrorsChild.*",
                                     {"VKG_TEST_EXIT_HELD=1", "DEBUG=1"}, log.string());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::stringstream text;
  text << std::ifstream(log).rdbuf();
  EXPECT_EQ(status, 0) << text.str();
  EXPECT_NE(text.str().find("exit: a realize still holds the engine"), std::string::npos)
      << text.str();
  // The wait gives up once, not once per registration (each pipeline compile registers it again,
  // and the child compiles three): ~2 s and the child's start, not ~8 s.
  EXPECT_GE(s, 2.0) << text.str();
  EXPECT_LT(s, 6.0) << text.str();
  std::filesystem::remove(log);
}

TEST(AsyncRealizeErrorsChild, ExitsWhileAnotherThreadHoldsTheEngine) {
  if (!std::getenv("VKG_TEST_EXIT_HELD"))
    GTEST_SKIP() << "runs only as ExitDoesNotHangOn...'s child";
  EXPECT_EQ((Tensor(std::vector<float>{1, 2}, {2}, "CPU") * 2).to_vector<float>(),
            (std::vector<float>{2, 4}));  // a device is open: the exit wait is registered
  Tensor v(std::vector<float>{1, -2, 3}, {3}, "VK");
  EXPECT_EQ((-v.exp2().relu()).to_vector<float>(), (std::vector<float>{-2, -0.25f, -8}));
  EXPECT_EQ((v * 3).to_vector<float>(), (std::vector<float>{3, -6, 9}));
  EXPECT_EQ(v.sum().item<float>(), 2.0f);
  std::promise<void> held;
  std::thread([&held] {
    std::lock_guard lock(engine_mutex());
    held.set_value();
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  }).detach();
  held.get_future().wait();
  std::fflush(stdout);
  std::exit(0);
}

}  // namespace
}  // namespace vkg
