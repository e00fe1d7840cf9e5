#include <vkgrad/vk/hazards.hpp>

#include <algorithm>
#include <iterator>

namespace vkg::vk {

bool RangeSet::overlaps(uint64_t resource, uint64_t begin, uint64_t end) const {
  if (begin >= end) return false;
  // The ranges are disjoint, so only the last one starting before `end` can reach into [begin,
  // end).
  auto it = ranges_.lower_bound({resource, end});
  if (it == ranges_.begin()) return false;
  --it;
  return it->first.first == resource && it->second > begin;
}

void RangeSet::add(uint64_t resource, uint64_t begin, uint64_t end) {
  if (begin >= end) return;
  // Absorb every range that overlaps or touches [begin, end), then insert the union.
  auto it = ranges_.lower_bound({resource, begin});
  if (it != ranges_.begin()) {
    auto prev = std::prev(it);
    if (prev->first.first == resource && prev->second >= begin) it = prev;
  }
  while (it != ranges_.end() && it->first.first == resource && it->first.second <= end) {
    begin = std::min(begin, it->first.second);
    end = std::max(end, it->second);
    it = ranges_.erase(it);
  }
  ranges_.emplace(std::make_pair(resource, begin), end);
}

Hazard HazardTracker::next(std::span<const Range> uses) {
  Hazard h = Hazard::None;
  for (const Range& u : uses) {
    if (written_.overlaps(u.resource, u.begin, u.end)) {
      h = Hazard::Memory;  // RAW or WAW
      break;
    }
    if (writes(u.access) && read_.overlaps(u.resource, u.begin, u.end)) h = Hazard::Execution;
  }
  // A barrier forgets every pending access, so one that only orders (WAR) must still publish
  // writes still pending elsewhere, or a later read of those would miss them.
  if (h == Hazard::Execution && !written_.empty()) h = Hazard::Memory;
  if (h != Hazard::None) reset();
  for (const Range& u : uses) {
    if (reads(u.access)) read_.add(u.resource, u.begin, u.end);
    if (writes(u.access)) written_.add(u.resource, u.begin, u.end);
  }
  return h;
}

void HazardTracker::reset() {
  read_.clear();
  written_.clear();
}

}  // namespace vkg::vk
