#include <vkgrad/core/memory_planner.hpp>

#include <map>
#include <string>

#include <vkgrad/core/device.hpp>

namespace vkg {

namespace {

// The buffer under a realized view: a whole buffer, through movement ops that keep it whole.
const Buffer& viewed(const UOp& view) {
  const UOp* b = &view;
  while (b->op != Ops::BUFFER) b = b->src[0].get();
  return buffer_of(*b);
}

struct Block {
  std::shared_ptr<Allocation> memory;
  size_t bytes = 0;
  std::string device;
};

}  // namespace

std::unordered_map<int64_t, std::shared_ptr<Allocation>> share_memory(
    std::span<const ScheduleItem> items, const std::unordered_set<int64_t>& candidates) {
  std::unordered_map<int64_t, size_t> last;
  for (size_t i = 0; i < items.size(); ++i)
    for (const auto& b : items[i].buffers)
      if (candidates.count(b->storage_id())) last[b->storage_id()] = i;
  std::map<std::string, std::multimap<size_t, Block>> free;  // by device, by size
  std::unordered_map<int64_t, Block> held;
  std::vector<std::vector<int64_t>> ending(items.size());
  std::unordered_map<int64_t, std::shared_ptr<Allocation>> out;
  for (size_t i = 0; i < items.size(); ++i) {
    // Every output of a kernel gets its block before any block it reads is given back: a
    // multi-output kernel's outputs never share memory with each other or with its inputs.
    for (size_t o = 0; o < items[i].outputs; ++o) {
      const Buffer& b = *items[i].buffers[o];
      const int64_t id = b.storage_id();
      if (!candidates.count(id) || held.count(id)) continue;
      auto& pool = free[b.device()];
      Block block;
      if (auto fit = pool.lower_bound(b.capacity_bytes()); fit != pool.end()) {
        block = std::move(fit->second);
        pool.erase(fit);
      } else {
        ensure_allocated(b);  // allocated (and counted in mem_used) as the block's first user
        block = {b.allocation, b.capacity_bytes(), b.device()};
      }
      out[id] = block.memory;
      held[id] = std::move(block);
      ending[last.at(id)].push_back(id);
    }
    // After item i: a block is not given to the buffer item i writes while item i reads it.
    for (int64_t id : ending[i]) {
      Block& block = held.at(id);
      free[block.device].emplace(block.bytes, block);
    }
  }
  return out;
}

std::unordered_set<int64_t> plan_memory(const Schedule& sched, const std::vector<UOpPtr>& outputs,
                                        const std::vector<UOpPtr>& kept_graphs) {
  std::unordered_set<int64_t> kept;  // storages the requested tensors end up in, or autograd reads
  for (const UOpPtr& o : outputs)
    if (auto it = sched.realized.find(o.get()); it != sched.realized.end())
      kept.insert(viewed(*it->second).storage_id());
  if (!kept_graphs.empty()) {
    const UOpPtr sink = UOp::make(Ops::SINK, dtypes::void_, kept_graphs);
    for (const UOp* n : toposort(sink.get()))
      if (auto it = sched.realized.find(n); it != sched.realized.end())
        kept.insert(viewed(*it->second).storage_id());
  }
  std::unordered_set<int64_t> candidates;
  std::unordered_map<int64_t, const Buffer*> by_id;
  for (const ScheduleItem& item : sched.items)
    for (size_t o = 0; o < item.outputs; ++o) {
      const Buffer& out = *item.buffers[o];
      if (out.count() > 0 && !out.allocation && !out.initial_data && out.storage_id() == out.id() &&
          !kept.count(out.id())) {
        candidates.insert(out.id());
        by_id[out.id()] = &out;
      }
    }
  if (candidates.empty()) return {};
  for (auto& [id, memory] : share_memory(sched.items, candidates))
    by_id.at(id)->allocation = memory;
  return candidates;
}

}  // namespace vkg
