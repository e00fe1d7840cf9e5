// Dispatch groups of a recording (what vkg::Jit replays): small kernels that share no buffer one
// of them writes run as one merged program (codegen/program_merge.hpp says why and how), so a
// replay of an MLP's Adam step makes 10 dispatches instead of 14 (bench_nn BM_MlpAdamStep_Jit).
// A small kernel may join a group recorded before kernels it does not depend on (nor they on it),
// and so run ahead of them: beautiful_mnist's step at batch 32 makes 52 dispatches for its 65
// kernels where neighbours alone made 59. Only recordings group: a recording is compiled once and
// replayed many times, so its merged kernels' compiles pay off; an eager realize would compile a
// merged kernel for each new neighbourhood of kernels.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <thread>
#include <unordered_set>

#include <vkgrad/codegen/get_program.hpp>
#include <vkgrad/codegen/program_merge.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/devices/vk_device.hpp>

namespace vkg {
namespace {

// A merged kernel's members and arguments are kept modest: its GLSL grows with each member, and
// past the device's binding limits its buffers go by address.
constexpr size_t kMaxMembers = 8;
constexpr size_t kMaxBuffers = 16;
// Only kernels that do little join a group: a dispatch's fixed cost is worth saving where it is
// a large part of a kernel's time, and a large kernel merged ran slower on Lavapipe (Adam's
// update of a 784x128 weight merged with the small parameters' one: 1066 us against 399 + 31
// apart; the 784x128 weight gradient merged with the small moments' update: 1492 against 1133 +
// 32; minimum times of one Lavapipe thread, bench_nn MlpAdamStep_Jit), where small kernels merged
// ran as fast as apart or faster (three bias and weight gradients: 117 us against 134). Why:
// Lavapipe runs both sides of a branch, so each workgroup of a merged kernel runs every member's
// code, masked off but for its own (VkDevice::max_group_workgroups_ bounds that). On a GPU,
// whose branch on the workgroup id costs nothing, the limits keep a merged kernel's registers
// those of small kernels.
constexpr int64_t kMaxMemberFlops = 8 << 20;
// How many units (groups or kernels alone) back a kernel may look for a group to join: planning
// stays linear in a recording's length.
constexpr size_t kMaxLookBack = 32;
constexpr int64_t kMaxMemberBytes = 512 << 10;

// A group under construction: its members, and the merged program's arguments.
struct GroupBuilder {
  std::vector<std::shared_ptr<CompiledKernel>> kernels;
  std::vector<MergeMember> members;
  std::vector<Allocation*> memory;  // by merged slot
  std::vector<BufferParam> params;
  std::vector<VkDeviceSize> bytes;
  std::unordered_set<Allocation*> written, read;
  int64_t max_shared = 0;  // the device's workgroup-shared bytes
  // At most how many workgroups the merged program may launch (0: any; VkDevice's
  // max_group_workgroups_ says why a CPU device has a limit).
  int64_t max_workgroups = 0;

  // Adds the kernel over `memory` (bytes[i]: what slot i may touch) unless it uses a buffer a
  // member writes, writes one a member reads, or the group would be too large to merge.
  bool add(const std::shared_ptr<CompiledKernel>& k, std::span<Allocation* const> mem,
           std::span<const VkDeviceSize> mem_bytes) {
    const Program& p = k->program;
    if (mem.size() != p.buffers.size() || members.size() >= kMaxMembers) return false;
    for (size_t s = 0; s < mem.size(); ++s)
      if (written.count(mem[s]) || (p.buffers[s].written && read.count(mem[s]))) return false;
    GroupBuilder next = *this;
    MergeMember m{&p, {}};
    for (size_t s = 0; s < mem.size(); ++s) {
      const auto at = std::find(next.memory.begin(), next.memory.end(), mem[s]);
      const size_t slot = size_t(at - next.memory.begin());
      if (at == next.memory.end()) {
        next.memory.push_back(mem[s]);
        next.params.push_back({int(slot), p.buffers[s].dtype, 0, false});
        next.bytes.push_back(0);
      } else if (next.params[slot].dtype != p.buffers[s].dtype) {
        return false;  // one buffer read as two dtypes: a slot has one
      }
      BufferParam& b = next.params[slot];
      b.count = std::max(b.count, p.buffers[s].count);
      b.written = b.written || p.buffers[s].written;
      next.bytes[slot] = std::max(next.bytes[slot], mem_bytes[s]);
      (p.buffers[s].written ? next.written : next.read).insert(mem[s]);
      m.slots.push_back(int64_t(slot));
    }
    next.members.push_back(m);
    if (next.memory.size() > kMaxBuffers || !merge_refusal(next.members, max_shared).empty() ||
        (max_workgroups && merged_workgroups(next.members) > max_workgroups))
      return false;
    next.kernels.push_back(k);
    *this = std::move(next);
    return true;
  }
};

// The buffers a kernel (or a unit of several) reads and writes: slots before the item's outputs
// are written (core/schedule.hpp), the others read.
struct Touches {
  std::unordered_set<Allocation*> read, written;

  void add(const Touches& other) {
    read.insert(other.read.begin(), other.read.end());
    written.insert(other.written.begin(), other.written.end());
  }
  // Whether the two must keep their order: one writes a buffer the other reads or writes.
  bool orders(const Touches& other) const {
    for (Allocation* a : written)
      if (other.read.count(a) || other.written.count(a)) return true;
    for (Allocation* a : read)
      if (other.written.count(a)) return true;
    return false;
  }
};

Touches touches_of(const ScheduleItem& item, std::span<Allocation* const> memory) {
  Touches t;
  for (size_t s = 0; s < memory.size(); ++s)
    (s < item.outputs ? t.written : t.read).insert(memory[s]);
  return t;
}

}  // namespace

std::vector<VkDevice::DispatchGroup> VkDevice::plan_groups(
    std::span<const ScheduleItem> items, const std::vector<std::vector<Allocation*>>& memory,
    const RunOptions& options) {
  const bool on = options.dispatch_groups;
  // The kernel of item i and the bytes each of its slots may touch (as dispatch() binds them),
  // or null where the item cannot join a group: a kernel over symbolic sizes launches by its
  // binding, an empty one launches nothing.
  auto member = [&](size_t i, std::vector<VkDeviceSize>& bytes) -> std::shared_ptr<CompiledKernel> {
    const ScheduleItem& item = items[i];
    if (!on || item.buffers.empty() || item.buffers[0]->count() == 0 || !item.var_vals.empty())
      return nullptr;
    std::shared_ptr<CompiledKernel> k = cache_.get(item, options, [&] {
      ++compiled_in_run_;
      return compile(item, options);
    });
    const Program& p = k->program;
    if (!p.vars.empty() || p.groups_needed || p.flops > kMaxMemberFlops ||
        p.bytes > kMaxMemberBytes)
      return nullptr;
    bytes.clear();
    for (size_t s = 0; s < memory[i].size() && s < item.buffers.size(); ++s)
      bytes.push_back(
          std::min<VkDeviceSize>((item.buffers[s]->capacity_bytes() + 3) / 4 * 4,
                                 static_cast<VkAllocation*>(memory[i][s])->buffer.capacity()));
    return k;
  };

  // The recording in order, as units that each run at one point: a group (or a kernel alone).
  // A small kernel joins the latest group that takes it as long as it touches nothing that the
  // units after that group touch in a way that orders them (one writes what the other reads or
  // writes): it then runs before those units instead of after, and nothing can tell. (Its
  // buffers are the planner's Allocations, shared by the tensors that share memory, so a reuse
  // of memory orders kernels as a shared tensor does.)
  struct Unit {
    std::vector<size_t> items;
    Touches touches;
    std::optional<GroupBuilder> group;  // where its first kernel may join a group
  };
  std::vector<Unit> units;
  std::vector<VkDeviceSize> bytes;
  for (size_t i = 0; i < items.size(); ++i) {
    const Touches touches = touches_of(items[i], memory[i]);
    const std::shared_ptr<CompiledKernel> k = member(i, bytes);
    bool joined = false;
    for (size_t u = units.size(); k && u-- > 0 && units.size() - u <= kMaxLookBack;) {
      Unit& unit = units[u];
      if (unit.group && unit.group->add(k, memory[i], bytes)) {
        unit.items.push_back(i);
        unit.touches.add(touches);
        joined = true;
        break;
      }
      if (touches.orders(unit.touches)) break;
    }
    if (joined) continue;
    Unit unit{{i}, touches, std::nullopt};
    if (k) {
      unit.group.emplace();
      unit.group->max_shared = int64_t(rt_.device.caps().limits.max_shared_memory);
      unit.group->max_workgroups = max_group_workgroups_;
      if (!unit.group->add(k, memory[i], bytes)) unit.group.reset();
    }
    units.push_back(std::move(unit));
  }

  std::vector<DispatchGroup> groups;
  std::vector<GroupBuilder> builders;
  for (Unit& unit : units) {
    if (unit.items.size() < 2) {
      groups.push_back({unit.items, nullptr, {}, {}});
      continue;
    }
    groups.push_back({unit.items, nullptr, unit.group->memory, unit.group->bytes});
    builders.push_back(std::move(*unit.group));
  }

  // The merged kernels, compiled on every core; one that fails to merge or compile leaves its
  // members to run one by one (each then compiles or fails as it would alone).
  std::vector<DispatchGroup*> merged;
  for (DispatchGroup& g : groups)
    if (g.items.size() > 1) merged.push_back(&g);
  GlslTarget target = target_;
  if (options.no_float16) target.float16 = false;
  if (options.no_storage16) target.storage_16bit = false;
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t n; (n = next++) < merged.size();) {
      try {
        auto k = std::make_shared<CompiledKernel>();
        k->program = merge_programs(builders[n].members, builders[n].params);
        if (options.debug >= 5) std::printf("%s\n", to_string(k->program).c_str());
        compile_program(*k, target, options);
        merged[n]->merged = std::move(k);
      } catch (const Error& e) {
        if (options.debug >= 3)
          std::printf("dispatch group left as %zu kernels: %s\n", merged[n]->items.size(),
                      e.what());
      }
    }
  };
  {
    std::vector<std::jthread> pool;
    const size_t threads =
        options.debug >= 3
            ? 1
            : std::min<size_t>(merged.size(), std::max(1u, std::thread::hardware_concurrency()));
    for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
  }
  std::vector<DispatchGroup> out;
  for (DispatchGroup& g : groups) {
    if (g.items.size() < 2 || g.merged) {
      out.push_back(std::move(g));
      continue;
    }
    // Apart, in the order they joined: none touches what another writes, and each runs before
    // only units it does not touch that way.
    for (size_t i : g.items) out.push_back({{i}, nullptr, {}, {}});
  }
  return out;
}

}  // namespace vkg
