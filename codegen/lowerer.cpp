// lower(): the Lowerer's axes, combos, loads, stores and reduces (the class and what each member
// does: codegen/lowering.hpp; what a workgroup does together: lowerer_workgroup.cpp).
#include <vkgrad/codegen/lowerer.hpp>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <unordered_set>

#include <vkgrad/codegen/lowering.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/symbolic.hpp>

namespace vkg {

namespace lowering {

Scalarish reduce_identity(Ops op, DType d) {
  switch (op) {
    case Ops::ADD:
      // Floats start from -0.0, the exact identity of IEEE addition: +0.0 + -0.0 is +0.0, so a
      // sum of -0.0s would come out +0.0, and a device that folds the first `acc + x` to `x`
      // (Lavapipe does, once a one-trip loop is unrolled) would disagree with one that does not.
      return d.is_float() ? Scalarish(-0.0) : Scalarish(int64_t(0));
    case Ops::MUL:
      return int64_t(1);
    case Ops::MAX:
      if (d.is_float()) return -std::numeric_limits<double>::infinity();
      if (d.is_bool()) return false;
      return dtypes::min_value(d);
    default:
      throw Error("reduce with " + std::string(op_name(op)) + " is not supported");
  }
}

Lowerer::Lowerer(const Kernel& k, const LowerOptions& options) : k_(k) {
  const auto& shape = k.full_shape();
  const auto& kinds = k.kinds();
  axis_idx_.resize(shape.size());
  std::vector<size_t> global, local, group;
  for (size_t i = 0; i < shape.size(); ++i) {
    switch (kinds[i]) {
      case AxisKind::Global:
        global.push_back(i);
        break;
      case AxisKind::Local:
        local.push_back(i);
        break;
      case AxisKind::Reduce:
        axis_idx_[i] = UOp::make(Ops::RANGE, dtypes::int32, {axis_size(i)}, int64_t(i));
        break;
      case AxisKind::Group:
        group.push_back(i);
        break;
      case AxisKind::Upcast:
      case AxisKind::Unroll:
      case AxisKind::Shuffle:
        expanded_.push_back(i);
        break;
    }
  }
  int64_t n_global = 1, n_local = 1;
  for (size_t i : global) n_global *= shape[i];
  for (size_t i : local) n_local *= shape[i];
  for (size_t i : group) group_size_ *= shape[i];
  if (const int s = k.shuffle_axis(); s >= 0) {
    if (!group.empty() || local.empty() || n_local != shape[size_t(s)] || k.staged())
      throw Error(
          "lower: a SHUFFLE axis needs a workgroup of exactly its size (one subgroup) "
          "and no GROUP axes or STAGE: kernel " +
          k.describe());
  }
  if (k.staged() && (local.empty() || !group.empty()))
    throw Error(
        "lower: STAGE needs local axes (the invocations that share a tile) and no GROUP "
        "axes: kernel " +
        k.describe());
  // Group axes are the innermost part of the local id: a workgroup's invocations that share
  // an output are neighbours, lidx = (local part) * group_size + group part.
  local.insert(local.end(), group.begin(), group.end());
  n_local *= group_size_;
  if (local.empty()) {
    // One invocation per output element, in workgroups of a fixed size.
    const UOpPtr idx0 = special("idx0", n_global);
    unflatten(idx0, global);
    UOpPtr bound;
    if (k.symbolic()) {
      bound = int_const(1);
      for (size_t i : global) bound = simplify(bound * axis_size(i));
      if (bound->vmax() >= n_global && bound->vmin() >= n_global)
        bound = nullptr;  // always all of them
      if (bound) guard_ = idx0->lt(bound);
    }
    const int64_t wg = std::max<int64_t>(1, std::min(options.default_workgroup, n_global));
    program_.local_size = {wg, 1, 1};
    program_.global_size = {(n_global + wg - 1) / wg, 1, 1};
    if (bound) program_.groups_needed = simplify((bound + int_const(wg - 1)) / int_const(wg));
  } else {
    const UOpPtr gidx = special("gidx0", n_global);
    unflatten(gidx, global);
    lane_ = special("lidx0", n_local);
    unflatten(lane_, local);
    if (!group.empty()) group_lane_ = simplify(lane_ % group_size_);
    program_.local_size = {n_local, 1, 1};
    program_.global_size = {n_global, 1, 1};
    if (k.symbolic()) {
      // Workgroups past the bound sizes' (the grid is for the maxima) and, within a LOCAL split
      // of a symbolic axis, the invocations past its size do nothing.
      std::vector<UOpPtr> conds = k.sym_guards(axis_idx_);
      UOpPtr groups = int_const(1);
      for (size_t i : global) groups = simplify(groups * axis_size(i));
      if (groups->vmin() < n_global) {
        conds.push_back(gidx->lt(groups));
        program_.groups_needed = groups;
      }
      for (const UOpPtr& c : conds) guard_ = guard_ ? simplify(guard_->alu(Ops::AND, {c})) : c;
    }
  }
}

Program Lowerer::run(const std::vector<int64_t>& counts) {
  if (k_.staged()) stage_tiles();
  std::vector<UOpPtr> stores;
  for (const UOpPtr& store : k_.ast()->src) {
    if (store->op != Ops::STORE) throw Error("Kernel: SINK sources must be STOREs");
    const std::vector<Combo> all = output_combos(Combo(k_.full_shape().size(), 0));
    if (is_scatter_store(store.get())) {
      // One combining store per value, at the address its indices give (no vectors: each lane
      // may land anywhere). The linear STORE carries the combine as its arg.
      const auto& arg = store->arg_as<std::vector<int64_t>>();
      for (const Combo& c : all) {
        IndexExpr e = address(store->src[1].get(), c);
        for (size_t j = 3; j < store->src.size(); ++j) {
          const UOpPtr at = value(store->src[j].get(), c);
          const int64_t stride = arg.at(2 * j - 5), size = arg.at(2 * j - 4);
          e.index = e.index + at * stride;
          e.valid = e.valid->alu(Ops::AND, {at->ge(0)})->alu(Ops::AND, {at->lt(size)});
        }
        stores.push_back(UOp::make(Ops::STORE, dtypes::void_,
                                   {indexed(store->src[0], simplify(e.index), simplify(e.valid)),
                                    value(store->src[2].get(), c)},
                                   arg[0]));
      }
      continue;
    }
    // Combos vary the innermost upcast axis fastest: each run of `width` is one vector's lanes.
    const DType stored = store->src[0]->dtype.base();
    const size_t width = stored.is_bool() || stored.scalar == Scalar::BFloat16 ? 1 : vector_width();
    for (size_t g = 0; g < all.size(); g += width) {
      std::vector<UOpPtr> idx, values;
      for (size_t k = g; k < g + width; ++k) {
        auto [index, valid] = address(store->src[1].get(), all[k]);
        // Every invocation of a group holds the result; the first one stores it.
        if (group_lane_) valid = simplify(valid->alu(Ops::AND, {group_lane_->eq(int64_t(0))}));
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
            const UOpPtr lane =
                UOp::make(Ops::GEP, v->dtype.base(), {v}, std::vector<int64_t>{int64_t(k)});
            stores.push_back(UOp::make(Ops::STORE, dtypes::void_, {idx[k], lane}));
          }
          continue;
        }
      for (size_t k = 0; k < width; ++k)
        stores.push_back(UOp::make(Ops::STORE, dtypes::void_, {idx[k], values[k]}));
    }
  }
  // The end of a staged iteration: every invocation has read the tiles before any overwrites
  // them in the next one.
  if (!tile_reads_.empty()) stores.push_back(UOp::make(Ops::BARRIER, dtypes::void_, tile_reads_));
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
      program_.buffers[size_t(slot)] =
          BufferParam{int(slot), u->dtype.base(), counts[size_t(slot)], written.count(slot) != 0};
      program_.bytes += counts[size_t(slot)] * u->dtype.base().itemsize();
    }
  program_.flops = estimate_flops();
  // The variables the kernel reads, by name: the order their values are passed in.
  for (const UOpPtr& u : program_.uops)
    if (u->op == Ops::DEFINE_VAR) program_.vars.push_back(u->arg_as<VarArg>());
  std::sort(program_.vars.begin(), program_.vars.end(),
            [](const VarArg& a, const VarArg& b) { return a.name < b.name; });
  program_.vars.erase(std::unique(program_.vars.begin(), program_.vars.end()), program_.vars.end());
  return std::move(program_);
}

bool Lowerer::is_output_axis(size_t axis) const {
  return k_.kinds()[axis] == AxisKind::Upcast || k_.kinds()[axis] == AxisKind::Shuffle;
}

size_t Lowerer::vector_width() const {
  if (group_lane_) return 1;
  for (auto it = expanded_.rbegin(); it != expanded_.rend(); ++it)
    if (is_output_axis(*it)) {
      if (k_.kinds()[*it] == AxisKind::Shuffle) return 1;
      const int64_t w = k_.full_shape()[*it];
      return w >= 2 && w <= 4 ? size_t(w) : 1;
    }
  return 1;
}

UOpPtr Lowerer::special(const char* name, int64_t size) {
  return UOp::make(Ops::SPECIAL, dtypes::int32, {int_const(size)}, std::string(name));
}

UOpPtr Lowerer::axis_size(size_t i) const {
  return k_.symbolic() ? k_.sym_full_shape()[i] : int_const(k_.full_shape()[i]);
}

void Lowerer::unflatten(const UOpPtr& flat, const std::vector<size_t>& axes) {
  if (k_.symbolic()) {
    UOpPtr stride = int_const(1);
    for (auto it = axes.rbegin(); it != axes.rend(); ++it) {
      const UOpPtr size = axis_size(*it);
      axis_idx_[*it] = simplify((flat / stride) % size);
      stride = simplify(stride * size);
    }
    return;
  }
  int64_t stride = 1;
  for (auto it = axes.rbegin(); it != axes.rend(); ++it) {
    const int64_t size = k_.full_shape()[*it];
    axis_idx_[*it] = simplify((flat / stride) % size);
    stride *= size;
  }
}

std::vector<Combo> Lowerer::combos(bool unroll, const Combo& base) const {
  std::vector<Combo> out{base};
  for (size_t axis : expanded_) {
    if ((k_.kinds()[axis] == AxisKind::Unroll) != unroll) continue;
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

IndexExpr Lowerer::address(const UOp* view_node, const Combo& c, int at_lane) const {
  const ShapeTracker& st = k_.view(view_node);
  std::vector<UOpPtr> idxs;
  for (size_t i = 0; i < st.shape().size(); ++i) {
    if (st.shape()[i] == 1)
      idxs.push_back(int_const(0));
    else if (int(i) == at_lane)
      idxs.push_back(lane_);
    else if (axis_idx_[i])
      idxs.push_back(axis_idx_[i]);
    else
      idxs.push_back(int_const(c[i]));
  }
  IndexExpr e = st.expr_idxs(idxs);
  if (guard_) e.valid = simplify(e.valid->alu(Ops::AND, {guard_}));
  return e;
}

IndexExpr Lowerer::load_address(const UOp* load, const Combo& c) {
  IndexExpr e = address(load->src[1].get(), c);
  if (!is_indexed_load(load)) return e;
  const auto& axes = load->arg_as<std::vector<int64_t>>();  // (stride, size) per index
  for (size_t j = 2; j < load->src.size(); ++j) {
    const UOpPtr at = value(load->src[j].get(), c);
    const int64_t stride = axes[2 * (j - 2)], size = axes[2 * (j - 2) + 1];
    // Addressed clamped into the axis: the address stays in the buffer, and its bounds let the
    // symbolic folds prove alignment (a row of floats then loads as vec4s).
    const UOpPtr inside = -((-at->maximum(0))->maximum(-(size - 1)));
    e.index = e.index + inside * stride;
    e.valid = e.valid->alu(Ops::AND, {at->ge(0)})->alu(Ops::AND, {at->lt(size)});
  }
  return {simplify(e.index), simplify(e.valid)};
}

UOpPtr Lowerer::indexed(const UOpPtr& global, const UOpPtr& index, const UOpPtr& valid) {
  if (is_true(valid)) return UOp::make(Ops::INDEX, global->dtype, {global, index});
  return UOp::make(Ops::INDEX, global->dtype, {global, index, valid});
}

UOpPtr Lowerer::value(const UOp* n, const Combo& c) {
  auto key = std::pair{n, c};
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  UOpPtr out = value_uncached(n, c);
  memo_.emplace(std::move(key), out);
  return out;
}

UOpPtr Lowerer::value_uncached(const UOp* n, const Combo& c) {
  switch (n->op) {
    case Ops::LOAD: {
      if (UOpPtr staged = from_tile(n, c)) return staged;
      if (UOpPtr lane = shuffled(n, c)) return lane;
      if (UOpPtr lane = unrolled_vector_lane(n, c)) return lane;
      auto [index, valid] = load_address(n, c);
      UOpPtr idx = indexed(n->src[0], index, valid);
      if (is_true(valid)) return UOp::make(Ops::LOAD, n->dtype, {idx});
      return UOp::make(Ops::LOAD, n->dtype, {idx, UOp::const_(n->dtype, 0)});
    }
    case Ops::CONST: {
      if (n->src.empty()) return n->ptr();  // a number inside a variable's expression
      const UOpPtr v = UOp::make(Ops::CONST, n->dtype, {}, n->arg);
      const UOpPtr valid = address(n->src[0].get(), c).valid;
      return is_true(valid) ? v : valid->where(v, UOp::const_(n->dtype, 0));
    }
    case Ops::REDUCE_AXIS: {
      const UOpPtr partial = value_partial(n, c);
      return group_lane_ ? group_reduce(n, c, partial) : partial;
    }
    default: {
      std::vector<UOpPtr> src;
      for (const UOpPtr& s : n->src) src.push_back(value(s.get(), c));
      // x < x and x != x of integers and bools are false (symbolic_rules.cpp folds them in
      // indexes; values are not simplified). Folded here, not by the driver: Lavapipe turned bool
      // `!a && a` into false and then float(false) * v into +0 where v < 0 gives -0; as a CONST
      // the renderer sees the +0 operand and guards it (glsl_alu.cpp, positive_zero).
      // Also x ^ x (a bool xor renders as !=: the mean of an all-false xor came out -0, elementwise
      // fuzzer seed 880257, as the driver folded `acc + float(c != c)` from -0 to acc) and the
      // float x < x, false for every x (nan included).
      if (src.size() == 2 && src[0] == src[1] &&
          ((n->op == Ops::CMPNE && !src[0]->dtype.is_float()) || n->op == Ops::XOR ||
           n->op == Ops::CMPLT))
        return UOp::const_(n->dtype, false);
      return UOp::make(n->op, n->dtype, std::move(src), n->arg);
    }
  }
}

UOpPtr Lowerer::value_partial(const UOp* n, const Combo& c) {
  auto key = std::pair{n, c};
  if (auto it = partials_.find(key); it != partials_.end()) return it->second;
  const Ops op = n->arg_as<ReduceArg>().op;
  if (op == Ops::MAX)
    if (UOpPtr same = invariant_value(n, c)) return partials_[key] = same;
  std::vector<UOpPtr> acc_src{UOp::const_(n->dtype, reduce_identity(op, n->dtype))};
  for (const UOpPtr& r : axis_idx_)
    if (r && r->op == Ops::RANGE) acc_src.push_back(r);
  const UOpPtr acc = UOp::make(Ops::DEFINE_ACC, n->dtype, std::move(acc_src), next_acc_++);
  UOpPtr total = acc;
  for (const Combo& u : unroll_combos(c)) total = total->alu(op, {value(n->src[0].get(), u)});
  return partials_[key] = UOp::make(Ops::ASSIGN, n->dtype, {acc, total});
}

// The reduced value when it is the same in every step of the reduce: every unrolled lane lowers to
// one node, which reads no reduce RANGE, and every RANGE has a constant size of at least 1. A max
// of copies of x is x (max(-inf, x) and max(INT_MIN, x) are x, nan included), so no loop is needed;
// and Lavapipe got `acc = max(acc, 0)` in a loop from INT_MIN wrong: it gave INT_MIN (elementwise
// fuzzer seeds 800062, 800611, an int max of a value folded to the constant 0). A RANGE of a
// symbolic size (bound at run time, possibly 0) gives `size > 0 ? x : identity`: the loop gave
// INT_MIN there too on Lavapipe, for every binding.
UOpPtr Lowerer::invariant_value(const UOp* n, const Combo& c) {
  UOpPtr same;
  for (const Combo& u : unroll_combos(c)) {
    // Simplified: LLVM sees through an integer x * 0 or x & 0 to the constant, and then got the
    // loop wrong (elementwise fuzzer seed 77000540: max of x * 0 gave INT_MIN).
    const UOpPtr v = simplify(value(n->src[0].get(), u));
    if (same && v != same) return nullptr;
    same = v;
  }
  if (!same) return nullptr;
  std::vector<const UOp*> ranges;
  UOpPtr nonempty;  // every symbolic RANGE has a step, or null where all sizes are constants
  for (const UOpPtr& r : axis_idx_) {
    if (!r || r->op != Ops::RANGE) continue;
    const UOpPtr& size = r->src[0];
    if (size->op == Ops::CONST && size->src.empty()) {
      if (size->const_int() < 1) return nullptr;
    } else if (size->vmin() < 1) {
      const UOpPtr steps = size->const_like(0)->lt(size);
      nonempty = nonempty ? nonempty->alu(Ops::AND, {steps}) : steps;
    }
    ranges.push_back(r.get());
  }
  for (const UOp* u : toposort(same.get()))
    if (std::find(ranges.begin(), ranges.end(), u) != ranges.end()) return nullptr;
  if (nonempty)
    return nonempty->where(same, UOp::const_(n->dtype, reduce_identity(Ops::MAX, n->dtype)));
  return same;
}

UOpPtr Lowerer::unrolled_vector_lane(const UOp* load, const Combo& c, int at_lane) {
  const auto [v, axis] = unrolled_vector(load, c, at_lane);
  if (!v) return nullptr;
  const UOpPtr x = at_lane >= 0 ? shuffle(v, c[size_t(at_lane)]) : v;
  return UOp::make(Ops::GEP, load->dtype, {x}, std::vector<int64_t>{c[size_t(axis)]});
}

int Lowerer::innermost_unroll() const {
  int axis = -1;
  for (size_t a : expanded_)
    if (k_.kinds()[a] == AxisKind::Unroll) axis = int(a);
  return axis;
}

std::vector<int> Lowerer::vector_axes() const {
  std::vector<int> axes;
  if (const int u = innermost_unroll(); u >= 0) axes.push_back(u);
  // The innermost output axis is the LaneVectorizer's (vector_width): its loads are vectorized
  // with the arithmetic above them, not here.
  bool innermost_output = vector_width() > 1;
  for (auto it = expanded_.rbegin(); it != expanded_.rend(); ++it) {
    if (!is_output_axis(*it)) continue;
    if (innermost_output) {
      innermost_output = false;
      continue;
    }
    if (k_.kinds()[*it] == AxisKind::Upcast) axes.push_back(int(*it));
  }
  return axes;
}

std::pair<UOpPtr, int> Lowerer::unrolled_vector(const UOp* load, const Combo& c, int at_lane) {
  const DType d = load->dtype;
  if (d.count != 1 || d.is_bool() || d.scalar == Scalar::BFloat16) return {nullptr, -1};
  // An indexed load's lanes are consecutive only per invocation: never read across lanes.
  if (at_lane >= 0 && is_indexed_load(load)) return {nullptr, -1};
  for (const int axis : vector_axes()) {
    const int64_t w = k_.full_shape()[size_t(axis)];
    if (w < 2 || w > 4) continue;
    Combo base = c;
    base[size_t(axis)] = -2;  // one load for every value of the axis (-2: keyed by the axis)
    if (at_lane >= 0) base[size_t(at_lane)] = -1;  // one load for every value of the lane axis
    auto key = std::pair{load, base};
    auto it = unrolled_loads_.find(key);
    if (it == unrolled_loads_.end()) {
      std::vector<UOpPtr> idx;
      for (int64_t j = 0; j < w; ++j) {
        Combo lane = base;
        lane[size_t(axis)] = j;
        auto [index, valid] =
            at_lane >= 0 ? address(load->src[1].get(), lane, at_lane) : load_address(load, lane);
        idx.push_back(indexed(load->src[0], index, valid));
      }
      UOpPtr v;
      if (LaneVectorizer::consecutive(idx)) {
        // Masked lanes (one mask for all: see consecutive) read zeros, as scalar loads do.
        const DType vd = d.vec(int(w));
        v = idx[0]->src.size() > 2 ? UOp::make(Ops::LOAD, vd, {idx[0], UOp::const_(vd, 0)})
                                   : UOp::make(Ops::LOAD, vd, {idx[0]});
      }
      it = unrolled_loads_.emplace(std::move(key), v).first;
    }
    if (it->second) return {it->second, axis};
  }
  return {nullptr, -1};
}

int64_t Lowerer::estimate_flops() const {
  const int64_t full = prod(k_.full_shape());
  const int64_t out = prod(k_.output_view().shape());
  std::unordered_set<const UOp*> below_reduce;
  for (const UOp* u : toposort(k_.ast().get()))
    if (u->op == Ops::REDUCE_AXIS)
      for (const UOp* x : toposort(u->src[0].get())) below_reduce.insert(x);
  int64_t flops = 0;
  for (const UOp* u : toposort(k_.ast().get())) {
    if (u->op == Ops::REDUCE_AXIS)
      flops += full;
    else if (is_alu(u->op))
      flops += below_reduce.count(u) ? full : out;
  }
  return flops;
}

}  // namespace lowering

Program lower(const Kernel& kernel, const std::vector<int64_t>& buffer_counts,
              const LowerOptions& options) {
  return lowering::Lowerer(kernel, options).run(buffer_counts);
}

}  // namespace vkg
