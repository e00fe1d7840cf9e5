// The VkPipelineCache, loaded from and saved to vkg::cache_dir() so that a second run of a program
// skips the driver's shader compilation. Its owner calls save() when it has created pipelines (the
// device adapter: after each realize that did); the destructor saves too. The file is keyed by
// vendor, device and the driver's pipelineCacheUUID, which changes whenever the driver build
// changes what it caches.
#pragma once
#include <vulkan/vulkan.h>

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <vector>

#include <vkgrad/vk/capabilities.hpp>
#include <vkgrad/vk/handle.hpp>

namespace vkg::vk {

class PipelineCache {
 public:
  // `persistent` false keeps the cache in memory only.
  PipelineCache(VkDevice device, const Capabilities& caps, bool persistent);
  ~PipelineCache();  // saves, ignoring failures: a cache we cannot write is only a slower start
  PipelineCache(const PipelineCache&) = delete;
  PipelineCache& operator=(const PipelineCache&) = delete;

  VkPipelineCache get() const { return cache_.get(); }
  // cache_dir()/pipeline-<vendor>-<device>-<uuid>.bin
  const std::filesystem::path& path() const { return path_; }
  // Bytes read from disk at start (0: none, or rejected as another device's or corrupt).
  std::size_t loaded_bytes() const { return loaded_bytes_; }
  // Writes the cache (temp file, then rename) if the driver returns data that differs from what
  // was loaded or last saved; Lavapipe returns only the 32-byte header. Returns whether a file
  // was written. Thread-safe.
  bool save();

 private:
  VkDevice device_;
  bool persistent_;
  std::filesystem::path path_;
  std::mutex save_mu_;
  std::vector<uint8_t> loaded_;  // what the file holds as far as we know (guarded by save_mu_)
  std::size_t loaded_bytes_ = 0;
  UniquePipelineCache cache_;
};

}  // namespace vkg::vk
