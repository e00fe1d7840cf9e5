// Reading the environment variables that steer the runtime (VKG_VALIDATION, VK_DEVICE, ...).
// Options structs take their defaults from here, so code can override what the environment says.
#pragma once
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include <vkgrad/core/error.hpp>

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

// The variable as a whole non-negative number, or nullopt when it is unset or "". Anything else
// (a sign, a suffix, letters) is a vkg::Error naming the variable: a setting that only lowers a
// device limit for tests must not be ignored silently when mistyped.
inline std::optional<uint64_t> env_count(const char* name) {
  const std::string v = env_string(name);
  if (v.empty()) return std::nullopt;
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size())
    throw Error(std::string(name) + "=" + v + " is not a whole number (it takes a count, as " +
                name + "=64)");
  return n;
}

}  // namespace vkg::vk
