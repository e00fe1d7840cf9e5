#include <vkgrad/core/schedule_merge.hpp>

namespace vkg::merge {

Slots slots_of(const std::vector<ScheduleItem>& items, const std::vector<size_t>& group) {
  Slots s;
  auto add = [&](const std::shared_ptr<const Buffer>& b) {
    if (s.slot_of.emplace(b->storage_id(), int64_t(s.buffers.size())).second)
      s.buffers.push_back(b);
  };
  for (size_t m : group) add(items[m].buffers[0]);
  for (size_t m : group)
    for (const auto& b : items[m].buffers) add(b);
  return s;
}

UOpPtr rebuild_member(const ScheduleItem& member, const Slots& slots, const Replace& replace) {
  std::unordered_map<const UOp*, UOpPtr> memo;
  auto rebuild = [&](auto& self, const UOp* u) -> UOpPtr {
    if (auto it = memo.find(u); it != memo.end()) return it->second;
    UOpPtr out;
    if (u->op == Ops::DEFINE_GLOBAL) {
      const int64_t storage = member.buffers.at(size_t(u->arg_as<int64_t>()))->storage_id();
      out = UOp::make(Ops::DEFINE_GLOBAL, u->dtype, {}, slots.slot_of.at(storage));
    } else if (!(out = replace(*u))) {
      std::vector<UOpPtr> src;
      for (const UOpPtr& s : u->src) src.push_back(self(self, s.get()));
      out = UOp::make(u->op, u->dtype, std::move(src), u->arg);
    }
    memo.emplace(u, out);
    return out;
  };
  return rebuild(rebuild, member.ast->src[0].get());
}

}  // namespace vkg::merge
