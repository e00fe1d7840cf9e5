#include <vkgrad/codegen/program_merge.hpp>

#include <algorithm>
#include <array>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include <vkgrad/core/error.hpp>

namespace vkg {
namespace {

using Size3 = std::array<int64_t, 3>;

int64_t volume(const Size3& s) { return s[0] * s[1] * s[2]; }

bool talks(const Program& p) {
  return std::any_of(p.uops.begin(), p.uops.end(), [](const UOpPtr& u) {
    return u->op == Ops::BARRIER || u->op == Ops::DEFINE_LOCAL || u->op == Ops::SHUFFLE;
  });
}

// The workgroup size of the members that talk (all alike), if any does.
std::optional<Size3> talking_size(const std::vector<MergeMember>& members, std::string* why) {
  std::optional<Size3> size;
  for (const MergeMember& m : members) {
    if (!talks(*m.program)) continue;
    if (size && *size != m.program->local_size) {
      if (why)
        *why = fmt::format(
            "'{}' and another member share workgroup memory or lanes at different "
            "workgroup sizes",
            m.program->name);
      return size;
    }
    size = m.program->local_size;
  }
  return size;
}

// The merged workgroup size: the talking members', else the largest member's (so the kernel that
// does most of the work keeps its tiling).
Size3 merged_local_size(const std::vector<MergeMember>& members) {
  if (std::optional<Size3> s = talking_size(members, nullptr)) return *s;
  const Program* biggest = members.front().program;
  for (const MergeMember& m : members)
    if (volume(m.program->global_size) * volume(m.program->local_size) >
        volume(biggest->global_size) * volume(biggest->local_size))
      biggest = m.program;
  return biggest->local_size;
}

// A member's workgroups in the merged program: its own where it keeps its workgroup size, else
// its invocations re-tiled over workgroups of the merged size.
int64_t member_workgroups(const Program& p, const Size3& local) {
  if (p.local_size == local) return volume(p.global_size);
  const int64_t per_group = volume(local);
  return (volume(p.global_size) * volume(p.local_size) + per_group - 1) / per_group;
}

UOpPtr i32(int64_t v) { return UOp::const_(dtypes::int32, v); }
UOpPtr op2(Ops op, const UOpPtr& a, const UOpPtr& b) { return a->alu(op, {b}); }
UOpPtr add(const UOpPtr& a, int64_t b) { return op2(Ops::ADD, a, i32(b)); }
UOpPtr mul(const UOpPtr& a, int64_t b) { return op2(Ops::MUL, a, i32(b)); }
UOpPtr div(const UOpPtr& a, int64_t b) { return b == 1 ? a : op2(Ops::IDIV, a, i32(b)); }
UOpPtr mod(const UOpPtr& a, int64_t b) { return op2(Ops::MOD, a, i32(b)); }
UOpPtr both(const UOpPtr& a, const UOpPtr& b) { return a ? op2(Ops::AND, a, b) : b; }

// x (in [0, volume(s))) as three coordinates, axis 0 fastest. Axes of size 1 are 0: `zero`, a
// node of the member's own, so that no two members share an id node.
std::array<UOpPtr, 3> decompose(const UOpPtr& x, const Size3& s, const UOpPtr& zero) {
  std::array<UOpPtr, 3> out;
  int64_t below = 1;
  for (int d = 0; d < 3; ++d) {
    if (s[d] == 1) {
      out[size_t(d)] = zero;
      continue;
    }
    UOpPtr v = div(x, below);
    if (below * s[d] < volume(s)) v = mod(v, s[d]);
    out[size_t(d)] = v;
    below *= s[d];
  }
  return out;
}

// One member's ids in the merged launch, and the condition under which an invocation is one of
// its own.
struct MemberIds {
  std::array<UOpPtr, 3> gidx, lidx;
  UOpPtr inside;
  int64_t workgroups = 0;
};

MemberIds member_ids(const Program& p, const Size3& merged_local, int64_t offset,
                     const UOpPtr& group, const std::array<UOpPtr, 3>& lane) {
  MemberIds ids;
  // w - O_m: a node of this member only (no other has its offset), as is everything built on it.
  const UOpPtr w = add(group, -offset);
  const UOpPtr zero = mul(w, 0);
  const int64_t invocations = volume(p.global_size) * volume(p.local_size);
  UOpPtr flat;  // the member's flat invocation number, when it is re-tiled
  if (p.local_size == merged_local) {
    ids.workgroups = volume(p.global_size);
    ids.gidx = decompose(w, p.global_size, zero);
    for (int d = 0; d < 3; ++d)
      ids.lidx[size_t(d)] =
          p.local_size[size_t(d)] == 1 ? zero : op2(Ops::ADD, lane[size_t(d)], zero);
  } else {
    const int64_t per_group = volume(merged_local);
    ids.workgroups = (invocations + per_group - 1) / per_group;
    UOpPtr lane_flat = zero;
    int64_t below = 1;
    for (int d = 0; d < 3; ++d) {
      if (merged_local[size_t(d)] == 1) continue;
      lane_flat = op2(Ops::ADD, lane_flat, mul(lane[size_t(d)], below));
      below *= merged_local[size_t(d)];
    }
    flat = op2(Ops::ADD, mul(w, per_group), lane_flat);
    ids.gidx = decompose(div(flat, volume(p.local_size)), p.global_size, zero);
    ids.lidx = decompose(mod(flat, volume(p.local_size)), p.local_size, zero);
  }
  const UOpPtr end = group->lt(i32(offset + ids.workgroups));
  ids.inside = offset == 0 ? end : both(group->lt(i32(offset))->logical_not(), end);
  if (flat && ids.workgroups * volume(merged_local) > invocations)
    ids.inside = both(ids.inside, flat->lt(i32(invocations)));
  return ids;
}

// The value of one of the member's SPECIALs, and the guard its size asks for (null when none).
std::pair<UOpPtr, UOpPtr> special_value(const UOp& s, const Program& p, const MemberIds& ids) {
  const std::string& name = s.arg_as<std::string>();
  const int d = name.back() - '0';
  const int64_t size = s.src.at(0)->const_int();
  UOpPtr value;
  int64_t capacity = 0;
  if (name.rfind("gidx", 0) == 0) {
    value = ids.gidx[size_t(d)];
    capacity = p.global_size[size_t(d)];
  } else if (name.rfind("lidx", 0) == 0) {
    value = ids.lidx[size_t(d)];
    capacity = p.local_size[size_t(d)];
  } else {
    value = op2(Ops::ADD, mul(ids.gidx[size_t(d)], p.local_size[size_t(d)]), ids.lidx[size_t(d)]);
    capacity = p.global_size[size_t(d)] * p.local_size[size_t(d)];
  }
  return {value, size < capacity ? value->lt(i32(size)) : nullptr};
}

// Appends `u` and the sources it needs that are not in `seen` yet, sources first.
void emit(const UOpPtr& u, std::vector<UOpPtr>& out, std::unordered_set<const UOp*>& seen) {
  if (seen.count(u.get())) return;
  for (const UOpPtr& s : u->src) emit(s, out, seen);
  seen.insert(u.get());
  out.push_back(u);
}

// Appends a node of a member's list where the list has it: its sources are placed already, but
// for a DEFINE_ACC's RANGEs, which the list gives after it, and sources the list leaves out.
void place(const UOpPtr& u, std::vector<UOpPtr>& out, std::unordered_set<const UOp*>& seen) {
  if (seen.count(u.get())) return;
  for (const UOpPtr& s : u->src)
    if (s->op != Ops::RANGE) emit(s, out, seen);
  seen.insert(u.get());
  out.push_back(u);
}

// Ids the member's loops, accumulators and shared arrays take, shifted past earlier members'.
struct IdBase {
  int64_t range = 0, acc = 0, local = 0;
};

struct MemberCode {
  std::vector<UOpPtr> prologue;  // the member's ids and its condition
  UOpPtr inside;
  std::vector<UOpPtr> body;  // its program, rebuilt, without the SPECIALs
};

MemberCode rebuild(const MergeMember& m, const MemberIds& ids,
                   const std::vector<BufferParam>& buffers, IdBase& base) {
  const Program& p = *m.program;
  MemberCode code;
  std::unordered_map<const UOp*, UOpPtr> memo;
  std::unordered_set<const UOp*> seen;
  UOpPtr inside = ids.inside;
  for (const UOpPtr& u : p.uops) {
    if (u->op != Ops::SPECIAL) continue;
    auto [value, guard] = special_value(*u, p, ids);
    if (guard) inside = both(inside, guard);
    memo[u.get()] = value;
    emit(value, code.prologue, seen);
  }
  emit(inside, code.prologue, seen);
  code.inside = inside;
  IdBase next = base;
  // Each node rebuilt once, from its rebuilt sources. A DEFINE_ACC comes before the RANGEs it
  // lists, so a node may be rebuilt before the list reaches it.
  auto rebuild_node = [&](auto& self, const UOpPtr& u) -> UOpPtr {
    if (auto it = memo.find(u.get()); it != memo.end()) return it->second;
    std::vector<UOpPtr> src;
    for (const UOpPtr& x : u->src) src.push_back(self(self, x));
    UOpPtr out;
    switch (u->op) {
      case Ops::DEFINE_GLOBAL: {
        const int64_t own = u->arg_as<int64_t>();
        const int64_t slot = m.slots.at(size_t(own));
        if (buffers.at(size_t(slot)).dtype != p.buffers.at(size_t(own)).dtype)
          throw Error(fmt::format("merge_programs: '{}' reads slot {} as {}, merged slot {} is {}",
                                  p.name, own, p.buffers[size_t(own)].dtype.name(), slot,
                                  buffers[size_t(slot)].dtype.name()));
        out = UOp::make(Ops::DEFINE_GLOBAL, u->dtype, {}, slot);
        break;
      }
      case Ops::RANGE:
        out = UOp::make(u->op, u->dtype, std::move(src), base.range + u->arg_as<int64_t>());
        next.range = std::max(next.range, base.range + u->arg_as<int64_t>() + 1);
        break;
      case Ops::DEFINE_ACC:
        out = UOp::make(u->op, u->dtype, std::move(src), base.acc + u->arg_as<int64_t>());
        next.acc = std::max(next.acc, base.acc + u->arg_as<int64_t>() + 1);
        break;
      case Ops::DEFINE_LOCAL: {
        std::vector<int64_t> arg = u->arg_as<std::vector<int64_t>>();
        arg.at(0) += base.local;
        next.local = std::max(next.local, arg[0] + 1);
        out = UOp::make(u->op, u->dtype, {}, arg);
        break;
      }
      case Ops::IF:
        // Its own condition, so that no two members share an IF: one whose condition reads no
        // id (a constant, a load at a fixed index) would otherwise be one node in two blocks.
        src.at(0) = both(src[0], inside);
        out = UOp::make(u->op, u->dtype, std::move(src), u->arg);
        break;
      default:
        out = UOp::make(u->op, u->dtype, std::move(src), u->arg);
    }
    return memo[u.get()] = out;
  };
  // The member's list in its own order; only an IF's new condition is placed before it.
  for (const UOpPtr& u : p.uops) {
    if (u->op == Ops::SPECIAL) continue;
    const UOpPtr out = rebuild_node(rebuild_node, u);
    if (out->op == Ops::IF) emit(out->src[0], code.body, seen);
    if (seen.insert(out.get()).second) code.body.push_back(out);
  }
  base = next;
  return code;
}

}  // namespace

std::string merge_refusal(const std::vector<MergeMember>& members, int64_t max_shared_bytes) {
  if (members.empty()) return "no programs to merge";
  int64_t shared = 0;
  for (const MergeMember& m : members)
    for (const UOpPtr& u : m.program->uops)
      if (u->op == Ops::DEFINE_LOCAL)
        shared += int64_t(u->dtype.base().itemsize()) * u->arg_as<std::vector<int64_t>>().at(1);
  if (shared > max_shared_bytes)
    return fmt::format("the members' workgroup-shared arrays take {} bytes, the device has {}",
                       shared, max_shared_bytes);
  for (const MergeMember& m : members) {
    const Program& p = *m.program;
    if (!p.vars.empty() || p.groups_needed)
      return fmt::format("'{}' takes variables (its launch follows their binding)", p.name);
    if (m.slots.size() != p.buffers.size())
      return fmt::format("'{}' has {} buffers, {} merged slots given", p.name, p.buffers.size(),
                         m.slots.size());
  }
  std::string why;
  talking_size(members, &why);
  return why;
}

int64_t merged_workgroups(const std::vector<MergeMember>& members) {
  const Size3 local = merged_local_size(members);
  int64_t total = 0;
  for (const MergeMember& m : members) total += member_workgroups(*m.program, local);
  return total;
}

Program merge_programs(const std::vector<MergeMember>& members, std::vector<BufferParam> buffers) {
  if (std::string why = merge_refusal(members); !why.empty()) throw Error("merge_programs: " + why);
  Program out;
  out.local_size = merged_local_size(members);
  out.buffers = std::move(buffers);

  // The members' workgroup counts come first: the merged group id's size is their sum.
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (const MergeMember& m : members) {
    offsets.push_back(total);
    total += member_workgroups(*m.program, out.local_size);
  }
  out.global_size = {total, 1, 1};
  const UOpPtr group = UOp::make(Ops::SPECIAL, dtypes::int32, {i32(total)}, std::string("gidx0"));
  std::array<UOpPtr, 3> lane;
  for (int d = 0; d < 3; ++d)
    if (out.local_size[size_t(d)] > 1)
      lane[size_t(d)] = UOp::make(Ops::SPECIAL, dtypes::int32, {i32(out.local_size[size_t(d)])},
                                  fmt::format("lidx{}", d));

  std::vector<MemberCode> code;
  IdBase base;
  for (size_t i = 0; i < members.size(); ++i) {
    const Program& p = *members[i].program;
    code.push_back(rebuild(members[i], member_ids(p, out.local_size, offsets[i], group, lane),
                           out.buffers, base));
    out.name += (i ? "+" : "") + p.name;
    out.flops += p.flops;
    out.bytes += p.bytes;
  }

  // Nodes more than one member computes go first, once; each member's own go in its block.
  std::unordered_map<const UOp*, int> members_using;
  for (const MemberCode& c : code) {
    std::unordered_set<const UOp*> mine;
    for (const auto* list : {&c.prologue, &c.body})
      for (const UOpPtr& u : *list) mine.insert(u.get());
    for (const UOp* u : mine) ++members_using[u];
  }
  std::unordered_set<const UOp*> seen;
  emit(group, out.uops, seen);
  for (const UOpPtr& l : lane)
    if (l) emit(l, out.uops, seen);
  for (const MemberCode& c : code)
    for (const auto* list : {&c.prologue, &c.body})
      for (const UOpPtr& u : *list)
        if (members_using.at(u.get()) > 1) emit(u, out.uops, seen);
  for (const MemberCode& c : code) {
    for (const UOpPtr& u : c.prologue) emit(u, out.uops, seen);
    const UOpPtr open = UOp::make(Ops::IF, dtypes::void_, {c.inside});
    emit(open, out.uops, seen);
    for (const UOpPtr& u : c.body) place(u, out.uops, seen);
    emit(UOp::make(Ops::ENDIF, dtypes::void_, {open}), out.uops, seen);
  }
  return out;
}

}  // namespace vkg
