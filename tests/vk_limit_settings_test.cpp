// The settings that lower device limits for tests (vk::lower_limits_by_env): each only lowers,
// and a value that is not a whole number is a vkg::Error naming the setting, not
// std::invalid_argument from deep inside device setup.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include <vkgrad/core/error.hpp>
#include <vkgrad/vk/capabilities.hpp>

namespace vkg::vk {
namespace {

// Sets a variable for one scope, restoring what was there (CTest entries set these too).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

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

}  // namespace
}  // namespace vkg::vk
