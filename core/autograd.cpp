// Autograd's tensor side: which tensors are leaves, how they keep their identity in a hash-consed
// graph, NoGrad, and backward(), which hands the graph to compute_gradient (core/gradient.hpp)
// and adds the results to the leaves' .grad.
//
// Identity. UOps are hash-consed, so two equal unrealized values are one node (two
// Tensor::zeros({3}) are the same CONST), and a gradient found for a node would belong to every
// tensor holding it. A leaf therefore holds a node of its own: requires_grad_ and assign wrap the
// value in a DETACH whose argument is a fresh number. DETACH is a no-op to the scheduler, stops
// the gradient walk (a leaf has no history) and, being unique, names exactly one leaf, without
// realizing anything. Realizing a leaf writes it to a buffer of its own (the scheduler never
// aliases a numbered DETACH to the buffer it views), so its buffer view is unique as well.
//
// Realized tensors. realize() points a tensor at a buffer view, but graphs built before it
// refer to the old node, and a realized loss must still be differentiable: the state keeps that
// node while it may carry a gradient. A leaf answers to both nodes (the old one held weakly: an
// optimizer's update graph would otherwise keep a whole training step alive); a realized
// non-leaf's buffer view stands for its old graph (an alias in the gradient request).
//
// Threads. backward() and realize() read the autograd fields (node, requires_grad, unrealized,
// leaf_before_realize) of every registered state, also those of tensors other threads own and
// change. Those fields are therefore written under state_mu, and read under it when they are
// another tensor's; a thread reads its own tensor's fields without it (only it writes them).
// .grad is written only for the leaves a graph reaches, which the caller owns (README, Threads).
#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_set>

#include <vkgrad/core/buffer.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/gradient.hpp>
#include <vkgrad/core/jit_capture.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

namespace {

std::mutex state_mu;  // see "Threads" above; taken before StateRegistry::mu, never after
thread_local int no_grad_depth = 0;
std::atomic<int64_t> live_leaves{0};  // states with requires_grad set
std::atomic<int64_t> next_identity{1};

UOpPtr numbered_detach(const UOpPtr& value) {
  return UOp::make(Ops::DETACH, value->dtype, {value}, int64_t(next_identity.fetch_add(1)));
}

// Whether a tensor at `n` holds a whole buffer in order (a BUFFER, a reshape of one, or an
// assign to one that is not realized yet), which an assign can then write in place.
bool writable_in_place(const UOp& n) {
  if (n.op == Ops::ASSIGN) return true;
  const UOp* b = n.op == Ops::RESHAPE ? n.src[0].get() : &n;
  return b->op == Ops::BUFFER && buffer_of(*b).count() == prod(*n.shape());
}

// Weak references to the states autograd must find at backward: leaves, and realized tensors
// that keep their unrealized graph (as tinygrad's all_tensors).
struct StateRegistry {
  std::mutex mu;
  std::vector<std::weak_ptr<TensorState>> states;
  size_t sweep_at = 64;

  static StateRegistry& get() {
    static StateRegistry* r = new StateRegistry;  // immortal: states may die during static exit
    return *r;
  }
  void add(const std::shared_ptr<TensorState>& s) {
    std::lock_guard lock(mu);
    if (states.size() >= sweep_at) {  // amortized: sweep when the list has doubled
      std::erase_if(states, [](const auto& w) { return w.expired(); });
      sweep_at = std::max<size_t>(64, 2 * states.size());
    }
    states.push_back(s);
  }
  std::vector<std::shared_ptr<TensorState>> live() {
    std::lock_guard lock(mu);
    std::vector<std::shared_ptr<TensorState>> out;
    for (const auto& w : states)
      if (auto s = w.lock()) out.push_back(std::move(s));
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
};

// A leaf's nodes: its current one, and the one before its last realize while graphs refer to it.
std::vector<UOpPtr> leaf_nodes(const TensorState& s) {
  std::vector<UOpPtr> out{s.node};
  if (UOpPtr before = s.leaf_before_realize.lock()) out.push_back(std::move(before));
  return out;
}

// The nodes through which a graph can carry a gradient to a live leaf.
std::unordered_set<const UOp*> gradient_carriers(
    const std::vector<std::shared_ptr<TensorState>>& states) {
  std::unordered_set<const UOp*> out;
  for (const auto& s : states) {
    if (s->requires_grad)
      for (const UOpPtr& n : leaf_nodes(*s)) out.insert(n.get());
    if (s->unrealized) out.insert(s->node.get()), out.insert(s->unrealized.get());
  }
  return out;
}

// Whether `root`'s graph reaches one of `carriers` along paths a gradient takes.
bool reaches_any(const UOpPtr& root, const std::unordered_set<const UOp*>& carriers) {
  std::vector<const UOp*> stack{root.get()};
  std::unordered_set<const UOp*> seen{root.get()};
  while (!stack.empty()) {
    const UOp* n = stack.back();
    stack.pop_back();
    if (carriers.count(n)) return true;
    for (const UOpPtr& s : gradient_sources(*n))
      if (seen.insert(s.get()).second) stack.push_back(s.get());
  }
  return false;
}

}  // namespace

TensorState::~TensorState() {
  if (requires_grad) live_leaves.fetch_sub(1);
}

NoGrad::NoGrad() { ++no_grad_depth; }
NoGrad::~NoGrad() { --no_grad_depth; }
bool NoGrad::active() { return no_grad_depth > 0; }

// In a NoGrad scope every result is detached, but only while some tensor requires grad: without
// one no graph can carry a gradient and the extra nodes would only cost. Buffers and constants
// carry none anyway.
Tensor::Tensor(UOpPtr node) {
  if (NoGrad::active() && live_leaves.load() > 0 && node->op != Ops::DETACH &&
      node->op != Ops::BUFFER && node->op != Ops::CONST)
    node = UOp::make(Ops::DETACH, node->dtype, {node});
  state_ = std::make_shared<TensorState>(std::move(node));
}

Tensor& Tensor::requires_grad_(bool on) {
  if (on == state_->requires_grad) return *this;
  if (on && !dtype().is_float())
    throw Error("requires_grad_: only float tensors can require gradients, got " + dtype().name() +
                " of shape " + shape_str(shape()));
  std::lock_guard lock(state_mu);
  state_->requires_grad = on;
  if (!on) {
    live_leaves.fetch_sub(1);
    return *this;
  }
  live_leaves.fetch_add(1);
  state_->node = numbered_detach(node());
  state_->unrealized = nullptr;
  state_->leaf_before_realize.reset();
  StateRegistry::get().add(state_);
  return *this;
}

// As torch: a leaf that asked for it, or a result whose graph reaches one (a gradient would
// flow into it). NoGrad results are detached and reach none.
bool Tensor::requires_grad() const {
  if (state_->requires_grad) return true;
  if (live_leaves.load() == 0) return false;
  auto states = StateRegistry::get().live();
  std::erase_if(states, [&](const auto& s) { return s == state_; });
  std::lock_guard lock(state_mu);
  return reaches_any(state_->unrealized ? state_->unrealized : node(), gradient_carriers(states));
}
bool Tensor::is_leaf() const { return state_->requires_grad || !requires_grad(); }
std::optional<Tensor> Tensor::grad() const { return state_->grad; }

void Tensor::set_grad(std::optional<Tensor> grad) {
  if (grad && (grad->shape() != shape() || grad->device() != device()))
    throw Error("set_grad: a gradient of shape " + shape_str(grad->shape()) + " on " +
                grad->device() + " for a tensor of shape " + shape_str(shape()) + " on " +
                device());
  state_->grad = grad ? std::optional<Tensor>(grad->cast(dtype())) : std::nullopt;
}

Tensor Tensor::detach() const { return Tensor(UOp::make(Ops::DETACH, dtype(), {node()})); }

namespace {

// Notes an in-place assign for the next vkg::Jit call (pending_assigns). The list is pruned of
// entries realized, gone or listed before each time it doubles, so a loop that never calls a
// Jit keeps it within twice the number of tensors it leaves with lazy assigns (or 64).
void note_pending_assign(const std::shared_ptr<TensorState>& state) {
  thread_local size_t prune_at = 64;
  std::vector<std::weak_ptr<TensorState>>& pending = pending_assigns();
  pending.push_back(state);
  if (pending.size() < prune_at) return;
  std::unordered_set<const TensorState*> seen;  // a tensor assigned again is listed once
  std::erase_if(pending, [&](const std::weak_ptr<TensorState>& weak) {
    const std::shared_ptr<TensorState> s = weak.lock();
    if (!s || !seen.insert(s.get()).second) return true;
    std::lock_guard lock(state_mu);  // released before s, whose end may take it
    return s->node->op != Ops::ASSIGN;
  });
  prune_at = std::max<size_t>(64, 2 * pending.size());
}

}  // namespace

Tensor& Tensor::assign(const Tensor& value) {
  if (value.shape() != shape() || value.device() != device())
    throw Error("assign: the value has shape " + shape_str(value.shape()) + " (" +
                value.dtype().name() + " on " + value.device() + "), the tensor " +
                shape_str(shape()) + " (" + dtype().name() + " on " + device() + ")");
  const UOpPtr v = value.cast(dtype()).node();
  // A tensor that holds a whole buffer is written in place: the scheduler stores the value into
  // that buffer once every read of the old contents in its schedule has run. The argument numbers
  // the assign, so a second equal assign is a new node (not one whose value is recorded).
  UOpPtr fresh = writable_in_place(*node()) ? UOp::make(Ops::ASSIGN, dtype(), {node(), v},
                                                        int64_t(next_identity.fetch_add(1)))
                                            : numbered_detach(v);
  const bool in_place = fresh->op == Ops::ASSIGN;
  {
    std::lock_guard lock(state_mu);
    state_->node = std::move(fresh);
    state_->unrealized = nullptr;
    state_->leaf_before_realize.reset();
  }
  if (in_place) note_pending_assign(state_);
  if (auto* log = active_assign_log()) log->push_back(state_);
  return *this;
}

void Tensor::set_realized(UOpPtr view) {
  if (view == node()) return;
  const auto states = !state_->requires_grad && !NoGrad::active() && live_leaves.load() > 0
                          ? StateRegistry::get().live()
                          : std::vector<std::shared_ptr<TensorState>>{};
  std::lock_guard lock(state_mu);
  if (state_->requires_grad) {
    state_->leaf_before_realize = node();
  } else if (!NoGrad::active() && live_leaves.load() > 0) {
    const auto carriers = gradient_carriers(states);
    if (reaches_any(node(), carriers)) {
      state_->unrealized = node();
      StateRegistry::get().add(state_);
    } else {
      state_->unrealized = nullptr;
    }
  } else {
    state_->unrealized = nullptr;
  }
  state_->node = std::move(view);
}

void Tensor::backward() const {
  if (numel() != 1)
    throw Error("backward: a tensor of shape " + shape_str(shape()) + " (" + dtype().name() +
                ") has more than one element; pass the gradient to seed it with");
  backward(Tensor::ones(shape(), dtype(), device()));
}

void Tensor::backward(const Tensor& gradient) const {
  if (!dtype().is_float())
    throw Error("backward: the tensor is " + dtype().name() + " of shape " + shape_str(shape()) +
                "; only float tensors have gradients");
  if (gradient.shape() != shape())
    throw Error("backward: the gradient has shape " + shape_str(gradient.shape()) +
                ", the tensor " + shape_str(shape()));
  const auto states = StateRegistry::get().live();
  GradientRequest req;
  req.root = node();
  req.seed = gradient.cast(dtype()).node();
  std::unordered_map<const UOp*, std::vector<TensorState*>> leaves_of;
  std::unordered_map<TensorState*, DType> leaf_dtype;
  std::vector<UOpPtr> keep_alive;  // the weakly held nodes, while they are targets
  {
    std::lock_guard lock(state_mu);
    for (const auto& s : states) {
      if (s->requires_grad) {
        leaf_dtype.emplace(s.get(), s->node->dtype);
        for (const UOpPtr& n : leaf_nodes(*s)) {
          req.targets.insert(n.get());
          leaves_of[n.get()].push_back(s.get());
          keep_alive.push_back(n);
        }
      } else if (s->unrealized) {
        req.aliases.emplace(s->node.get(), s->unrealized);
        keep_alive.push_back(s->node);
      }
    }
  }
  // A realized tensor differentiates the graph that computed it.
  if (!state_->requires_grad && state_->unrealized) req.root = state_->unrealized;
  const auto grads = compute_gradient(req);
  if (grads.empty())
    throw Error("backward: the tensor (shape " + shape_str(shape()) +
                ") does not depend on any tensor with "
                "requires_grad set");
  // A leaf may be reached through both of its nodes: its gradient is their sum.
  std::unordered_map<TensorState*, std::optional<Tensor>> found;
  for (const auto& [n, g] : grads)
    for (TensorState* s : leaves_of.at(n)) {
      const Tensor part = Tensor(g).cast(leaf_dtype.at(s));
      found[s] = found[s] ? *found[s] + part : part;
    }
  for (auto& [s, g] : found) {
    const Tensor fresh = g->detach();  // gradients carry no gradient themselves
    s->grad = s->grad ? *s->grad + fresh : fresh;
  }
}

}  // namespace vkg
