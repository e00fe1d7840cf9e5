// SymbolicArg and the symbolic-shape rules of graph nodes (core/symbolic_shape.hpp).
#include <vkgrad/core/symbolic_shape.hpp>

#include <algorithm>
#include <climits>
#include <unordered_set>

#include <vkgrad/core/bounds.hpp>
#include <vkgrad/core/int_math.hpp>
#include <vkgrad/core/symbolic.hpp>

namespace vkg {

namespace {

bool is_const_one(const UOpPtr& e) { return e->is_const() && e->const_int() == 1; }

std::optional<std::vector<UOpPtr>> unless_all_const(std::vector<UOpPtr> exprs) {
  for (const UOpPtr& e : exprs)
    if (!e->is_const()) return exprs;
  return std::nullopt;
}

}  // namespace

size_t SymbolicArg::hash() const {
  size_t h = values.size();
  for (int64_t v : values) h = hash_mix(h, size_t(v));
  for (const UOpPtr& e : exprs) h = hash_mix(h, e->hash());
  for (const Binding& b : bindings) h = hash_mix(hash_mix(h, b.var->hash()), size_t(b.value));
  return h;
}

bool SymbolicArg::equals(const ArgPayload& other) const {
  const auto& o = static_cast<const SymbolicArg&>(other);
  return values == o.values && exprs == o.exprs && bindings == o.bindings;
}

std::string SymbolicArg::repr() const {
  std::string s = "(";
  for (size_t i = 0; i < exprs.size(); ++i) s += (i ? ", " : "") + render(exprs[i]);
  s += ")";
  for (const Binding& b : bindings)
    s += " " + b.var->arg_as<VarArg>().name + "=" + std::to_string(b.value);
  return s;
}

Arg make_symbolic_arg(std::vector<int64_t> values, std::vector<UOpPtr> exprs,
                      std::vector<Binding> bindings) {
  auto a = std::make_shared<SymbolicArg>();
  a->values = std::move(values);
  a->exprs = std::move(exprs);
  a->bindings = std::move(bindings);
  return std::shared_ptr<const ArgPayload>(std::move(a));
}

const SymbolicArg* symbolic_arg(const UOp& u) {
  const auto* p = std::get_if<std::shared_ptr<const ArgPayload>>(&u.arg);
  return p ? dynamic_cast<const SymbolicArg*>(p->get()) : nullptr;
}

const std::vector<int64_t>* movement_values(const UOp& u) {
  if (const auto* v = std::get_if<std::vector<int64_t>>(&u.arg)) return v;
  if (const SymbolicArg* s = symbolic_arg(u)) return &s->values;
  return nullptr;
}

std::vector<UOpPtr> shape_exprs(const UOp& u) {
  if (const auto* s = u.sym_shape()) return *s;
  std::vector<UOpPtr> out;
  if (const Shape* shape = u.shape())
    for (int64_t d : *shape) out.push_back(UOp::const_(dtypes::int32, d));
  return out;
}

int64_t max_elements(const std::vector<UOpPtr>& sym_shape) {
  int64_t out = 1;
  for (const UOpPtr& d : sym_shape) {
    const int64_t hi = std::max<int64_t>(compute_bounds(*d).second, 0);
    if (hi == 0) return 0;
    out = out > INT64_MAX / hi ? INT64_MAX : out * hi;
  }
  return out;
}

std::vector<Binding> collect_bindings(const UOp* root) {
  std::vector<std::vector<Binding>> found;
  std::vector<const UOp*> stack{root};
  std::unordered_set<const UOp*> seen;
  while (!stack.empty()) {
    const UOp* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    if (const SymbolicArg* a = symbolic_arg(*n)) found.push_back(a->bindings);
    for (const UOpPtr& s : n->src)
      if (s->sym_shape() || symbolic_arg(*s)) stack.push_back(s.get());
  }
  return merge_bindings(found, "symbolic shape");
}

std::optional<std::vector<UOpPtr>> carry_reshape(const Shape& from_values,
                                                 const std::vector<UOpPtr>& from_exprs,
                                                 const Shape& target) {
  // Plain 1s of `from` may go and 1s of `target` may come; every other dimension of `from` must
  // reappear in order with its value. A symbolic dimension is kept even where its value is 1 (it
  // is not 1 for other bindings); matched from the right, it takes the last of a run of 1s, as
  // a reshape from (3, n) to (3, 1, n) means.
  std::vector<size_t> kept;
  for (size_t i = 0; i < from_values.size(); ++i)
    if (!is_const_one(from_exprs[i])) kept.push_back(i);
  std::vector<UOpPtr> out(target.size());
  size_t k = kept.size();
  for (size_t j = target.size(); j-- > 0;) {
    if (k > 0 && from_values[kept[k - 1]] == target[j]) {
      out[j] = from_exprs[kept[--k]];
    } else if (target[j] == 1) {
      out[j] = UOp::const_(dtypes::int32, 1);
    } else {
      return std::nullopt;
    }
  }
  if (k != 0) return std::nullopt;
  return out;
}

std::optional<std::vector<UOpPtr>> compute_sym_shape(const UOp& u) {
  if (u.op == Ops::BUFFER || u.op == Ops::CONST || u.op == Ops::BIND || !u.shape())
    return std::nullopt;
  if (u.src.empty()) return std::nullopt;
  const UOp& in = *u.src[0];
  if (is_movement(u.op)) {
    const SymbolicArg* s = symbolic_arg(u);
    if (!in.sym_shape() && !s) return std::nullopt;
    const std::vector<UOpPtr> ins = shape_exprs(in);
    const std::vector<int64_t>* a = movement_values(u);
    switch (u.op) {
      case Ops::RESHAPE:
      case Ops::EXPAND:
        if (s) return unless_all_const(s->exprs);
        return std::nullopt;  // plain numbers: the result is concrete
      case Ops::PERMUTE: {
        std::vector<UOpPtr> out;
        for (int64_t ax : *a) out.push_back(ins[size_t(ax)]);
        return unless_all_const(out);
      }
      case Ops::FLIP:
        return unless_all_const(ins);
      case Ops::PAD:
      case Ops::SHRINK: {
        std::vector<UOpPtr> e;
        if (s)
          e = s->exprs;
        else
          for (int64_t v : *a) e.push_back(UOp::const_(dtypes::int32, v));
        std::vector<UOpPtr> out;
        for (size_t i = 0; i < ins.size(); ++i)
          out.push_back(simplify(u.op == Ops::PAD ? ins[i] + e[2 * i] + e[2 * i + 1]
                                                  : e[2 * i + 1] - e[2 * i]));
        return unless_all_const(out);
      }
      default:
        return std::nullopt;
    }
  }
  if (u.op == Ops::REDUCE_AXIS) {
    if (!in.sym_shape()) return std::nullopt;
    std::vector<UOpPtr> out = *in.sym_shape();
    for (int64_t ax : u.arg_as<ReduceArg>().axes) out[size_t(ax)] = UOp::const_(dtypes::int32, 1);
    return unless_all_const(out);
  }
  // Elementwise: every source has the same shape; the first symbolic one names it.
  for (const UOpPtr& s : u.src)
    if (s->sym_shape() && s->shape() && *s->shape() == *u.shape()) return *s->sym_shape();
  return std::nullopt;
}

}  // namespace vkg
