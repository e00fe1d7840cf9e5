#include <vkgrad/codegen/lowerer.hpp>

#include <limits>
#include <map>
#include <unordered_set>

#include <vkgrad/codegen/vectorize.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/symbolic.hpp>

namespace vkg {

namespace {

UOpPtr int_const(int64_t v) { return UOp::const_(dtypes::int32, v); }

bool is_true(const UOpPtr& u) { return u->op == Ops::CONST && u->const_value() != 0; }

// The value a reduce's accumulator starts from.
Scalarish reduce_identity(Ops op, DType d) {
  switch (op) {
    case Ops::ADD: return int64_t(0);
    case Ops::MUL: return int64_t(1);
    case Ops::MAX:
      if (d.is_float()) return -std::numeric_limits<double>::infinity();
      if (d.is_bool()) return false;
      return dtypes::min_value(d);
    default: throw Error("reduce with " + std::string(op_name(op)) + " is not supported");
  }
}

// Values of the upcast and unroll axes (one per axis of the kernel; other axes hold 0).
using Combo = std::vector<int64_t>;

class Lowerer {
 public:
  Lowerer(const Kernel& k, const LowerOptions& options) : k_(k) {
    const auto& shape = k.full_shape();
    const auto& kinds = k.kinds();
    axis_idx_.resize(shape.size());
    std::vector<size_t> global, local;
    for (size_t i = 0; i < shape.size(); ++i) {
      switch (kinds[i]) {
        case AxisKind::Global: global.push_back(i); break;
        case AxisKind::Local: local.push_back(i); break;
        case AxisKind::Reduce:
          axis_idx_[i] = UOp::make(Ops::RANGE, dtypes::int32, {int_const(shape[i])}, int64_t(i));
          break;
        case AxisKind::Group:
          throw Error("GROUP opts are not lowered yet (kernel " + k.describe() + ")");
        case AxisKind::Upcast:
        case AxisKind::Unroll: expanded_.push_back(i); break;
      }
    }
    int64_t n_global = 1, n_local = 1;
    for (size_t i : global) n_global *= shape[i];
    for (size_t i : local) n_local *= shape[i];
    if (local.empty()) {
      // One invocation per output element, in workgroups of a fixed size.
      unflatten(special("idx0", n_global), global);
      const int64_t wg = std::max<int64_t>(1, std::min(options.default_workgroup, n_global));
      program_.local_size = {wg, 1, 1};
      program_.global_size = {(n_global + wg - 1) / wg, 1, 1};
    } else {
      unflatten(special("gidx0", n_global), global);
      unflatten(special("lidx0", n_local), local);
      program_.local_size = {n_local, 1, 1};
      program_.global_size = {n_global, 1, 1};
    }
  }

  Program run(const std::vector<int64_t>& counts) {
    std::vector<UOpPtr> stores;
    for (const UOpPtr& store : k_.ast()->src) {
      if (store->op != Ops::STORE) throw Error("Kernel: SINK sources must be STOREs");
      const std::vector<Combo> all = combos(AxisKind::Upcast, Combo(k_.full_shape().size(), 0));
      // Combos vary the innermost upcast axis fastest: each run of `width` is one vector's lanes.
      const DType stored = store->src[0]->dtype.base();
      const size_t width = stored.is_bool() || stored.scalar == Scalar::BFloat16 ? 1 : vector_width();
      for (size_t g = 0; g < all.size(); g += width) {
        std::vector<UOpPtr> idx, values;
        for (size_t k = g; k < g + width; ++k) {
          auto [index, valid] = address(store->src[1].get(), all[k]);
          idx.push_back(indexed(store->src[0], index, valid));
          values.push_back(value(store->src[2].get(), all[k]));
        }
        if (width > 1)
          if (UOpPtr v = vectorizer_.vectorize(values)) {
            if (LaneVectorizer::consecutive(idx)) {
              stores.push_back(UOp::make(Ops::STORE, dtypes::void_, {idx[0], v}));
              continue;
            }
            // Computed as a vector (its loads and accumulators line up), stored lane by lane.
            for (size_t k = 0; k < width; ++k) {
              const UOpPtr lane = UOp::make(Ops::GEP, v->dtype.base(), {v}, std::vector<int64_t>{int64_t(k)});
              stores.push_back(UOp::make(Ops::STORE, dtypes::void_, {idx[k], lane}));
            }
            continue;
          }
        for (size_t k = 0; k < width; ++k) stores.push_back(UOp::make(Ops::STORE, dtypes::void_, {idx[k], values[k]}));
      }
    }
    program_.name = k_.name();
    program_.uops = linearize(stores);
    std::unordered_set<int64_t> written;
    for (const UOpPtr& s : k_.ast()->src) written.insert(s->src[0]->arg_as<int64_t>());
    for (const UOp* u : toposort(k_.ast().get()))
      if (u->op == Ops::DEFINE_GLOBAL) {
        const int64_t slot = u->arg_as<int64_t>();
        if (slot < 0 || size_t(slot) >= counts.size())
          throw Error("lower: no buffer size given for slot " + std::to_string(slot));
        if (program_.buffers.size() <= size_t(slot)) program_.buffers.resize(size_t(slot) + 1);
        program_.buffers[size_t(slot)] = BufferParam{int(slot), u->dtype.base(), counts[size_t(slot)], written.count(slot) != 0};
        program_.bytes += counts[size_t(slot)] * u->dtype.base().itemsize();
      }
    program_.flops = estimate_flops();
    return std::move(program_);
  }

 private:
  const Kernel& k_;
  Program program_;
  std::vector<UOpPtr> axis_idx_;   // per axis: its index expression (upcast/unroll: none)
  std::vector<size_t> expanded_;   // upcast and unroll axes
  std::map<std::pair<const UOp*, Combo>, UOpPtr> memo_;
  int64_t next_acc_ = 0;
  LaneVectorizer vectorizer_{next_acc_};
  std::map<std::pair<const UOp*, Combo>, UOpPtr> unrolled_loads_;  // vector loads by first lane

  // The lanes of one vector store: the innermost upcast axis when it has 2..4 elements (GLSL's
  // vector widths).
  size_t vector_width() const {
    for (auto it = expanded_.rbegin(); it != expanded_.rend(); ++it)
      if (k_.kinds()[*it] == AxisKind::Upcast) {
        const int64_t w = k_.full_shape()[*it];
        return w >= 2 && w <= 4 ? size_t(w) : 1;
      }
    return 1;
  }

  static UOpPtr special(const char* name, int64_t size) {
    return UOp::make(Ops::SPECIAL, dtypes::int32, {int_const(size)}, std::string(name));
  }

  // Row-major split of one flat id over `axes`.
  void unflatten(const UOpPtr& flat, const std::vector<size_t>& axes) {
    int64_t stride = 1;
    for (auto it = axes.rbegin(); it != axes.rend(); ++it) {
      const int64_t size = k_.full_shape()[*it];
      axis_idx_[*it] = simplify((flat / stride) % size);
      stride *= size;
    }
  }

  // Every assignment of values to the axes of `kind`, on top of `base`.
  std::vector<Combo> combos(AxisKind kind, const Combo& base) const {
    std::vector<Combo> out{base};
    for (size_t axis : expanded_) {
      if (k_.kinds()[axis] != kind) continue;
      std::vector<Combo> next;
      for (const Combo& c : out)
        for (int64_t v = 0; v < k_.full_shape()[axis]; ++v) {
          Combo d = c;
          d[axis] = v;
          next.push_back(std::move(d));
        }
      out = std::move(next);
    }
    return out;
  }

  // Index and validity of the element a VIEW addresses at this combo. An axis the view has size 1
  // along (a reduce's output along the reduced axes) is index 0 there.
  IndexExpr address(const UOp* view_node, const Combo& c) const {
    const ShapeTracker& st = k_.view(view_node);
    std::vector<UOpPtr> idxs;
    for (size_t i = 0; i < st.shape().size(); ++i) {
      if (st.shape()[i] == 1) idxs.push_back(int_const(0));
      else if (axis_idx_[i]) idxs.push_back(axis_idx_[i]);
      else idxs.push_back(int_const(c[i]));
    }
    return st.expr_idxs(idxs);
  }

  static UOpPtr indexed(const UOpPtr& global, const UOpPtr& index, const UOpPtr& valid) {
    if (is_true(valid)) return UOp::make(Ops::INDEX, global->dtype, {global, index});
    return UOp::make(Ops::INDEX, global->dtype, {global, index, valid});
  }

  UOpPtr value(const UOp* n, const Combo& c) {
    auto key = std::pair{n, c};
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    UOpPtr out = value_uncached(n, c);
    memo_.emplace(std::move(key), out);
    return out;
  }

  UOpPtr value_uncached(const UOp* n, const Combo& c) {
    switch (n->op) {
      case Ops::LOAD: {
        if (UOpPtr lane = unrolled_vector_lane(n, c)) return lane;
        auto [index, valid] = address(n->src[1].get(), c);
        UOpPtr idx = indexed(n->src[0], index, valid);
        if (is_true(valid)) return UOp::make(Ops::LOAD, n->dtype, {idx});
        return UOp::make(Ops::LOAD, n->dtype, {idx, UOp::const_(n->dtype, 0)});
      }
      case Ops::CONST: {
        const UOpPtr v = UOp::make(Ops::CONST, n->dtype, {}, n->arg);
        const UOpPtr valid = address(n->src[0].get(), c).valid;
        return is_true(valid) ? v : valid->where(v, UOp::const_(n->dtype, 0));
      }
      case Ops::REDUCE_AXIS: {
        const Ops op = n->arg_as<ReduceArg>().op;
        std::vector<UOpPtr> acc_src{UOp::const_(n->dtype, reduce_identity(op, n->dtype))};
        for (const UOpPtr& r : axis_idx_)
          if (r && r->op == Ops::RANGE) acc_src.push_back(r);
        const UOpPtr acc = UOp::make(Ops::DEFINE_ACC, n->dtype, std::move(acc_src), next_acc_++);
        UOpPtr total = acc;
        for (const Combo& u : combos(AxisKind::Unroll, c)) total = total->alu(op, {value(n->src[0].get(), u)});
        return UOp::make(Ops::ASSIGN, n->dtype, {acc, total});
      }
      default: {
        std::vector<UOpPtr> src;
        for (const UOpPtr& s : n->src) src.push_back(value(s.get(), c));
        return UOp::make(n->op, n->dtype, std::move(src), n->arg);
      }
    }
  }

  // A load whose elements are consecutive along the innermost unroll axis (a row of A in a
  // matmul's reduce) is read once as a vector for all of that axis' values, and each unrolled
  // copy takes its lane: one vector access instead of 2..4 scalar ones. nullptr where it does
  // not apply.
  UOpPtr unrolled_vector_lane(const UOp* load, const Combo& c) {
    size_t axis = 0;
    bool found = false;
    for (size_t a : expanded_)
      if (k_.kinds()[a] == AxisKind::Unroll) axis = a, found = true;
    if (!found) return nullptr;
    const int64_t w = k_.full_shape()[axis];
    const DType d = load->dtype;
    if (w < 2 || w > 4 || d.count != 1 || d.is_bool() || d.scalar == Scalar::BFloat16) return nullptr;
    Combo base = c;
    base[axis] = 0;
    auto key = std::pair{load, base};
    auto it = unrolled_loads_.find(key);
    if (it == unrolled_loads_.end()) {
      std::vector<UOpPtr> idx;
      for (int64_t j = 0; j < w; ++j) {
        Combo lane = base;
        lane[axis] = j;
        auto [index, valid] = address(load->src[1].get(), lane);
        idx.push_back(indexed(load->src[0], index, valid));
      }
      UOpPtr v = LaneVectorizer::consecutive(idx) ? UOp::make(Ops::LOAD, d.vec(int(w)), {idx[0]}) : nullptr;
      it = unrolled_loads_.emplace(std::move(key), v).first;
    }
    if (!it->second) return nullptr;
    return UOp::make(Ops::GEP, d, {it->second}, std::vector<int64_t>{c[axis]});
  }

  // Arithmetic of one launch, as the AST counts it: each op once per element it is computed
  // for (the full shape below a reduce, the output shape above it).
  int64_t estimate_flops() const {
    const int64_t full = prod(k_.full_shape());
    const int64_t out = prod(k_.output_view().shape());
    std::unordered_set<const UOp*> below_reduce;
    for (const UOp* u : toposort(k_.ast().get()))
      if (u->op == Ops::REDUCE_AXIS)
        for (const UOp* x : toposort(u->src[0].get())) below_reduce.insert(x);
    int64_t flops = 0;
    for (const UOp* u : toposort(k_.ast().get())) {
      if (u->op == Ops::REDUCE_AXIS) flops += full;
      else if (is_alu(u->op)) flops += below_reduce.count(u) ? full : out;
    }
    return flops;
  }
};

}  // namespace

Program lower(const Kernel& kernel, const std::vector<int64_t>& buffer_counts, const LowerOptions& options) {
  return Lowerer(kernel, options).run(buffer_counts);
}

}  // namespace vkg
