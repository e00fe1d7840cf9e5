#include <vkgrad/core/schedule_horizontal.hpp>

#include <set>
#include <unordered_map>

#include <vkgrad/core/context.hpp>
#include <vkgrad/core/copy_item.hpp>
#include <vkgrad/core/device.hpp>
#include <vkgrad/core/schedule_merge.hpp>
#include <vkgrad/core/shape_tracker.hpp>

namespace vkg {

namespace {

constexpr int64_t kMaxElements = 4096;  // per member: past it a dispatch's cost is not the point
constexpr int64_t kMaxTotal = 16384;    // elements of a merged kernel, its members padded to 4
constexpr size_t kMaxBuffers = 16;      // as core/schedule_multi_output.cpp

int64_t round_up4(int64_t n) { return (n + 3) / 4 * 4; }

struct Member {
  int64_t elements = 0;  // 0: not a candidate
  std::string device;
  std::set<int64_t> touched, writes;  // storages
};

Member inspect(const ScheduleItem& item) {
  Member m;
  for (size_t s = 0; s < item.buffers.size(); ++s) {
    m.touched.insert(item.buffers[s]->storage_id());
    if (s < item.outputs) m.writes.insert(item.buffers[s]->storage_id());
  }
  if (is_copy(item) || item.outputs != 1 || !item.var_vals.empty()) return m;
  const Buffer& out = *item.buffers[0];
  // An assign's target (memory from before the schedule), written whole.
  const bool persistent = out.allocation || out.storage_id() != out.id();
  if (!persistent || out.count() == 0 || out.max_count() != out.count() ||
      out.count() > kMaxElements)
    return m;
  const UOp& sink = *item.ast;
  if (sink.op != Ops::SINK || sink.src.size() != 1) return m;
  const UOp& store = *sink.src[0];
  if (store.op != Ops::STORE || store.src.size() != 3) return m;  // a scatter's has indices
  for (const UOp* u : toposort(item.ast.get())) {
    if (u->op == Ops::REDUCE_AXIS || u->op == Ops::DEFINE_VAR) return m;
    if (u->op == Ops::LOAD && u->src.size() != 2) return m;  // an indexed load
    if (u->op == Ops::VIEW) {
      const ShapeTracker* st = ShapeTracker::from_arg(u->arg);
      if (!st || st->symbolic() || prod(st->shape()) != out.count()) return m;
    }
  }
  const ShapeTracker* st = ShapeTracker::from_arg(store.src[1]->arg);
  if (!st || !st->simplify().contiguous()) return m;
  m.device = canonical_device(out.device());
  m.elements = out.count();
  return m;
}

bool meet(const std::set<int64_t>& a, const std::set<int64_t>& b) {
  for (int64_t x : a)
    if (b.count(x)) return true;
  return false;
}

// One kernel over the members' elements end to end, each at an offset that is a multiple of 4
// (so that a vector of 4 never spans two members).
ScheduleItem build(const std::vector<ScheduleItem>& items, const std::vector<size_t>& group,
                   const std::vector<Member>& info) {
  merge::Slots slots = merge::slots_of(items, group);
  int64_t total = 0;
  for (size_t m : group) total += round_up4(info[m].elements);
  std::vector<UOpPtr> stores;
  int64_t offset = 0;
  for (size_t m : group) {
    const int64_t n = info[m].elements;
    // Flat, then padded: valid only on this member's elements (its store is masked there).
    stores.push_back(merge::rebuild_member(items[m], slots, [&](const UOp& u) -> UOpPtr {
      if (u.op != Ops::VIEW) return nullptr;
      const ShapeTracker st =
          ShapeTracker::from_arg(u.arg)->reshape({n}).pad({{offset, total - offset - n}});
      return UOp::make(Ops::VIEW, u.dtype, {}, st.to_arg());
    }));
    offset += round_up4(n);
  }
  ScheduleItem item{
      UOp::make(Ops::SINK, dtypes::void_, std::move(stores)), std::move(slots.buffers), {}};
  item.outputs = group.size();
  return item;
}

}  // namespace

void merge_horizontal(Schedule& sched) {
  if (setting("HORIZONTAL", 1) == 0 || sched.items.size() < 2) return;
  std::vector<Member> info;
  for (const ScheduleItem& item : sched.items) info.push_back(inspect(item));
  std::vector<ScheduleItem> out;
  std::vector<size_t> group;
  int64_t total = 0;
  std::set<int64_t> buffers;
  auto flush = [&] {
    if (group.size() == 1) out.push_back(sched.items[group[0]]);
    if (group.size() > 1) out.push_back(build(sched.items, group, info));
    group.clear();
    total = 0;
    buffers.clear();
  };
  for (size_t j = 0; j < sched.items.size(); ++j) {
    const Member& b = info[j];
    if (b.elements == 0) {
      flush();
      out.push_back(sched.items[j]);
      continue;
    }
    bool joins = !group.empty() && info[group[0]].device == b.device &&
                 total + round_up4(b.elements) <= kMaxTotal;
    std::set<int64_t> all = buffers;
    all.insert(b.touched.begin(), b.touched.end());
    joins = joins && all.size() <= kMaxBuffers;
    // Independent: neither writes what the other binds (so no order between them matters).
    for (size_t m : group)
      joins = joins && !meet(b.writes, info[m].touched) && !meet(info[m].writes, b.touched);
    if (!joins) flush();
    group.push_back(j);
    total += round_up4(b.elements);
    buffers.insert(b.touched.begin(), b.touched.end());
  }
  flush();
  sched.items = std::move(out);
}

}  // namespace vkg
