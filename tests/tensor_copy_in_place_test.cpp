// Copies between devices that the destination's queue reads in place (Device::import_in): where
// the destination's memory is device-local (a discrete GPU's; Lavapipe's under VKG_FORCE_STAGING,
// CTest tensor_device_local and tensor_copy_timeline), it imports the source's host-visible bytes
// (the source's staging memory, or the CPU device's memory) with VK_EXT_external_memory_host and
// copies out of them: no host memcpy, no staging memory of its own. Into the CPU device's memory
// the source's queue writes in place the same way (Device::import_out). CTest tensor_copy_staged
// runs these once more with VKG_NO_HOST_IMPORT=1, the staged path every device without the
// extension takes. Both paths: values arrive bit for bit whatever their size and place in a block,
// a source overwritten at once keeps the copy its old values, and gradients flow back through the
// copies.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include <vkgrad/core/device.hpp>
#include <vkgrad/core/mapped_memory.hpp>
#include <vkgrad/vkgrad.hpp>

namespace vkg {
namespace {

// Whether copies into the Vulkan device `vk`, and out of it into the CPU device, should go in
// place: its memory is not mapped, so its queue makes them, and VKG_NO_HOST_IMPORT does not turn
// importing off. (Lavapipe, and the GPUs the
// check scripts run on, offer the extension; a device without it would fail the count below.)
bool in_place(const std::string& vk) {
  const char* off = std::getenv("VKG_NO_HOST_IMPORT");
  const bool disabled = off && std::string(off) != "" && std::string(off) != "0";
  return !maps_memory(vk) && !disabled;
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
        << from << " -> " << to << (in_place(to) ? ": staged" : ": read in place");
  }
  // Out of VK into the CPU device's memory, which nothing queued uses: VK's queue copies into it
  // in place (import_out) where VK's memory is device-local.
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
