// vkg::Jit (core/jit.hpp): the capture through the realize engine's hook (core/jit_capture.hpp),
// the plan of what a replay copies in, runs and points at new buffer versions, and the replay.
#include <vkgrad/core/jit.hpp>

#include <algorithm>
#include <cctype>
#include <unordered_set>

#include <vkgrad/core/buffer.hpp>
#include <vkgrad/core/device.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/jit_capture.hpp>

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

bool holds_whole_buffer(const UOp& n) {
  const UOp& b = buffer_node(n);
  return b.op == Ops::BUFFER && buffer_of(b).count() == prod(*n.shape());
}

// `view` over the next version of its buffer: after a replay wrote the buffer, graphs built on
// the tensor are new nodes, never ones the realized-node cache computed from the old contents.
UOpPtr next_version_view(const UOp& view) {
  const UOp& b = buffer_node(view);
  UOpPtr next = UOp::make(Ops::BUFFER, b.dtype, b.src,
                          std::shared_ptr<const ArgPayload>(Buffer::next_version(buffer_ptr(b))));
  return view.op == Ops::RESHAPE ? UOp::make(Ops::RESHAPE, view.dtype, {next}, view.arg) : next;
}

std::string signature(const Tensor& t) {
  return shape_str(t.shape()) + " " + t.dtype().name() + " on " + upper(t.device());
}

void realize_each(std::vector<Tensor>& tensors) {
  std::vector<Tensor*> all;
  for (Tensor& t : tensors) all.push_back(&t);
  if (!all.empty()) realize(all);
}

// Points this thread's realizes at `capture` while alive.
class CaptureScope {
 public:
  explicit CaptureScope(Capture& capture) { active_capture() = &capture; }
  ~CaptureScope() { active_capture() = nullptr; }
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;
};

}  // namespace

struct Jit::Plan {
  Device* device = nullptr;
  size_t kernels = 0;
  std::unique_ptr<Recording> recording;
  // The memory of every buffer the recording uses, kept while the buffers themselves may go.
  std::vector<std::shared_ptr<Allocation>> memory;
  std::vector<std::shared_ptr<const Buffer>> inputs;  // where the capture read each input
  std::vector<std::string> signatures;
  std::vector<std::shared_ptr<const Buffer>> regenerated;
  std::vector<UOpPtr> outputs;                        // buffer views
  std::unordered_set<int64_t> written;                // storages the kernels write
  std::vector<std::weak_ptr<TensorState>> rewritten;  // tensors holding one of them
};

Jit::Jit(Function function) : function_(std::move(function)) {
  if (!function_) throw Error("Jit: needs a function");
}

Jit::~Jit() = default;

size_t Jit::kernels() const { return plan_ ? plan_->kernels : 0; }

Recording* Jit::recording() const { return plan_ ? plan_->recording.get() : nullptr; }
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
    std::vector<Tensor> out = replay(inputs);
    ++calls_;
    return out;
  }
  std::vector<Tensor> in = inputs;  // aliases: the caller's tensors are realized too
  std::vector<Tensor> out;
  if (calls_ == 0) {
    realize_each(in);
    out = function_(in);
    realize_each(out);
  } else {
    // The capture reads copies of the inputs, in buffers of the Jit's own that replays fill:
    // the caller's tensors keep their values.
    for (Tensor& t : in) t = t.clone();
    realize_each(in);
    out = capture(std::move(in));
  }
  ++calls_;
  return out;
}

std::vector<Tensor> Jit::capture(std::vector<Tensor> inputs) {
  Capture captured;
  std::vector<Tensor> out;
  {
    CaptureScope scope(captured);
    out = function_(inputs);
    realize_each(out);
  }
  auto plan = std::make_unique<Plan>();
  const std::vector<ScheduleItem>& items = captured.items;
  plan->kernels = items.size();
  for (const ScheduleItem& item : items) {
    Device& dev = vkg::device(item.buffers[0]->device());
    if (plan->device && plan->device != &dev)
      throw Error("Jit: the function runs kernels on " + plan->device->name() + " and " +
                  dev.name() + "; a capture replays on one device");
    plan->device = &dev;
    plan->written.insert(item.buffers[0]->storage_id());
  }
  for (const Tensor& t : inputs) {
    plan->inputs.push_back(buffer_ptr(buffer_node(*t.node())));
    plan->signatures.push_back(signature(t));
  }
  std::unordered_set<int64_t> seen;
  for (const auto& b : captured.regenerated)
    if (seen.insert(b->id()).second) plan->regenerated.push_back(b);
  for (const Tensor& t : out) plan->outputs.push_back(t.node());
  std::unordered_set<const TensorState*> listed;
  for (const auto& weak : captured.realized) {
    const std::shared_ptr<TensorState> s = weak.lock();
    if (s && listed.insert(s.get()).second && holds_whole_buffer(*s->node) &&
        plan->written.count(buffer_of(buffer_node(*s->node)).storage_id()))
      plan->rewritten.push_back(s);
  }
  if (plan->device) {
    // The memory is what the capture's run used: intermediates already share it within each of
    // its schedules (core/memory_planner.hpp). Planning again over the whole capture would need
    // memory of its own, as the capture's graphs (its gradients, the loss's graph) keep the
    // originals in the realized-node cache.
    std::lock_guard lock(engine_mutex());
    std::vector<std::vector<Allocation*>> memory;
    std::unordered_set<const Allocation*> held;
    for (const ScheduleItem& item : items) {
      memory.emplace_back();
      for (const auto& b : item.buffers) {
        memory.back().push_back(&ensure_allocated(*b));
        if (held.insert(b->allocation.get()).second) plan->memory.push_back(b->allocation);
      }
    }
    plan->recording = plan->device->record(items, std::move(memory), RunOptions::from_settings());
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
      throw Error(
          "Jit: input " + std::to_string(i) + " is " + signature(inputs[i]) +
          ", the captured call's was " + plan.signatures[i] +
          "; a replay needs the same shapes, dtypes and devices (use a Jit per shape, "
          "or reset() to capture again" +
          // The capture recorded its buffers' sizes and its variables' values.
          (inputs[i].has_symbolic_shape()
               ? std::string("; a replay cannot take new values of symbolic sizes yet, but a "
                             "new capture reuses their compiled kernels)")
               : std::string(")")));
  // Host data not yet on the device is uploaded straight into the captured input's buffer;
  // anything else is realized where it is and copied there on the device.
  std::vector<Tensor> in = inputs;
  std::vector<bool> from_host(in.size());
  std::vector<Tensor*> to_realize;
  for (size_t i = 0; i < in.size(); ++i) {
    const UOp& n = *in[i].node();
    from_host[i] = holds_whole_buffer(n) && buffer_of(buffer_node(n)).initial_data &&
                   !buffer_of(buffer_node(n)).allocation;
    if (!from_host[i]) to_realize.push_back(&in[i]);
  }
  if (!to_realize.empty()) realize(to_realize);
  {
    std::lock_guard lock(engine_mutex());
    for (size_t i = 0; i < in.size(); ++i) {
      const Buffer& captured = *plan.inputs[i];
      const Buffer& given = buffer_of(buffer_node(*in[i].node()));
      Device& dev = vkg::device(captured.device());
      if (from_host[i])
        dev.copy_in(ensure_allocated(captured), *given.initial_data);
      else if (given.storage_id() != captured.storage_id())
        dev.copy(ensure_allocated(given), ensure_allocated(captured), captured.nbytes());
    }
    if (plan.device) {
      for (const auto& b : plan.regenerated)
        plan.device->copy_in(ensure_allocated(*b), b->regenerate());
      report_replay(*plan.device, plan.device->replay(*plan.recording));
    }
  }
  for (const auto& weak : plan.rewritten) {
    const std::shared_ptr<TensorState> s = weak.lock();
    if (!s || !holds_whole_buffer(*s->node) ||
        !plan.written.count(buffer_of(buffer_node(*s->node)).storage_id()))
      continue;  // gone, or pointed elsewhere since
    Tensor handle(s->node);
    handle.state_ = s;
    handle.set_realized(next_version_view(*s->node));
  }
  std::vector<Tensor> out;
  for (const UOpPtr& view : plan.outputs)
    out.emplace_back(plan.written.count(buffer_of(buffer_node(*view)).storage_id())
                         ? next_version_view(*view)
                         : view);
  return out;
}

}  // namespace vkg
