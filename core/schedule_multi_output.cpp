#include <vkgrad/core/schedule_multi_output.hpp>

#include <algorithm>
#include <optional>
#include <set>
#include <unordered_map>

#include <vkgrad/core/context.hpp>
#include <vkgrad/core/copy_item.hpp>
#include <vkgrad/core/device.hpp>
#include <vkgrad/core/schedule_merge.hpp>
#include <vkgrad/core/shape_tracker.hpp>

namespace vkg {

namespace {

constexpr size_t kMaxBuffers = 16;
constexpr size_t kMaxTries = 16;  // groups a kernel may join: the latest ones

struct Load {
  int64_t storage;
  ShapeTracker view;
  DType dtype;
};

// What the pass needs to know of one item. Reads and writes by storage: versions of one buffer
// (an assign's) share it, which makes every check below conservative across versions.
struct ItemInfo {
  bool candidate = false;
  std::optional<ShapeTracker> store_view;
  std::string device;         // canonical_device's spelling
  std::set<int64_t> touched;  // every storage the item binds (read or written)
  std::set<int64_t> writes;
  std::vector<Load> loads;  // a candidate's LOADs
};

ItemInfo inspect(const ScheduleItem& item) {
  ItemInfo info;
  for (size_t s = 0; s < item.buffers.size(); ++s) {
    info.touched.insert(item.buffers[s]->storage_id());
    if (s < item.outputs) info.writes.insert(item.buffers[s]->storage_id());
  }
  if (is_copy(item) || item.outputs != 1 || !item.var_vals.empty()) return info;
  const Buffer& out = *item.buffers[0];
  if (out.count() == 0 || out.max_count() != out.count()) return info;
  const UOp& sink = *item.ast;
  if (sink.op != Ops::SINK || sink.src.size() != 1) return info;
  const UOp& store = *sink.src[0];
  if (store.op != Ops::STORE || store.src.size() != 3) return info;  // a scatter's has indices
  for (const UOp* u : toposort(item.ast.get())) {
    if (u->op == Ops::REDUCE_AXIS || u->op == Ops::DEFINE_VAR) return info;
    if (u->op == Ops::LOAD) {
      if (u->src.size() != 2) return info;  // an indexed load reads other elements
      const ShapeTracker* st = ShapeTracker::from_arg(u->src[1]->arg);
      if (!st || st->symbolic()) return info;
      const int64_t slot = u->src[0]->arg_as<int64_t>();
      info.loads.push_back({item.buffers.at(size_t(slot))->storage_id(), st->simplify(), u->dtype});
    }
  }
  const ShapeTracker* st = ShapeTracker::from_arg(store.src[1]->arg);
  if (!st || st->symbolic()) return info;
  info.store_view = st->simplify();
  info.device = canonical_device(out.device());  // "vk" and "VK:0" are one device
  info.candidate = true;
  return info;
}

bool meet(const std::set<int64_t>& a, const std::set<int64_t>& b) {
  return std::any_of(a.begin(), a.end(), [&](int64_t x) { return b.count(x) != 0; });
}

// Whether two items must keep their order: one writes what the other binds.
bool conflict(const ItemInfo& a, const ItemInfo& b) {
  return meet(a.writes, b.touched) || meet(b.writes, a.touched);
}

int64_t output_storage(const ItemInfo& info) { return *info.writes.begin(); }

class Grouper {
 public:
  explicit Grouper(const std::vector<ScheduleItem>& items) : items_(items) {
    for (const ScheduleItem& item : items) info_.push_back(inspect(item));
    group_of_.assign(items.size(), -1);
  }

  void run() {
    for (size_t j = 0; j < items_.size(); ++j) {
      if (!info_[j].candidate) continue;
      // The latest groups first, kMaxTries of them: the nearest kernels are the likeliest to
      // share inputs, and a long schedule's pass stays linear in its length.
      bool joined = false;
      const size_t oldest = groups_.size() > kMaxTries ? groups_.size() - kMaxTries : 0;
      for (size_t g = groups_.size(); g-- > oldest && !joined;)
        if (can_join(groups_[g], j)) {
          groups_[g].push_back(j);
          group_of_[j] = int(g);
          joined = true;
        }
      if (!joined) {
        group_of_[j] = int(groups_.size());
        groups_.push_back({j});
      }
    }
  }

  std::vector<ScheduleItem> merged() const {
    std::vector<ScheduleItem> out;
    for (size_t i = 0; i < items_.size(); ++i) {
      const int g = group_of_[i];
      if (g < 0 || groups_[size_t(g)].size() == 1) {
        out.push_back(items_[i]);
      } else if (groups_[size_t(g)].back() == i) {
        out.push_back(build(groups_[size_t(g)]));
      }
    }
    return out;
  }

 private:
  const std::vector<ScheduleItem>& items_;
  std::vector<ItemInfo> info_;
  std::vector<std::vector<size_t>> groups_;  // item indices, ascending
  std::vector<int> group_of_;

  // A buffer that outlives the schedule anyway (an assign's target, memory from before): a
  // kernel that reads it just after it is written may join the writer's kernel. A new
  // intermediate read by the next kernel of a chain stays apart: merged, the chain's buffers
  // would all live at once, and the memory planner could not reuse them
  // (tests/tensor_memory_planner_test.cpp).
  static bool persistent(const Buffer& b) { return b.allocation || b.storage_id() != b.id(); }

  bool can_join(const std::vector<size_t>& group, size_t j) const {
    const ItemInfo& b = info_[j];
    const ItemInfo& first = info_[group[0]];
    if (b.device != first.device || *b.store_view != *first.store_view) return false;
    std::set<int64_t> storages;
    bool related = false;
    for (size_t m : group) {
      const ItemInfo& a = info_[m];
      storages.insert(a.touched.begin(), a.touched.end());
      const int64_t written = output_storage(a);
      if (b.writes.count(written)) return false;
      // The earlier member reads what the new one writes (its old value): two kernels.
      for (const Load& l : a.loads)
        if (b.writes.count(l.storage)) return false;
      for (const Load& l : b.loads) {
        if (l.storage == written) {
          // Read at the element stored there, in the stored type: the value is forwarded.
          if (l.view != *a.store_view || l.dtype != items_[m].ast->src[0]->src[2]->dtype)
            return false;
          related = related || persistent(*items_[m].buffers[0]);
        }
        for (const Load& k : a.loads) related = related || k.storage == l.storage;
      }
    }
    storages.insert(b.touched.begin(), b.touched.end());
    if (!related || storages.size() > kMaxBuffers) return false;
    // Every member moves to j: past no kernel that must stay on one side of it.
    for (size_t m : group)
      for (size_t y = m + 1; y < j; ++y)
        if (std::find(group.begin(), group.end(), y) == group.end() && conflict(info_[m], info_[y]))
          return false;
    return true;
  }

  // One kernel: the members' outputs in slots 0..k-1 in order, then their inputs.
  ScheduleItem build(const std::vector<size_t>& group) const {
    merge::Slots slots = merge::slots_of(items_, group);
    std::unordered_map<int64_t, UOpPtr> stored;  // by storage: the value a member stores there
    std::vector<UOpPtr> stores;
    for (size_t m : group) {
      const ScheduleItem& member = items_[m];
      const UOpPtr store = merge::rebuild_member(member, slots, [&](const UOp& u) -> UOpPtr {
        if (u.op != Ops::LOAD) return nullptr;
        auto it = stored.find(member.buffers.at(size_t(u.src[0]->arg_as<int64_t>()))->storage_id());
        return it == stored.end() ? nullptr : it->second;
      });
      stored.emplace(member.buffers[0]->storage_id(), store->src[2]);
      stores.push_back(store);
    }
    ScheduleItem item{
        UOp::make(Ops::SINK, dtypes::void_, std::move(stores)), std::move(slots.buffers), {}};
    item.outputs = group.size();
    return item;
  }
};

}  // namespace

void merge_multi_output(Schedule& sched) {
  if (setting("MULTI_OUTPUT", 1) == 0 || sched.items.size() < 2) return;
  Grouper grouper(sched.items);
  grouper.run();
  sched.items = grouper.merged();
}

}  // namespace vkg
