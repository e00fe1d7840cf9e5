// The Lowerer behind lower() (codegen/lowerer.hpp), in two files: lowerer.cpp maps axes to
// invocation ids and loops and lowers loads, stores and reduces over the upcast and unroll
// combos; lowerer_workgroup.cpp holds what a workgroup's invocations do together (SHUFFLE loads,
// GROUP reductions through shared memory, STAGE tiles). Internal to codegen.
#pragma once
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include <vkgrad/codegen/kernel.hpp>
#include <vkgrad/codegen/lowerer.hpp>
#include <vkgrad/codegen/program.hpp>
#include <vkgrad/codegen/vectorize.hpp>
#include <vkgrad/core/shape_tracker.hpp>

namespace vkg::lowering {

inline UOpPtr int_const(int64_t v) { return UOp::const_(dtypes::int32, v); }
inline bool is_true(const UOpPtr& u) { return u->op == Ops::CONST && u->const_value() != 0; }

// The value a reduce's accumulator starts from.
Scalarish reduce_identity(Ops op, DType d);

// Values of the upcast and unroll axes (one per axis of the kernel; other axes hold 0).
using Combo = std::vector<int64_t>;

class Lowerer {
 public:
  Lowerer(const Kernel& k, const LowerOptions& options);

  Program run(const std::vector<int64_t>& counts);

 private:
  const Kernel& k_;
  Program program_;
  std::vector<UOpPtr> axis_idx_;  // per axis: its index expression (upcast/unroll: none)
  std::vector<size_t> expanded_;  // upcast and unroll axes
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
  UOpPtr tiles_ready_;              // the BARRIER after the tiles' stores
  std::vector<UOpPtr> tile_reads_;  // every load from a tile (the end BARRIER's sources)
  UOpPtr lane_;        // the flat local id (lidx0), the subgroup lane of SHUFFLE kernels
  UOpPtr group_lane_;  // the invocation's place along the group axes (GROUP kernels)
  int64_t group_size_ = 1;
  int64_t next_local_ = 0;
  // Symbolic kernels launch for the largest sizes; `guard_` (idx0 < the bound number of outputs)
  // masks every load and store of the invocations past the bound sizes. nullptr otherwise.
  UOpPtr guard_;

  // The size of axis i: its expression in a symbolic kernel, else the number.
  UOpPtr axis_size(size_t i) const;

  bool is_output_axis(size_t axis) const;

  // The lanes of one vector store: the innermost upcast axis when it has 2..4 elements (GLSL's
  // vector widths). Group results come out of shared memory one element at a time: scalar.
  size_t vector_width() const;

  static UOpPtr special(const char* name, int64_t size);

  // Row-major split of one flat id over `axes`.
  void unflatten(const UOpPtr& flat, const std::vector<size_t>& axes);

  // Every assignment of values to the unroll axes (unroll) or the upcast and shuffle axes (not
  // unroll), on top of `base`.
  std::vector<Combo> combos(bool unroll, const Combo& base) const;
  std::vector<Combo> output_combos(const Combo& base) const { return combos(false, base); }
  std::vector<Combo> unroll_combos(const Combo& base) const { return combos(true, base); }

  // Index and validity of the element a VIEW addresses at this combo. An axis the view has size 1
  // along (a reduce's output along the reduced axes) is index 0 there. The axis `at_lane`, if
  // given, takes the invocation's lane instead of its combo value.
  IndexExpr address(const UOp* view_node, const Combo& c, int at_lane = -1) const;

  // A load's address at combo c: its view's, plus, for an indexed load (is_indexed_load), each
  // index value times its axis' stride, valid where every index is within its axis.
  IndexExpr load_address(const UOp* load, const Combo& c);

  static UOpPtr indexed(const UOpPtr& global, const UOpPtr& index, const UOpPtr& valid);

  UOpPtr value(const UOp* n, const Combo& c);

  UOpPtr value_uncached(const UOp* n, const Combo& c);

  // What this invocation's loops add up for a reduce at combo c (all of it, without GROUP axes).
  UOpPtr value_partial(const UOp* n, const Combo& c);
  // The reduced value of a reduce whose every step sees the same value, else null.
  UOpPtr invariant_value(const UOp* n, const Combo& c);

  // A load whose elements are consecutive along the innermost unroll axis (a row of A in a
  // matmul's reduce), or else along an upcast axis (a matmul's weight gradient reads both
  // operands along their output axes), is read once as a vector for all of that axis' values,
  // and each copy takes its lane: one vector access instead of 2..4 scalar ones (on Lavapipe
  // every access is a loop over the SIMD lanes, whatever its width). nullptr where it does not
  // apply. With `at_lane`, the vector is the one at the invocation's lane along that axis.
  UOpPtr unrolled_vector_lane(const UOp* load, const Combo& c, int at_lane = -1);

  int innermost_unroll() const;

  // The axes unrolled_vector tries, in order: the innermost unroll axis, then the upcast axes
  // from the innermost out, less the one the LaneVectorizer takes (vector_width).
  std::vector<int> vector_axes() const;

  // The vector LOAD of unrolled_vector_lane and the axis it runs along ({nullptr, -1} where no
  // axis has consecutive lanes).
  std::pair<UOpPtr, int> unrolled_vector(const UOp* load, const Combo& c, int at_lane);

  // Arithmetic of one launch, as the AST counts it: each op once per element it is computed
  // for (the full shape below a reduce, the output shape above it).
  int64_t estimate_flops() const;

  // ---- lowerer_workgroup.cpp: what the workgroup's invocations do together ----

  static UOpPtr shuffle(const UOpPtr& x, int64_t lane);

  // A load on the lanes of the SHUFFLE axis (see AxisKind::Shuffle): the same for every
  // invocation of the workgroup (stride 0 along every local axis) and different along the
  // shuffle axis. Each invocation loads the element at its own lane, and the value at this
  // combo is the shuffle from the lane that loaded it. nullptr where it does not apply.
  UOpPtr shuffled(const UOp* load, const Combo& c);

  // The reduce's value at combo c of a GROUP kernel, from `partial`, this invocation's share:
  // every invocation stores its partials (one per output combo) to shared memory, then a tree
  // halves the invocations that still add each step (invocation g takes g + s's value while
  // g < s), one BARRIER a step; the group's first invocation ends with the whole. No IF is
  // needed: the loads and stores of invocations that sit a step out are masked, so every
  // invocation reaches every BARRIER.
  UOpPtr group_reduce(const UOp* n, const Combo& c, const UOpPtr& partial);

  // Index and validity at combo c with some axes' indexes given (`forced[axis]`, else as usual).
  IndexExpr address_forced(const UOp* view_node, const Combo& c,
                           const std::vector<UOpPtr>& forced) const;
  // Whether that validity is the same expression at every index of every local axis not forced
  // (a load the workgroup shares must not be masked along the axes it is shared on).
  bool valid_across_local_axes(const UOp* view_node, const Combo& c,
                               std::vector<UOpPtr> forced) const;
  // Whether it is the same at every index of every Upcast/Unroll axis outside `tile_axes` (a
  // staged tile is copied at combo zero).
  bool valid_across_register_axes(const UOp* view_node, const std::vector<size_t>& tile_axes) const;

  // STAGE: finds the loads inside reduces that the workgroup shares and writes the copy of each
  // one's tile for this iteration: invocation `lane` copies tile elements lane, lane + n_local,
  // ... (the last round masked where the tile ends), each from the global address of the tile
  // coordinates it stands for. One BARRIER after all of them.
  void stage_tiles();

  // A staged load's value at combo c: its element of the tile, after the tiles are ready.
  UOpPtr from_tile(const UOp* load, const Combo& c);
};

}  // namespace vkg::lowering
