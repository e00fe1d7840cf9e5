// Decides where a command stream needs a barrier. Each command declares the byte ranges it reads
// and writes; a barrier goes before a command only if it reads or writes what an earlier command
// wrote since the last barrier (RAW, WAW), or writes what one read (WAR). Independent commands
// get none, so the GPU may overlap them. Pure bookkeeping, no Vulkan: unit-tested on its own.
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <utility>

namespace vkg::vk {

enum class Access : uint8_t { Read = 1, Write = 2, ReadWrite = 3 };

inline bool reads(Access a) { return static_cast<uint8_t>(a) & 1; }
inline bool writes(Access a) { return static_cast<uint8_t>(a) & 2; }

// [begin, end) bytes of one resource (a memory block).
struct Range {
  uint64_t resource;
  uint64_t begin, end;
  Access access;
};

// A set of disjoint byte ranges per resource; overlapping or touching inserts are merged.
class RangeSet {
 public:
  bool overlaps(uint64_t resource, uint64_t begin, uint64_t end) const;
  void add(uint64_t resource, uint64_t begin, uint64_t end);
  void clear() { ranges_.clear(); }
  bool empty() const { return ranges_.empty(); }
  std::size_t size() const { return ranges_.size(); }

 private:
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> ranges_;  // (resource, begin) -> end
};

enum class Hazard : uint8_t {
  None,       // no barrier needed
  Execution,  // WAR only: the earlier reads must finish before the write starts
  Memory,     // RAW or WAW: the earlier writes must be made visible
};

class HazardTracker {
 public:
  // The barrier the next command, with these accesses, needs before it. Records its accesses as
  // if the barrier (if any) had been placed.
  Hazard next(std::span<const Range> uses);
  // A full barrier was recorded (submission start, profiling): nothing earlier is pending.
  void reset();

 private:
  RangeSet read_, written_;  // since the last barrier
};

}  // namespace vkg::vk
