// linearize(): the order of a kernel's UOps, with loops. A kernel's loops form one nest (its
// reduce axes, outermost first): every node goes in the innermost loop any of its sources needs,
// and what reads an accumulator's final value (an ASSIGN, seen from outside the loops) goes after
// the nest closes. Within a kernel every LOAD of a global buffer comes before any STORE to it: an
// in-place assign reads the old value of the elements it overwrites, and a later part of the
// program (another output of a multi-output kernel, a lane computed apart from the vector store)
// may read them again.
#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include <vkgrad/codegen/lowerer.hpp>
#include <vkgrad/core/error.hpp>

namespace vkg {

namespace {

// The global buffer a LOAD or STORE accesses (nullptr: none, or workgroup memory, whose tiles
// are stored and then loaded on purpose).
const UOp* global_buffer(const UOp* u) {
  if ((u->op != Ops::LOAD && u->op != Ops::STORE) || u->src.empty()) return nullptr;
  const UOp* ix = u->src[0].get();
  if (ix->op != Ops::INDEX || ix->src.empty() || ix->src[0]->op != Ops::DEFINE_GLOBAL)
    return nullptr;
  return ix->src[0].get();
}

// The roots to order from: the LOADs of every buffer the kernel stores to, then the stores. The
// order is depth-first from the roots in turn, so those LOADs (and what they need) come first.
std::vector<UOpPtr> loads_first(const std::vector<UOpPtr>& stores) {
  const UOpPtr sink = UOp::make(Ops::SINK, dtypes::void_, stores);
  const std::vector<const UOp*> all = toposort(sink.get());
  std::unordered_set<const UOp*> written;
  for (const UOp* u : all)
    if (u->op == Ops::STORE)
      if (const UOp* b = global_buffer(u)) written.insert(b);
  std::vector<UOpPtr> roots;
  for (const UOp* u : all)
    if (u->op == Ops::LOAD && written.count(global_buffer(u))) roots.push_back(u->ptr());
  roots.insert(roots.end(), stores.begin(), stores.end());
  return roots;
}

// Every LOAD of a global buffer before any STORE to it, checked on the final order (the loop
// placement moves nodes; a kernel that would break the rule fails here rather than computing
// a wrong answer).
void check_loads_before_stores(const std::vector<UOpPtr>& out) {
  std::unordered_set<const UOp*> stored;
  for (const UOpPtr& u : out) {
    const UOp* b = global_buffer(u.get());
    if (!b) continue;
    if (u->op == Ops::STORE)
      stored.insert(b);
    else if (stored.count(b))
      throw Error("linearize: buffer " + std::to_string(b->arg_as<int64_t>()) +
                  " is loaded after a store to it in the same kernel");
  }
}

}  // namespace

std::vector<UOpPtr> linearize(const std::vector<UOpPtr>& stores) {
  const UOpPtr sink = UOp::make(Ops::SINK, dtypes::void_, loads_first(stores));
  std::vector<const UOp*> order = toposort(sink.get());
  order.pop_back();  // the sink itself

  // The loop nest, outermost first (RANGE args number the loops in nest order).
  std::vector<const UOp*> ranges;
  for (const UOp* u : order)
    if (u->op == Ops::RANGE) ranges.push_back(u);
  std::sort(ranges.begin(), ranges.end(),
            [](const UOp* a, const UOp* b) { return a->arg_as<int64_t>() < b->arg_as<int64_t>(); });
  std::unordered_map<const UOp*, int> range_depth;
  for (size_t i = 0; i < ranges.size(); ++i) range_depth[ranges[i]] = int(i);

  // depth: the innermost loop a node must be inside (-1: none). after: it reads a final
  // accumulator value, so it comes after the nest.
  std::unordered_map<const UOp*, int> depth;
  std::unordered_map<const UOp*, bool> after;
  // What a node passes to its users: a RANGE puts them inside its own loop, and so does an
  // accumulator (the running value exists only inside its loops; after them it is read through
  // the ASSIGN).
  auto export_depth = [&](const UOp* s) {
    if (s->op == Ops::RANGE) return range_depth[s];
    if (s->op == Ops::DEFINE_ACC) {
      int d = depth[s];
      for (const UOpPtr& r : s->src)
        if (r->op == Ops::RANGE) d = std::max(d, range_depth[r.get()]);
      return d;
    }
    return depth[s];
  };
  for (const UOp* u : order) {
    int d = -1;
    bool a = false;
    for (const UOpPtr& s : u->src) {
      if (s->op == Ops::ASSIGN && u->op != Ops::ASSIGN) {
        a = true;  // the accumulator's value once its loops are done
        continue;
      }
      if (u->op == Ops::DEFINE_ACC && s->op == Ops::RANGE) continue;  // declared before the loops
      d = std::max(d, export_depth(s.get()));
      a = a || after[s.get()];
    }
    if (u->op == Ops::RANGE) d = range_depth[u] - 1;  // opened inside the loops around it
    if (a && d >= 0)
      throw Error(
          "linearize: a node reads a reduce's result inside a loop (nested reduces are not fused)");
    depth[u] = d;
    after[u] = a;
  }

  std::vector<UOpPtr> out;
  for (const UOp* u : order)
    if (depth[u] == -1 && !after[u] && u->op != Ops::RANGE) out.push_back(u->ptr());
  for (size_t k = 0; k < ranges.size(); ++k) {
    out.push_back(ranges[k]->ptr());
    for (const UOp* u : order)
      if (depth[u] == int(k) && u->op != Ops::RANGE) out.push_back(u->ptr());
  }
  for (auto it = ranges.rbegin(); it != ranges.rend(); ++it)
    out.push_back(UOp::make(Ops::ENDRANGE, dtypes::void_, {(*it)->ptr()}));
  for (const UOp* u : order)
    if (after[u]) out.push_back(u->ptr());
  check_loads_before_stores(out);
  return out;
}

}  // namespace vkg
