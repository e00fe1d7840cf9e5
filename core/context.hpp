// Settings with tinygrad's names (DEBUG, NOOPT, BEAM, ...), read from the environment and
// overridable from code for a scope:
//
//   int level = setting("DEBUG");                // $DEBUG, or 0
//   { ScopedSetting quiet("DEBUG", 0); ... }     // DEBUG is 0 inside, restored after
//
// Overrides are per thread, so tests running scoped settings do not disturb each other.
#pragma once
#include <cstdint>
#include <string>

namespace vkg {

// The setting's value: the innermost ScopedSetting of this thread, else the environment variable
// parsed as an integer, else `fallback`.
int64_t setting(const std::string& name, int64_t fallback = 0);

class ScopedSetting {
 public:
  ScopedSetting(std::string name, int64_t value);
  ~ScopedSetting();
  ScopedSetting(const ScopedSetting&) = delete;
  ScopedSetting& operator=(const ScopedSetting&) = delete;

 private:
  std::string name_;
};

}  // namespace vkg
