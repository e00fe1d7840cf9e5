// simplify, eval_int, IntExpr and render: the symbolic API around the rule table
// (symbolic_rules.cpp) and the device's integer semantics (exec_alu, symbolic_alu.cpp).
#include <vkgrad/core/symbolic.hpp>

#include <unordered_map>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/symbolic_folds.hpp>

namespace vkg {

UOpPtr simplify(const UOpPtr& u) {
  UOpPtr out = graph_rewrite(u, symbolic_rules());
  if (out != u && toposort(out.get()).size() > toposort(u.get()).size()) return u;
  return out;
}

// ---- simplification under a condition ----

namespace {

bool is_variable(Ops op) { return op == Ops::DEFINE_VAR || op == Ops::SPECIAL || op == Ops::RANGE; }

}  // namespace

UOpPtr substitute(const UOpPtr& u, const std::unordered_map<const UOp*, UOpPtr>& with) {
  std::unordered_map<const UOp*, UOpPtr> done;
  for (const UOp* n : toposort(u.get())) {
    if (auto it = with.find(n); it != with.end()) {
      done.emplace(n, it->second);
      continue;
    }
    std::vector<UOpPtr> src;
    bool changed = false;
    for (const UOpPtr& s : n->src) {
      src.push_back(done.at(s.get()));
      changed |= src.back() != s;
    }
    done.emplace(n, changed ? UOp::make(n->op, n->dtype, std::move(src), n->arg) : n->ptr());
  }
  return done.at(u.get());
}

UOpPtr simplify_given(const UOpPtr& u, const UOpPtr& valid) {
  std::unordered_map<const UOp*, std::pair<int64_t, int64_t>> bounds;
  const UOpPtr v = simplify(valid);
  std::vector<const UOp*> conjuncts{v.get()};
  while (!conjuncts.empty()) {
    const UOp* c = conjuncts.back();
    conjuncts.pop_back();
    if (c->op == Ops::AND && c->dtype.is_bool()) {
      for (const UOpPtr& s : c->src) conjuncts.push_back(s.get());
      continue;
    }
    if (c->op != Ops::CMPLT || c->src[0]->is_const() == c->src[1]->is_const()) continue;
    const bool var_left = c->src[1]->is_const();
    const UOp* x = c->src[var_left ? 0 : 1].get();
    if (!is_variable(x->op) || !x->dtype.is_int()) continue;
    auto [it, fresh] = bounds.try_emplace(x, x->vmin(), x->vmax());
    const int64_t k = c->src[var_left ? 1 : 0]->const_int();  // x < k: x <= k-1; k < x: x >= k+1
    if (var_left)
      it->second.second = std::min(it->second.second, k - 1);
    else
      it->second.first = std::max(it->second.first, k + 1);
  }
  std::unordered_map<const UOp*, UOpPtr> narrow, widen;
  for (const auto& [x, b] : bounds) {
    if (b.first > b.second) return simplify(u);  // `valid` never holds: nothing to go on
    if (b.first == x->vmin() && b.second == x->vmax()) continue;
    UOpPtr narrowed = UOp::var(variable_name(*x), b.first, b.second, x->dtype);
    widen.emplace(narrowed.get(), x->ptr());
    narrow.emplace(x, std::move(narrowed));
  }
  if (narrow.empty()) return simplify(u);
  return substitute(simplify(substitute(u, narrow)), widen);
}

// ---- evaluation ----

std::string variable_name(const UOp& u) {
  if (u.op == Ops::DEFINE_VAR) return u.arg_as<VarArg>().name;
  if (u.op == Ops::SPECIAL || u.op == Ops::RANGE) {
    if (const auto* s = std::get_if<std::string>(&u.arg)) return *s;
    if (const auto* i = std::get_if<int64_t>(&u.arg); i && u.op == Ops::RANGE)
      return "ridx" + std::to_string(*i);
  }
  throw Error("a " + std::string(op_name(u.op)) + " node with arg " + arg_repr(u.arg) +
              " is not a variable");
}

namespace {

bool is_int_alu(Ops op) {
  return symbolic_detail::is_binary_int_op(op) || op == Ops::NEG || op == Ops::CAST || op == Ops::WHERE || op == Ops::MULACC;
}

bool intlike(DType d) { return (d.is_int() || d.is_bool()) && d.count == 1 && !d.is_ptr(); }

}  // namespace

IntExpr::IntExpr(const UOpPtr& root) : root_(root), nodes_(toposort(root.get())) {
  std::unordered_map<const UOp*, uint32_t> index;
  std::unordered_map<std::string, int64_t> var_index;
  for (const UOp* n : nodes_) {
    index.emplace(n, uint32_t(index.size()));
    if (!intlike(n->dtype))
      throw Error("IntExpr: " + std::string(op_name(n->op)) + " of dtype " + n->dtype.name() +
                  " is not integer arithmetic");
    Step s{n->op, n->dtype, n->dtype, {0, 0, 0}, 0, 0};
    if (n->op == Ops::CONST) {
      s.value = n->const_int();
    } else if (is_variable(n->op)) {
      auto [it, fresh] = var_index.emplace(variable_name(*n), int64_t(names_.size()));
      if (fresh) names_.push_back(it->first);
      s.value = it->second;
    } else if (n->op == Ops::BIND) {  // a variable bound to a value: the variable is what we read
      s.nsrc = 1;
      s.src[0] = index.at(n->src[0].get());
    } else if (is_int_alu(n->op)) {
      if (n->src.size() > 3)
        throw Error("IntExpr: " + std::string(op_name(n->op)) + " with too many sources");
      s.nsrc = uint32_t(n->src.size());
      for (size_t i = 0; i < n->src.size(); ++i) s.src[i] = index.at(n->src[i].get());
      s.operand = n->src[n->op == Ops::WHERE ? 1 : 0]->dtype;
    } else {
      throw Error("IntExpr: " + std::string(op_name(n->op)) + " is not integer arithmetic");
    }
    steps_.push_back(s);
  }
}

std::optional<int64_t> IntExpr::operator()(std::span<const int64_t> values,
                                           std::vector<int64_t>* node_values) const {
  if (values.size() != names_.size())
    throw Error("IntExpr: " + std::to_string(values.size()) + " values for " +
                std::to_string(names_.size()) + " variables");
  std::vector<int64_t> local;
  std::vector<int64_t>& v = node_values ? *node_values : local;
  v.resize(steps_.size());
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& s = steps_[i];
    if (s.op == Ops::CONST) {
      v[i] = s.value;
    } else if (is_variable(s.op)) {
      v[i] = values[size_t(s.value)];
    } else if (s.op == Ops::BIND) {
      v[i] = v[s.src[0]];
    } else {
      const int64_t args[3] = {v[s.src[0]], v[s.src[1]], v[s.src[2]]};
      const std::optional<int64_t> r = exec_alu(s.op, s.result, s.operand, std::span(args, s.nsrc));
      if (!r) return std::nullopt;
      v[i] = *r;
    }
  }
  return v.back();
}

int64_t eval_int(const UOpPtr& u, const std::map<std::string, int64_t>& vars) {
  const IntExpr e(u);
  std::vector<int64_t> values;
  for (const std::string& name : e.var_names()) {
    auto it = vars.find(name);
    if (it == vars.end())
      throw Error("eval_int: no value for variable '" + name + "' in " + render(u));
    values.push_back(it->second);
  }
  if (const std::optional<int64_t> v = e(values)) return *v;
  throw Error("eval_int: division by zero (or a shift out of range) in " + render(u));
}

// ---- rendering ----

namespace {

const char* infix(Ops op) {
  switch (op) {
    case Ops::ADD:
      return "+";
    case Ops::SUB:
      return "-";
    case Ops::MUL:
      return "*";
    case Ops::IDIV:
      return "//";
    case Ops::FDIV:
      return "/";
    case Ops::MOD:
      return "%";
    case Ops::CMPLT:
      return "<";
    case Ops::CMPNE:
      return "!=";
    case Ops::AND:
      return "&";
    case Ops::OR:
      return "|";
    case Ops::XOR:
      return "^";
    case Ops::SHL:
      return "<<";
    case Ops::SHR:
      return ">>";
    default:
      return nullptr;
  }
}

std::string render_const(const UOp& n) {
  if (n.dtype.is_bool()) return n.const_int() ? "true" : "false";
  if (n.dtype.scalar == Scalar::UInt64) return std::to_string(uint64_t(n.const_int()));
  if (n.dtype.is_int()) return std::to_string(n.const_int());
  return arg_repr(n.arg);
}

std::string render_node(const UOp& n, const std::unordered_map<const UOp*, std::string>& done) {
  auto s = [&](size_t i) -> const std::string& { return done.at(n.src[i].get()); };
  if (n.op == Ops::CONST) return render_const(n);
  if (is_variable(n.op)) return variable_name(n);
  if (const char* op = infix(n.op); op && n.src.size() == 2) return "(" + s(0) + op + s(1) + ")";
  switch (n.op) {
    case Ops::NEG:
      return "(-" + s(0) + ")";
    case Ops::MAX:
      return "max(" + s(0) + "," + s(1) + ")";
    case Ops::WHERE:
      return "(" + s(0) + "?" + s(1) + ":" + s(2) + ")";
    case Ops::CAST:
      return "((" + n.dtype.name() + ")" + s(0) + ")";
    case Ops::MULACC:
      return "((" + s(0) + "*" + s(1) + ")+" + s(2) + ")";
    default:
      break;
  }
  std::string out(op_name(n.op));
  out += "(";
  for (size_t i = 0; i < n.src.size(); ++i) out += (i ? "," : "") + s(i);
  return out + ")";
}

}  // namespace

std::string render(const UOpPtr& u) {
  // Shared subexpressions are spelled out at each use, as tinygrad prints them.
  std::unordered_map<const UOp*, std::string> done;
  for (const UOp* n : toposort(u.get())) done.emplace(n, render_node(*n, done));
  return done.at(u.get());
}

}  // namespace vkg
