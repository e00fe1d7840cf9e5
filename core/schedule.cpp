#include <vkgrad/core/schedule.hpp>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_set>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/shape_tracker.hpp>

namespace vkg {

std::shared_ptr<const Buffer> buffer_ptr(const UOp& node) {
  buffer_of(node);  // checks the node
  return std::static_pointer_cast<const Buffer>(std::get<std::shared_ptr<const ArgPayload>>(node.arg));
}

// A node's value computed by an earlier schedule: the buffer view holding it.
struct RealizedRecord {
  UOpPtr view;
  explicit RealizedRecord(UOpPtr v);
  ~RealizedRecord();
};

// Reads and writes UOp::realized_, which the node carries so that it dies with the node.
struct RealizedValues {
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::atomic<size_t>& count() {
    static std::atomic<size_t> c{0};
    return c;
  }
  static UOpPtr lookup(const UOp* n) {
    std::lock_guard lock(mu());
    return n->realized_ ? n->realized_->view : nullptr;
  }
  static void remember(const UOp* n, const UOpPtr& view) {
    // A node that is its own value (a buffer view read again) needs no record, and a record
    // holding its own node would keep it, and its buffer, alive forever.
    if (view.get() == n) return;
    auto record = std::make_shared<const RealizedRecord>(view);
    std::lock_guard lock(mu());
    std::swap(n->realized_, record);
  }  // a replaced record dies here, after the lock: its view may take other nodes with it
};

RealizedRecord::RealizedRecord(UOpPtr v) : view(std::move(v)) { ++RealizedValues::count(); }
RealizedRecord::~RealizedRecord() { --RealizedValues::count(); }

namespace {

// Movement nodes between a consumer and what it reads, in the order they apply (innermost first).
using Chain = std::vector<const UOp*>;

ShapeTracker apply_movement(const ShapeTracker& st, const UOp& m) {
  const auto& a = m.arg_as<std::vector<int64_t>>();
  switch (m.op) {
    case Ops::RESHAPE: return st.reshape(a);
    case Ops::PERMUTE: return st.permute(a);
    case Ops::EXPAND: return st.expand(a);
    case Ops::FLIP: {
      std::vector<bool> flags;
      for (int64_t f : a) flags.push_back(f != 0);
      return st.flip(flags);
    }
    case Ops::PAD:
    case Ops::SHRINK: {
      std::vector<std::pair<int64_t, int64_t>> pairs;
      for (size_t i = 0; i + 1 < a.size(); i += 2) pairs.emplace_back(a[i], a[i + 1]);
      return m.op == Ops::PAD ? st.pad(pairs) : st.shrink(pairs);
    }
    default: throw Error("not a movement op: " + std::string(op_name(m.op)));
  }
}

ShapeTracker apply_chain(ShapeTracker st, const Chain& chain) {
  for (const UOp* m : chain) st = apply_movement(st, *m);
  return st;
}

// f(0, ..., 0) == 0: such an op may be computed under a pad, whose positions read 0 in every
// operand and must produce 0.
bool maps_zero_to_zero(Ops op) {
  switch (op) {
    case Ops::EXP2: case Ops::LOG2: case Ops::RECIP: case Ops::FDIV: case Ops::IDIV: case Ops::MOD:
    case Ops::THREEFRY:
      return false;
    default: return true;
  }
}

bool is_elementwise(Ops op) { return is_alu(op) || op == Ops::CAST || op == Ops::BITCAST; }

// The BUFFER a node views through movement ops only (nullptr if it computes anything), and the
// movement chain from that buffer up to the node.
const UOp* viewed_buffer(const UOp* n, Chain& chain) {
  // A DETACH without an argument (NoGrad's, detach()) changes nothing; one with an argument is a
  // gradient leaf's identity (core/autograd.cpp), realized into a buffer of its own, or a custom
  // gradient (core/gradient.hpp), which computes something anyway.
  while (is_movement(n->op) || (n->op == Ops::DETACH && std::holds_alternative<std::monostate>(n->arg))) {
    if (n->op != Ops::DETACH) chain.insert(chain.begin(), n);
    n = n->src[0].get();
  }
  return n->op == Ops::BUFFER ? n : nullptr;
}

// Decides which nodes are realized (get a buffer of their own) by walking each kernel from its
// root, and repeats until the set stops growing: realizing a node can only make other kernels
// simpler, so the walk converges.
class Analysis {
 public:
  std::unordered_set<const UOp*> realized;

  bool is_leaf(const UOp* n) const {
    return n->op == Ops::BUFFER || n->op == Ops::CONST || realized.count(n) || previously_realized(n);
  }
  bool previously_realized(const UOp* n) const { return prior.count(n) != 0; }
  std::unordered_map<const UOp*, UOpPtr> prior;  // from RealizedValues

  void run(const std::vector<UOpPtr>& outputs) {
    // Every output gets a buffer of its own shape, even a constant or a view of another buffer.
    for (const UOpPtr& o : outputs)
      if (!previously_realized(o.get())) realized.insert(o.get());
    for (bool grew = true; grew;) {
      const size_t before = realized.size();
      reached_by.clear();
      const std::vector<const UOp*> roots(realized.begin(), realized.end());
      for (const UOp* root : roots) walk_kernel(root);
      grew = realized.size() != before;
    }
  }

  void realize(const UOp* n) {
    if (n->op == Ops::BUFFER || n->op == Ops::CONST || previously_realized(n)) return;
    realized.insert(n);
  }

 private:
  struct KernelState {
    const UOp* root;
    std::optional<std::pair<Shape, std::vector<int64_t>>> reduce;  // full shape and axes
  };
  std::unordered_map<const UOp*, const UOp*> reached_by;  // reduce -> the kernel that fused it

  void walk_kernel(const UOp* root) {
    if (previously_realized(root)) return;
    KernelState ks{root, std::nullopt};
    std::set<std::tuple<const UOp*, bool, bool, bool>> seen;
    visit(root, true, false, false, ks, seen, true);
  }

  void visit(const UOp* n, bool only_reshapes, bool padded, bool in_reduce, KernelState& ks,
             std::set<std::tuple<const UOp*, bool, bool, bool>>& seen, bool is_root = false) {
    if (n->op == Ops::BUFFER || n->op == Ops::CONST || (!is_root && is_leaf(n))) return;
    if (!seen.insert({n, only_reshapes, padded, in_reduce}).second) return;
    if (is_movement(n->op)) {
      visit(n->src[0].get(), only_reshapes && n->op == Ops::RESHAPE, padded || n->op == Ops::PAD, in_reduce, ks, seen);
      return;
    }
    if (n->op == Ops::REDUCE_AXIS) {
      const auto key = std::pair{*n->src[0]->shape(), n->arg_as<ReduceArg>().axes};
      auto owner = reached_by.find(n);
      const bool shared = owner != reached_by.end() && owner->second != ks.root;
      if (!is_root && (!only_reshapes || in_reduce || shared || (ks.reduce && *ks.reduce != key))) {
        realize(n);
        return;
      }
      ks.reduce = key;
      reached_by[n] = ks.root;
      visit(n->src[0].get(), true, false, true, ks, seen);
      return;
    }
    if (is_elementwise(n->op)) {
      if (!is_root && padded && !maps_zero_to_zero(n->op)) {
        realize(n);
        return;
      }
      for (const UOpPtr& s : n->src) visit(s.get(), only_reshapes, padded, in_reduce, ks, seen);
      return;
    }
    if (n->op == Ops::DETACH) {
      visit(n->src[0].get(), only_reshapes, padded, in_reduce, ks, seen);
      return;
    }
    if (n->op == Ops::CONTIGUOUS) {
      if (is_root) visit(n->src[0].get(), only_reshapes, padded, in_reduce, ks, seen);
      else realize(n);
      return;
    }
    throw Error("schedule: cannot compute a " + std::string(op_name(n->op)) + " node yet");
  }
};

// Builds one kernel's AST.
class KernelBuilder {
 public:
  KernelBuilder(const UOp* root, const Analysis& analysis, const Schedule& sched)
      : root_(root), analysis_(analysis), sched_(sched) {}

  ScheduleItem build(const std::shared_ptr<const Buffer>& out) {
    slot_of(out);
    const Shape& shape = *root_->shape();
    const UOp* value_root = root_->op == Ops::CONTIGUOUS ? root_->src[0].get() : root_;
    // A kernel with a reduce works in the reduce's coordinates: its output shape (1 at the
    // reduced axes) after it. The root, reached from the reduce through reshapes only, is
    // reshaped back into them.
    Chain top;
    if (const UOp* r = find_reduce(value_root)) {
      const Shape& o = *r->shape();
      if (o != shape) {
        to_kernel_shape_ = UOp::make(Ops::RESHAPE, root_->dtype, {root_->ptr()}, o);
        top.push_back(to_kernel_shape_.get());
      }
    }
    UOpPtr value = lower(value_root, top);
    ShapeTracker out_st = apply_chain(ShapeTracker::from_shape(shape), top);
    UOpPtr store = UOp::make(Ops::STORE, dtypes::void_, {global(0, out->dtype()), view(out_st), value});
    return ScheduleItem{UOp::make(Ops::SINK, dtypes::void_, {store}), buffers_};
  }

 private:
  const UOp* root_;
  const Analysis& analysis_;
  const Schedule& sched_;
  UOpPtr to_kernel_shape_;
  std::vector<std::shared_ptr<const Buffer>> buffers_;
  std::map<std::pair<const UOp*, Chain>, UOpPtr> memo_;

  // The first reduce of this kernel, searched without entering realized nodes.
  const UOp* find_reduce(const UOp* n) {
    std::vector<const UOp*> stack{n};
    std::unordered_set<const UOp*> seen;
    while (!stack.empty()) {
      const UOp* x = stack.back();
      stack.pop_back();
      if (!seen.insert(x).second || (x != n && analysis_.is_leaf(x))) continue;
      if (x->op == Ops::REDUCE_AXIS) return x;
      for (const UOpPtr& s : x->src) stack.push_back(s.get());
    }
    return nullptr;
  }

  int slot_of(const std::shared_ptr<const Buffer>& b) {
    for (size_t i = 0; i < buffers_.size(); ++i)
      if (buffers_[i]->id() == b->id()) return int(i);
    buffers_.push_back(b);
    return int(buffers_.size() - 1);
  }
  static UOpPtr global(int slot, DType d) { return UOp::make(Ops::DEFINE_GLOBAL, d.ptr(), {}, int64_t(slot)); }
  static UOpPtr view(const ShapeTracker& st) { return UOp::make(Ops::VIEW, dtypes::void_, {}, st.to_arg()); }

  // The buffer view holding a leaf's value.
  UOpPtr leaf_view(const UOp* n) const {
    if (n->op == Ops::BUFFER) return n->ptr();
    auto it = sched_.realized.find(n);
    if (it != sched_.realized.end()) return it->second;
    auto p = analysis_.prior.find(n);
    if (p != analysis_.prior.end()) return p->second;
    throw Error("schedule: leaf " + std::string(op_name(n->op)) + " has no buffer");
  }

  UOpPtr lower(const UOp* n, const Chain& chain) {
    auto key = std::pair{n, chain};
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    UOpPtr out = lower_uncached(n, chain);
    memo_.emplace(std::move(key), out);
    return out;
  }

  UOpPtr lower_uncached(const UOp* n, const Chain& chain) {
    if (n->op == Ops::CONST) {
      return UOp::make(Ops::CONST, n->dtype, {view(apply_chain(ShapeTracker::from_shape({}), chain))}, n->arg);
    }
    if (n->op == Ops::BUFFER || (n != root_ && analysis_.is_leaf(n))) {
      Chain buffer_chain;
      const UOp* buf = viewed_buffer(leaf_view(n).get(), buffer_chain);
      buffer_chain.insert(buffer_chain.end(), chain.begin(), chain.end());
      const auto b = buffer_ptr(*buf);
      const int slot = slot_of(b);
      ShapeTracker st = apply_chain(ShapeTracker::from_shape({b->count()}), buffer_chain);
      return UOp::make(Ops::LOAD, n->dtype, {global(slot, b->dtype()), view(st)});
    }
    if (is_movement(n->op)) {
      Chain inner{n};
      inner.insert(inner.end(), chain.begin(), chain.end());
      return lower(n->src[0].get(), inner);
    }
    if (n->op == Ops::DETACH) return lower(n->src[0].get(), chain);
    if (n->op == Ops::REDUCE_AXIS) {
      for (const UOp* m : chain)
        if (m->op != Ops::RESHAPE) throw Error("schedule: a moved reduce was not realized (internal)");
      return UOp::make(Ops::REDUCE_AXIS, n->dtype, {lower(n->src[0].get(), {})}, n->arg);
    }
    std::vector<UOpPtr> src;
    for (const UOpPtr& s : n->src) src.push_back(lower(s.get(), chain));
    return UOp::make(n->op, n->dtype, std::move(src), n->arg);
  }
};

}  // namespace

Schedule create_schedule(const std::vector<UOpPtr>& outputs) {
  Schedule sched;
  Analysis analysis;
  std::vector<const UOp*> order;
  {
    const UOpPtr sink = UOp::make(Ops::SINK, dtypes::void_, outputs);
    for (const UOp* n : toposort(sink.get()))
      if (n != sink.get()) {
        order.push_back(n);
        if (UOpPtr v = RealizedValues::lookup(n)) analysis.prior.emplace(n, v);
      }
  }
  analysis.run(outputs);
  for (const UOpPtr& o : outputs)
    if (auto p = analysis.prior.find(o.get()); p != analysis.prior.end()) sched.realized.emplace(o.get(), p->second);

  std::unordered_set<int64_t> uploads;
  for (const UOp* n : order) {
    if (n->op == Ops::BUFFER) {
      auto b = buffer_ptr(*n);
      if (b->initial_data && uploads.insert(b->id()).second) sched.uploads.push_back(b);
    }
    if (!analysis.realized.count(n)) continue;
    // A node that only views a whole buffer in order needs no kernel.
    Chain chain;
    const UOp* value = n->op == Ops::CONTIGUOUS ? n->src[0].get() : n;
    if (const UOp* buf = viewed_buffer(value, chain)) {
      const ShapeTracker st = apply_chain(ShapeTracker::from_shape({buffer_of(*buf).count()}), chain);
      // contiguous() alone holds for a prefix (a shrink to [0, k)): that is not the whole buffer.
      if (st.contiguous() && prod(*n->shape()) == buffer_of(*buf).count()) {
        sched.realized.emplace(n, value->ptr());
        continue;
      }
    }
    const std::string device = n->device_node() ? n->device_node()->arg_as<std::string>() : std::string();
    auto out = std::make_shared<Buffer>(device, n->dtype, prod(*n->shape()));
    sched.items.push_back(KernelBuilder(n, analysis, sched).build(out));
    UOpPtr bnode = UOp::make(Ops::BUFFER, n->dtype, {n->device_node()->ptr()}, std::shared_ptr<const ArgPayload>(out));
    UOpPtr view = *n->shape() == Shape{out->count()} ? bnode : UOp::make(Ops::RESHAPE, n->dtype, {bnode}, *n->shape());
    sched.realized.emplace(n, view);
  }
  return sched;
}

size_t realized_node_count() { return RealizedValues::count().load(); }

void commit_realized(const Schedule& sched) {
  for (const auto& [n, view] : sched.realized) RealizedValues::remember(n, view);
}

}  // namespace vkg
