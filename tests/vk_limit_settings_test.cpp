// The settings that lower device limits for tests (vk::lower_limits_by_env): each only lowers,
// and a value that is not a whole number is a vkg::Error naming the setting, not
// std::invalid_argument from deep inside device setup.
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <vkgrad/core/error.hpp>
#include <vkgrad/vk/capabilities.hpp>

#include "support/scoped_env.hpp"

namespace vkg::vk {
namespace {

using test::ScopedEnv;

Limits some_limits() {
  Limits l;
  l.max_storage_buffer_range = 1u << 27;
  l.max_texel_buffer_elements = 1u << 27;
  l.max_sampled_images_per_stage = 1u << 20;
  return l;
}

TEST(LimitSettings, EachLowersItsLimitAndNeverRaisesIt) {
  ScopedEnv range("VKG_MAX_STORAGE_BUFFER_RANGE", "4096"), texels("VKG_MAX_TEXEL_ELEMENTS", "64"),
      images("VKG_MAX_SAMPLED_IMAGES", "99999999");
  Limits l = some_limits();
  lower_limits_by_env(l);
  EXPECT_EQ(l.max_storage_buffer_range, 4096u);
  EXPECT_EQ(l.max_texel_buffer_elements, 64u);
  EXPECT_EQ(l.max_sampled_images_per_stage, 1u << 20);
}

// The push-constant, workgroup-count and allocation-size settings that let a GPU's tests spill
// arguments and fold grids (VkQueue.SpillsArgumentsThatExceedPushConstants,
// Kernels.MoreWorkgroupsThan...).
TEST(LimitSettings, PushConstantsWorkgroupCountsAndAllocationSizeAreLowered) {
  ScopedEnv push("VKG_MAX_PUSH_CONSTANTS", "128"), groups("VKG_MAX_WORKGROUP_COUNT", "65535"),
      allocation("VKG_MAX_ALLOCATION_SIZE", "268435456");
  Limits l = some_limits();
  l.max_push_constants_size = 256;
  l.max_workgroup_count = {2147483647u, 65535u, 1000u};
  l.max_memory_allocation_size = 4ull << 30;
  lower_limits_by_env(l);
  EXPECT_EQ(l.max_push_constants_size, 128u);
  EXPECT_EQ(l.max_workgroup_count, (std::array<uint32_t, 3>{65535u, 65535u, 1000u}));
  EXPECT_EQ(l.max_memory_allocation_size, 256ull << 20);
}

TEST(LimitSettings, TheHeapSettingLowersEveryHeapAndNeverRaisesOne) {
  ScopedEnv heap("VKG_MAX_HEAP_SIZE", "1073741824");
  std::vector<MemoryHeap> heaps{{80ull << 30, true}, {94ull << 30, false}, {256ull << 20, true}};
  lower_heaps_by_env(heaps);
  EXPECT_EQ(heaps[0].size, 1ull << 30);
  EXPECT_EQ(heaps[1].size, 1ull << 30);
  EXPECT_EQ(heaps[2].size, 256ull << 20);
  ScopedEnv bad("VKG_MAX_HEAP_SIZE", "1G");
  EXPECT_THROW(lower_heaps_by_env(heaps), Error);
}

TEST(LimitSettings, AnEmptyValueLeavesTheLimit) {
  ScopedEnv texels("VKG_MAX_TEXEL_ELEMENTS", "");
  Limits l = some_limits();
  lower_limits_by_env(l);
  EXPECT_EQ(l.max_texel_buffer_elements, 1u << 27);
}

TEST(LimitSettings, AMalformedValueIsAnErrorNamingTheSetting) {
  for (const char* bad : {"abc", "64k", "-1", " 64", "1e3"}) {
    ScopedEnv texels("VKG_MAX_TEXEL_ELEMENTS", bad);
    Limits l = some_limits();
    try {
      lower_limits_by_env(l);
      ADD_FAILURE() << "VKG_MAX_TEXEL_ELEMENTS=" << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("VKG_MAX_TEXEL_ELEMENTS=") + bad),
                std::string::npos)
          << e.what();
    }
  }
  ScopedEnv images("VKG_MAX_SAMPLED_IMAGES", "eight");
  Limits l = some_limits();
  EXPECT_THROW(lower_limits_by_env(l), Error);
}

// VKG_MAX_WORKGROUP_COUNT=0 divided by zero where a launch is folded (SIGFPE), and push
// constants below 8 bytes failed every kernel with a message that did not name the setting.
TEST(LimitSettings, AValueBelowTheLeastThatWorksIsAnErrorNamingTheSetting) {
  for (const auto& [name, bad] :
       {std::pair{"VKG_MAX_WORKGROUP_COUNT", "0"}, std::pair{"VKG_MAX_PUSH_CONSTANTS", "4"},
        std::pair{"VKG_MAX_PUSH_CONSTANTS", "0"}}) {
    ScopedEnv setting(name, bad);
    Limits l = some_limits();
    l.max_push_constants_size = 256;
    l.max_workgroup_count = {65535u, 65535u, 65535u};
    try {
      lower_limits_by_env(l);
      ADD_FAILURE() << name << "=" << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(name) + "=" + bad), std::string::npos)
          << e.what();
    }
  }
  // The least values themselves work.
  ScopedEnv push("VKG_MAX_PUSH_CONSTANTS", "8"), groups("VKG_MAX_WORKGROUP_COUNT", "1");
  Limits l = some_limits();
  l.max_push_constants_size = 256;
  l.max_workgroup_count = {65535u, 65535u, 65535u};
  lower_limits_by_env(l);
  EXPECT_EQ(l.max_push_constants_size, 8u);
  EXPECT_EQ(l.max_workgroup_count, (std::array<uint32_t, 3>{1u, 1u, 1u}));
}

}  // namespace
}  // namespace vkg::vk
