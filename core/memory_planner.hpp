// The memory planner: within one schedule, intermediates whose lifetimes do not overlap share
// device memory, as tinygrad's memory planner (and so within a JIT, which replays the schedules
// its capture ran). NO_MEMORY_PLANNER=1 turns it off.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <vkgrad/core/schedule.hpp>

namespace vkg {

class Allocation;

// Memory for the buffers of `items` whose storages are in `candidates` (each written first by an
// item and read by later ones), for their lifetimes: from the item writing it to the last item
// that touches it, in order. A block given back after a buffer's last use serves the next buffer
// that fits (the smallest such block of its device); others are allocated. By storage id.
std::unordered_map<int64_t, std::shared_ptr<Allocation>> share_memory(
    std::span<const ScheduleItem> items, const std::unordered_set<int64_t>& candidates);

// Plans one schedule: every intermediate (a buffer an item writes that is new, not yet allocated,
// and not what one of `outputs` ends up in) gets its memory from share_memory. Returns the ids of
// the buffers it placed: their memory holds something else once the schedule has run, so the
// realized-node cache must not remember them. Intermediates in the graphs of `kept_graphs` are
// left alone: autograd keeps those graphs (a realized loss), and a backward built later reads
// their realized values from the cache. Call it with the engine's lock held, before anything of
// the schedule is allocated.
std::unordered_set<int64_t> plan_memory(const Schedule& sched, const std::vector<UOpPtr>& outputs,
                                        const std::vector<UOpPtr>& kept_graphs);

}  // namespace vkg
