// What the passes that merge kernels of one schedule into one (schedule_multi_output.cpp,
// schedule_horizontal.cpp) share: the merged kernel's buffer slots, and a member's AST rewritten
// onto them.
#pragma once
#include <functional>
#include <unordered_map>

#include <vkgrad/core/schedule.hpp>

namespace vkg::merge {

// The members' buffers, one slot per storage: their outputs in slots 0..k-1 in order, then their
// inputs.
struct Slots {
  std::vector<std::shared_ptr<const Buffer>> buffers;
  std::unordered_map<int64_t, int64_t> slot_of;  // by storage
};
Slots slots_of(const std::vector<ScheduleItem>& items, const std::vector<size_t>& group);

// `member`'s store with its DEFINE_GLOBALs moved to their merged slots. `replace` is asked first
// for every other node and may give its replacement; nullptr rebuilds the node from its rebuilt
// sources.
using Replace = std::function<UOpPtr(const UOp&)>;
UOpPtr rebuild_member(const ScheduleItem& member, const Slots& slots, const Replace& replace);

}  // namespace vkg::merge
