// A realize submits its kernels and returns; the host waits only where it reads a value. Pinned
// here: a realize of a long chain returns with the chain still running and no host wait, the read
// waits and gets the right value, memory freed while in flight is not handed to a new upload
// before the work that read it is done, and an error met on the device after the realize
// returned is a vkg::Error at the next read, with the library usable after it. CTest also runs
// this suite under the validation layer's synchronization validation (VKG_VALIDATION=sync).
#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <vkgrad/codegen/cpu_interpreter.hpp>
#include <vkgrad/codegen/get_program.hpp>
#include <vkgrad/core/device.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/mapped_memory.hpp>
#include <vkgrad/vkgrad.hpp>

#include "support/child_process.hpp"

namespace vkg {
namespace {

// `scale` times a 512 x 512 matrix of ones, `links` times multiplied by a matrix of 1/512 (which
// keeps it exactly), then + 1: a few hundred milliseconds of Lavapipe work whose every element is
// exactly scale + 1. Each scale is a new graph (no realized node of another scale is reused).
Tensor chain(const Tensor& ones, const Tensor& avg, int links, float scale = 1) {
  Tensor c = ones * scale;
  for (int i = 0; i < links; ++i) c = c.matmul(avg);
  return c + 1;
}

struct ChainInputs {
  explicit ChainInputs(int64_t side = 512)
      : side(side),
        ones(Tensor::ones({side, side}).contiguous().realize()),
        avg((Tensor::ones({side, side}) * (1.0f / float(side))).contiguous().realize()) {}
  int64_t side;
  Tensor ones, avg;
};

// Milliseconds since t0.
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The side (512, 1024, 2048 or 4096) of the smallest chains for which `holds(in, attempt)` (the
// condition a test needs: work still running when the host has recorded the next realize) is
// true on kTries attempts in a row. Lavapipe's 512 chains outlast a realize by far (a few hundred
// milliseconds); a GPU finishes those before the host has recorded the next one (an H100 did),
// not 4096 ones (some 130 GFLOP a matmul). One attempt that held could be a side at break-even,
// where the test itself would then flake: both of two hold there only by luck (about 1 in 4), so
// a GPU's test mostly runs one side up (8x the work). A third attempt cost Lavapipe ~0.5 s a test
// for little. Larger sides keep every value exact (1/side is a power of two).
constexpr int kTries = 2;

int64_t side_in_flight(const std::string& what,
                       const std::function<bool(ChainInputs&, int attempt)>& holds) {
  for (int64_t side = 512; side <= 4096; side *= 2) {
    ChainInputs in(side);
    int held = 0;
    while (held < kTries && holds(in, held)) ++held;
    if (held == kTries) {
      std::printf("%s with %lld x %lld matmuls on %d tries\n", what.c_str(),
                  static_cast<long long>(side), static_cast<long long>(side), kTries);
      return side;
    }
  }
  ADD_FAILURE() << "not even 4096 x 4096 matmuls: " << what;
  return 4096;
}

// Two chains of `links` matmuls realized back to back: whether the first was still running when
// the second's realize returned.
bool first_chain_outlasts_a_realize(ChainInputs& in, int attempt, int links) {
  Device& vk = device("VK");
  if (attempt == 0) {
    // Compiles both chains' kernels (a scale is a constant in the first one), then waits.
    EXPECT_EQ(chain(in.ones, in.avg, links, 3).max().item<float>(), 4.0f);
    EXPECT_EQ(chain(in.ones, in.avg, links, 4).max().item<float>(), 5.0f);
  }
  const Device::QueueCounts before = vk.queue_counts();
  Tensor a = chain(in.ones, in.avg, links, 3).realize();
  Tensor b = chain(in.ones, in.avg, links, 4).realize();
  const Device::QueueCounts after = vk.queue_counts();
  EXPECT_EQ(after.submitted, before.submitted + 2);  // nothing was reused from the reads above
  EXPECT_EQ(b.max().item<float>(), 5.0f);            // waits for both
  return after.completed <= before.submitted;
}

int64_t side_in_flight(int links) {
  return side_in_flight("chains of " + std::to_string(links) + " matmuls outlast a realize",
                        [links](ChainInputs& in, int attempt) {
                          return first_chain_outlasts_a_realize(in, attempt, links);
                        });
}

TEST(AsyncRealize, RealizeReturnsBeforeTheWorkEndsAndTheReadWaits) {
  // The probe's chains (scales 3 and 4), whose kernels it compiled: a compile inside the second
  // realize would give the first chain time to finish.
  ChainInputs in(side_in_flight(16));
  EXPECT_EQ(in.ones.sum().item<float>(), float(in.side * in.side));  // waits for everything
  Device& vk = device("VK");
  const Device::QueueCounts before = vk.queue_counts();
  Tensor c = chain(in.ones, in.avg, 16, 3).realize();
  Tensor d = chain(in.ones, in.avg, 16, 4).realize();  // queued behind c's, without a wait either
  const Device::QueueCounts after = vk.queue_counts();
  EXPECT_EQ(after.host_waits, before.host_waits) << "realize waited for the device";
  EXPECT_EQ(after.submitted, before.submitted + 2);
  EXPECT_LE(after.completed, before.submitted) << "c's chain had finished";
  const std::vector<float> v = c.to_vector<float>();
  EXPECT_EQ(d.max().item<float>(), 5.0f);
  EXPECT_GT(vk.queue_counts().host_waits, after.host_waits) << "the read did not wait";
  EXPECT_EQ(v.size(), size_t(in.side * in.side));
  EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](float x) { return x == 4.0f; }));
}

// A read waits for the submission that wrote its buffer, not for the device's whole queue: a
// short kernel B writes y, a long chain A (queued after it) writes x; y's value comes back by
// to_vector, item, a copy to the CPU device and a map (what all_reduce reads), each while A is
// still running (its timeline point not reached), and x's read still waits for A's result.
TEST(AsyncRealize, AReadWaitsForTheWriterOfItsBufferNotForLaterWork) {
  ChainInputs in;
  Tensor seed(std::vector<float>{1, 2, 3, 4}, {4});
  EXPECT_EQ((seed * 3 + 1).to_vector<float>(), (std::vector<float>{4, 7, 10, 13}));  // compiles
  EXPECT_EQ(chain(in.ones, in.avg, 32, 6).max().item<float>(), 7.0f);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(chain(in.ones, in.avg, 32, 7).max().item<float>(), 8.0f);
  // On Lavapipe a chain takes a few hundred milliseconds; a GPU may finish it before the checks.
  // Where it is slow enough to see, the long chains below repeat it to take about two seconds:
  // a margin no descheduling of the host on a loaded machine eats (the reads between take
  // milliseconds).
  const double chain_ms = ms_since(t0);
  const bool observable = chain_ms > 50;
  const int links = 32 * std::clamp(int(std::ceil(2000 / chain_ms)), 1, 8);
  Device& vk = device("VK");
  Tensor y = (seed * 3 + 1).realize();  // B
  const uint64_t b_point = vk.queue_counts().submitted;
  Tensor x = chain(in.ones, in.avg, links).realize();  // A
  const uint64_t a_point = vk.queue_counts().submitted;
  ASSERT_GT(a_point, b_point);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{4, 7, 10, 13}));
  EXPECT_GE(vk.queue_counts().completed, b_point);
  if (observable) {
    EXPECT_LT(vk.queue_counts().completed, a_point) << "to_vector waited for A";
  }
  EXPECT_EQ(y[2].item<float>(), 10.0f);  // a new kernel reading y, queued after A: it waits
  Tensor y2 = (seed * 5).realize();      // queued behind the waits above and A
  if (observable) {
    // A new chain keeps the queue busy behind y2's writer; y2 itself is read below.
    Tensor z = chain(in.ones, in.avg, links, 3).realize();
    const uint64_t z_point = vk.queue_counts().submitted;
    EXPECT_EQ(y2.to("CPU").to_vector<float>(), (std::vector<float>{5, 10, 15, 20}));
    EXPECT_LT(vk.queue_counts().completed, z_point) << "the copy to CPU waited for the chain";
    const MappedMemory m = mapped_memory(y2);
    if (m) {
      std::vector<float> mapped(4);
      std::memcpy(mapped.data(), m.data, m.size);
      EXPECT_EQ(mapped, (std::vector<float>{5, 10, 15, 20}));
      EXPECT_LT(vk.queue_counts().completed, z_point) << "the map waited for the chain";
    }
    EXPECT_EQ(z.max().item<float>(), 4.0f);
  }
  const std::vector<float> xv = x.to_vector<float>();
  EXPECT_GE(vk.queue_counts().completed, a_point);
  EXPECT_TRUE(std::all_of(xv.begin(), xv.end(), [](float v) { return v == 2.0f; }));
}

// The buffer a realized tensor holds, and its memory.
Allocation& memory_of(const Tensor& t) {
  const UOp* n = t.node().get();
  while (n->op != Ops::BUFFER) n = n->src[0].get();
  return *buffer_of(*n).allocation;
}

// An upload or a copy of no bytes writes nothing and waits for nothing: the buffer's writer, a
// long chain still running, stays the one a read waits for.
TEST(AsyncRealize, AnEmptyUploadOrCopyLeavesTheReadWaitingForTheWriter) {
  ChainInputs in;
  Device& vk = device("VK");
  EXPECT_EQ(chain(in.ones, in.avg, 32, 6).max().item<float>(), 7.0f);  // compiles
  Tensor x = chain(in.ones, in.avg, 32, 2).realize();
  vk.copy_in(memory_of(x), {});
  std::vector<float> v = x.to_vector<float>();
  EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](float e) { return e == 3.0f; }))
      << "an empty upload let the read skip the chain";
  Tensor y = chain(in.ones, in.avg, 32, 4).realize();
  vk.copy(memory_of(in.ones), memory_of(y), 0);
  v = y.to_vector<float>();
  EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](float e) { return e == 5.0f; }))
      << "a 0-byte copy let the read skip the chain";
}

// VKG_SYNC_REALIZE=1 makes every realize wait for its work (as CUDA_LAUNCH_BLOCKING does), to
// find which realize an error in flight came from.
TEST(AsyncRealize, SyncRealizeWaitsAtTheEndOfEachRealize) {
  ChainInputs in;
  EXPECT_EQ(chain(in.ones, in.avg, 16, 5).max().item<float>(), 6.0f);  // compiles the kernels
  Device& vk = device("VK");
  ScopedSetting sync("VKG_SYNC_REALIZE", 1);
  Tensor c = chain(in.ones, in.avg, 16, 4).realize();
  const Device::QueueCounts q = vk.queue_counts();
  EXPECT_EQ(q.completed, q.submitted);
  EXPECT_EQ(c.max().item<float>(), 5.0f);
}

// The uploaded input of a long chain dies right after the realize that submits the chain; a new
// upload of the same size follows at once. Had the allocator handed it the input's memory (the
// upload of fresh memory does not wait), the chain would read the new values.
TEST(AsyncRealize, MemoryFreedInFlightIsNotReusedBeforeItsReadersFinish) {
  ChainInputs in;
  EXPECT_EQ(chain(in.ones, in.avg, 8).max().item<float>(), 2.0f);
  // The input is made and dropped inside: only the chain's graph holds it.
  Tensor c = [&] {
    Tensor input(std::vector<float>(512 * 512, 1.0f), {512, 512});
    return chain(input, in.avg, 8, 3).realize();
  }();
  Tensor other(std::vector<float>(512 * 512, 5.0f), {512, 512});
  Tensor d = (other * 3).realize();
  const std::vector<float> cv = c.to_vector<float>(), dv = d.to_vector<float>();
  EXPECT_TRUE(std::all_of(cv.begin(), cv.end(), [](float x) { return x == 4.0f; }));
  EXPECT_TRUE(std::all_of(dv.begin(), dv.end(), [](float x) { return x == 15.0f; }));
}

// Three steps of the loop below, back to back: whether the third had to wait (for the first).
bool loop_is_throttled(ChainInputs& in, int attempt) {
  Device& vk = device("VK");
  Tensor w = Tensor::zeros({in.side, in.side}).contiguous().realize();
  EXPECT_EQ(w.sum().item<float>(), 0.0f);
  if (attempt == 0)  // compiles the steps' kernels (a scale is a constant in one)
    for (int step = 1; step <= 3; ++step)
      EXPECT_EQ((w + chain(in.ones, in.avg, 8, float(step))).max().item<float>(), float(step + 1));
  const uint64_t waits = vk.queue_counts().host_waits;
  for (int step = 1; step <= 3; ++step)
    w.assign(w + chain(in.ones, in.avg, 8, float(step))).realize();
  const bool waited = vk.queue_counts().host_waits > waits;
  EXPECT_EQ(w.max().item<float>(), 9.0f);  // 2 + 3 + 4
  return waited;
}

// A loop that never reads runs ahead of the device by at most two realizes (each is one
// submission here): past that, a realize waits for the oldest, so memory held by work in flight
// stays bounded. An in-place update (an optimizer's) read at the end sees every step.
TEST(AsyncRealize, ALoopThatNeverReadsRunsAheadByAtMostTwoRealizes) {
  // Chains that outlast a realize's recording: the probe is the throttle itself.
  ChainInputs in(side_in_flight("a loop of chains of 8 matmuls is throttled", loop_is_throttled));
  Device& vk = device("VK");
  const int64_t side = in.side;
  Tensor w = Tensor::zeros({side, side}).contiguous().realize();
  EXPECT_EQ(w.sum().item<float>(), 0.0f);
  // Compiles every step's kernels (its scale is a constant in one): a compile inside a step's
  // realize would give the chains before it time to finish, and the throttle nothing to do.
  for (int step = 1; step <= 6; ++step)
    EXPECT_EQ((w + chain(in.ones, in.avg, 8, float(step))).max().item<float>(), float(step + 1));
  const Device::QueueCounts start = vk.queue_counts();
  for (int step = 1; step <= 6; ++step) {
    w.assign(w + chain(in.ones, in.avg, 8, float(step))).realize();
    const Device::QueueCounts now = vk.queue_counts();
    EXPECT_EQ(now.submitted - start.submitted, uint64_t(step));
    EXPECT_LE(now.submitted - now.completed, 2u) << "step " << step;
  }
  EXPECT_GT(vk.queue_counts().host_waits, start.host_waits) << "it never had to wait";
  EXPECT_EQ(w.to_vector<float>(),
            std::vector<float>(size_t(side * side), 27.0f));  // sum of step + 1
}

// A device that runs nothing until it must: flush() returns at once, and the queued kernels run
// on the reference interpreter at the next wait, which fails once when armed (as a device lost
// while the host did something else).
struct HostMemory final : Allocation {
  std::shared_ptr<std::vector<std::byte>> bytes;
};

class DeferredDevice final : public Device {
 public:
  explicit DeferredDevice(std::string name) : name_(std::move(name)) {}
  const std::string& name() const override { return name_; }
  std::shared_ptr<Allocation> allocate(const Buffer& buffer) override {
    auto a = std::make_shared<HostMemory>();
    a->bytes = std::make_shared<std::vector<std::byte>>(buffer.capacity_bytes());
    return a;
  }
  void copy_in(Allocation& dst, std::span<const std::byte> src) override {
    synchronize();
    std::copy(src.begin(), src.end(), static_cast<HostMemory&>(dst).bytes->begin());
  }
  void copy_out(Allocation& src, std::span<std::byte> dst) override {
    synchronize();
    const auto& b = *static_cast<HostMemory&>(src).bytes;
    std::copy(b.begin(), b.begin() + std::ptrdiff_t(dst.size()), dst.begin());
  }
  void run(const ScheduleItem& item, std::span<Allocation* const> memory,
           const RunOptions& options) override {
    Queued q{item, options, {}};
    for (Allocation* a : memory) q.memory.push_back(static_cast<HostMemory*>(a)->bytes);
    queued_.push_back(std::move(q));
  }
  std::vector<RunStat> flush() override { return {}; }
  std::vector<RunStat> synchronize() override {
    ++waits;
    std::vector<Queued> todo = std::exchange(queued_, {});
    if (std::exchange(fail_next_wait, false))
      throw DeviceLost(name_ + ": the device was lost while it ran " + std::to_string(todo.size()) +
                       " queued kernels");
    for (const Queued& q : todo) {
      const Program p = get_program(q.item, DeviceTraits{}, q.options);
      std::vector<HostBuffer> buffers;
      for (const auto& m : q.memory) buffers.emplace_back(*m);
      run_program(p, buffers, var_values(p, q.item));
    }
    return {};
  }

  bool fail_next_wait = false;
  int waits = 0;

 private:
  struct Queued {
    ScheduleItem item;
    RunOptions options;
    std::vector<std::shared_ptr<std::vector<std::byte>>> memory;  // alive until it has run
  };
  std::string name_;
  std::vector<Queued> queued_;
};

const bool deferred_registered = register_device(
    "DEFERRED", [](const std::string& name) { return std::make_unique<DeferredDevice>(name); });

TEST(AsyncRealize, AnErrorInFlightIsAnErrorAtTheNextRead) {
  auto& dev = static_cast<DeferredDevice&>(device("DEFERRED"));
  Tensor x(std::vector<float>{1, 2, 3}, {3}, "DEFERRED");
  EXPECT_EQ((x * 2).to_vector<float>(), (std::vector<float>{2, 4, 6}));
  const int waits = dev.waits;
  dev.fail_next_wait = true;
  Tensor y = (x + 10).realize();  // returns: nothing has run, nothing failed yet
  EXPECT_EQ(dev.waits, waits);
  try {
    (void)y.to_vector<float>();
    ADD_FAILURE() << "the lost device's error was not raised at the read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("DEFERRED: the device was lost"), std::string::npos)
        << e.what();
  }
  // The library is usable after it: new work on the device runs and reads back.
  EXPECT_EQ((x * 3).to_vector<float>(), (std::vector<float>{3, 6, 9}));
}

// A program that ends with work in flight waits for it at exit, before the driver is torn down
// under it (which crashed the process): the child realizes a long chain, never reads it, and
// returns; DEBUG=1 makes the exit wait say what it waited for.
TEST(AsyncRealize, ExitWaitsForWorkInFlight) {
  const std::filesystem::path log = std::filesystem::temp_directory_path() /
                                    ("vkg_async_exit_" + std::to_string(::getpid()) + ".log");
  const int status =
      test::run_child("AsyncRealizeChild.*", {"VKG_TEST_ASYNC_EXIT=1", "DEBUG=1"}, log.string());
  std::stringstream text;
  text << std::ifstream(log).rdbuf();
  EXPECT_EQ(status, 0) << text.str();
  if (text.str().find("the chain was in flight at the end") != std::string::npos) {
    EXPECT_NE(text.str().find("exit: waiting for VK: "), std::string::npos) << text.str();
  }
  std::filesystem::remove(log);
}

TEST(AsyncRealizeChild, EndsWithWorkInFlight) {
  if (!std::getenv("VKG_TEST_ASYNC_EXIT"))
    GTEST_SKIP() << "runs only as ExitWaitsForWorkInFlight's child";
  ChainInputs in;
  Tensor c = chain(in.ones, in.avg, 32).realize();
  const Device::QueueCounts q = device("VK").queue_counts();
  if (q.completed < q.submitted) std::printf("the chain was in flight at the end\n");  // Lavapipe
}

}  // namespace
}  // namespace vkg
