// Copies between devices through the host bridge (core/host_bridge.hpp, Device::bridge_out and
// bridge_in): where a side's memory is device-local (a discrete GPU's; Lavapipe's under
// VKG_FORCE_STAGING, CTest tensor_device_local and tensor_copy_timeline) and its device imports
// host memory (VK_EXT_external_memory_host), its queue writes or reads slots of page-aligned host
// memory that vkgrad allocated and each device imported once: VK:0 -> VK:1 is the source's queue
// filling slots and the destination's queue emptying them, no host memcpy, no staging memory and
// no import per copy. CTest tensor_copy_staged runs these once more with VKG_NO_HOST_IMPORT=1,
// the staged path every device without the extension takes. Both paths: values arrive bit for
// bit whatever their size and place in a block, a source overwritten at once keeps the copy its
// old values, and gradients flow back through the copies.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <vkgrad/core/device.hpp>
#include <vkgrad/core/mapped_memory.hpp>
#include <vkgrad/vkgrad.hpp>

#include "support/child_process.hpp"

namespace vkg {
namespace {

// Whether copies into and out of the Vulkan device `vk` go through the bridge on its queue: its
// memory is not mapped, so its queue makes them, and it can import host memory
// (VK_EXT_external_memory_host, offered and not turned off by VKG_NO_HOST_IMPORT).
bool in_place(const std::string& vk) {
  return !maps_memory(vk) && device(vk).imports_host_memory();
}

uint64_t imported(const std::string& dev) { return device(dev).queue_counts().imported_copies; }

std::vector<float> floats(size_t n, float seed) {
  const float special[] = {-0.0f, std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN(), 1e-42f};
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = i % 97 == 5 ? special[(i / 97) % 5] : seed + float(i % 10007) * 0.37f - 1000.0f;
  return v;
}

std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> out;
  for (float f : v) out.push_back(std::bit_cast<uint32_t>(f));
  return out;
}

TEST(CopyInPlace, TheDestinationReadsTheSourceInPlaceWhereItsMemoryIsDeviceLocal) {
  const std::vector<float> values = floats(1000, 3);
  Tensor x = Tensor(values, {1000}, "VK").realize();
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{"VK", "VK:1"}, {"VK:1", "VK"}, {"CPU", "VK:1"}}) {
    Tensor src = x.to(from).realize();
    device(from).synchronize();
    const uint64_t before = imported(to);
    Tensor y = src.to(to).realize();
    EXPECT_EQ(bits(y.to_vector<float>()), bits(values)) << from << " -> " << to;
    EXPECT_EQ(imported(to), before + (in_place(to) ? 1 : 0))
        << from << " -> " << to << (in_place(to) ? ": staged" : ": through the bridge");
  }
  // Out of VK into the CPU device's memory: VK's queue copies into the bridge (bridge_out), the
  // host out of it, where VK's memory is device-local.
  const uint64_t vk_before = imported("VK");
  EXPECT_EQ(bits(x.to("CPU").to_vector<float>()), bits(values));
  EXPECT_EQ(imported("VK"), vk_before + (in_place("VK") ? 1 : 0));
}

// Sizes that are no multiple of a page (the import's alignment on Lavapipe) or of 256 (the
// allocator's), tensors placed after others in pooled blocks (their bytes, and those of their
// staging memory, start inside a page), and several chunks (1 MiB each at least): every dtype's
// bytes arrive whole, VK -> VK:1 -> VK and CPU -> VK:1 -> CPU.
TEST(CopyInPlace, OddSizesAndPlacesArriveWhole) {
  std::vector<Tensor> neighbours;  // taken first, so the copies' memory lies after them
  for (int64_t n : {3, 70, 1000}) {
    neighbours.push_back(Tensor::full({n}, 1.0f, dtypes::float32, "VK").realize());
    neighbours.push_back(Tensor::full({n}, 2.0f, dtypes::float32, "VK:1").realize());
  }
  for (size_t n : {size_t(1), size_t(3), size_t(1021), size_t(4097), (size_t(5) << 18) + 3}) {
    const std::vector<float> f = floats(n, float(n));
    Tensor a = Tensor(f, {int64_t(n)}, "VK").realize();
    EXPECT_EQ(bits(a.to("VK:1").to("VK").to_vector<float>()), bits(f)) << n << " floats";
    EXPECT_EQ(bits(Tensor(f, {int64_t(n)}, "CPU").to("VK:1").to("CPU").to_vector<float>()), bits(f))
        << n << " floats from the CPU device";
    std::vector<int32_t> i32(n);
    std::vector<int64_t> i64(n);
    for (size_t i = 0; i < n; ++i) {
      i32[i] = int32_t(i * 2654435761u);
      i64[i] = int64_t(i) * -3000000007ll;
    }
    EXPECT_EQ(Tensor(i32, {int64_t(n)}, "VK:1").to("VK").to("VK:1").to_vector<int32_t>(), i32)
        << n << " int32";
    EXPECT_EQ(Tensor(i64, {int64_t(n)}, "VK").to("VK:1").to_vector<int64_t>(), i64)
        << n << " int64";
  }
  for (size_t k = 0; k < neighbours.size(); ++k)
    EXPECT_EQ(neighbours[k].sum().item<float>(), float(neighbours[k].numel() * (k % 2 + 1)))
        << "a neighbour of the copies changed";
}

// A source overwritten right after the copy is queued (the realize returns with the copy in
// flight): the destination has the values from before. In place, the destination's queue reads
// the source's memory (or its staging memory) later than the copy is queued, so what overwrites
// the source must wait for that read; out of VK into the CPU device, VK's queue reads it later
// too. Several chunks, from VK and from the CPU device.
TEST(CopyInPlace, ASourceOverwrittenAtOnceLeavesTheCopyItsOldValues) {
  const size_t n = (size_t(3) << 20) / 4 + 5;
  std::vector<float> values(n);  // finite: x * 0 - 1 below overwrites every one with -1
  for (size_t i = 0; i < n; ++i) values[i] = float(i % 4099) * 0.25f - 17.0f;
  for (const char* from : {"VK", "CPU", "VK", "CPU", "CPU", "CPU"}) {  // a race: more than once
    Tensor x = Tensor(values, {int64_t(n)}, from).realize();
    Tensor y = x.to("VK:1").realize();
    const bool vk = std::string(from) == "VK";
    Tensor on_cpu = x.to(vk ? "CPU" : "VK").realize();  // out of VK in place, or back into it
    x.assign(x * 0 - 1).realize();
    Tensor z = (x.to("VK:1") + y).realize();  // -1 + old, read after the overwrite
    EXPECT_EQ(x.sum().item<float>(), -float(n)) << from;
    EXPECT_EQ(bits(y.to_vector<float>()), bits(values)) << from;
    EXPECT_EQ(bits(on_cpu.to_vector<float>()), bits(values)) << from;
    std::vector<float> minus_one = values;
    for (float& v : minus_one) v = v - 1.0f;
    EXPECT_EQ(bits(z.to_vector<float>()), bits(minus_one)) << from;
  }
}

// A copy from the CPU device into VK:1 while VK:1's queue still runs earlier kernels (chained
// matmuls), its source overwritten at once: the copy keeps the old values (the host copies the
// source into the bridge before the CPU device goes on, the destination's queue reads the bridge
// later) and the kernels' result is whole.
TEST(CopyInPlace, ACpuSourceCopiedWhileTheDestinationQueueIsBusy) {
  const size_t n = (size_t(3) << 20) / 4 + 5;
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = float(i % 4099) * 0.25f - 17.0f;
  for (int r = 0; r < 3; ++r) {
    Tensor a = Tensor::full({512, 512}, 1.0f, dtypes::float32, "VK:1").realize();
    device("VK:1").synchronize();
    Tensor x = Tensor(values, {int64_t(n)}, "CPU").realize();
    Tensor busy = a.dot(a).dot(a).realize();  // queued on VK:1, runs a while
    Tensor y = x.to("VK:1").realize();
    x.assign(x * 0 - 1).realize();
    EXPECT_EQ(bits(y.to_vector<float>()), bits(values)) << "round " << r;
    EXPECT_EQ(x.sum().item<float>(), -float(n));
    // Each element 512 * 512, a power of two: the sum is exact.
    EXPECT_EQ(busy.sum().item<float>(), 512.0f * 512 * 512 * 512) << "round " << r;
  }
}

// A copy through the bridge whose realize throws after the queues have queued its chunks (the
// test-only VKG_TEST_FAIL_AFTER_IMPORT): the queued chunks still write and read the bridge's
// slots, which later copies take only once those are done (an earlier design freed imported
// pages under the queue here: Lavapipe crashed, SIGSEGV, in the child). Afterwards copies
// through the same slots, more than a lease's worth, still arrive whole. Device memory unmapped
// (VKG_FORCE_STAGING), so that copies take the bridge on Lavapipe. The child must finish, and
// within 120 s (slots never let go would hang it).
TEST(CopyInPlace, ACopyThatThrowsAfterImportingLeavesThePagesToTheQueue) {
  if (!device("VK").imports_host_memory() || !device("VK:1").imports_host_memory())
    GTEST_SKIP() << "VK cannot import host memory: nothing goes in place";
  const std::filesystem::path log =
      std::filesystem::temp_directory_path() /
      ("vkg_copy_throw_after_import_" + std::to_string(::getpid()) + ".log");
  const int status =
      test::run_child("CopyInPlaceChild.ThrowsAfterImporting",
                      {"VKG_TEST_FAIL_AFTER_IMPORT=1", "VKG_FORCE_STAGING=1"}, log.string(), 120);
  std::stringstream text;
  text << std::ifstream(log).rdbuf();
  EXPECT_EQ(status, 0) << text.str();
  std::filesystem::remove(log);
}

TEST(CopyInPlaceChild, ThrowsAfterImporting) {
  if (!std::getenv("VKG_TEST_FAIL_AFTER_IMPORT"))
    GTEST_SKIP() << "runs only as ACopyThatThrowsAfterImportingLeavesThePagesToTheQueue's child";
  ASSERT_FALSE(maps_memory("VK"));
  const size_t n = (size_t(3) << 20) / 4 + 5;  // four chunks
  const std::vector<float> values(n, 5.0f);
  for (int r = 0; r < 2; ++r) {
    // Busy queues, so that the chunks run after the throw.
    Tensor a = Tensor::full({384, 384}, 1.0f, dtypes::float32, "VK:1").realize();
    Tensor b = Tensor::full({384, 384}, 1.0f, dtypes::float32, "VK").realize();
    Tensor busy_a = a.dot(a).dot(a).realize(), busy_b = b.dot(b).dot(b).realize();
    {
      Tensor x = Tensor(values, {int64_t(n)}, "VK").realize();
      EXPECT_THROW(x.to("VK:1").realize(), Error);  // VK fills the bridge, VK:1 reads it
      Tensor c = Tensor(values, {int64_t(n)}, "CPU").realize();
      EXPECT_THROW(c.to("VK:1").realize(), Error);  // the host fills the bridge, VK:1 reads it
      Tensor big = Tensor::full({int64_t(n)}, 2.0f, dtypes::float32, "VK") + busy_b.sum() * 0;
      EXPECT_THROW(big.to("CPU").realize(), Error);  // VK fills the bridge, the host reads it
    }
    std::vector<std::vector<float>> junk;  // takes the freed host memory again
    for (int i = 0; i < 8; ++i) junk.emplace_back(n, -7.0f);
    device("VK:1").synchronize();
    device("VK").synchronize();
    EXPECT_EQ(busy_a.sum().item<float>(), 384.0f * 384 * 384 * 384);
  }
  // Usable afterwards: the slots the failed copies took go round again, in every direction.
  setenv("VKG_TEST_FAIL_AFTER_IMPORT", "0", 1);
  const size_t m = (size_t(37) << 20) + 3;  // ten slots
  std::vector<uint8_t> want(m);
  for (size_t i = 0; i < m; ++i) want[i] = uint8_t(i * 131 + 7);
  Tensor c = Tensor(want, {int64_t(m)}, "CPU");
  EXPECT_EQ(c.to("VK").to("VK:1").to("CPU").to_vector<uint8_t>(), want);
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t((i * 2654435761u) >> 13) ^ seed;
  return v;
}

// Byte counts of every kind through every pair of devices: none, odd, inside one slot, not a
// multiple of the page, more than one slot (4 MiB) and more than the whole bridge (8 slots), so
// that a copy's own chunks take the slots round again and wait for their earlier reads.
TEST(CopyInPlace, EveryByteCountArrivesWholeBetweenEveryPair) {
  const std::pair<const char*, const char*> pairs[] = {
      {"VK", "VK:1"}, {"VK:1", "VK"}, {"VK", "CPU"}, {"CPU", "VK"}, {"CPU", "VK:1"}};
  for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(4097), size_t(65535),
                   (size_t(4) << 20) + 1, (size_t(9) << 20) - 5, (size_t(33) << 20) + 4093}) {
    const std::vector<uint8_t> want = pattern(n, uint8_t(n));
    for (const auto& [from, to] : pairs) {
      Tensor x = Tensor(want, {int64_t(n)}, from).realize();
      Tensor y = x.to(to).realize();
      EXPECT_EQ(y.to_vector<uint8_t>(), want) << n << " bytes, " << from << " -> " << to;
    }
  }
}

// Copies longer than the whole bridge in flight at once, in every direction (each realize
// returns with its copy queued): their leases take the same slots in turn, each chunk waiting
// for the slot's previous chunk, of its own copy or another's, to have been read out. All arrive
// whole, and nothing waits for a slot that nobody lets go (the test would hang).
TEST(CopyInPlace, CopiesLongerThanTheBridgeInFlightTogether) {
  const size_t n = (size_t(41) << 20) + 9;  // eleven slots
  const std::vector<uint8_t> a = pattern(n, 1), b = pattern(n, 2), c = pattern(n, 3);
  Tensor x = Tensor(a, {int64_t(n)}, "VK").realize();
  Tensor y = Tensor(b, {int64_t(n)}, "VK:1").realize();
  Tensor z = Tensor(c, {int64_t(n)}, "CPU").realize();
  device("VK").synchronize();
  device("VK:1").synchronize();
  Tensor x1 = x.to("VK:1").realize(), y0 = y.to("VK").realize(), z1 = z.to("VK:1").realize();
  Tensor xc = x.to("CPU").realize(), z0 = z.to("VK").realize();
  EXPECT_EQ(x1.to_vector<uint8_t>(), a);
  EXPECT_EQ(y0.to_vector<uint8_t>(), b);
  EXPECT_EQ(z1.to_vector<uint8_t>(), c);
  EXPECT_EQ(xc.to_vector<uint8_t>(), a);
  EXPECT_EQ(z0.to_vector<uint8_t>(), c);
}

// The bridge is imported once into each device that takes part, however many copies pass
// through it: QueueCounts::host_imports stays at one while the copies go on counting.
TEST(CopyInPlace, RepeatedCopiesDoNotImportAgain) {
  if (!in_place("VK") || !in_place("VK:1"))
    GTEST_SKIP() << "VK's memory is mapped or it cannot import: no bridge";
  const std::vector<uint8_t> want = pattern((size_t(5) << 20) + 11, 3);
  Tensor x = Tensor(want, {int64_t(want.size())}, "VK").realize();
  ASSERT_EQ(x.to("VK:1").to("CPU").to_vector<uint8_t>(), want);  // both import, if not yet
  EXPECT_EQ(device("VK").queue_counts().host_imports, 1u);
  EXPECT_EQ(device("VK:1").queue_counts().host_imports, 1u);
  const uint64_t vk = imported("VK"), vk1 = imported("VK:1");
  for (int r = 0; r < 6; ++r) {
    EXPECT_EQ(x.to("VK:1").to("VK").to("CPU").to("VK:1").to_vector<uint8_t>(), want) << r;
  }
  // Each round, on each device three: VK -> VK:1, VK:1 -> VK, VK -> CPU, CPU -> VK:1.
  EXPECT_EQ(imported("VK"), vk + 6 * 3);
  EXPECT_EQ(imported("VK:1"), vk1 + 6 * 3);
  EXPECT_EQ(device("VK").queue_counts().host_imports, 1u);
  EXPECT_EQ(device("VK:1").queue_counts().host_imports, 1u);
}

// Gradients through `to` are copies too (VK:1 -> VK), read in place like the forward ones.
TEST(CopyInPlace, GradientsFlowBackThroughCopiesReadInPlace) {
  const int64_t n = 1021;
  std::vector<float> w0(n);
  for (int64_t i = 0; i < n; ++i) w0[size_t(i)] = float(i % 13) - 6.0f;
  Tensor w = Tensor(w0, {n}, "VK").requires_grad_();
  // d/dw sum((w on VK:1)^2 / 2 on VK:1) + sum(3 w on CPU) = w + 3.
  Tensor loss =
      (w.to("VK:1") * w.to("VK:1") * 0.5f).sum().to("VK") + (w.to("CPU") * 3).sum().to("VK");
  loss.backward();
  ASSERT_TRUE(w.grad());
  EXPECT_EQ(w.grad()->device(), "VK");
  std::vector<float> want = w0;
  for (float& v : want) v += 3.0f;
  EXPECT_EQ(w.grad()->to_vector<float>(), want);
}

}  // namespace
}  // namespace vkg
