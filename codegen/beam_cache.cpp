#include <vkgrad/codegen/beam_cache.hpp>

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <system_error>

#include <vkgrad/codegen/fnv1a.hpp>
#include <vkgrad/codegen/get_program.hpp>
#include <vkgrad/core/cache_dir.hpp>
#include <vkgrad/core/error.hpp>

namespace vkg {

namespace {

// Bump when the meaning of a stored choice changes (opt numbering, the search's rules), to
// orphan old entries. 2: merge_adjacent leaves a short axis cut by a pad unmerged (a stack's),
// which renumbers the axes that stored opts name.
constexpr std::string_view kFormat = "vkg-beam-2";

struct Counters {
  std::atomic<uint64_t> searches{0}, memory_hits{0}, disk_hits{0}, rejects{0};
};
Counters counters;

std::mutex memory_mu;
std::map<uint64_t, std::vector<Opt>>& memory() {
  static auto* m = new std::map<uint64_t, std::vector<Opt>>;  // immortal, like the devices
  return *m;
}

uint64_t cache_key(const ScheduleItem& item, const std::string& device_key, int width) {
  Fnv1a64 h;
  h.add(kFormat).add(to_string(item.ast)).add(device_key).add(std::to_string(width));
  for (int64_t c : buffer_counts(item)) h.add(std::to_string(c));
  return h.value();
}

std::filesystem::path file_of(uint64_t key) {
  return cache_dir() / "beam" / fmt::format("{:016x}.txt", key);
}

std::optional<std::vector<Opt>> read_entry(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  const std::string header = std::string(kFormat) + "\n", footer = "end\n";
  if (s.size() < header.size() + footer.size() || s.compare(0, header.size(), header) != 0 ||
      s.compare(s.size() - footer.size(), footer.size(), footer) != 0)
    return std::nullopt;
  std::vector<Opt> opts;
  if (!opts_from_text(s.substr(header.size(), s.size() - header.size() - footer.size()), opts))
    return std::nullopt;
  return opts;
}

// Written to a private file and renamed into place (atomic), as the SPIR-V cache does; a cache we
// cannot write only costs the next process a search.
void write_entry(const std::filesystem::path& file, const std::vector<Opt>& opts) {
  static std::atomic<uint64_t> serial{0};
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  auto tmp = file;
  tmp += fmt::format(".tmp.{}.{}", ::getpid(), serial++);
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << kFormat << "\n" << opts_to_text(opts) << "end\n";
    out.close();
    if (out) {
      std::filesystem::rename(tmp, file, ec);
      if (!ec) return;
    }
  }
  std::filesystem::remove(tmp, ec);
}

bool all_apply(const Kernel& base, const std::vector<Opt>& opts) {
  try {
    Kernel k = base;
    for (const Opt& o : opts) k.apply(o);
    return true;
  } catch (const Error&) {
    return false;
  }
}

std::string describe(const std::vector<Opt>& opts) {
  std::string s = "[";
  for (size_t i = 0; i < opts.size(); ++i) s += (i ? ", " : "") + opts[i].str();
  return s + "]";
}

}  // namespace

std::filesystem::path beam_cache_file(const ScheduleItem& item, const std::string& device_key,
                                      int width) {
  return file_of(cache_key(item, device_key, width));
}

std::vector<Opt> beam_opts(const ScheduleItem& item, const DeviceTraits& traits,
                           const RunOptions& options, const std::string& device_key,
                           const std::function<std::unique_ptr<BeamDevice>()>& make_device) {
  const uint64_t key = cache_key(item, device_key, options.beam);
  const Kernel base(item.ast);
  {
    std::lock_guard lock(memory_mu);
    if (auto it = memory().find(key); it != memory().end()) {
      ++counters.memory_hits;
      if (options.debug >= 2)
        std::printf("beam %-34s from the memory cache %s\n", base.name().c_str(),
                    describe(it->second).c_str());
      return it->second;
    }
  }
  const std::filesystem::path file = file_of(key);
  std::error_code ec;
  if (std::filesystem::exists(file, ec)) {
    std::optional<std::vector<Opt>> opts = read_entry(file);
    if (opts && all_apply(base, *opts)) {
      ++counters.disk_hits;
      if (options.debug >= 2)
        std::printf("beam %-34s from the disk cache %s (%s)\n", base.name().c_str(),
                    describe(*opts).c_str(), file.filename().c_str());
      std::lock_guard lock(memory_mu);
      return memory().emplace(key, *opts).first->second;
    }
    ++counters.rejects;  // rewritten below with the new search's choice
    if (options.debug >= 2)
      std::printf("beam %-34s ignores the unreadable cache entry %s\n", base.name().c_str(),
                  file.c_str());
  }
  ++counters.searches;
  BeamOptions bo;
  bo.width = options.beam;
  bo.timeout_s = options.beam_timeout_s;
  bo.debug = options.debug;
  const std::unique_ptr<BeamDevice> device = make_device();
  const BeamResult r = beam_search(base, default_opts(base, traits, RunOptions{}),
                                   buffer_counts(item), traits, bo, *device);
  write_entry(file, r.opts);
  std::lock_guard lock(memory_mu);
  return memory().emplace(key, r.opts).first->second;
}

BeamCacheStats beam_cache_stats() {
  return {counters.searches.load(), counters.memory_hits.load(), counters.disk_hits.load(),
          counters.rejects.load()};
}

}  // namespace vkg
