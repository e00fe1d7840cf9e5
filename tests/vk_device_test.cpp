// Instance, device choice, the capabilities record, validation reporting, SPIR-V inspection and
// the on-disk pipeline cache.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <vkgrad/core/error.hpp>
#include <vkgrad/shaders/embedded.hpp>
#include <vkgrad/vk/device.hpp>
#include <vkgrad/vk/pipeline_cache.hpp>
#include <vkgrad/vk/program.hpp>
#include <vkgrad/vk/structure.hpp>

#include "support/scoped_env.hpp"
#include "support/validation_listener.hpp"
#include "support/vk_fixture.hpp"

namespace vkg::vk {
namespace {

PhysicalDevice fake(std::string name, VkPhysicalDeviceType type, bool usable = true) {
  PhysicalDevice d;
  d.caps.name = std::move(name);
  d.caps.type = type;
  if (!usable) d.caps.missing.push_back("bufferDeviceAddress");
  return d;
}

TEST(VkDeviceChoice, PrefersDiscreteThenIntegratedThenVirtualThenCpu) {
  std::vector<PhysicalDevice> d = {fake("llvmpipe", VK_PHYSICAL_DEVICE_TYPE_CPU),
                                   fake("Intel UHD", VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU),
                                   fake("virgl", VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU),
                                   fake("NVIDIA RTX", VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU)};
  EXPECT_EQ(choose_physical_device(d, ""), 3u);
  d.pop_back();
  EXPECT_EQ(choose_physical_device(d, ""), 1u);
  d.erase(d.begin() + 1);
  EXPECT_EQ(choose_physical_device(d, ""), 1u);
}

TEST(VkDeviceChoice, SkipsUnusableDevicesByDefault) {
  std::vector<PhysicalDevice> d = {fake("old GPU", VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, false),
                                   fake("llvmpipe", VK_PHYSICAL_DEVICE_TYPE_CPU)};
  EXPECT_EQ(choose_physical_device(d, ""), 1u);
  EXPECT_THROW(choose_physical_device(d, "0"), Error);  // asked for by index: a clear error
}

TEST(VkDeviceChoice, SelectsByIndexOrNameSubstring) {
  std::vector<PhysicalDevice> d = {
      fake("llvmpipe (LLVM 15)", VK_PHYSICAL_DEVICE_TYPE_CPU),
      fake("AMD Radeon RX 7900", VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU)};
  EXPECT_EQ(choose_physical_device(d, "0"), 0u);
  EXPECT_EQ(choose_physical_device(d, "radeon"), 1u);
  EXPECT_EQ(choose_physical_device(d, "LLVMPIPE"), 0u);
  try {
    choose_physical_device(d, "2");
    FAIL() << "index out of range must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("AMD Radeon RX 7900"), std::string::npos) << e.what();
  }
  EXPECT_THROW(choose_physical_device(d, "nvidia"), Error);
  EXPECT_THROW(choose_physical_device({}, ""), Error);
}

TEST(VkCapabilities, ReadsLavapipeLimitsAndFeatures) {
  const Capabilities& c = test::vk_runtime().device.caps();
  EXPECT_TRUE(c.usable());
  EXPECT_FALSE(c.name.empty());
  EXPECT_GE(c.limits.max_workgroup_invocations, 128u);
  EXPECT_GE(c.limits.max_workgroup_size[0], 128u);
  EXPECT_GE(c.limits.max_workgroup_count[0], 65535u);
  EXPECT_GE(c.limits.max_push_constants_size, 128u);
  EXPECT_GE(c.limits.max_shared_memory, 16384u);
  EXPECT_GT(c.limits.max_storage_buffer_range, 0u);
  EXPECT_GT(c.limits.max_buffer_size, 0u);
  EXPECT_GT(c.limits.subgroup_size, 0u);
  EXPECT_LE(c.limits.min_subgroup_size, c.limits.subgroup_size);
  EXPECT_GE(c.limits.max_subgroup_size, c.limits.subgroup_size);
  EXPECT_TRUE(c.features.buffer_device_address);
  EXPECT_TRUE(c.features.timeline_semaphore);
  EXPECT_TRUE(c.features.synchronization2);
  EXPECT_FALSE(c.heaps.empty());
  EXPECT_FALSE(c.memory_types.empty());
  if (c.type == VK_PHYSICAL_DEVICE_TYPE_CPU) {
    EXPECT_TRUE(c.unified_memory);  // Lavapipe: one heap the host maps
    EXPECT_TRUE(c.features.timestamps);
    EXPECT_TRUE(c.features.int64);
    EXPECT_TRUE(c.features.float16);
    EXPECT_TRUE(c.features.storage_buffer_8bit);
  }
  const std::string text = describe(c);
  EXPECT_NE(text.find(c.name), std::string::npos);
  EXPECT_NE(text.find("subgroup size"), std::string::npos);
}

TEST(VkValidation, MessagesAreRecordedAndCounted) {
  Device& dev = test::vk_runtime().device;
  const size_t before = validation_message_count();
  // A zero-sized buffer is invalid usage the layer reports (VUID-VkBufferCreateInfo-size-00912).
  VkBufferCreateInfo info = structure<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
  info.size = 0;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  VkBuffer buffer = VK_NULL_HANDLE;
  if (vkCreateBuffer(dev.get(), &info, nullptr, &buffer) == VK_SUCCESS && buffer)
    vkDestroyBuffer(dev.get(), buffer, nullptr);
  EXPECT_GT(validation_message_count(), before);
  bool named = false;
  for (const auto& m : take_validation_messages())
    named = named || m.find("VUID-VkBufferCreateInfo-size") != std::string::npos;
  EXPECT_TRUE(named);
  test::acknowledge_validation_messages();  // expected: must not fail this test
}

TEST(VkProgram, ReadsTheWorkgroupSizeFromSpirv) {
  EXPECT_EQ(spirv_local_size(shaders::get("add_f32").spirv), (std::array<uint32_t, 3>{256, 1, 1}));
  EXPECT_EQ(spirv_local_size(shaders::get("inc_u32").spirv), (std::array<uint32_t, 3>{64, 1, 1}));
  std::vector<uint32_t> junk = {1, 2, 3, 4, 5, 6};
  EXPECT_THROW(spirv_local_size(junk), Error);
}

TEST(VkProgram, RejectsPushConstantsOverTheLimit) {
  Device& dev = test::vk_runtime().device;
  const uint32_t too_many = dev.caps().limits.max_push_constants_size + 4;
  try {
    Program p(dev, "big", shaders::get("empty").spirv, too_many);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("spill"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Program(dev, "odd", shaders::get("empty").spirv, 6), Error);
}

TEST(VkProgram, CreatesItsPipelineOnFirstUse) {
  Program p(test::vk_runtime().device, "empty", shaders::get("empty").spirv, 0);
  EXPECT_FALSE(p.created());
  EXPECT_NE(p.pipeline(), VK_NULL_HANDLE);
  EXPECT_TRUE(p.created());
}

TEST(VkGroups, FoldsLongGridsIntoY) {
  Limits l;
  l.max_workgroup_count = {65535, 65535, 65535};
  Groups g = Groups::cover(100, l);
  EXPECT_EQ(g.x, 100u);
  EXPECT_EQ(g.y, 1u);
  g = Groups::cover(307200, l);
  EXPECT_EQ(g.x, 65535u);
  EXPECT_EQ(g.y, 5u);
  EXPECT_GE(g.total(), 307200u);
  EXPECT_EQ(Groups::cover(0, l).total(), 0u);
}

using test::ScopedEnv;

TEST(VkPipelineCache, LivesInTheCacheDirNamedAfterTheDevice) {
  Device& dev = test::vk_runtime().device;
  const auto dir = std::filesystem::temp_directory_path() / "vkgrad-test-pipeline-cache";
  std::filesystem::remove_all(dir);
  ScopedEnv env("VKG_CACHE_DIR", dir.string());
  char prefix[32];
  std::snprintf(prefix, sizeof prefix, "pipeline-%04x-%04x-", dev.caps().vendor_id,
                dev.caps().device_id);
  std::filesystem::path path;
  {
    PipelineCache cache(dev.get(), dev.caps(), /*persistent=*/true);
    path = cache.path();
    EXPECT_EQ(path.parent_path(), dir);
    EXPECT_EQ(path.filename().string().rfind(prefix, 0), 0u) << path;
    EXPECT_EQ(cache.loaded_bytes(), 0u);
    // A driver that returns data (Lavapipe: the 32-byte header only) leaves a file behind; one
    // that returns none leaves nothing.
    const bool wrote = cache.save();
    EXPECT_EQ(wrote, std::filesystem::exists(path));
  }
  // A corrupt file (another driver's, or cut short) is ignored, not fed to the driver.
  std::ofstream(path, std::ios::binary) << "definitely not a pipeline cache";
  PipelineCache reread(dev.get(), dev.caps(), /*persistent=*/true);
  EXPECT_EQ(reread.loaded_bytes(), 0u);
  EXPECT_NE(reread.get(), VK_NULL_HANDLE);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace vkg::vk
