// Reading the environment variables that steer the runtime (VKG_VALIDATION, VK_DEVICE, ...).
// Options structs take their defaults from here, so code can override what the environment says.
#pragma once
#include <cstdlib>
#include <string>
#include <string_view>

namespace vkg::vk {

// The variable's value, or "" when it is unset.
inline std::string env_string(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// True when the variable is set to anything but "", "0", "false" or "off".
inline bool env_flag(const char* name) {
  std::string v = env_string(name);
  return !(v.empty() || v == "0" || v == "false" || v == "off");
}

}  // namespace vkg::vk
