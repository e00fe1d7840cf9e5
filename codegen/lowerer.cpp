#include <vkgrad/codegen/lowerer.hpp>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
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
    std::vector<size_t> global, local, group;
    for (size_t i = 0; i < shape.size(); ++i) {
      switch (kinds[i]) {
        case AxisKind::Global: global.push_back(i); break;
        case AxisKind::Local: local.push_back(i); break;
        case AxisKind::Reduce:
          axis_idx_[i] = UOp::make(Ops::RANGE, dtypes::int32, {int_const(shape[i])}, int64_t(i));
          break;
        case AxisKind::Group: group.push_back(i); break;
        case AxisKind::Upcast:
        case AxisKind::Unroll:
        case AxisKind::Shuffle: expanded_.push_back(i); break;
      }
    }
    int64_t n_global = 1, n_local = 1;
    for (size_t i : global) n_global *= shape[i];
    for (size_t i : local) n_local *= shape[i];
    for (size_t i : group) group_size_ *= shape[i];
    if (const int s = k.shuffle_axis(); s >= 0) {
      if (!group.empty() || local.empty() || n_local != shape[size_t(s)] || k.staged())
        throw Error("lower: a SHUFFLE axis needs a workgroup of exactly its size (one subgroup) "
                    "and no GROUP axes or STAGE: kernel " + k.describe());
    }
    if (k.staged() && (local.empty() || !group.empty()))
      throw Error("lower: STAGE needs local axes (the invocations that share a tile) and no GROUP "
                  "axes: kernel " + k.describe());
    // Group axes are the innermost part of the local id: a workgroup's invocations that share
    // an output are neighbours, lidx = (local part) * group_size + group part.
    local.insert(local.end(), group.begin(), group.end());
    n_local *= group_size_;
    if (local.empty()) {
      // One invocation per output element, in workgroups of a fixed size.
      unflatten(special("idx0", n_global), global);
      const int64_t wg = std::max<int64_t>(1, std::min(options.default_workgroup, n_global));
      program_.local_size = {wg, 1, 1};
      program_.global_size = {(n_global + wg - 1) / wg, 1, 1};
    } else {
      unflatten(special("gidx0", n_global), global);
      lane_ = special("lidx0", n_local);
      unflatten(lane_, local);
      if (!group.empty()) group_lane_ = simplify(lane_ % group_size_);
      program_.local_size = {n_local, 1, 1};
      program_.global_size = {n_global, 1, 1};
    }
  }

  Program run(const std::vector<int64_t>& counts) {
    if (k_.staged()) stage_tiles();
    std::vector<UOpPtr> stores;
    for (const UOpPtr& store : k_.ast()->src) {
      if (store->op != Ops::STORE) throw Error("Kernel: SINK sources must be STOREs");
      const std::vector<Combo> all = output_combos(Combo(k_.full_shape().size(), 0));
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
              const UOpPtr lane = UOp::make(Ops::GEP, v->dtype.base(), {v}, std::vector<int64_t>{int64_t(k)});
              stores.push_back(UOp::make(Ops::STORE, dtypes::void_, {idx[k], lane}));
            }
            continue;
          }
        for (size_t k = 0; k < width; ++k) stores.push_back(UOp::make(Ops::STORE, dtypes::void_, {idx[k], values[k]}));
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
  std::map<std::pair<const UOp*, Combo>, UOpPtr> partials_;
  // STAGE: per staged load, its shared tile and the axes it spans (row-major, with strides).
  struct Tile {
    UOpPtr shared;
    std::vector<std::pair<size_t, int64_t>> axes;  // (axis, stride in the tile)
  };
  std::map<const UOp*, Tile> tiles_;
  UOpPtr tiles_ready_;             // the BARRIER after the tiles' stores
  std::vector<UOpPtr> tile_reads_;  // every load from a tile (the end BARRIER's sources)
  UOpPtr lane_;        // the flat local id (lidx0), the subgroup lane of SHUFFLE kernels
  UOpPtr group_lane_;  // the invocation's place along the group axes (GROUP kernels)
  int64_t group_size_ = 1;
  int64_t next_local_ = 0;

  bool is_output_axis(size_t axis) const {
    return k_.kinds()[axis] == AxisKind::Upcast || k_.kinds()[axis] == AxisKind::Shuffle;
  }

  // The lanes of one vector store: the innermost upcast axis when it has 2..4 elements (GLSL's
  // vector widths). Group results come out of shared memory one element at a time: scalar.
  size_t vector_width() const {
    if (group_lane_) return 1;
    for (auto it = expanded_.rbegin(); it != expanded_.rend(); ++it)
      if (is_output_axis(*it)) {
        if (k_.kinds()[*it] == AxisKind::Shuffle) return 1;
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

  // Every assignment of values to the unroll axes (unroll) or the upcast and shuffle axes (not
  // unroll), on top of `base`.
  std::vector<Combo> combos(bool unroll, const Combo& base) const {
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
  std::vector<Combo> output_combos(const Combo& base) const { return combos(false, base); }
  std::vector<Combo> unroll_combos(const Combo& base) const { return combos(true, base); }

  // Index and validity of the element a VIEW addresses at this combo. An axis the view has size 1
  // along (a reduce's output along the reduced axes) is index 0 there. The axis `at_lane`, if
  // given, takes the invocation's lane instead of its combo value.
  IndexExpr address(const UOp* view_node, const Combo& c, int at_lane = -1) const {
    const ShapeTracker& st = k_.view(view_node);
    std::vector<UOpPtr> idxs;
    for (size_t i = 0; i < st.shape().size(); ++i) {
      if (st.shape()[i] == 1) idxs.push_back(int_const(0));
      else if (int(i) == at_lane) idxs.push_back(lane_);
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
        if (UOpPtr staged = from_tile(n, c)) return staged;
        if (UOpPtr lane = shuffled(n, c)) return lane;
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
        const UOpPtr partial = value_partial(n, c);
        return group_lane_ ? group_reduce(n, c, partial) : partial;
      }
      default: {
        std::vector<UOpPtr> src;
        for (const UOpPtr& s : n->src) src.push_back(value(s.get(), c));
        return UOp::make(n->op, n->dtype, std::move(src), n->arg);
      }
    }
  }

  // Index and validity at combo c with some axes' indexes given (`forced[axis]`, else as usual).
  IndexExpr address_forced(const UOp* view_node, const Combo& c, const std::vector<UOpPtr>& forced) const {
    const ShapeTracker& st = k_.view(view_node);
    std::vector<UOpPtr> idxs;
    for (size_t i = 0; i < st.shape().size(); ++i) {
      if (st.shape()[i] == 1) idxs.push_back(int_const(0));
      else if (forced[i]) idxs.push_back(forced[i]);
      else if (axis_idx_[i]) idxs.push_back(axis_idx_[i]);
      else idxs.push_back(int_const(c[i]));
    }
    return st.expr_idxs(idxs);
  }

  // STAGE: finds the loads inside reduces that the workgroup shares and writes the copy of each
  // one's tile for this iteration: invocation `lane` copies tile elements lane, lane + n_local,
  // ... (the last round masked where the tile ends), each from the global address of the tile
  // coordinates it stands for. One BARRIER after all of them.
  void stage_tiles() {
    const int64_t n_local = lane_->src[0]->const_int();
    std::vector<UOpPtr> stores;
    std::unordered_set<const UOp*> in_reduce;
    for (const UOp* u : toposort(k_.ast().get()))
      if (u->op == Ops::REDUCE_AXIS)
        for (const UOp* x : toposort(u->src[0].get())) in_reduce.insert(x);
    for (const UOp* load : toposort(k_.ast().get())) {
      if (load->op != Ops::LOAD || !in_reduce.count(load) || load->dtype.count != 1) continue;
      const ShapeTracker& st = k_.view(load->src[1].get());
      const std::vector<std::optional<int64_t>> strides = st.real_strides(true);
      std::vector<size_t> tile_axes;
      bool shared = false;
      for (size_t a = 0; a < strides.size(); ++a) {
        const AxisKind kind = k_.kinds()[a];
        const bool spans = st.shape()[a] > 1 && strides[a] != 0;
        if (kind == AxisKind::Local && !spans && k_.full_shape()[a] > 1) shared = true;
        if (spans && (kind == AxisKind::Local || kind == AxisKind::Upcast || kind == AxisKind::Unroll))
          tile_axes.push_back(a);
      }
      if (!shared) continue;
      // The shared axes must not change which elements are valid (a mask along a broadcast axis).
      std::vector<UOpPtr> lo(strides.size()), hi(strides.size());
      for (size_t a = 0; a < strides.size(); ++a)
        if (k_.kinds()[a] == AxisKind::Local) lo[a] = int_const(0), hi[a] = int_const(k_.full_shape()[a] - 1);
      const Combo zero(k_.full_shape().size(), 0);
      if (address_forced(load->src[1].get(), zero, lo).valid != address_forced(load->src[1].get(), zero, hi).valid)
        continue;
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
        const UOpPtr inside = (round + 1) * n_local > size ? simplify(t->lt(size)) : UOp::const_(dtypes::bool_, true);
        std::vector<UOpPtr> forced(strides.size());
        for (const auto& [axis, stride] : tile.axes) forced[axis] = simplify((t / stride) % k_.full_shape()[axis]);
        for (size_t a = 0; a < strides.size(); ++a)
          if (!forced[a] && k_.kinds()[a] == AxisKind::Local) forced[a] = int_const(0);
        auto [index, valid] = address_forced(load->src[1].get(), zero, forced);
        const UOpPtr ok = simplify(valid->alu(Ops::AND, {inside}));
        const UOpPtr v = is_true(ok) ? UOp::make(Ops::LOAD, load->dtype, {indexed(load->src[0], index, ok)})
                                     : UOp::make(Ops::LOAD, load->dtype, {indexed(load->src[0], index, ok), UOp::const_(load->dtype, 0)});
        stores.push_back(UOp::make(Ops::STORE, dtypes::void_, {indexed(tile.shared, t, inside), v}));
      }
      tiles_.emplace(load, std::move(tile));
    }
    if (!stores.empty()) tiles_ready_ = UOp::make(Ops::BARRIER, dtypes::void_, stores);
  }

  // A staged load's value at combo c: its element of the tile, after the tiles are ready.
  UOpPtr from_tile(const UOp* load, const Combo& c) {
    auto it = tiles_.find(load);
    if (it == tiles_.end()) return nullptr;
    UOpPtr t = int_const(0);
    for (const auto& [axis, stride] : it->second.axes)
      t = t + (k_.kinds()[axis] == AxisKind::Local ? axis_idx_[axis] : int_const(c[axis])) * stride;
    const UOpPtr v = UOp::make(Ops::LOAD, load->dtype, {indexed(it->second.shared, simplify(t), UOp::const_(dtypes::bool_, true)), tiles_ready_});
    if (std::find(tile_reads_.begin(), tile_reads_.end(), v) == tile_reads_.end()) tile_reads_.push_back(v);
    return v;
  }

  // What this invocation's loops add up for a reduce at combo c (all of it, without GROUP axes).
  UOpPtr value_partial(const UOp* n, const Combo& c) {
    auto key = std::pair{n, c};
    if (auto it = partials_.find(key); it != partials_.end()) return it->second;
    const Ops op = n->arg_as<ReduceArg>().op;
    std::vector<UOpPtr> acc_src{UOp::const_(n->dtype, reduce_identity(op, n->dtype))};
    for (const UOpPtr& r : axis_idx_)
      if (r && r->op == Ops::RANGE) acc_src.push_back(r);
    const UOpPtr acc = UOp::make(Ops::DEFINE_ACC, n->dtype, std::move(acc_src), next_acc_++);
    UOpPtr total = acc;
    for (const Combo& u : unroll_combos(c)) total = total->alu(op, {value(n->src[0].get(), u)});
    return partials_[key] = UOp::make(Ops::ASSIGN, n->dtype, {acc, total});
  }

  // A load whose elements are consecutive along the innermost unroll axis (a row of A in a
  // matmul's reduce) is read once as a vector for all of that axis' values, and each unrolled
  // copy takes its lane: one vector access instead of 2..4 scalar ones. nullptr where it does
  // not apply. With `at_lane`, the vector is the one at the invocation's lane along that axis.
  UOpPtr unrolled_vector_lane(const UOp* load, const Combo& c, int at_lane = -1) {
    const UOpPtr v = unrolled_vector(load, c, at_lane);
    if (!v) return nullptr;
    const UOpPtr x = at_lane >= 0 ? shuffle(v, c[size_t(at_lane)]) : v;
    return UOp::make(Ops::GEP, load->dtype, {x}, std::vector<int64_t>{c[size_t(innermost_unroll())]});
  }

  int innermost_unroll() const {
    int axis = -1;
    for (size_t a : expanded_)
      if (k_.kinds()[a] == AxisKind::Unroll) axis = int(a);
    return axis;
  }

  // The vector LOAD of unrolled_vector_lane (nullptr where the lanes are not consecutive).
  UOpPtr unrolled_vector(const UOp* load, const Combo& c, int at_lane) {
    const int axis = innermost_unroll();
    if (axis < 0) return nullptr;
    const int64_t w = k_.full_shape()[size_t(axis)];
    const DType d = load->dtype;
    if (w < 2 || w > 4 || d.count != 1 || d.is_bool() || d.scalar == Scalar::BFloat16) return nullptr;
    Combo base = c;
    base[size_t(axis)] = 0;
    if (at_lane >= 0) base[size_t(at_lane)] = -1;  // one load for every value of the lane axis
    auto key = std::pair{load, base};
    auto it = unrolled_loads_.find(key);
    if (it == unrolled_loads_.end()) {
      std::vector<UOpPtr> idx;
      for (int64_t j = 0; j < w; ++j) {
        Combo lane = base;
        lane[size_t(axis)] = j;
        auto [index, valid] = address(load->src[1].get(), lane, at_lane);
        idx.push_back(indexed(load->src[0], index, valid));
      }
      UOpPtr v = LaneVectorizer::consecutive(idx) ? UOp::make(Ops::LOAD, d.vec(int(w)), {idx[0]}) : nullptr;
      it = unrolled_loads_.emplace(std::move(key), v).first;
    }
    return it->second;
  }

  static UOpPtr shuffle(const UOpPtr& x, int64_t lane) {
    return UOp::make(Ops::SHUFFLE, x->dtype, {x}, lane);
  }

  // A load on the lanes of the SHUFFLE axis (see AxisKind::Shuffle): the same for every
  // invocation of the workgroup (stride 0 along every local axis) and different along the
  // shuffle axis. Each invocation loads the element at its own lane, and the value at this
  // combo is the shuffle from the lane that loaded it. nullptr where it does not apply.
  UOpPtr shuffled(const UOp* load, const Combo& c) {
    const int s = k_.shuffle_axis();
    // subgroupShuffle of 32-bit values only (smaller and wider types need extended-types
    // features); other loads are read per lane as usual.
    if (s < 0 || load->dtype.scalar_size() != 4 || load->dtype.is_bool()) return nullptr;
    const ShapeTracker& st = k_.view(load->src[1].get());
    const std::vector<std::optional<int64_t>> strides = st.real_strides(true);
    for (size_t a = 0; a < strides.size(); ++a)
      if (k_.kinds()[a] == AxisKind::Local && st.shape()[a] > 1 && strides[a] != 0) return nullptr;
    if (st.shape()[size_t(s)] == 1 || strides[size_t(s)] == 0) return nullptr;
    if (UOpPtr lane = unrolled_vector_lane(load, c, s)) return lane;
    auto [index, valid] = address(load->src[1].get(), c, s);
    UOpPtr idx = indexed(load->src[0], index, valid);
    const UOpPtr x = is_true(valid) ? UOp::make(Ops::LOAD, load->dtype, {idx})
                                    : UOp::make(Ops::LOAD, load->dtype, {idx, UOp::const_(load->dtype, 0)});
    return shuffle(x, c[size_t(s)]);
  }

  // The reduce's value at combo c of a GROUP kernel, from `partial`, this invocation's share:
  // every invocation stores its partials (one per output combo) to shared memory, then a tree
  // halves the invocations that still add each step (invocation g takes g + s's value while
  // g < s), one BARRIER a step; the group's first invocation ends with the whole. No IF is
  // needed: the loads and stores of invocations that sit a step out are masked, so every
  // invocation reaches every BARRIER.
  UOpPtr group_reduce(const UOp* n, const Combo& c, const UOpPtr& partial) {
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
      stores.push_back(UOp::make(Ops::STORE, dtypes::void_, {at(lane_, k, UOp::const_(dtypes::bool_, true)), v[size_t(k)]}));
    UOpPtr barrier = UOp::make(Ops::BARRIER, dtypes::void_, stores);
    int64_t top = 1;
    while (top < group_size_) top *= 2;
    for (int64_t s = top / 2; s >= 1; s /= 2) {
      const UOpPtr takes = simplify(group_lane_->lt(s)->alu(Ops::AND, {(group_lane_ + s)->lt(group_size_)}));
      const UOpPtr identity = UOp::const_(d, reduce_identity(op, d));
      for (int64_t k = 0; k < u; ++k) {
        const UOpPtr other = UOp::make(Ops::LOAD, d, {at(lane_ + s, k, takes), identity, barrier});
        v[size_t(k)] = v[size_t(k)]->alu(op, {other});
      }
      if (s == 1) break;
      stores.clear();
      for (int64_t k = 0; k < u; ++k)
        stores.push_back(UOp::make(Ops::STORE, dtypes::void_, {at(lane_, k, simplify(group_lane_->lt(s))), v[size_t(k)]}));
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
