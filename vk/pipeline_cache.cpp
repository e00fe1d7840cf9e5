#include <vkgrad/vk/pipeline_cache.hpp>

#include <fmt/format.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <iterator>
#include <system_error>
#include <thread>

#include <unistd.h>

#include <vkgrad/core/cache_dir.hpp>
#include <vkgrad/vk/check.hpp>
#include <vkgrad/vk/structure.hpp>

namespace vkg::vk {

namespace {

std::filesystem::path cache_path(const Capabilities& caps) {
  std::string uuid;
  for (uint8_t b : caps.pipeline_cache_uuid) uuid += fmt::format("{:02x}", b);
  return cache_dir() /
         fmt::format("pipeline-{:04x}-{:04x}-{}.bin", caps.vendor_id, caps.device_id, uuid);
}

// A file another driver wrote, or a cut one, must never reach vkCreatePipelineCache: drivers are
// meant to reject it but not all do so gracefully.
bool header_matches(const std::vector<uint8_t>& data, const Capabilities& caps) {
  VkPipelineCacheHeaderVersionOne h;
  if (data.size() < sizeof(h)) return false;
  std::memcpy(&h, data.data(), sizeof(h));
  return h.headerSize >= sizeof(h) && h.headerSize <= data.size() &&
         h.headerVersion == VK_PIPELINE_CACHE_HEADER_VERSION_ONE && h.vendorID == caps.vendor_id &&
         h.deviceID == caps.device_id &&
         std::memcmp(h.pipelineCacheUUID, caps.pipeline_cache_uuid.data(), VK_UUID_SIZE) == 0;
}

}  // namespace

PipelineCache::PipelineCache(VkDevice device, const Capabilities& caps, bool persistent)
    : device_(device), persistent_(persistent) {
  if (persistent_) {
    path_ = cache_path(caps);
    std::ifstream in(path_, std::ios::binary);
    if (in) loaded_.assign(std::istreambuf_iterator<char>(in), {});
    if (!header_matches(loaded_, caps)) loaded_.clear();
  }
  VkPipelineCacheCreateInfo info =
      structure<VkPipelineCacheCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO);
  info.initialDataSize = loaded_.size();
  info.pInitialData = loaded_.data();
  VkPipelineCache cache;
  VkResult r = vkCreatePipelineCache(device_, &info, nullptr, &cache);
  if (r != VK_SUCCESS && !loaded_.empty()) {  // the driver refused the old data: start empty
    loaded_.clear();
    info.initialDataSize = 0;
    info.pInitialData = nullptr;
    r = vkCreatePipelineCache(device_, &info, nullptr, &cache);
  }
  check(r, "vkCreatePipelineCache");
  cache_ = UniquePipelineCache(device_, cache);
  loaded_bytes_ = loaded_.size();
}

PipelineCache::~PipelineCache() {
  try {
    save();
  } catch (...) {
  }
}

bool PipelineCache::save() {
  if (!persistent_) return false;
  std::lock_guard lock(save_mu_);
  size_t size = 0;
  check(vkGetPipelineCacheData(device_, cache_.get(), &size, nullptr), "vkGetPipelineCacheData");
  if (size == 0) return false;
  std::vector<uint8_t> data(size);
  check(vkGetPipelineCacheData(device_, cache_.get(), &size, data.data()),
        "vkGetPipelineCacheData");
  data.resize(size);
  if (data == loaded_) return false;
  // Write then rename, so a concurrent reader sees the old file or the new one, never half of one.
  // The temp name is this process's, thread's and save's own: two writers never share one.
  static std::atomic<uint64_t> serial{0};
  std::filesystem::path tmp = path_;
  tmp += fmt::format(".{}.{}.{}.tmp", ::getpid(),
                     std::hash<std::thread::id>{}(std::this_thread::get_id()), serial++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data.data()),
              static_cast<std::streamsize>(data.size()));
    if (!out) return false;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path_, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return false;
  }
  loaded_ = std::move(data);
  return true;
}

}  // namespace vkg::vk
