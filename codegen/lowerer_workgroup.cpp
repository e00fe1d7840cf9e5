// What the invocations of a workgroup do together, for the Lowerer (codegen/lowering.hpp):
// SHUFFLE loads (one element per lane, handed around by subgroupShuffle), GROUP reductions
// (partials through shared memory and a tree of barriers) and STAGE tiles (operands copied into
// shared memory once per reduce iteration).
#include <algorithm>
#include <optional>
#include <unordered_set>

#include <vkgrad/codegen/lowering.hpp>
#include <vkgrad/core/symbolic.hpp>

namespace vkg::lowering {

IndexExpr Lowerer::address_forced(const UOp* view_node, const Combo& c,
                                  const std::vector<UOpPtr>& forced) const {
  const ShapeTracker& st = k_.view(view_node);
  std::vector<UOpPtr> idxs;
  for (size_t i = 0; i < st.shape().size(); ++i) {
    if (st.shape()[i] == 1)
      idxs.push_back(int_const(0));
    else if (forced[i])
      idxs.push_back(forced[i]);
    else if (axis_idx_[i])
      idxs.push_back(axis_idx_[i]);
    else
      idxs.push_back(int_const(c[i]));
  }
  return st.expr_idxs(idxs);
}

bool Lowerer::valid_across_local_axes(const UOp* view_node, const Combo& c,
                                      std::vector<UOpPtr> forced) const {
  // Hash-consed: equal validity expressions are one node. Every index, not only the ends: a mask
  // 4 <= m < 12 is false at both ends of a tile of 16.
  const Shape& shape = k_.view(view_node).shape();
  std::optional<UOpPtr> mask;
  for (size_t a = 0; a < shape.size(); ++a) {
    if (k_.kinds()[a] != AxisKind::Local || shape[a] == 1 || forced[a]) continue;
    for (int64_t i = 0; i < k_.full_shape()[a]; ++i) {
      forced[a] = int_const(i);
      const UOpPtr valid = address_forced(view_node, c, forced).valid;
      if (mask && valid != *mask) return false;
      mask = valid;
    }
    forced[a] = nullptr;
  }
  return true;
}

bool Lowerer::valid_across_register_axes(const UOp* view_node,
                                         const std::vector<size_t>& tile_axes) const {
  const Shape& shape = k_.view(view_node).shape();
  const Combo zero(k_.full_shape().size(), 0);
  std::vector<UOpPtr> forced(shape.size());
  const UOpPtr mask = address_forced(view_node, zero, forced).valid;
  for (size_t a = 0; a < shape.size(); ++a) {
    const AxisKind kind = k_.kinds()[a];
    if ((kind != AxisKind::Upcast && kind != AxisKind::Unroll) || shape[a] == 1 ||
        std::find(tile_axes.begin(), tile_axes.end(), a) != tile_axes.end())
      continue;
    for (int64_t i = 1; i < k_.full_shape()[a]; ++i) {
      forced[a] = int_const(i);
      if (address_forced(view_node, zero, forced).valid != mask) return false;
    }
    forced[a] = nullptr;
  }
  return true;
}

void Lowerer::stage_tiles() {
  const int64_t n_local = lane_->src[0]->const_int();
  std::vector<UOpPtr> stores;
  std::unordered_set<const UOp*> in_reduce;
  for (const UOp* u : toposort(k_.ast().get()))
    if (u->op == Ops::REDUCE_AXIS)
      for (const UOp* x : toposort(u->src[0].get())) in_reduce.insert(x);
  for (const UOp* load : toposort(k_.ast().get())) {
    if (load->op != Ops::LOAD || !in_reduce.count(load) || load->dtype.count != 1 ||
        is_indexed_load(load))
      continue;
    const ShapeTracker& st = k_.view(load->src[1].get());
    const std::vector<std::optional<int64_t>> strides = st.real_strides(true);
    std::vector<size_t> tile_axes;
    bool shared = false;
    for (size_t a = 0; a < strides.size(); ++a) {
      const AxisKind kind = k_.kinds()[a];
      const bool spans = st.shape()[a] > 1 && strides[a] != 0;
      if (kind == AxisKind::Local && !spans && k_.full_shape()[a] > 1) shared = true;
      if (spans &&
          (kind == AxisKind::Local || kind == AxisKind::Upcast || kind == AxisKind::Unroll))
        tile_axes.push_back(a);
    }
    if (!shared) continue;
    // The shared axes must not change which elements are valid (a mask along a broadcast axis).
    const Combo zero(k_.full_shape().size(), 0);
    if (!valid_across_local_axes(load->src[1].get(), zero, std::vector<UOpPtr>(strides.size())))
      continue;
    // Nor the register axes outside the tile (stride 0: one value for all their indexes, but the
    // copy is made at combo zero, so a mask along one, e.g. rows 4..11 of an upcast row band,
    // would give index 0's validity to every index).
    if (!valid_across_register_axes(load->src[1].get(), tile_axes)) continue;
    Tile tile;
    int64_t size = 1;
    for (auto it = tile_axes.rbegin(); it != tile_axes.rend(); ++it) {
      tile.axes.insert(tile.axes.begin(), {*it, size});
      size *= k_.full_shape()[*it];
    }
    tile.shared = UOp::make(Ops::DEFINE_LOCAL, load->dtype.ptr(AddrSpace::Local), {},
                            std::vector<int64_t>{next_local_++, size});
    for (int64_t round = 0; round * n_local < size; ++round) {
      const UOpPtr t = simplify(lane_ + round * n_local);
      const UOpPtr inside =
          (round + 1) * n_local > size ? simplify(t->lt(size)) : UOp::const_(dtypes::bool_, true);
      std::vector<UOpPtr> forced(strides.size());
      for (const auto& [axis, stride] : tile.axes)
        forced[axis] = simplify((t / stride) % k_.full_shape()[axis]);
      for (size_t a = 0; a < strides.size(); ++a)
        if (!forced[a] && k_.kinds()[a] == AxisKind::Local) forced[a] = int_const(0);
      auto [index, valid] = address_forced(load->src[1].get(), zero, forced);
      const UOpPtr ok = simplify(valid->alu(Ops::AND, {inside}));
      const UOpPtr v =
          is_true(ok) ? UOp::make(Ops::LOAD, load->dtype, {indexed(load->src[0], index, ok)})
                      : UOp::make(Ops::LOAD, load->dtype,
                                  {indexed(load->src[0], index, ok), UOp::const_(load->dtype, 0)});
      stores.push_back(UOp::make(Ops::STORE, dtypes::void_, {indexed(tile.shared, t, inside), v}));
    }
    tiles_.emplace(load, std::move(tile));
  }
  if (!stores.empty()) tiles_ready_ = UOp::make(Ops::BARRIER, dtypes::void_, stores);
}

UOpPtr Lowerer::from_tile(const UOp* load, const Combo& c) {
  auto it = tiles_.find(load);
  if (it == tiles_.end()) return nullptr;
  UOpPtr t = int_const(0);
  for (const auto& [axis, stride] : it->second.axes)
    t = t + (k_.kinds()[axis] == AxisKind::Local ? axis_idx_[axis] : int_const(c[axis])) * stride;
  const UOpPtr v = UOp::make(
      Ops::LOAD, load->dtype,
      {indexed(it->second.shared, simplify(t), UOp::const_(dtypes::bool_, true)), tiles_ready_});
  if (std::find(tile_reads_.begin(), tile_reads_.end(), v) == tile_reads_.end())
    tile_reads_.push_back(v);
  return v;
}

UOpPtr Lowerer::shuffle(const UOpPtr& x, int64_t lane) {
  return UOp::make(Ops::SHUFFLE, x->dtype, {x}, lane);
}

UOpPtr Lowerer::shuffled(const UOp* load, const Combo& c) {
  const int s = k_.shuffle_axis();
  // subgroupShuffle of 32-bit values only (smaller and wider types need extended-types
  // features); other loads are read per lane as usual.
  if (s < 0 || load->dtype.scalar_size() != 4 || load->dtype.is_bool() || is_indexed_load(load))
    return nullptr;
  const ShapeTracker& st = k_.view(load->src[1].get());
  const std::vector<std::optional<int64_t>> strides = st.real_strides(true);
  for (size_t a = 0; a < strides.size(); ++a)
    if (k_.kinds()[a] == AxisKind::Local && st.shape()[a] > 1 && strides[a] != 0) return nullptr;
  if (st.shape()[size_t(s)] == 1 || strides[size_t(s)] == 0) return nullptr;
  // Nor its mask: lane k computes the validity at its own local index, not the reader's. A
  // replicate pad's pieces are masked along a local axis their stride 0 ignores (the lanes read
  // 0 where the reader's piece was valid).
  std::vector<UOpPtr> at_lane(strides.size());
  at_lane[size_t(s)] = lane_;
  if (!valid_across_local_axes(load->src[1].get(), c, at_lane)) return nullptr;
  if (UOpPtr lane = unrolled_vector_lane(load, c, s)) return lane;
  auto [index, valid] = address(load->src[1].get(), c, s);
  UOpPtr idx = indexed(load->src[0], index, valid);
  const UOpPtr x = is_true(valid)
                       ? UOp::make(Ops::LOAD, load->dtype, {idx})
                       : UOp::make(Ops::LOAD, load->dtype, {idx, UOp::const_(load->dtype, 0)});
  return shuffle(x, c[size_t(s)]);
}

UOpPtr Lowerer::group_reduce(const UOp* n, const Combo& c, const UOpPtr& partial) {
  const std::vector<Combo> outs = output_combos(Combo(k_.full_shape().size(), 0));
  const int64_t u = int64_t(outs.size());
  const Ops op = n->arg_as<ReduceArg>().op;
  const DType d = n->dtype;
  if (group_size_ == 1) return partial;
  // This reduce's partials at every combo (value() memoizes them: built once).
  std::vector<UOpPtr> v;
  int64_t mine = -1;
  for (const Combo& o : outs) {
    Combo full = c;
    for (size_t a : expanded_)
      if (is_output_axis(a)) full[a] = o[a];
    if (full == c) mine = int64_t(v.size());
    v.push_back(full == c ? partial : value_partial(n, full));
  }
  const int64_t n_local = lane_->src[0]->const_int();
  const UOpPtr temp = UOp::make(Ops::DEFINE_LOCAL, d.ptr(AddrSpace::Local), {},
                                std::vector<int64_t>{next_local_++, n_local * u});
  auto at = [&](const UOpPtr& slot, int64_t k, const UOpPtr& valid) {
    return indexed(temp, simplify(slot * u + k), valid);
  };
  std::vector<UOpPtr> stores;
  for (int64_t k = 0; k < u; ++k)
    stores.push_back(UOp::make(Ops::STORE, dtypes::void_,
                               {at(lane_, k, UOp::const_(dtypes::bool_, true)), v[size_t(k)]}));
  UOpPtr barrier = UOp::make(Ops::BARRIER, dtypes::void_, stores);
  int64_t top = 1;
  while (top < group_size_) top *= 2;
  for (int64_t s = top / 2; s >= 1; s /= 2) {
    const UOpPtr takes =
        simplify(group_lane_->lt(s)->alu(Ops::AND, {(group_lane_ + s)->lt(group_size_)}));
    const UOpPtr identity = UOp::const_(d, reduce_identity(op, d));
    for (int64_t k = 0; k < u; ++k) {
      const UOpPtr other = UOp::make(Ops::LOAD, d, {at(lane_ + s, k, takes), identity, barrier});
      v[size_t(k)] = v[size_t(k)]->alu(op, {other});
    }
    if (s == 1) break;
    stores.clear();
    for (int64_t k = 0; k < u; ++k)
      stores.push_back(UOp::make(Ops::STORE, dtypes::void_,
                                 {at(lane_, k, simplify(group_lane_->lt(s))), v[size_t(k)]}));
    barrier = UOp::make(Ops::BARRIER, dtypes::void_, stores);
  }
  // The other combos' results are the same tree's: remember them, so that it is built once.
  for (size_t k = 0; k < outs.size(); ++k) {
    Combo full = c;
    for (size_t a : expanded_)
      if (is_output_axis(a)) full[a] = outs[k][a];
    memo_[std::pair{n, full}] = v[k];
  }
  return v[size_t(mine)];
}

}  // namespace vkg::lowering
