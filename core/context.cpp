#include <vkgrad/core/context.hpp>

#include <cstdlib>
#include <utility>
#include <vector>

namespace vkg {

namespace {
thread_local std::vector<std::pair<std::string, int64_t>> overrides;
}

int64_t setting(const std::string& name, int64_t fallback) {
  for (auto it = overrides.rbegin(); it != overrides.rend(); ++it)
    if (it->first == name) return it->second;
  const char* env = std::getenv(name.c_str());
  if (!env || !*env) return fallback;
  char* end = nullptr;
  const long long v = std::strtoll(env, &end, 10);
  return end && *end == '\0' ? int64_t(v) : fallback;
}

ScopedSetting::ScopedSetting(std::string name, int64_t value) : name_(std::move(name)) {
  overrides.emplace_back(name_, value);
}

ScopedSetting::~ScopedSetting() {
  for (auto it = overrides.rbegin(); it != overrides.rend(); ++it)
    if (it->first == name_) {
      overrides.erase(std::next(it).base());
      return;
    }
}

}  // namespace vkg
