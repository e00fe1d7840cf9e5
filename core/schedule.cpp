#include <vkgrad/core/schedule.hpp>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <queue>
#include <set>
#include <tuple>
#include <unordered_set>

#include <vkgrad/core/copy_item.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/jit_capture.hpp>
#include <vkgrad/core/schedule_horizontal.hpp>
#include <vkgrad/core/schedule_multi_output.hpp>
#include <vkgrad/core/shape_tracker.hpp>
#include <vkgrad/core/symbolic_shape.hpp>

namespace vkg {

std::shared_ptr<const Buffer> buffer_ptr(const UOp& node) {
  buffer_of(node);  // checks the node
  return std::static_pointer_cast<const Buffer>(
      std::get<std::shared_ptr<const ArgPayload>>(node.arg));
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
  static void forget(const UOp* n, const UOp* view) {
    std::shared_ptr<const RealizedRecord> record;
    std::lock_guard lock(mu());
    if (n->realized_ && n->realized_->view.get() == view) std::swap(n->realized_, record);
  }  // as in remember, the record dies after the lock
};

RealizedRecord::RealizedRecord(UOpPtr v) : view(std::move(v)) { ++RealizedValues::count(); }
RealizedRecord::~RealizedRecord() { --RealizedValues::count(); }

namespace {

// Movement nodes between a consumer and what it reads, in the order they apply (innermost first).
using Chain = std::vector<const UOp*>;

// A movement with symbolic arguments, applied by its expressions: what a chain that ends in a
// symbolic shape does, so that its kernel is the same for every binding.
ShapeTracker apply_symbolic(const ShapeTracker& st, const UOp& m, const SymbolicArg& a) {
  const std::vector<UOpPtr>& e = a.exprs;
  switch (m.op) {
    case Ops::RESHAPE:
      return st.reshape_sym(e);
    case Ops::EXPAND:
      return st.expand_sym(e);
    case Ops::PAD:
    case Ops::SHRINK: {
      std::vector<SymRange> pairs;
      for (size_t i = 0; i + 1 < e.size(); i += 2) pairs.emplace_back(e[i], e[i + 1]);
      return m.op == Ops::PAD ? st.pad_sym(pairs) : st.shrink_sym(pairs);
    }
    default:
      throw Error("schedule: a symbolic " + std::string(op_name(m.op)) + " (internal)");
  }
}

// Symbolic arguments apply by their expressions, even in a chain that comes back to plain
// numbers (x.reshape(3, n).reshape(12)): a plain reshape of a symbolic view stacks a view whose
// numbers are this binding's, which is right for it (and compiled for it).
ShapeTracker apply_movement(const ShapeTracker& st, const UOp& m) {
  if (const SymbolicArg* sa = symbolic_arg(m)) return apply_symbolic(st, m, *sa);
  const auto& a = *movement_values(m);
  switch (m.op) {
    case Ops::RESHAPE:
      return st.reshape(a);
    case Ops::PERMUTE:
      return st.permute(a);
    case Ops::EXPAND:
      return st.expand(a);
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
    default:
      throw Error("not a movement op: " + std::string(op_name(m.op)));
  }
}

ShapeTracker apply_chain(ShapeTracker st, const Chain& chain) {
  for (const UOp* m : chain) st = apply_movement(st, *m);
  return st;
}

// f(0, ..., 0) == 0: such an op may be computed under a pad, whose positions read 0 in every
// operand and must produce 0.
bool maps_zero_to_zero(const UOp& n) {
  // A float negation makes the pad's +0 a -0 (min is -max(-x): x.min().pad() read -0).
  if (n.op == Ops::NEG && n.dtype.is_float()) return false;
  return !alu_info(n.op).has(alu::Zeroless);
}

bool is_elementwise(Ops op) { return is_alu(op) || op == Ops::CAST || op == Ops::BITCAST; }

// Whether a view (in the output's shape) reads, wherever its mask lets it read, the element the
// output stores there: row-major strides and offset on every axis the mask leaves more than one
// index of. A part of a cat or stack of the target's own parts (Adam's two moments in one tensor,
// each assigned from its old value) is such a view.
bool reads_own_element(const ShapeTracker& st) {
  if (st.views().size() != 1 || st.symbolic()) return false;
  const View& v = st.views()[0];
  const std::vector<int64_t> rows = strides_for_shape(v.shape);
  int64_t at = v.offset, want = 0;
  for (size_t a = 0; a < v.shape.size(); ++a) {
    const int64_t lo = v.mask ? (*v.mask)[a].first : 0;
    const int64_t hi = v.mask ? (*v.mask)[a].second : v.shape[a];
    if (hi - lo > 1 && v.strides[a] != rows[a]) return false;
    at += lo * v.strides[a];
    want += lo * rows[a];
  }
  return at == want;
}

// The BUFFER a node views through movement ops only (nullptr if it computes anything), and the
// movement chain from that buffer up to the node.
const UOp* viewed_buffer(const UOp* n, Chain& chain) {
  // A DETACH without an argument (NoGrad's, detach()) changes nothing; one with an argument is a
  // gradient leaf's identity (core/autograd.cpp), realized into a buffer of its own, or a custom
  // gradient (core/gradient.hpp), which computes something anyway.
  while (is_movement(n->op) ||
         (n->op == Ops::DETACH && std::holds_alternative<std::monostate>(n->arg))) {
    if (n->op != Ops::DETACH) chain.insert(chain.begin(), n);
    n = n->src[0].get();
  }
  return n->op == Ops::BUFFER ? n : nullptr;
}

// The BUFFER node an ASSIGN writes: its target, through earlier assigns not yet realized and the
// reshape of a whole buffer (Tensor::assign writes in place only such targets).
const UOp* assign_target(const UOp* n) {
  while (n->op == Ops::ASSIGN || n->op == Ops::RESHAPE) n = n->src[0].get();
  return n;
}

// Decides which nodes are realized (get a buffer of their own) by walking each kernel from its
// root, and repeats until the set stops growing: realizing a node can only make other kernels
// simpler, so the walk converges.
class Analysis {
 public:
  std::unordered_set<const UOp*> realized;

  bool is_leaf(const UOp* n) const {
    return n->op == Ops::BUFFER || n->op == Ops::CONST || n->op == Ops::BIND || realized.count(n) ||
           previously_realized(n);
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
      if (realized.size() == before) separate_assign_values();
      grew = realized.size() != before;
    }
  }

  void realize(const UOp* n) {
    if (n->op == Ops::BUFFER || n->op == Ops::CONST || n->op == Ops::BIND || previously_realized(n))
      return;
    realized.insert(n);
  }

 private:
  struct KernelState {
    const UOp* root;
    std::optional<std::pair<Shape, std::vector<int64_t>>> reduce;  // full shape and axes
  };
  std::unordered_map<const UOp*, const UOp*> reached_by;  // reduce -> the kernel that fused it

  // An assign's kernel stores element i of the target and may read its old contents at element
  // i only: reading another (a flip, a row sum) would see elements other invocations already
  // overwrote. Such a value is computed into a buffer of its own first. Checked once the kernels
  // have settled, as realizing an inner reduce often removes the read.
  void separate_assign_values() {
    const std::vector<const UOp*> roots(realized.begin(), realized.end());
    for (const UOp* n : roots) {
      if (n->op != Ops::ASSIGN || previously_realized(n)) continue;
      const UOp* value = n->src[1].get();
      std::set<std::pair<const UOp*, Chain>> checked;
      if (reads_elsewhere(value, {}, nullptr, buffer_of(*assign_target(n)).storage_id(), checked))
        realize(value);
    }
  }

  // Whether the kernel computing `n` (seen through `chain`, as KernelBuilder lowers it) loads
  // `storage` at an element other than the one it stores. Above a reduce, reshapes keep the
  // element; below it, only a view that is the output's expanded over the reduced axes does (a
  // bias read by its own gradient's sum). Realized values are whole buffers in order, or other
  // kernels, so the walk stops at them.
  static constexpr size_t kMaxReadsElsewhereChecks = 1 << 14;
  bool reads_elsewhere(const UOp* n, const Chain& chain, const UOp* reduce, int64_t storage,
                       std::set<std::pair<const UOp*, Chain>>& checked) const {
    if (n->op == Ops::BUFFER) {
      const Buffer& b = buffer_of(*n);
      if (b.storage_id() != storage) return false;
      const ShapeTracker whole = ShapeTracker::from_shape({b.count()});
      if (!reduce)
        return !std::all_of(chain.begin(), chain.end(), [](const UOp* m) {
          return m->op == Ops::RESHAPE;
        }) && !reads_own_element(apply_chain(whole, chain).simplify());
      const ShapeTracker same = whole.reshape(*reduce->shape()).expand(*reduce->src[0]->shape());
      return apply_chain(whole, chain).simplify() != same.simplify();
    }
    // An assign realized in this schedule or before writes its target's buffer in place, so
    // reading it is reading `storage` when that is the target: the walk goes on into the target,
    // in the same shape. Stopping there (a leaf) let p.assign(f(p @ p)) after another p.assign in
    // the same realize run the matmul in the kernel overwriting p, whose workgroups then read
    // elements others had overwritten (results changed from run to run on VK).
    if (n->op == Ops::ASSIGN && (realized.count(n) || previously_realized(n)))
      return reads_elsewhere(n->src[0].get(), chain, reduce, storage, checked);
    // A value realized before as a view of a buffer (no kernel of its own) is read in place: the
    // walk goes on into that view. One realized here that only views (a movement, a contiguous()
    // that is not a clone) may become the viewed buffer itself, as the target's contiguous()
    // does, so the walk goes on through it: p.assign(p.contiguous().flip(1) * 2) overwrote p
    // while reading it flipped (review of the merge of branch race). Where such a value gets a
    // kernel after all (a transpose made contiguous), the assign's value gets a buffer it did not
    // need, never a wrong answer.
    if (previously_realized(n)) {
      const UOp* view = prior.at(n).get();
      return view != n && reads_elsewhere(view, chain, reduce, storage, checked);
    }
    const bool only_views = is_movement(n->op) ||
                            (n->op == Ops::CONTIGUOUS && !std::holds_alternative<int64_t>(n->arg));
    if (n->op == Ops::CONST || n->op == Ops::BIND || (is_leaf(n) && !only_views) ||
        !checked.insert({n, chain}).second)
      return false;
    // Each path through the graph's movement ops is its own chain, so a graph that forks and
    // rejoins through views (a sort's network) has exponentially many: x.assign(f(x.clone()
    // .sort().second)) of 16 elements took 23 GB (Jit fuzzer seed 8310560). Past this many the
    // answer is yes: the value gets a buffer of its own, a kernel more, never a wrong answer.
    if (checked.size() > kMaxReadsElsewhereChecks) return true;
    if (n->op == Ops::CONTIGUOUS)
      return reads_elsewhere(n->src[0].get(), chain, reduce, storage, checked);
    if (is_movement(n->op)) {
      Chain inner{n};
      inner.insert(inner.end(), chain.begin(), chain.end());
      return reads_elsewhere(n->src[0].get(), inner, reduce, storage, checked);
    }
    if (n->op == Ops::REDUCE_AXIS) return reads_elsewhere(n->src[0].get(), {}, n, storage, checked);
    if (n->op == Ops::INDEX) {  // its source is read at elements its indices choose
      if (indexed_storage(n->src[0].get()) == storage) return true;
      for (size_t i = 1; i < n->src.size(); ++i)
        if (reads_elsewhere(n->src[i].get(), chain, reduce, storage, checked)) return true;
      return false;
    }
    for (const UOpPtr& s : n->src)
      if (reads_elsewhere(s.get(), chain, reduce, storage, checked)) return true;
    return false;
  }

  // An indexed load reads its source at computed elements, so the source must be one buffer seen
  // through one view without a mask (each indexed axis then has one stride): movement ops over a
  // leaf. A computed source is realized, and so is a view that one view cannot express.
  void make_indexable(const UOp* src) {
    Chain chain;
    const UOp* base = indexed_base(src, chain);
    if (!is_leaf(base)) realize(base);
    if (base->op == Ops::CONST || base->op == Ops::BIND) {  // no buffer to read
      realize(src);
      return;
    }
    const ShapeTracker st = apply_chain(ShapeTracker::from_shape(*base->shape()), chain).simplify();
    if (st.views().size() != 1 || st.views()[0].mask) realize(src);
  }

 public:
  // The node below the movement ops (and plain DETACHes) of an indexed load's source, stopping at
  // a leaf; `chain` gets the movement ops in the order they apply.
  const UOp* indexed_base(const UOp* src, Chain& chain) const {
    while (!is_leaf(src) &&
           (is_movement(src->op) ||
            (src->op == Ops::DETACH && std::holds_alternative<std::monostate>(src->arg)))) {
      if (src->op != Ops::DETACH) chain.insert(chain.begin(), src);
      src = src->src[0].get();
    }
    return src;
  }

  // The storage an indexed load's source reads (-1 where it is not a buffer yet).
  int64_t indexed_storage(const UOp* src) const {
    Chain chain;
    const UOp* base = indexed_base(src, chain);
    if (auto p = prior.find(base); p != prior.end()) base = p->second.get();
    while (base->op != Ops::BUFFER && is_movement(base->op)) base = base->src[0].get();
    return base->op == Ops::BUFFER ? buffer_of(*base).storage_id() : -1;
  }

 private:
  void walk_kernel(const UOp* root) {
    if (previously_realized(root)) return;
    KernelState ks{root, std::nullopt};
    std::set<std::tuple<const UOp*, bool, bool, bool>> seen;
    visit(root, true, false, false, ks, seen, true);
  }

  void visit(const UOp* n, bool only_reshapes, bool padded, bool in_reduce, KernelState& ks,
             std::set<std::tuple<const UOp*, bool, bool, bool>>& seen, bool is_root = false) {
    if (n->op == Ops::BUFFER || n->op == Ops::CONST || n->op == Ops::BIND ||
        (!is_root && is_leaf(n)))
      return;
    if (!seen.insert({n, only_reshapes, padded, in_reduce}).second) return;
    if (is_movement(n->op)) {
      visit(n->src[0].get(), only_reshapes && n->op == Ops::RESHAPE, padded || n->op == Ops::PAD,
            in_reduce, ks, seen);
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
      if (!is_root && padded && !maps_zero_to_zero(*n)) {
        realize(n);
        return;
      }
      for (const UOpPtr& s : n->src) visit(s.get(), only_reshapes, padded, in_reduce, ks, seen);
      return;
    }
    if (n->op == Ops::INDEX) {  // an indexed load (core/indexed_load.hpp)
      // Under a pad its masked positions would still read the source: 0 needs a kernel of its own.
      if (!is_root && padded) {
        realize(n);
        return;
      }
      make_indexable(n->src[0].get());
      for (size_t i = 1; i < n->src.size(); ++i)
        visit(n->src[i].get(), only_reshapes, padded, in_reduce, ks, seen);
      return;
    }
    if (n->op == Ops::SCATTER) {  // core/indexed_load.hpp: a kernel of its own
      if (!is_root) {
        realize(n);
        return;
      }
      // It combines in place into the copy of dest (a clone, so never elided into dest's
      // buffer), which its own kernel makes first. Its values and indices are computed per
      // value, by elementwise ops and indexed loads: a reduce among them gets a kernel.
      realize(n->src[0].get());
      for (size_t i = 1; i < n->src.size(); ++i)
        visit(n->src[i].get(), true, false, true, ks, seen);
      return;
    }
    if (n->op == Ops::DETACH) {
      visit(n->src[0].get(), only_reshapes, padded, in_reduce, ks, seen);
      return;
    }
    if (n->op == Ops::CONTIGUOUS) {
      if (is_root)
        visit(n->src[0].get(), only_reshapes, padded, in_reduce, ks, seen);
      else
        realize(n);
      return;
    }
    // A copy moves a whole buffer: its source is realized (or already one), and it is a buffer
    // of its own on its device for whatever reads it.
    if (n->op == Ops::COPY) {
      if (!is_root)
        realize(n);
      else if (n->src[0]->op != Ops::BUFFER)
        realize(n->src[0].get());
      return;
    }
    if (n->op == Ops::ASSIGN) {
      if (!is_root) {
        realize(n);
        return;
      }
      visit(n->src[1].get(), only_reshapes, padded, in_reduce, ks, seen);
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
    if (root_->op == Ops::SCATTER) return build_scatter(out);
    slot_of(out);
    const Shape& shape = *root_->shape();
    const UOp* value_root = root_->op == Ops::CONTIGUOUS ? root_->src[0].get()
                            : root_->op == Ops::ASSIGN   ? root_->src[1].get()
                                                         : root_;
    // A kernel with a reduce works in the reduce's coordinates: its output shape (1 at the
    // reduced axes) after it. The root, reached from the reduce through reshapes only, is
    // reshaped back into them.
    Chain top;
    if (const UOp* r = find_reduce(value_root)) {
      const Shape& o = *r->shape();
      if (o != shape || r->sym_shape() != nullptr) {
        Arg arg = o;
        if (r->sym_shape()) arg = make_symbolic_arg(o, *r->sym_shape(), {});
        to_kernel_shape_ = UOp::make(Ops::RESHAPE, root_->dtype, {root_->ptr()}, std::move(arg));
        top.push_back(to_kernel_shape_.get());
      }
    }
    UOpPtr value = lower(value_root, top);
    const ShapeTracker out_base = root_->sym_shape()
                                      ? ShapeTracker::from_sym_shape(*root_->sym_shape())
                                      : ShapeTracker::from_shape(shape);
    ShapeTracker out_st = apply_chain(out_base, top);
    UOpPtr store =
        UOp::make(Ops::STORE, dtypes::void_, {global(0, out->dtype()), view(out_st), value});
    ScheduleItem item{UOp::make(Ops::SINK, dtypes::void_, {store}), buffers_, {}};
    for (const Binding& b : merge_bindings(bindings_, "schedule"))
      item.var_vals[b.var->arg_as<VarArg>().name] = b.value;
    return item;
  }

  // A SCATTER's kernel: one invocation per value, over the values' shape, combining into the copy
  // of dest (`out`, slot 0) with STORE(buffer, base view, value, index...) whose arg is the
  // combine, then (stride, size) per index (codegen's is_scatter_store). The base view is the
  // value's own element of dest with each indexed axis at 0; the lowerer adds index * stride.
  ScheduleItem build_scatter(const std::shared_ptr<const Buffer>& out) {
    slot_of(out);
    loads_.emplace_back(root_->src[0].get(), out->storage_id());  // after the copy's kernel
    const Shape& dest = *root_->shape();
    const Shape& o = *root_->src[1]->shape();
    const auto& arg = root_->arg_as<std::vector<int64_t>>();
    const ShapeTracker st = ShapeTracker::from_shape(dest);
    Mask at_zero;
    for (int64_t d : o) at_zero.emplace_back(0, d);
    std::vector<int64_t> steps{arg.at(0)};
    for (size_t j = 1; j < arg.size(); ++j) {
      const size_t a = size_t(arg[j]);
      steps.push_back(st.views()[0].strides[a]);
      steps.push_back(dest[a]);
      at_zero[a] = {0, 1};
    }
    std::vector<UOpPtr> src{global(0, out->dtype()), view(st.shrink(at_zero).expand(o))};
    for (size_t i = 1; i < root_->src.size(); ++i) src.push_back(lower(root_->src[i].get(), {}));
    UOpPtr store = UOp::make(Ops::STORE, dtypes::void_, std::move(src), std::move(steps));
    ScheduleItem item{UOp::make(Ops::SINK, dtypes::void_, {store}), buffers_, {}};
    return item;
  }

  // The leaves the kernel loads, with the storage each one's buffer has.
  const std::vector<std::pair<const UOp*, int64_t>>& loads() const { return loads_; }

 private:
  const UOp* root_;
  const Analysis& analysis_;
  const Schedule& sched_;
  UOpPtr to_kernel_shape_;
  std::vector<std::shared_ptr<const Buffer>> buffers_;
  std::map<std::pair<const UOp*, Chain>, UOpPtr> memo_;
  std::vector<std::pair<const UOp*, int64_t>> loads_;
  std::vector<std::vector<Binding>> bindings_;  // of the symbolic nodes this kernel reads

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

  // One slot per storage: an assign's kernel reads the old contents of the buffer it writes.
  int slot_of(const std::shared_ptr<const Buffer>& b) {
    for (size_t i = 0; i < buffers_.size(); ++i)
      if (buffers_[i]->storage_id() == b->storage_id()) return int(i);
    buffers_.push_back(b);
    return int(buffers_.size() - 1);
  }
  static UOpPtr global(int slot, DType d) {
    return UOp::make(Ops::DEFINE_GLOBAL, d.ptr(), {}, int64_t(slot));
  }
  static UOpPtr view(const ShapeTracker& st) {
    return UOp::make(Ops::VIEW, dtypes::void_, {}, st.to_arg());
  }

  // The buffer view holding a leaf's value.
  UOpPtr leaf_view(const UOp* n) const {
    if (n->op == Ops::BUFFER) return n->ptr();
    auto it = sched_.realized.find(n);
    if (it != sched_.realized.end()) return it->second;
    auto p = analysis_.prior.find(n);
    if (p != analysis_.prior.end()) return p->second;
    throw Error("schedule: leaf " + std::string(op_name(n->op)) + " has no buffer");
  }

  // An indexed load becomes LOAD(buffer, base view, index...) (codegen's is_indexed_load): the
  // base view is the source's view with each indexed axis at 0 and expanded to the output's
  // shape, so that the movement ops above the INDEX apply to it as to the indices; the lowerer
  // adds index * stride per indexed axis.
  UOpPtr lower_indexed_load(const UOp* n, const Chain& chain) {
    Chain src_chain;
    const UOp* leaf = analysis_.indexed_base(n->src[0].get(), src_chain);
    Chain buffer_chain;
    const UOp* buf = viewed_buffer(leaf_view(leaf).get(), buffer_chain);
    if (!buf) throw Error("schedule: the source of an indexed load is no buffer (internal)");
    buffer_chain.insert(buffer_chain.end(), src_chain.begin(), src_chain.end());
    const auto b = buffer_ptr(*buf);
    const int slot = slot_of(b);
    loads_.emplace_back(leaf, b->storage_id());
    const ShapeTracker st =
        apply_chain(ShapeTracker::from_shape({b->count()}), buffer_chain).simplify();
    if (st.views().size() != 1 || st.views()[0].mask)
      throw Error("schedule: the source of an indexed load has no single view (internal)");
    const Shape& out = *n->shape();
    Mask at_zero;
    for (int64_t d : st.shape()) at_zero.emplace_back(0, d);
    std::vector<int64_t> steps;  // (stride, size) per index
    for (int64_t a : n->arg_as<std::vector<int64_t>>()) {
      steps.push_back(st.views()[0].strides[size_t(a)]);
      steps.push_back(st.shape()[size_t(a)]);
      at_zero[size_t(a)] = {0, 1};
    }
    const ShapeTracker base = apply_chain(st.shrink(at_zero).expand(out), chain);
    std::vector<UOpPtr> src{global(slot, b->dtype()), view(base)};
    for (size_t i = 1; i < n->src.size(); ++i) src.push_back(lower(n->src[i].get(), chain));
    return UOp::make(Ops::LOAD, n->dtype, std::move(src), std::move(steps));
  }

  UOpPtr lower(const UOp* n, const Chain& chain) {
    auto key = std::pair{n, chain};
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    UOpPtr out = lower_uncached(n, chain);
    memo_.emplace(std::move(key), out);
    return out;
  }

  UOpPtr lower_uncached(const UOp* n, const Chain& chain) {
    // A variable's value as a tensor: the kernel reads the (unbound) expression.
    if (n->op == Ops::BIND) {
      bindings_.push_back(symbolic_arg(*n)->bindings);
      return n->src[0];
    }
    for (const UOp* m : chain)
      if (const SymbolicArg* a = symbolic_arg(*m)) bindings_.push_back(a->bindings);
    if (n->op == Ops::CONST) {
      return UOp::make(Ops::CONST, n->dtype,
                       {view(apply_chain(ShapeTracker::from_shape({}), chain))}, n->arg);
    }
    if (n->op == Ops::BUFFER || (n != root_ && analysis_.is_leaf(n))) {
      Chain buffer_chain;
      const UOp* buf = viewed_buffer(leaf_view(n).get(), buffer_chain);
      buffer_chain.insert(buffer_chain.end(), chain.begin(), chain.end());
      // The leaf's own symbolic views too (a symbolic input realized in the same schedule, read
      // as a leaf: "reads variable 'n', which has no value in this run", symbolic fuzzer).
      for (const UOp* m : buffer_chain)
        if (const SymbolicArg* a = symbolic_arg(*m)) bindings_.push_back(a->bindings);
      const auto b = buffer_ptr(*buf);
      const int slot = slot_of(b);
      loads_.emplace_back(n, b->storage_id());
      ShapeTracker st = apply_chain(ShapeTracker::from_shape({b->count()}), buffer_chain);
      return UOp::make(Ops::LOAD, n->dtype, {global(slot, b->dtype()), view(st)});
    }
    if (is_movement(n->op)) {
      Chain inner{n};
      inner.insert(inner.end(), chain.begin(), chain.end());
      return lower(n->src[0].get(), inner);
    }
    if (n->op == Ops::DETACH) return lower(n->src[0].get(), chain);
    if (n->op == Ops::INDEX) return lower_indexed_load(n, chain);
    if (n->op == Ops::REDUCE_AXIS) {
      for (const UOp* m : chain)
        if (m->op != Ops::RESHAPE)
          throw Error("schedule: a moved reduce was not realized (internal)");
      return UOp::make(Ops::REDUCE_AXIS, n->dtype, {lower(n->src[0].get(), {})}, n->arg);
    }
    std::vector<UOpPtr> src;
    for (const UOpPtr& s : n->src) src.push_back(lower(s.get(), chain));
    return UOp::make(n->op, n->dtype, std::move(src), n->arg);
  }
};

// What one item computes (its root) and loads (leaves, with their buffers' storage).
struct ItemAccess {
  const UOp* root;
  std::vector<std::pair<const UOp*, int64_t>> loads;
};

// Puts every kernel that reads a buffer's contents from before an assign ahead of the ASSIGN
// kernel that overwrites them: the toposort does not, since such a reader need not be an
// ancestor of the assign (the loss reads the weights the update writes). A stable Kahn sort over
// the producer edges and those, so the toposort order stays wherever it is free.
void order_around_assigns(Schedule& sched, const std::vector<ItemAccess>& access) {
  const size_t n = access.size();
  std::unordered_map<const UOp*, size_t> item_of;
  for (size_t i = 0; i < n; ++i) item_of.emplace(access[i].root, i);
  // A load reads the version an assign of this schedule left, or (nullptr) what the buffer held
  // before the schedule.
  auto version = [&](const UOp* leaf) -> const UOp* {
    return leaf->op == Ops::ASSIGN && item_of.count(leaf) ? leaf : nullptr;
  };
  std::map<std::pair<int64_t, const UOp*>, std::vector<size_t>> readers;
  std::vector<std::vector<size_t>> next(n);
  std::vector<size_t> waits(n, 0);
  auto edge = [&](size_t from, size_t to) {
    if (from == to) return;
    next[from].push_back(to);
    ++waits[to];
  };
  for (size_t j = 0; j < n; ++j)
    for (const auto& [leaf, storage] : access[j].loads) {
      readers[{storage, version(leaf)}].push_back(j);
      if (auto p = item_of.find(leaf); p != item_of.end()) edge(p->second, j);
    }
  for (size_t a = 0; a < n; ++a) {
    const UOp* root = access[a].root;
    if (root->op != Ops::ASSIGN) continue;
    const UOp* prev = root->src[0].get();
    while (prev->op == Ops::RESHAPE) prev = prev->src[0].get();
    prev = version(prev);
    if (prev) edge(item_of.at(prev), a);  // writes of one buffer keep their order
    const int64_t storage = sched.items[a].buffers[0]->storage_id();
    for (size_t j : readers[{storage, prev}]) edge(j, a);
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < n; ++i)
    if (waits[i] == 0) ready.push(i);
  std::vector<ScheduleItem> ordered;
  while (!ready.empty()) {
    const size_t i = ready.top();
    ready.pop();
    ordered.push_back(std::move(sched.items[i]));
    for (size_t j : next[i])
      if (--waits[j] == 0) ready.push(j);
  }
  if (ordered.size() != n) {
    for (size_t i = 0; i < n; ++i)
      if (waits[i] && access[i].root->op == Ops::ASSIGN)
        throw Error("assign: a tensor of shape " + shape_str(*access[i].root->shape()) +
                    " is read at its old value by a computation that also needs its new value, in "
                    "one realize; realize the old value (or the assign) first");
    throw Error("schedule: the kernels around an assign form a cycle (internal)");
  }
  sched.items = std::move(ordered);
}

// viewed_buffer through values realized earlier in this schedule (or before it), whose buffer
// views stand in for them: x.permute(p).contiguous().permute(q).contiguous() with q p the
// identity is the first copy's buffer in order, and needs no second copy (a convolution's
// gradient made channels-last once for both its consumers: core/tensor_conv.cpp).
const UOp* viewed_realized(const UOp* n, Chain& chain, const Schedule& sched,
                           const Analysis& analysis) {
  // Realized views are movement ops over a BUFFER: the walk ends at the second step.
  for (;;) {
    while (is_movement(n->op) ||
           (n->op == Ops::DETACH && std::holds_alternative<std::monostate>(n->arg))) {
      if (n->op != Ops::DETACH) chain.insert(chain.begin(), n);
      n = n->src[0].get();
    }
    if (n->op == Ops::BUFFER) return n;
    // An assign's buffer is written in place: a later assign to it in this schedule would change
    // what a view of it reads, so a value read after this assign gets a copy of its own.
    if (n->sym_shape() || n->op == Ops::ASSIGN) return nullptr;
    if (auto it = sched.realized.find(n); it != sched.realized.end())
      n = it->second.get();
    else if (auto p = analysis.prior.find(n); p != analysis.prior.end())
      n = p->second.get();
    else
      return nullptr;
  }
}

// Whether node n's value depends on a variable's binding: a BIND, a symbolic size or argument
// under it. `memo` keeps the answers across one schedule's (or one commit's) nodes.
bool depends_on_binding(const UOp* n, std::unordered_map<const UOp*, bool>& memo) {
  std::vector<std::pair<const UOp*, size_t>> stack{{n, 0}};
  while (!stack.empty()) {
    auto& [u, next] = stack.back();
    if (memo.count(u)) {
      stack.pop_back();
      continue;
    }
    if (next < u->src.size()) {
      const UOp* s = u->src[next++].get();
      if (!memo.count(s)) stack.push_back({s, 0});
      continue;
    }
    bool depends = u->op == Ops::BIND || u->sym_shape() || symbolic_arg(*u);
    for (const UOpPtr& s : u->src) depends = depends || memo.at(s.get());
    memo.emplace(u, depends);
    stack.pop_back();
  }
  return memo.at(n);
}

// Whether a Jit capture may take node n's value from an earlier schedule (the buffer view
// `view`). One whose graph depends on a variable's binding (depends_on_binding) and that no
// captured kernel wrote
// is an eager call's, of the captured binding only: a replay at another binding would keep its
// values, and its memory has no room for more elements. The capture computes it again (binding
// fuzzer seed 5401231: an (n, 0) @ (0, 3) an eager call had realized).
bool capture_may_reuse(const UOp* n, const UOp* view, const Capture& capture,
                       std::unordered_map<const UOp*, bool>& bound) {
  if (!view || !depends_on_binding(n, bound)) return true;
  // An assign ran once, where it was realized: a record of one is never computed again (a
  // caller's assign the capture ran outside it, or realized before, would be captured and every
  // replay would run it once more).
  if (n->op == Ops::ASSIGN) return true;
  while (view->op != Ops::BUFFER) view = view->src[0].get();  // a realized value views a buffer
  const int64_t storage = buffer_of(*view).storage_id();
  for (const ScheduleItem& item : capture.items)
    for (size_t o = 0; o < item.outputs; ++o)
      if (item.buffers[o]->storage_id() == storage) return true;
  return false;
}

}  // namespace

Schedule create_schedule(const std::vector<UOpPtr>& outputs) {
  Schedule sched;
  Analysis analysis;
  std::vector<const UOp*> order;
  {
    const UOpPtr sink = UOp::make(Ops::SINK, dtypes::void_, outputs);
    const Capture* capture = active_capture();
    std::unordered_map<const UOp*, bool> bound;  // depends_on_binding's
    for (const UOp* n : toposort(sink.get()))
      if (n != sink.get()) {
        order.push_back(n);
        UOpPtr v = RealizedValues::lookup(n);
        if (capture && !capture_may_reuse(n, v.get(), *capture, bound)) v = nullptr;
        if (v) analysis.prior.emplace(n, v);
      }
  }
  analysis.run(outputs);
  for (const UOpPtr& o : outputs)
    if (auto p = analysis.prior.find(o.get()); p != analysis.prior.end())
      sched.realized.emplace(o.get(), p->second);

  std::unordered_set<int64_t> uploads;
  std::vector<ItemAccess> access;  // by item
  bool has_assign = false;
  for (const UOp* n : order) {
    if (n->op == Ops::BUFFER) {
      auto b = buffer_ptr(*n);
      if (b->initial_data && uploads.insert(b->id()).second) sched.uploads.push_back(b);
    }
    if (!analysis.realized.count(n)) continue;
    // A node that only views a whole buffer in order needs no kernel (unless it is a clone).
    Chain chain;
    const UOp* value = n->op == Ops::CONTIGUOUS ? n->src[0].get() : n;
    const bool clone = n->op == Ops::CONTIGUOUS && std::holds_alternative<int64_t>(n->arg);
    if (const UOp* buf = clone ? nullptr : viewed_realized(value, chain, sched, analysis)) {
      const ShapeTracker st =
          apply_chain(ShapeTracker::from_shape({buffer_of(*buf).count()}), chain);
      // contiguous() alone holds for a prefix (a shrink to [0, k)): that is not the whole buffer.
      if (st.contiguous() && prod(*n->shape()) == buffer_of(*buf).count()) {
        // Through a realized value, the view is that value's buffer in n's shape. A view whose
        // arguments hold a variable (a shrink to n of a value computed here) is the whole buffer
        // only at this binding: it stays that view, over the buffer, so that a Jit replay at
        // another binding gives its shape (it was the bare buffer: a replay at n = 1 returned all
        // of it; the binding fuzzer's seed 5400818).
        Chain direct;
        UOpPtr view;
        if (viewed_buffer(value, direct)) {
          view = value->ptr();
        } else if (value->sym_shape()) {
          view = buf->ptr();
          for (const UOp* c : chain) {
            std::vector<UOpPtr> src = c->src;
            src.at(0) = view;
            view = UOp::make(c->op, c->dtype, std::move(src), c->arg);
          }
        } else {
          view = *n->shape() == Shape{buffer_of(*buf).count()}
                     ? buf->ptr()
                     : UOp::make(Ops::RESHAPE, n->dtype, {buf->ptr()}, *n->shape());
        }
        sched.realized.emplace(n, std::move(view));
        continue;
      }
    }
    // A scatter is a buffer of its own: reshapes and plain detaches of it (a gradient's) view it.
    if (!clone) {
      const UOp* under = value;
      while (under->op == Ops::RESHAPE ||
             (under->op == Ops::DETACH && std::holds_alternative<std::monostate>(under->arg)))
        under = under->src[0].get();
      auto scattered = sched.realized.find(under);
      if (under->op == Ops::SCATTER && scattered != sched.realized.end()) {
        const UOpPtr& v = scattered->second;
        sched.realized.emplace(n, *n->shape() == *v->shape()
                                      ? v
                                      : UOp::make(Ops::RESHAPE, n->dtype, {v}, *n->shape()));
        continue;
      }
    }
    const std::string device =
        n->device_node() ? n->device_node()->arg_as<std::string>() : std::string();
    if (n->op == Ops::COPY) {
      const UOp* src = n->src[0].get();
      Chain src_chain;
      const UOp* src_view = src;
      if (src->op != Ops::BUFFER) {
        auto it = sched.realized.find(src);
        auto p = analysis.prior.find(src);
        if (it == sched.realized.end() && p == analysis.prior.end())
          throw Error("schedule: a copy of a " + std::string(op_name(src->op)) +
                      " that has no buffer (internal: Tensor::to computes constants first)");
        src_view = it != sched.realized.end() ? it->second.get() : p->second.get();
      }
      const auto from = buffer_ptr(*viewed_buffer(src_view, src_chain));
      const auto out = std::make_shared<Buffer>(device, n->dtype, from->count());
      sched.items.push_back(copy_item(out, from));
      access.push_back({n, {{src, from->storage_id()}}});
      UOpPtr bnode = UOp::make(Ops::BUFFER, n->dtype, {n->device_node()->ptr()},
                               std::shared_ptr<const ArgPayload>(out));
      sched.realized.emplace(n, *n->shape() == Shape{out->count()}
                                    ? bnode
                                    : UOp::make(Ops::RESHAPE, n->dtype, {bnode}, *n->shape()));
      continue;
    }
    // An assign stores into its target's buffer and leaves the tensor at the next version of it;
    // so does a scatter, into the copy of dest its first kernel made.
    const bool assign = n->op == Ops::ASSIGN;
    std::shared_ptr<const Buffer> out;
    if (assign) {
      out = buffer_ptr(*assign_target(n));
    } else if (n->op == Ops::SCATTER) {
      auto copy = sched.realized.find(n->src[0].get());
      Chain unused;
      const UOp* buf =
          copy == sched.realized.end() ? nullptr : viewed_buffer(copy->second.get(), unused);
      if (!buf) throw Error("schedule: a scatter's copy was not made in its schedule (internal)");
      out = buffer_ptr(*buf);
    } else {
      auto made = std::make_shared<Buffer>(device, n->dtype, prod(*n->shape()));
      if (n->sym_shape()) made->set_max_count(max_elements(*n->sym_shape()));
      out = std::move(made);
    }
    KernelBuilder builder(n, analysis, sched);
    sched.items.push_back(builder.build(out));
    access.push_back({n, builder.loads()});
    has_assign = has_assign || assign;
    const auto held = assign || n->op == Ops::SCATTER ? Buffer::next_version(out) : out;
    UOpPtr bnode = UOp::make(Ops::BUFFER, n->dtype, {n->device_node()->ptr()},
                             std::shared_ptr<const ArgPayload>(held));
    UOpPtr view =
        n->sym_shape()
            ? UOp::make(Ops::RESHAPE, n->dtype, {bnode},
                        make_symbolic_arg(*n->shape(), *n->sym_shape(), collect_bindings(n)))
        : *n->shape() == Shape{out->count()}
            ? bnode
            : UOp::make(Ops::RESHAPE, n->dtype, {bnode}, *n->shape());
    sched.realized.emplace(n, view);
  }
  if (has_assign) order_around_assigns(sched, access);
  merge_multi_output(sched);  // after the order is final: it keeps it
  merge_horizontal(sched);    // after it: a member is a whole kernel of one output
  return sched;
}

size_t realized_node_count() { return RealizedValues::count().load(); }

void commit_realized(const Schedule& sched, const std::unordered_set<int64_t>& lent) {
  Capture* capture = active_capture();
  std::unordered_map<const UOp*, bool> bound;  // depends_on_binding's
  for (const auto& [n, view] : sched.realized) {
    if (!lent.empty() && view.get() != n) {
      const UOp* b = view.get();
      while (b->op != Ops::BUFFER) b = b->src[0].get();  // a realized value views a whole buffer
      if (lent.count(buffer_of(*b).storage_id())) continue;  // its memory holds something else
    }
    RealizedValues::remember(n, view);
    // Jit::capture drops it at the end if its plan writes the buffer (core/jit_capture.hpp).
    if (capture && view.get() != n && depends_on_binding(n, bound))
      capture->bound_records.emplace_back(n->ptr(), view);
  }
}

void forget_realized(const UOp* n, const UOp* view) { RealizedValues::forget(n, view); }

}  // namespace vkg
