// The gradient rules, one line (or a few) per op, and the walk that applies them from the root of
// a graph back to its targets.
#include <vkgrad/core/gradient.hpp>

#include <algorithm>
#include <array>
#include <functional>
#include <numbers>
#include <optional>
#include <span>
#include <type_traits>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/indexed_load.hpp>
#include <vkgrad/core/multi.hpp>
#include <vkgrad/core/symbolic.hpp>
#include <vkgrad/core/symbolic_shape.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

namespace {

// What a rule sees: the node, the gradient of its value, and both as tensors.
struct GradArgs {
  const UOp& n;
  Tensor g;
  Tensor out() const { return Tensor(n.ptr()); }
  Tensor x(size_t i) const { return Tensor(n.src[i]); }
  const Shape& in_shape() const { return *n.src[0]->shape(); }
  const std::vector<int64_t>& ints() const { return *movement_values(n); }
  // A movement op with a symbolic argument (a shrink at a bound variable's offset) or a symbolic
  // source: its gradient is shaped with the same variables, so it compiles once too.
  bool symbolic() const { return symbolic_arg(n) || n.src[0]->sym_shape(); }
  // Argument k as a size (its expression where the argument is symbolic).
  SymInt arg(size_t k) const {
    const SymbolicArg* sym = symbolic_arg(n);
    if (!sym) return SymInt(ints()[k]);
    return SymInt(sym->exprs[k], sym->values[k], sym->bindings);
  }
};

// The gradient of each source, in order; none (or a shorter list) where no gradient flows.
using Grads = std::vector<std::optional<Tensor>>;
using GradFn = std::function<Grads(const GradArgs&)>;

Tensor zero_like(const Tensor& t) { return t.scalar_like(0); }

// d max(x, y): to the larger input; split evenly between equal ones, as tinygrad.
Grads max_grad(const GradArgs& a) {
  const Tensor x = a.x(0), y = a.x(1);
  const Tensor tie = x.ne(y).where(zero_like(a.g), a.g * 0.5);
  return {x.gt(y).where(a.g, tie), y.gt(x).where(a.g, tie)};
}

// The gradient of a REDUCE_AXIS (its result keeps the reduced axes as 1s) spread back over the
// source's shape.
Grads reduce_grad(const GradArgs& a) {
  const auto& r = a.n.arg_as<ReduceArg>();
  const Tensor x = a.x(0);
  // Over symbolic sizes, expanded by their expressions: the backward compiles once too.
  const SymShape in = x.sym_shape();
  const Tensor g = a.g.expand(in);
  switch (r.op) {
    case Ops::ADD:
      return {g};
    case Ops::MAX: {
      // To the positions holding the max, divided by their count (ties share it), as tinygrad.
      const Tensor is_max = x.eq(a.out().expand(in)).cast(a.g.dtype());
      return {is_max / is_max.sum(r.axes, true).expand(in) * g};
    }
    case Ops::MUL: {
      // d prod / d x_i is the product of the others: prod / x_i unless x holds zeros. With one
      // zero, only its position gets the product of the rest; with two or more, every one is 0.
      const Tensor nonzero = x.ne(zero_like(x));
      const Tensor safe = nonzero.where(x, x.scalar_like(1));
      const Tensor prod_nonzero =
          Tensor(UOp::make(Ops::REDUCE_AXIS, x.dtype(), {safe.node()}, ReduceArg{Ops::MUL, r.axes}))
              .expand(in);
      const Tensor zeros = nonzero.logical_not().cast(dtypes::int32).sum(r.axes, true).expand(in);
      const Tensor zero = zero_like(x);
      const Tensor others =
          nonzero.where(zeros.eq(zeros.scalar_like(0)).where(prod_nonzero / safe, zero),
                        zeros.eq(zeros.scalar_like(1)).where(prod_nonzero, zero));
      return {g * others};
    }
    default:
      throw Error("backward: no gradient rule for a REDUCE_AXIS of " + std::string(op_name(r.op)));
  }
}

Grads permute_grad(const GradArgs& a) {
  std::vector<int64_t> inverse(a.ints().size());
  for (size_t i = 0; i < inverse.size(); ++i) inverse[size_t(a.ints()[i])] = int64_t(i);
  // A permuted reduce is the reduce of the permuted input. The scheduler ends a kernel at a
  // moved reduce, so a weight's gradient (a reduce in the transposed layout dot() multiplies in)
  // would cost a transposing copy; reducing the permuted input writes it in place.
  const UOp& g = *a.g.node();
  if (g.op == Ops::REDUCE_AXIS) {
    const ReduceArg& r = g.arg_as<ReduceArg>();
    std::vector<int64_t> axes;  // axis i of the result is axis inverse[i] of the reduce
    for (size_t i = 0; i < inverse.size(); ++i)
      if (std::find(r.axes.begin(), r.axes.end(), inverse[i]) != r.axes.end())
        axes.push_back(int64_t(i));
    const Tensor moved = Tensor(g.src[0]).permute(inverse);
    return {Tensor(
        UOp::make(Ops::REDUCE_AXIS, g.dtype, {moved.node()}, ReduceArg{r.op, std::move(axes)}))};
  }
  return {a.g.permute(inverse)};
}

Grads reshape_grad(const GradArgs& a) {
  if (a.n.src[0]->sym_shape()) return {a.g.reshape(a.x(0).sym_shape())};
  return {a.g.reshape(a.in_shape())};
}

Grads expand_grad(const GradArgs& a) {
  // The source has the result's rank (Tensor::expand reshapes first). Symbolic sizes compare by
  // expression: a 1 expanded to n is summed back even where n is bound to 1. Only a 1 is
  // broadcast: a size that is not 1 expanded to an equal one of another spelling (i + j against
  // a plain 5 where a symbolic cat meets a plain tensor) is a relabeling, its gradient passed on.
  const std::vector<UOpPtr> in = shape_exprs(*a.n.src[0]), out = shape_exprs(a.n);
  std::vector<int64_t> axes;
  for (size_t i = 0; i < in.size(); ++i) {
    const UOpPtr from = simplify(in[i]);
    const bool one = from->is_const() && from->const_value() == 1;
    if (a.in_shape()[i] != a.ints()[i] || (one && from != simplify(out[i])))
      axes.push_back(int64_t(i));
  }
  return {axes.empty() ? a.g : a.g.sum(axes, true)};
}

// max(x, 0), as a size with its value.
SymInt at_least_zero(const SymInt& x) {
  if (!x.is_symbolic()) return std::max<int64_t>(x.value(), 0);
  return SymInt(simplify(x.expr()->maximum(0)), std::max<int64_t>(x.value(), 0), x.bindings());
}

Grads pad_grad(const GradArgs& a) {
  if (a.symbolic()) {
    // A negative width trims (Tensor::pad): the forward is a shrink by the trims, then a pad by
    // the positive widths, so the gradient is the shrink of g by those, then a pad by the trims.
    // Widths that are never negative leave max(w, 0) = w and the trims 0: a plain shrink.
    const SymShape in = a.x(0).sym_shape();
    std::vector<std::pair<SymInt, SymInt>> keep, trims;
    for (size_t i = 0; i < in.size(); ++i) {
      const SymInt before = a.arg(2 * i), after = a.arg(2 * i + 1);
      const SymInt grown = at_least_zero(before);
      trims.emplace_back(at_least_zero(SymInt(0) - before), at_least_zero(SymInt(0) - after));
      keep.emplace_back(grown, grown + in[i] - trims.back().first - trims.back().second);
    }
    return {a.g.shrink(keep).pad(trims)};
  }
  std::vector<std::pair<int64_t, int64_t>> keep;
  for (size_t i = 0; i < a.in_shape().size(); ++i)
    keep.emplace_back(a.ints()[2 * i], a.ints()[2 * i] + a.in_shape()[i]);
  return {a.g.shrink(keep)};
}

Grads shrink_grad(const GradArgs& a) {
  if (a.symbolic()) {
    const SymShape in = a.x(0).sym_shape();
    std::vector<std::pair<SymInt, SymInt>> pads;
    for (size_t i = 0; i < in.size(); ++i)
      pads.emplace_back(a.arg(2 * i), in[i] - a.arg(2 * i + 1));
    return {a.g.pad(pads)};
  }
  std::vector<std::pair<int64_t, int64_t>> pads;
  for (size_t i = 0; i < a.in_shape().size(); ++i)
    pads.emplace_back(a.ints()[2 * i], a.in_shape()[i] - a.ints()[2 * i + 1]);
  return {a.g.pad(pads)};
}

Grads flip_grad(const GradArgs& a) {
  std::vector<int64_t> axes;
  for (size_t i = 0; i < a.ints().size(); ++i)
    if (a.ints()[i]) axes.push_back(int64_t(i));
  return {a.g.flip(axes)};
}

// The gradient goes back to the source's device, by a copy the other way (Tensor::to).
Grads copy_grad(const GradArgs& a) { return {a.g.to(a.x(0).device())}; }

Grads none(const GradArgs&) { return {}; }

// The words of alu_table.hpp's gradient column.
template <class... Ts>
Grads grads(const Ts&... g) {
  return Grads{std::optional<Tensor>(g)...};
}
const Grads no_grad{};  // piecewise constant or not real-valued: no gradient flows
// No rule at all: backward through the op fails, naming it.
struct NoRule {};
constexpr NoRule no_rule;

// A row's gradient column as a GradFn; empty for no_rule.
template <class F>
GradFn alu_rule(F f) {
  if constexpr (std::is_same_v<std::invoke_result_t<F, const GradArgs&>, NoRule>)
    return {};
  else
    return [f](const GradArgs& a) -> Grads { return f(a); };
}

Grads where_grad(const GradArgs& a) {
  const Tensor c = a.x(0), zero = zero_like(a.g);
  return {std::nullopt, c.where(a.g, zero), c.where(zero, a.g)};
}

struct GradRule {
  Ops op;
  GradFn fn;
};

// d(result)/d(source) times the result's gradient g, for every op a gradient can pass through.
const std::vector<GradRule>& gradient_rules() {
  using A = const GradArgs&;
  // One line per rule reads as a table:
  // clang-format off
  static const std::vector<GradRule> rules = {
      // The ALU ops: their rows' gradient column in alu_table.hpp.
#define VKG_ALU_GRAD(op, arity, dtypes, result, flags, cpu, gradient, ...) \
      {Ops::op, alu_rule([](A a) {                                        \
         [[maybe_unused]] const Tensor& g = a.g;                          \
         [[maybe_unused]] const Tensor x = a.x(0);                        \
         [[maybe_unused]] const Tensor y = a.n.src.size() > 1 ? a.x(1) : x; \
         [[maybe_unused]] const Tensor out = a.out();                     \
         return gradient;                                                 \
       })},
      VKG_ALU_OPS(VKG_ALU_GRAD)
#undef VKG_ALU_GRAD
      // Back to the source's dtype; an integer or bool source gets none.
      {Ops::CAST, [](A a) -> Grads {
         if (!a.n.src[0]->dtype.is_float()) return {};
         return {a.g.cast(a.n.src[0]->dtype)};
       }},
      {Ops::BITCAST, none},
      {Ops::REDUCE_AXIS, reduce_grad},
      {Ops::RESHAPE, reshape_grad},
      {Ops::PERMUTE, permute_grad},
      {Ops::EXPAND, expand_grad},
      {Ops::PAD, pad_grad},
      {Ops::SHRINK, shrink_grad},
      {Ops::FLIP, flip_grad},
      {Ops::CONTIGUOUS, [](A a) -> Grads { return {a.g}; }},
      {Ops::DETACH, none},  // not reached: the walk never enters a DETACH
      {Ops::COPY, copy_grad},
      {Ops::MULTI, [](A a) { return multi_gradient(a.n, a.g); }},  // to each shard (multi.hpp)
      {Ops::SCATTER, [](A a) -> Grads { return scatter_gradient(a.n, a.g); }},  // indexed_load.hpp
  };
  // clang-format on
  return rules;
}

// The rules indexed by op.
const std::array<const GradFn*, kOpsCount>& rule_table() {
  static const std::array<const GradFn*, kOpsCount> table = [] {
    std::array<const GradFn*, kOpsCount> t{};
    for (const GradRule& r : gradient_rules())
      if (r.fn) t[size_t(r.op)] = &r.fn;
    return t;
  }();
  return table;
}

const CustomGradient* custom_gradient_of(const UOp& n) {
  if (n.op != Ops::DETACH) return nullptr;
  const auto* p = std::get_if<std::shared_ptr<const ArgPayload>>(&n.arg);
  return p ? dynamic_cast<const CustomGradient*>(p->get()) : nullptr;
}

}  // namespace

UOpPtr with_custom_gradient(
    const UOpPtr& value, std::vector<UOpPtr> inputs,
    std::function<std::vector<std::optional<Tensor>>(const Tensor& grad)> fn) {
  auto payload = std::make_shared<CustomGradient>();
  payload->inputs = std::move(inputs);
  payload->fn = std::move(fn);
  return UOp::make(Ops::DETACH, value->dtype, {value},
                   std::shared_ptr<const ArgPayload>(std::move(payload)));
}

std::span<const UOpPtr> gradient_sources(const UOp& n) {
  if (const CustomGradient* c = custom_gradient_of(n)) return c->inputs;
  // A BUFFER's source is its DEVICE; an ASSIGN's value is detached, as an optimizer's update.
  if (n.op == Ops::DETACH || n.op == Ops::BUFFER || n.op == Ops::CONST || n.op == Ops::ASSIGN)
    return {};
  return n.src;
}

namespace {

// The box a zero-filled PAD of a plain-sized float keeps of its result: [begin, end) per axis;
// none for anything else.
std::optional<std::vector<std::pair<int64_t, int64_t>>> padded_box(const UOp& n) {
  if (n.op != Ops::PAD || !n.dtype.is_float() || symbolic_arg(n) || n.src[0]->sym_shape() ||
      is_multi_device(Tensor(n.ptr()).device()))
    return std::nullopt;
  const std::vector<int64_t>* pads = movement_values(n);
  if (!pads || !n.shape()) return std::nullopt;
  const Shape& in = *n.src[0]->shape();
  std::vector<std::pair<int64_t, int64_t>> box;
  for (size_t i = 0; i < in.size(); ++i) box.emplace_back((*pads)[2 * i], (*pads)[2 * i] + in[i]);
  return box;
}

// The sum of a node's gradient contributions, in order. Where the zero-filled pads among them
// (the gradients of shrinks: the pieces of a split, the shards of shard()) partition the shape,
// they are filled with -0.0 instead, the identity of addition, as cat's pieces: each position is
// then exactly its one piece's gradient, and a -0.0 stays -0.0 (+0.0 + -0.0 is +0.0). Anything
// short of a partition keeps its +0.0 fill, where a position no piece covers must read +0.0.
UOpPtr sum_contributions(const std::vector<UOpPtr>& parts) {
  if (parts.size() == 1) return parts[0];
  std::vector<size_t> padded;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> boxes;
  for (size_t i = 0; i < parts.size(); ++i)
    if (auto box = padded_box(*parts[i])) {
      padded.push_back(i);
      boxes.push_back(std::move(*box));
    }
  bool partition = padded.size() > 1;
  if (partition) {
    const Shape& shape = *parts[padded[0]]->shape();
    int64_t total = 1, covered = 0;
    for (int64_t d : shape) total *= d;
    std::vector<int64_t> volumes;
    for (size_t i = 0; i < boxes.size() && partition; ++i) {
      partition = *parts[padded[i]]->shape() == shape;
      int64_t volume = 1;
      for (const auto& [b, e] : boxes[i]) volume *= e - b;
      covered += volume;
      volumes.push_back(volume);
      for (size_t j = 0; j < i && partition; ++j) {
        bool apart = volume == 0 || volumes[j] == 0;  // else disjoint boxes are apart on an axis
        for (size_t d = 0; d < shape.size() && !apart; ++d)
          apart =
              boxes[i][d].second <= boxes[j][d].first || boxes[j][d].second <= boxes[i][d].first;
        partition = apart;
      }
    }
    partition = partition && covered == total;
  }
  std::optional<Tensor> sum;
  size_t k = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    Tensor t(parts[i]);
    if (partition && k < padded.size() && padded[k] == i) {
      const UOp& pad = *parts[i];
      const std::vector<int64_t>& v = *movement_values(pad);
      std::vector<std::pair<int64_t, int64_t>> pads;
      for (size_t d = 0; d < v.size() / 2; ++d) pads.emplace_back(v[2 * d], v[2 * d + 1]);
      t = Tensor(pad.src[0]).pad(pads, -0.0);
      ++k;
    }
    sum = sum ? *sum + t : t;
  }
  return sum->node();
}

}  // namespace

std::unordered_map<const UOp*, UOpPtr> compute_gradient(const GradientRequest& req) {
  // The sources a gradient flows into: an alias's stand-in, else gradient_sources.
  auto sources = [&](const UOp* n) -> std::span<const UOpPtr> {
    if (auto it = req.aliases.find(n); it != req.aliases.end()) return {&it->second, 1};
    return gradient_sources(*n);
  };

  // Post-order walk (sources first), marking the nodes that lie on a path to a target.
  std::vector<const UOp*> order;
  std::unordered_map<const UOp*, bool> on_path;  // present once visited; set when finished
  std::vector<std::pair<const UOp*, size_t>> stack{{req.root.get(), 0}};
  on_path[req.root.get()] = false;
  while (!stack.empty()) {
    auto& [n, next] = stack.back();
    const std::span<const UOpPtr> srcs = sources(n);
    if (next < srcs.size()) {
      const UOp* s = srcs[next++].get();
      if (on_path.emplace(s, false).second) stack.emplace_back(s, 0);
      continue;
    }
    bool reaches = req.targets.count(n) != 0;
    for (const UOpPtr& s : srcs) reaches = reaches || on_path.at(s.get());
    on_path[n] = reaches;
    order.push_back(n);
    stack.pop_back();
  }

  // Each node's gradient contributions, summed in order once all of them are in (its users come
  // first in the walk).
  std::unordered_map<const UOp*, std::vector<UOpPtr>> grads{{req.root.get(), {req.seed}}};
  auto accumulate = [&](const UOp* s, const Tensor& g) { grads[s].push_back(g.node()); };
  const auto& table = rule_table();
  std::unordered_map<const UOp*, UOpPtr> result;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {  // users before their sources
    const UOp* n = *it;
    if (!on_path.at(n)) continue;
    auto g = grads.find(n);
    if (g == grads.end()) continue;  // no gradient flows here (through a comparison, say)
    const UOpPtr grad = sum_contributions(g->second);
    if (!req.targets.count(n))
      grads.erase(g);  // not needed again: frees the graph early
    else
      result[n] = grad;
    const std::span<const UOpPtr> srcs = sources(n);
    if (srcs.empty()) continue;
    if (req.aliases.count(n)) {
      accumulate(srcs[0].get(), Tensor(grad));
      continue;
    }
    const CustomGradient* custom = custom_gradient_of(*n);
    const GradFn* rule = table[size_t(n->op)];
    if (!rule && !custom)
      throw Error("backward: no gradient rule for op " + std::string(op_name(n->op)) + " (shape " +
                  (n->shape() ? shape_str(*n->shape()) : std::string("none")) + ", dtype " +
                  n->dtype.name() + ")");
    const Grads gs = custom ? custom->fn(Tensor(grad)) : (*rule)(GradArgs{*n, Tensor(grad)});
    for (size_t i = 0; i < gs.size() && i < srcs.size(); ++i) {
      if (!gs[i] || !on_path.at(srcs[i].get())) continue;
      if (gs[i]->shape() != *srcs[i]->shape())
        throw Error("backward: the gradient rule of " + std::string(op_name(n->op)) +
                    " gave shape " + shape_str(gs[i]->shape()) + " for a source of shape " +
                    shape_str(*srcs[i]->shape()) + " (internal)");
      accumulate(srcs[i].get(), *gs[i]);
    }
  }
  return result;
}

}  // namespace vkg
