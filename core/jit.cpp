// vkg::Jit (core/jit.hpp): the capture through the realize engine's hook (core/jit_capture.hpp),
// the plan of what a replay copies in, runs and points at new buffer versions, and the replay.
#include <vkgrad/core/jit.hpp>

#include <algorithm>
#include <cctype>
#include <unordered_set>

#include <vkgrad/core/binding_guard.hpp>
#include <vkgrad/core/buffer.hpp>
#include <vkgrad/core/copy_item.hpp>
#include <vkgrad/core/device.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/jit_capture.hpp>
#include <vkgrad/core/multi.hpp>
#include <vkgrad/core/shape_tracker.hpp>
#include <vkgrad/core/symbolic.hpp>
#include <vkgrad/core/symbolic_shape.hpp>

namespace vkg {

namespace {

std::string upper(std::string s) {
  for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// The BUFFER node under a realized tensor's node: itself, or reshapes of one (a symbolic
// reshape of a tensor made from host data views it through two).
const UOp& buffer_node(const UOp& view) {
  const UOp* n = &view;
  while (n->op == Ops::RESHAPE) n = n->src[0].get();
  return *n;
}

// The BUFFER a realized tensor's node reads: for a view, under its movement ops. A realize leaves
// a view of a buffer that keeps its order (the whole of it, or a prefix) in place of a copy
// kernel (core/schedule.cpp): a function may return one, or be given one.
const UOp& base_buffer(const UOp& view) {
  const UOp* n = &view;
  while (n->op != Ops::BUFFER && !n->src.empty()) n = n->src[0].get();
  return *n;
}

bool holds_whole_buffer(const UOp& n) {
  const UOp& b = buffer_node(n);
  return b.op == Ops::BUFFER && buffer_of(b).count() == prod(*n.shape());
}

// The buffer views a realized tensor's node stands for: its shards' for a sharded tensor (a
// MULTI of views, core/multi.hpp), else itself.
std::vector<UOpPtr> views_of(const UOpPtr& node) {
  if (node->op == Ops::MULTI) return {node->src.begin() + 1, node->src.end()};
  return {node};
}

bool holds_whole_buffers(const UOpPtr& node) {
  const std::vector<UOpPtr> views = views_of(node);
  return std::all_of(views.begin(), views.end(),
                     [](const UOpPtr& v) { return holds_whole_buffer(*v); });
}

// The axis a realized sharded tensor is split on (-1: replicated), or -2 for one device.
int64_t sharded_axis(const UOp& node) {
  return node.op == Ops::MULTI ? std::get<int64_t>(node.arg) : -2;
}

std::string split_str(int64_t axis) {
  return axis == -2   ? std::string("on one device")
         : axis == -1 ? std::string("replicated")
                      : "sharded on axis " + std::to_string(axis);
}

// node with each of its views replaced by f(view).
template <class F>
UOpPtr map_views(const UOpPtr& node, F f) {
  if (node->op != Ops::MULTI) return f(*node);
  std::vector<UOpPtr> src{node->src[0]};
  for (size_t i = 1; i < node->src.size(); ++i) src.push_back(f(*node->src[i]));
  return UOp::make(Ops::MULTI, node->dtype, std::move(src), node->arg);
}

// `view` over the next version of its buffer: after a replay wrote the buffer, graphs built on
// the tensor are new nodes, never ones the realized-node cache computed from the old contents.
// A view of symbolic shape gets the shape its expressions have under `vars` (the replay's
// binding), over a version of the buffer holding that many elements.
UOpPtr next_version_view(const UOp& view, const Device::VarVals& vars) {
  const SymbolicArg* sym = view.op == Ops::BUFFER ? nullptr : symbolic_arg(view);
  std::vector<int64_t> values;
  std::vector<Binding> bindings;
  if (sym) {
    for (const UOpPtr& e : sym->exprs) values.push_back(eval_int(e, vars));
    bindings = sym->bindings;
    for (Binding& bound : bindings)
      if (auto it = vars.find(bound.var->arg_as<VarArg>().name); it != vars.end())
        bound.value = it->second;
  }
  const UOp& b = buffer_node(view);
  if (b.op == Ops::BUFFER && (view.op == Ops::BUFFER || view.op == Ops::RESHAPE)) {
    if (!sym) {
      UOpPtr next =
          UOp::make(Ops::BUFFER, b.dtype, b.src,
                    std::shared_ptr<const ArgPayload>(Buffer::next_version(buffer_ptr(b))));
      return view.op == Ops::RESHAPE ? UOp::make(Ops::RESHAPE, view.dtype, {next}, view.arg) : next;
    }
    UOpPtr next = UOp::make(
        Ops::BUFFER, b.dtype, b.src,
        std::shared_ptr<const ArgPayload>(Buffer::next_version(buffer_ptr(b), prod(values))));
    return UOp::make(Ops::RESHAPE, view.dtype, {next},
                     make_symbolic_arg(std::move(values), sym->exprs, std::move(bindings)));
  }
  // Another view (base_buffer's): the same over the next version, with its symbolic arguments
  // (a shrink to n) evaluated under `vars`.
  std::vector<UOpPtr> src = view.src;
  src[0] = next_version_view(*src[0], vars);
  return UOp::make(
      view.op, view.dtype, std::move(src),
      sym ? make_symbolic_arg(std::move(values), sym->exprs, std::move(bindings)) : view.arg);
}

// A tensor's shape as a replay must match it: numbers, and the variables of symbolic sizes
// (whose values a replay may change) rather than their values.
std::string signature(const Tensor& t) {
  std::string shape = shape_str(t.shape());
  if (t.has_symbolic_shape()) {
    shape = "(";
    for (const SymInt& d : t.sym_shape()) shape += (shape.size() > 1 ? ", " : "") + d.str();
    shape += ")";
  }
  return shape + " " + t.dtype().name() + " on " + upper(t.device());
}

// The values the variables of the inputs' symbolic sizes have in this call.
Device::VarVals input_bindings(const std::vector<Tensor>& inputs) {
  std::vector<std::vector<Binding>> all;
  for (const Tensor& t : inputs)
    if (t.has_symbolic_shape()) all.push_back(collect_bindings(t.node().get()));
  Device::VarVals out;
  for (const Binding& b : merge_bindings(all, "Jit")) out[b.var->arg_as<VarArg>().name] = b.value;
  return out;
}

std::string str(const Device::VarVals& vars) {
  std::string out;
  for (const auto& [name, value] : vars)
    out += (out.empty() ? "" : ", ") + name + " = " + std::to_string(value);
  return out;
}

void realize_each(std::vector<Tensor>& tensors) {
  std::vector<Tensor*> all;
  for (Tensor& t : tensors) all.push_back(&t);
  if (!all.empty()) realize(all);
}

// Points this thread's Tensor::assign calls at `log` while alive.
class AssignLogScope {
 public:
  explicit AssignLogScope(std::vector<std::weak_ptr<TensorState>>& log)
      : outer_(std::exchange(active_assign_log(), &log)) {}
  ~AssignLogScope() { active_assign_log() = outer_; }
  AssignLogScope(const AssignLogScope&) = delete;
  AssignLogScope& operator=(const AssignLogScope&) = delete;

 private:
  std::vector<std::weak_ptr<TensorState>>* outer_;
};

// Points this thread's realizes at `capture` while alive.
class CaptureScope {
 public:
  explicit CaptureScope(Capture& capture) { active_capture() = &capture; }
  ~CaptureScope() { active_capture() = nullptr; }
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;
};

// Gives the buffers of symbolic size this thread's realizes make room for every binding while
// alive: what a capture and its inputs' copies are made in, so that replays may rebind.
class ReserveMaxScope {
 public:
  ReserveMaxScope() { reserve_symbolic_max() = true; }
  ~ReserveMaxScope() { reserve_symbolic_max() = false; }
  ReserveMaxScope(const ReserveMaxScope&) = delete;
  ReserveMaxScope& operator=(const ReserveMaxScope&) = delete;
};

// Whether the kernel loads or stores buffer `slot` through a view whose outermost sizes are
// numbers: one compiled for the values of this run (a symbolic tensor reshaped to numbers).
bool plain_view_of(const ScheduleItem& item, int64_t slot) {
  for (const UOp* u : toposort(item.ast.get())) {
    if ((u->op != Ops::LOAD && u->op != Ops::STORE) || u->src.size() < 2) continue;
    const UOp& global = *u->src[0];
    if (global.op != Ops::DEFINE_GLOBAL || global.arg_as<int64_t>() != slot) continue;
    const ShapeTracker* st = ShapeTracker::from_arg(u->src[1]->arg);
    if (st && !st->views().back().sym) return true;
  }
  return false;
}

// Why the captured kernels cannot run under another binding of their variables, or "" when they
// can: every buffer of symbolic size they touch has room for every binding, and every kernel
// reaches it through symbolic sizes (one compiled for the capture's sizes would not follow).
std::string why_not_rebindable(const std::vector<ScheduleItem>& items) {
  for (const ScheduleItem& item : items)
    for (size_t slot = 0; slot < item.buffers.size(); ++slot) {
      const auto& b = item.buffers[slot];
      if (b->max_count() == b->count()) continue;
      if (plain_view_of(item, int64_t(slot)))
        return "a kernel of the function uses a tensor of symbolic size through plain sizes (a "
               "reshape to numbers), which are frozen at the capture's values";
      if (b->capacity() < b->max_count())
        return "the function reads a tensor of symbolic size realized before the capture, whose "
               "memory holds only the captured binding's elements";
    }
  return "";
}

}  // namespace

// What a replay runs, in the capture's order: a run of kernels of one device, recorded, or one
// copy between two devices.
struct ReplayStep {
  Device* device = nullptr;
  bool copy = false;
  std::vector<ScheduleItem> items;
  std::unique_ptr<Recording> recording;  // the kernels' (none for a copy)
};

struct Jit::Plan {
  Device* device = nullptr;  // the device of the first kernels
  size_t kernels = 0;
  std::vector<ReplayStep> steps;
  // The memory of every buffer the recording uses, kept while the buffers themselves may go.
  std::vector<std::shared_ptr<Allocation>> memory;
  // Where the capture read each input (a sharded input: each shard's buffer).
  std::vector<std::vector<std::shared_ptr<const Buffer>>> inputs;
  std::vector<int64_t> input_axes;  // a sharded input's axis (-1: replicated), else -2
  std::vector<std::string> signatures;
  std::vector<std::shared_ptr<const Buffer>> regenerated;
  // Tensors the function makes from host data and its kernels then write (an assign to one): a
  // replay uploads their data again first, so that each starts from it as in an eager call.
  std::vector<std::pair<std::shared_ptr<const Buffer>, HostBytes>> reuploaded;
  std::vector<UOpPtr> outputs;          // buffer views
  std::unordered_set<int64_t> written;  // storages the kernels write
  // Storages the kernels use and the outputs hold: where a caller's lazy assign is realized
  // before a replay (realize_callers_assigns).
  std::unordered_set<int64_t> storage;
  std::vector<std::weak_ptr<TensorState>> rewritten;  // tensors holding one of them
  // The variables' values at the capture (those of its kernels and its inputs' sizes), and why
  // a replay may not change them ("" when it may).
  Device::VarVals vars;
  std::string fixed_binding;
  // What the function's ops checked with the captured values (core/binding_guard.hpp).
  BindingGuards guards;
};

Jit::Jit(Function function) : function_(std::move(function)) {
  if (!function_) throw Error("Jit: needs a function");
}

Jit::~Jit() = default;

size_t Jit::kernels() const { return plan_ ? plan_->kernels : 0; }
size_t Jit::guards() const { return plan_ ? plan_->guards.size() : 0; }

Recording* Jit::recording() const {
  return plan_ && plan_->steps.size() == 1 ? plan_->steps[0].recording.get() : nullptr;
}
Device* Jit::device() const { return plan_ ? plan_->device : nullptr; }

void Jit::reset() {
  plan_.reset();
  calls_ = 0;
}

std::vector<Tensor> Jit::operator()(const std::vector<Tensor>& inputs) {
  if (active_capture())
    throw Error(
        "Jit: called inside another Jit's function while that one captures; call the "
        "inner function directly");
  if (plan_) {
    // The caller's lazy assigns to what the capture uses, as the first call's reads ran them:
    // left lazy, they would run after this replay, which read the old values.
    realize_callers_assigns(plan_->storage);
    std::vector<Tensor> out = replay(inputs);
    ++calls_;
    return out;
  }
  std::vector<Tensor> in = inputs;  // aliases: the caller's tensors are realized too
  std::vector<Tensor> out;
  if (calls_ == 0) {
    realize_each(in);
    std::vector<std::weak_ptr<TensorState>> assigned;
    AssignLogScope log(assigned);
    out = function_(in);
    realize_each(out);
    realize_left_assigns(assigned);
  } else {
    // The capture reads copies of the inputs, in buffers of the Jit's own that replays fill:
    // the caller's tensors keep their values.
    ReserveMaxScope reserve;
    for (Tensor& t : in) t = t.clone();
    realize_each(in);
    out = capture(std::move(in));
  }
  ++calls_;
  return out;
}

void Jit::realize_callers_assigns(const std::unordered_set<int64_t>& storage) {
  std::vector<std::weak_ptr<TensorState>>& pending = pending_assigns();
  if (pending.empty()) return;
  std::vector<std::weak_ptr<TensorState>> listed = std::exchange(pending, {});
  std::vector<std::weak_ptr<TensorState>> used, left;
  for (const std::weak_ptr<TensorState>& weak : listed) {
    const std::shared_ptr<TensorState> s = weak.lock();
    if (!s || s->node->op != Ops::ASSIGN) continue;
    const UOp& target = base_buffer(*s->node->src.at(0));
    const bool uses = target.op == Ops::BUFFER && storage.count(buffer_of(target).storage_id());
    (uses ? used : left).push_back(weak);
  }
  try {
    // In one realize, as the function's eager call would run them: reads of old values first.
    realize_left_assigns(used);
  } catch (...) {
    left.insert(left.end(), used.begin(), used.end());  // still lazy, for the next call
    pending.insert(pending.begin(), left.begin(), left.end());
    throw;
  }
  pending.insert(pending.begin(), left.begin(), left.end());  // before any the realizes made
}

void Jit::realize_left_assigns(const std::vector<std::weak_ptr<TensorState>>& assigned) {
  std::vector<Tensor> left;
  std::unordered_set<const TensorState*> seen;
  for (const auto& weak : assigned) {
    const std::shared_ptr<TensorState> s = weak.lock();
    if (!s || !seen.insert(s.get()).second || s->node->op != Ops::ASSIGN) continue;
    left.push_back(Tensor(s->node));
    left.back().state_ = s;  // the function's tensor itself, so realize points it at its buffer
  }
  realize_each(left);
}

std::vector<Tensor> Jit::capture(std::vector<Tensor> inputs) {
  Capture captured;
  // The caller's lazy assigns: those the function reads run before the capture's kernels that
  // read them (realize), not inside the capture.
  {
    const std::vector<std::weak_ptr<TensorState>>& pending = pending_assigns();
    for (const std::weak_ptr<TensorState>& weak : pending)
      if (const std::shared_ptr<TensorState> s = weak.lock())
        for (const UOp* n = s->node.get(); n->op == Ops::ASSIGN; n = n->src[0].get())
          captured.callers_assigns.emplace(n, Capture::CallerAssign{n->ptr(), weak});
  }
  // Buffer ids are issued in order: those the function makes are from this probe's on.
  const int64_t first_buffer = Buffer("CPU", dtypes::uint8, 0).id();
  std::vector<Tensor> out;
  {
    CaptureScope scope(captured);
    std::vector<std::weak_ptr<TensorState>> assigned;
    AssignLogScope log(assigned);
    out = function_(inputs);
    realize_each(out);
    realize_left_assigns(assigned);
  }
  auto plan = std::make_unique<Plan>();
  const std::vector<ScheduleItem>& items = captured.items;
  // Kernels of one device in a row make one recorded step; each copy between devices is one.
  for (const ScheduleItem& item : items) {
    Device& dev = vkg::device(item.buffers[0]->device());
    const bool copy = is_copy(item);
    if (copy || plan->steps.empty() || plan->steps.back().copy || plan->steps.back().device != &dev)
      plan->steps.push_back(ReplayStep{&dev, copy, {}, nullptr});
    plan->steps.back().items.push_back(item);
    if (!copy) {
      ++plan->kernels;
      if (!plan->device) plan->device = &dev;
    }
    for (size_t o = 0; o < item.outputs; ++o) plan->written.insert(item.buffers[o]->storage_id());
    for (const auto& b : item.buffers) plan->storage.insert(b->storage_id());
  }
  for (const Tensor& t : inputs) {
    plan->inputs.emplace_back();
    for (const UOpPtr& v : views_of(t.node()))
      plan->inputs.back().push_back(buffer_ptr(buffer_node(*v)));
    plan->input_axes.push_back(sharded_axis(*t.node()));
    plan->signatures.push_back(signature(t));
  }
  plan->vars = input_bindings(inputs);
  for (const ScheduleItem& item : items)
    plan->vars.insert(item.var_vals.begin(), item.var_vals.end());
  plan->fixed_binding = captured.skipped_symbolic
                            ? "a kernel had no elements under the captured binding (a size of 0), "
                              "so the capture holds nothing that computes it"
                            : why_not_rebindable(items);
  plan->guards = std::move(captured.guards);
  for (const ScheduleItem& item : items)
    if (is_copy(item) && item.buffers[0]->max_count() != item.buffers[0]->count())
      plan->fixed_binding =
          "it copies a tensor of symbolic size between devices, by the captured size";
  std::unordered_set<int64_t> seen;
  for (const auto& b : captured.regenerated)
    if (seen.insert(b->id()).second) plan->regenerated.push_back(b);
  // Host data the function made (a tensor closed over keeps what the kernels write into it).
  for (const auto& [b, data] : captured.uploaded)
    if (b->id() >= first_buffer && plan->written.count(b->storage_id()))
      plan->reuploaded.emplace_back(b, data);
  for (const Tensor& t : out) {
    plan->outputs.push_back(t.node());
    for (const UOpPtr& v : views_of(t.node()))
      if (const UOp& b = base_buffer(*v); b.op == Ops::BUFFER)
        plan->storage.insert(buffer_of(b).storage_id());
  }
  std::unordered_set<const TensorState*> listed;
  for (const auto& weak : captured.realized) {
    const std::shared_ptr<TensorState> s = weak.lock();
    if (!s || !listed.insert(s.get()).second || !holds_whole_buffers(s->node)) continue;
    for (const UOpPtr& v : views_of(s->node))
      if (plan->written.count(buffer_of(buffer_node(*v)).storage_id())) {
        plan->rewritten.push_back(s);
        break;
      }
  }
  // A node of the captured binding whose buffer the plan writes holds each replay's binding's
  // value after a replay: a later eager schedule of the same (hash-consed) graph, at the captured
  // binding, must compute it rather than read another binding's value. Replays do not use the
  // records; the function's outputs hold their buffers themselves.
  for (const auto& [n, view] : captured.bound_records) {
    const UOp* b = view.get();
    while (b->op != Ops::BUFFER) b = b->src[0].get();  // a realized value views a whole buffer
    if (plan->written.count(buffer_of(*b).storage_id())) forget_realized(n.get(), view.get());
  }
  if (!plan->steps.empty()) {
    // The memory is what the capture's run used: intermediates already share it within each of
    // its schedules (core/memory_planner.hpp). Planning again over the whole capture would need
    // memory of its own, as the capture's graphs (its gradients, the loss's graph) keep the
    // originals in the realized-node cache.
    const auto lock = lock_engine();
    std::unordered_set<const Allocation*> held;
    for (ReplayStep& step : plan->steps) {
      std::vector<std::vector<Allocation*>> memory;
      for (const ScheduleItem& item : step.items) {
        memory.emplace_back();
        for (const auto& b : item.buffers) {
          memory.back().push_back(&ensure_allocated(*b));
          if (held.insert(b->allocation.get()).second) plan->memory.push_back(b->allocation);
        }
      }
      if (!step.copy)
        step.recording =
            step.device->record(step.items, std::move(memory), RunOptions::from_settings());
    }
  }
  plan_ = std::move(plan);
  return out;
}

std::vector<Tensor> Jit::replay(const std::vector<Tensor>& inputs) {
  Plan& plan = *plan_;
  if (inputs.size() != plan.inputs.size())
    throw Error("Jit: called with " + std::to_string(inputs.size()) +
                " inputs, the captured call had " + std::to_string(plan.inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (signature(inputs[i]) != plan.signatures[i])
      throw Error("Jit: input " + std::to_string(i) + " is " + signature(inputs[i]) +
                  ", the captured call's was " + plan.signatures[i] +
                  "; a replay needs the same shapes (symbolic sizes may take other values), dtypes "
                  "and devices (use a Jit per shape, or reset() to capture again)");
  // New values of the inputs' variables: the kernels read them from their argument buffers
  // and the buffers of symbolic size have room for every binding, so nothing is recorded again.
  Device::VarVals vars = plan.vars;
  bool rebound = false;
  for (const auto& [name, value] : input_bindings(inputs)) {
    auto [it, added] = vars.emplace(name, value);
    rebound = rebound || added || it->second != value;
    it->second = value;
  }
  if (rebound)
    if (const std::string broken = plan.guards.broken(vars); !broken.empty())
      throw Error("Jit: called with " + str(input_bindings(inputs)) + ", the capture had " +
                  str(plan.vars) + ", and the function's " + broken +
                  "; an eager call throws there, or computes what the capture's kernels do not "
                  "(reset() captures again)");
  if (rebound && !plan.fixed_binding.empty())
    throw Error("Jit: called with " + str(input_bindings(inputs)) + ", the capture had " +
                str(plan.vars) + ", and this capture replays only its own binding: " +
                plan.fixed_binding + " (reset() captures again, compiling nothing new)");
  // Host data not yet on the device is uploaded straight into the captured input's buffer;
  // anything else is realized where it is and copied there on the device.
  std::vector<Tensor> in = inputs;
  std::vector<bool> from_host(in.size());
  std::vector<Tensor*> to_realize;
  for (size_t i = 0; i < in.size(); ++i) {
    const UOp& n = *in[i].node();
    // A replicated tensor made from host data is a BUFFER on the joined device, not yet a MULTI:
    // realized first, it uploads to every replica (an upload here would fill replica 0 only).
    from_host[i] = n.op != Ops::MULTI && !is_multi_device(in[i].device()) &&
                   holds_whole_buffer(n) && buffer_of(buffer_node(n)).initial_data &&
                   !buffer_of(buffer_node(n)).allocation;
    if (!from_host[i]) to_realize.push_back(&in[i]);
  }
  if (!to_realize.empty()) realize(to_realize);
  {
    const auto lock = lock_engine();
    for (size_t i = 0; i < in.size(); ++i) {
      const std::vector<UOpPtr> views = views_of(in[i].node());
      if (sharded_axis(*in[i].node()) != plan.input_axes[i])
        throw Error("Jit: input " + std::to_string(i) + " is " +
                    split_str(sharded_axis(*in[i].node())) + ", the captured call's was " +
                    split_str(plan.input_axes[i]) + "; a replay needs the same split");
      for (size_t j = 0; j < views.size(); ++j) {
        const Buffer& captured = *plan.inputs[i][j];
        const Buffer& given = buffer_of(base_buffer(*views[j]));
        Device& dev = vkg::device(captured.device());
        if (from_host[i])
          dev.copy_in(ensure_allocated(captured), *given.initial_data);
        else if (given.storage_id() != captured.storage_id())
          dev.copy(ensure_allocated(given), ensure_allocated(captured),
                   std::min(given.nbytes(),
                            size_t(prod(*views[j]->shape())) * size_t(given.dtype().itemsize())));
      }
    }
    for (const auto& b : plan.regenerated)
      vkg::device(b->device()).copy_in(ensure_allocated(*b), b->regenerate());
    for (const auto& [b, data] : plan.reuploaded)
      vkg::device(b->device()).copy_in(ensure_allocated(*b), *data);
    // The steps in the capture's order, none waited for by the host: a kernel step is submitted
    // (Device::replay), a copy waits on a copy thread for what writes its source and what still
    // uses its destination, and the device that reads it waits for it on its queue. So the
    // devices' steps overlap, and the host waits only where it reads a result.
    bool first = true;
    for (ReplayStep& step : plan.steps) {
      if (step.copy) {
        replay_copy(step.items[0]);
        continue;
      }
      report_replay(*step.device, step.device->replay(*step.recording, vars), first);
      first = false;
    }
    if (first) count_replay();  // a capture of copies only replayed too
    wait_if_exiting();
  }
  // A view of a buffer the replay wrote (or of another size) moves to the buffer's next version.
  auto refreshed = [&](const UOp& view) {
    return plan.written.count(buffer_of(base_buffer(view)).storage_id()) ||
                   (rebound && view.sym_shape())
               ? next_version_view(view, vars)
               : view.ptr();
  };
  for (const auto& weak : plan.rewritten) {
    const std::shared_ptr<TensorState> s = weak.lock();
    if (!s || !holds_whole_buffers(s->node)) continue;  // gone, or pointed elsewhere since
    const std::vector<UOpPtr> views = views_of(s->node);
    if (std::none_of(views.begin(), views.end(), [&](const UOpPtr& v) {
          return plan.written.count(buffer_of(buffer_node(*v)).storage_id()) > 0;
        }))
      continue;
    Tensor handle(s->node);
    handle.state_ = s;
    handle.set_realized(map_views(s->node, [&](const UOp& v) {
      return plan.written.count(buffer_of(buffer_node(v)).storage_id()) ? next_version_view(v, vars)
                                                                        : v.ptr();
    }));
  }
  std::vector<Tensor> out;
  for (const UOpPtr& node : plan.outputs) out.emplace_back(map_views(node, refreshed));
  return out;
}

}  // namespace vkg
