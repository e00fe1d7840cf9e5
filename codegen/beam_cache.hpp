// BEAM's choices by kernel, so that a search runs once per kernel, device and beam width: in
// memory for this process, and on disk for the next, in cache_dir()/beam/<16 hex digits>.txt,
// named by a 64-bit hash of the kernel AST's printed form, its buffer sizes, the device key
// (name and driver version) and the beam width. A file holds a header line, one opt per line
// ("UPCAST 0 4") and an "end" line, so a cut file reads as corrupt. A file that does not parse,
// or whose opts no longer apply to the kernel, is ignored and rewritten by a new search.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <vkgrad/codegen/beam.hpp>
#include <vkgrad/core/run_options.hpp>
#include <vkgrad/core/schedule.hpp>

namespace vkg {

// The opts BEAM=options.beam picks for the item's kernel on the device named by `device_key`:
// from the memory cache, else the disk cache, else a search on the device `make_device` opens
// (called only on a miss, so a hit allocates nothing on the device). DEBUG=2 says when a kernel's
// opts came from a cache.
std::vector<Opt> beam_opts(const ScheduleItem& item, const DeviceTraits& traits,
                           const RunOptions& options, const std::string& device_key,
                           const std::function<std::unique_ptr<BeamDevice>()>& make_device);

// Where beam_opts keeps (or would keep) the item's entry.
std::filesystem::path beam_cache_file(const ScheduleItem& item, const std::string& device_key,
                                      int width);

// Process-wide counts since start, for tests and DEBUG output.
struct BeamCacheStats {
  uint64_t searches = 0;     // searches run (each a miss in both caches)
  uint64_t memory_hits = 0;  // choices found in this process's memory
  uint64_t disk_hits = 0;    // choices read from disk
  uint64_t rejects = 0;      // disk entries found corrupt or stale (then rewritten)
};
BeamCacheStats beam_cache_stats();

}  // namespace vkg
