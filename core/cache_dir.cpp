#include <vkgrad/core/cache_dir.hpp>

#include <cstdlib>
#include <system_error>

namespace vkg {

namespace {
std::filesystem::path env_path(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::filesystem::path(v) : std::filesystem::path();
}
}  // namespace

std::filesystem::path cache_dir() {
  std::filesystem::path dir = env_path("VKG_CACHE_DIR");
  if (dir.empty() && !env_path("XDG_CACHE_HOME").empty()) dir = env_path("XDG_CACHE_HOME") / "vkgrad";
  if (dir.empty() && !env_path("HOME").empty()) dir = env_path("HOME") / ".cache" / "vkgrad";
  if (dir.empty()) dir = std::filesystem::temp_directory_path() / "vkgrad-cache";
  std::error_code ec;  // a cache we cannot create is not an error: callers just miss it
  std::filesystem::create_directories(dir, ec);
  return dir;
}

}  // namespace vkg
