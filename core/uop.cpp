#include <vkgrad/core/uop.hpp>

#include <bit>
#include <cmath>
#include <functional>
#include <mutex>
#include <typeinfo>
#include <unordered_map>
#include <unordered_set>

#include <vkgrad/core/bounds.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/int_math.hpp>
#include <vkgrad/core/shape_rules.hpp>
#include <vkgrad/core/symbolic_shape.hpp>

namespace vkg {

namespace {

size_t node_hash(Ops op, DType dtype, const std::vector<UOpPtr>& src, const Arg& arg) {
  size_t h = hash_mix(size_t(op), (size_t(dtype.scalar) << 16) | (size_t(dtype.count) << 8) | size_t(dtype.addr));
  for (const UOpPtr& s : src) h = hash_mix(h, std::hash<const UOp*>{}(s.get()));
  return hash_mix(h, arg_hash(arg));
}

}  // namespace

// ---- arguments ----

bool arg_equal(const Arg& a, const Arg& b) {
  if (a.index() != b.index()) return false;
  if (const double* x = std::get_if<double>(&a))
    return std::bit_cast<uint64_t>(*x) == std::bit_cast<uint64_t>(std::get<double>(b));
  if (const auto* p = std::get_if<std::shared_ptr<const ArgPayload>>(&a)) {
    const auto& q = std::get<std::shared_ptr<const ArgPayload>>(b);
    if (p->get() == q.get()) return true;
    if (!*p || !q || typeid(**p) != typeid(*q)) return false;
    return (*p)->equals(*q);
  }
  return a == b;
}

size_t arg_hash(const Arg& a) {
  return std::visit(
      [](const auto& v) -> size_t {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) return 0x51ed;
        else if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, int64_t>) return std::hash<int64_t>{}(v);
        else if constexpr (std::is_same_v<T, double>) return std::hash<uint64_t>{}(std::bit_cast<uint64_t>(v));
        else if constexpr (std::is_same_v<T, std::string>) return std::hash<std::string>{}(v);
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          size_t h = v.size();
          for (int64_t x : v) h = hash_mix(h, size_t(x));
          return h;
        } else if constexpr (std::is_same_v<T, VarArg>)
          return hash_mix(hash_mix(std::hash<std::string>{}(v.name), size_t(v.min)), size_t(v.max));
        else if constexpr (std::is_same_v<T, ReduceArg>) {
          size_t h = size_t(v.op);
          for (int64_t x : v.axes) h = hash_mix(h, size_t(x));
          return h;
        } else
          return v ? hash_mix(typeid(*v).hash_code(), v->hash()) : 0;
      },
      a);
}

namespace {
std::string int_tuple(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

std::string double_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[32];
  for (int prec = 1; prec <= 17; ++prec) {  // the shortest form that reads back exactly
    std::snprintf(buf, sizeof buf, "%.*g", prec, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}
}  // namespace

std::string arg_repr(const Arg& a) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) return "None";
        else if constexpr (std::is_same_v<T, bool>) return v ? "True" : "False";
        else if constexpr (std::is_same_v<T, int64_t>) return std::to_string(v);
        else if constexpr (std::is_same_v<T, double>) return double_repr(v);
        else if constexpr (std::is_same_v<T, std::string>) return "'" + v + "'";
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>) return int_tuple(v);
        else if constexpr (std::is_same_v<T, VarArg>)
          return "('" + v.name + "', " + std::to_string(v.min) + ", " + std::to_string(v.max) + ")";
        else if constexpr (std::is_same_v<T, ReduceArg>)
          return "(Ops." + std::string(op_name(v.op)) + ", " + int_tuple(v.axes) + ")";
        else
          return v ? v->repr() : "None";
      },
      a);
}

ScalarKind Scalarish::kind() const {
  if (std::holds_alternative<bool>(v)) return ScalarKind::Bool;
  return std::holds_alternative<int64_t>(v) ? ScalarKind::Int : ScalarKind::Float;
}

double Scalarish::as_double() const {
  return std::visit([](auto x) { return double(x); }, v);
}

// ---- interning ----

// The table of live nodes. Entries hold a raw pointer (to compare contents while the node may be
// dying) and a weak pointer (to hand out a new reference only while it is alive). A node removes
// its own entry in its deleter, under the lock, before its memory goes away.
struct UOpInterner {
  struct Entry {
    const UOp* node;
    std::weak_ptr<const UOp> weak;
  };
  std::mutex mu;
  std::unordered_multimap<size_t, Entry> table;

  static UOpInterner& get() {
    static UOpInterner* instance = new UOpInterner;  // immortal: nodes may die during static exit
    return *instance;
  }

  static bool same(const UOp& n, Ops op, DType dtype, const std::vector<UOpPtr>& src, const Arg& arg) {
    if (n.op != op || !(n.dtype == dtype) || n.src.size() != src.size()) return false;
    for (size_t i = 0; i < src.size(); ++i)
      if (n.src[i] != src[i]) return false;
    return arg_equal(n.arg, arg);
  }

  UOpPtr intern(Ops op, DType dtype, std::vector<UOpPtr>&& src, Arg&& arg) {
    const size_t h = node_hash(op, dtype, src, arg);
    std::lock_guard lock(mu);
    auto [lo, hi] = table.equal_range(h);
    for (auto it = lo; it != hi; ++it)
      if (same(*it->second.node, op, dtype, src, arg))
        if (UOpPtr alive = it->second.weak.lock()) return alive;
    UOpPtr fresh(new UOp(op, dtype, std::move(src), std::move(arg), h), release);
    table.emplace(h, Entry{fresh.get(), fresh});
    return fresh;
  }

  // A node's deleter. Deleting a node releases its sources, which may die too: done recursively,
  // a chain of 100000 nodes (a long unrealized loop, its backward graph) overflows the stack.
  // Nodes that die while another is being deleted are queued and deleted by the outermost call.
  static void release(const UOp* n) {
    thread_local std::vector<const UOp*>* pending = nullptr;
    get().forget(n);  // dead from here on: never handed out again
    if (pending) {
      pending->push_back(n);
      return;
    }
    std::vector<const UOp*> queue{n};
    pending = &queue;
    while (!queue.empty()) {
      const UOp* x = queue.back();
      queue.pop_back();
      delete x;  // releases the sources, whose deleters take the lock again: not held here
    }
    pending = nullptr;
  }

  void forget(const UOp* n) {
    std::lock_guard lock(mu);
    auto [lo, hi] = table.equal_range(n->hash());
    for (auto it = lo; it != hi; ++it)
      if (it->second.node == n) {
        table.erase(it);
        return;
      }
  }
};

UOp::UOp(Ops op, DType dtype, std::vector<UOpPtr> src, Arg arg, size_t hash)
    : op(op), dtype(dtype), src(std::move(src)), arg(std::move(arg)), hash_(hash) {
  std::tie(vmin_, vmax_) = compute_bounds(*this);
  shape_ = compute_shape(*this);
  if (op == Ops::DEVICE) device_ = this;
  // A COPY (x, DEVICE) lives where it copies to, not where its source does.
  if (op == Ops::COPY && this->src.size() > 1) device_ = this->src[1]->device_;
  for (size_t i = 0; i < this->src.size() && !device_; ++i) device_ = this->src[i]->device_;
}

UOp::~UOp() = default;

UOpPtr UOp::make(Ops op, DType dtype, std::vector<UOpPtr> src, Arg arg) {
  UOpPtr u = UOpInterner::get().intern(op, dtype, std::move(src), std::move(arg));
  // Sources were made (and got theirs) first; a shapeless node has none.
  if (u->shape_) std::call_once(u->sym_once_, [&] { u->sym_shape_ = compute_sym_shape(*u); });
  return u;
}

size_t live_uop_count() {
  UOpInterner& in = UOpInterner::get();
  std::lock_guard lock(in.mu);
  return in.table.size();
}

// ---- constants ----

namespace {
// `v` converted to scalar dtype d exactly as a device would store it.
Arg const_arg(DType d, const Scalarish& v) {
  if (d.is_bool()) return v.as_double() != 0.0;
  if (d.is_int()) {
    int64_t i;
    if (const double* f = std::get_if<double>(&v.v)) {
      const double t = std::trunc(*f);  // float -> int truncates; out-of-range and nan saturate
      i = std::isnan(t) ? 0 : t >= 9.2233720368547758e18 ? INT64_MAX : t <= -9.2233720368547758e18 ? INT64_MIN : int64_t(t);
    } else {
      i = std::visit([](auto x) { return int64_t(x); }, v.v);
    }
    return visit_dtype(d.base(), [i](auto tag) -> int64_t {
      using T = decltype(tag);
      if constexpr (std::is_integral_v<T>) return int64_t(T(i));  // wraps to the width
      else return i;
    });
  }
  if (d.is_float()) {
    const double x = v.as_double();
    switch (d.scalar) {
      case Scalar::Float16: return double(float(float16_t(float(x))));
      case Scalar::BFloat16: return double(float(bfloat16_t(float(x))));
      case Scalar::Float32: return double(float(x));
      default: return x;
    }
  }
  throw Error("cannot make a constant of dtype " + d.name());
}
}  // namespace

UOpPtr UOp::const_(DType d, Scalarish value) { return make(Ops::CONST, d, {}, const_arg(d, value)); }

UOpPtr UOp::var(std::string name, int64_t min, int64_t max, DType d) {
  if (min > max)
    throw Error("variable '" + name + "' has empty bounds [" + std::to_string(min) + ", " + std::to_string(max) + "]");
  return make(Ops::DEFINE_VAR, d, {}, VarArg{std::move(name), min, max});
}

double UOp::const_value() const {
  if (op != Ops::CONST) throw Error("const_value() of a " + std::string(op_name(op)) + " node");
  if (const int64_t* i = std::get_if<int64_t>(&arg))
    return dtype.scalar == Scalar::UInt64 ? double(uint64_t(*i)) : double(*i);
  if (const bool* b = std::get_if<bool>(&arg)) return *b ? 1.0 : 0.0;
  return std::get<double>(arg);
}

int64_t UOp::const_int() const {
  if (op != Ops::CONST) throw Error("const_int() of a " + std::string(op_name(op)) + " node");
  if (const int64_t* i = std::get_if<int64_t>(&arg)) return *i;
  if (const bool* b = std::get_if<bool>(&arg)) return *b;
  return int64_t(std::get<double>(arg));
}

// ---- building ----

UOpPtr UOp::alu(Ops o, const std::vector<UOpPtr>& others) const {
  std::vector<UOpPtr> src;
  src.reserve(others.size() + 1);
  src.push_back(ptr());
  src.insert(src.end(), others.begin(), others.end());
  const DType out = is_comparison(o) ? DType{Scalar::Bool, dtype.count} : dtype;
  return make(o, out, std::move(src));
}

UOpPtr UOp::cast(DType d) const { return d == dtype ? ptr() : make(Ops::CAST, d, {ptr()}); }
UOpPtr UOp::const_like(Scalarish v) const { return const_(dtype.base().vec(dtype.count), v); }
UOpPtr UOp::logical_not() const { return ne(true); }
UOpPtr UOp::where(const UOpPtr& t, const UOpPtr& f) const { return make(Ops::WHERE, t->dtype, {ptr(), t, f}); }

UOpPtr binary(Ops op, const UOpPtr& a, const UOpPtr& b) {
  if (op == Ops::IDIV && a->dtype.is_float()) op = Ops::FDIV;
  return a->alu(op, {b});
}
UOpPtr operator-(const UOpPtr& a) { return a->alu(Ops::NEG); }
UOpPtr operator+(const UOpPtr& a, Scalarish b) { return a + a->const_like(b); }
UOpPtr operator-(const UOpPtr& a, Scalarish b) { return a - a->const_like(b); }
UOpPtr operator*(const UOpPtr& a, Scalarish b) { return a * a->const_like(b); }
UOpPtr operator/(const UOpPtr& a, Scalarish b) { return a / a->const_like(b); }
UOpPtr operator%(const UOpPtr& a, Scalarish b) { return a % a->const_like(b); }
UOpPtr operator+(Scalarish a, const UOpPtr& b) { return b->const_like(a) + b; }
UOpPtr operator-(Scalarish a, const UOpPtr& b) { return b->const_like(a) - b; }
UOpPtr operator*(Scalarish a, const UOpPtr& b) { return b->const_like(a) * b; }

// ---- walking ----

std::vector<const UOp*> toposort(const UOp* root) {
  std::vector<const UOp*> order;
  std::unordered_set<const UOp*> seen;
  std::vector<std::pair<const UOp*, bool>> stack{{root, false}};  // (node, sources done)
  while (!stack.empty()) {
    auto [n, expanded] = stack.back();
    stack.pop_back();
    if (expanded) {
      order.push_back(n);
      continue;
    }
    if (!seen.insert(n).second) continue;
    stack.push_back({n, true});
    for (auto it = n->src.rbegin(); it != n->src.rend(); ++it)
      if (!seen.count(it->get())) stack.push_back({it->get(), false});
  }
  return order;
}

}  // namespace vkg
