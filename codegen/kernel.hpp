// Kernel: one scheduled kernel AST prepared for lowering. Every VIEW in the AST is brought to a
// common shape whose axes each have a kind (global, local, reduce, ...), reduce axes last, with
// adjacent axes merged where every view allows. Opts then split axes into new kinds; they are
// explicit, printable actions, applied by the heuristics (codegen/heuristics.hpp) or by hand.
//
//   Kernel k(item.ast);          // full_shape (64, 64, 64): global, global, reduce
//   k.apply({OptOp::UPCAST, 0, 4});
//   k.apply({OptOp::UNROLL, 2, 4});
//   Program p = lower(k, counts);
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <vkgrad/core/shape.hpp>
#include <vkgrad/core/shape_tracker.hpp>
#include <vkgrad/core/uop.hpp>

namespace vkg {

// What an axis of the kernel's shape becomes when lowered.
//   Global: spread over invocations.  Local: over the invocations of one workgroup.
//   Reduce: a loop.  Group: a reduce axis split across a workgroup's invocations, combined through
//   shared memory.  Upcast: an output axis unrolled into registers.  Unroll: a reduce axis
//   unrolled inside the loop body.  Shuffle: an upcast axis whose broadcast loads are spread over
//   the lanes of a subgroup: a load that is the same for every lane (constant along the local
//   axes) but varies along this axis is read once per lane, lane j reading element j, and
//   subgroupShuffle hands each element to every lane. The workgroup must be one subgroup of as
//   many invocations as the axis has elements (the lowerer checks the local axes, the renderer
//   the device). On CPU-like devices (Lavapipe) a load whose address differs per lane is a loop
//   over the lanes while a shuffle by a constant lane is one vector permute: a matmul's A tile
//   costs one load instead of 8 (bench/tensor_opts_bench.cpp).
enum class AxisKind : uint8_t { Global, Local, Reduce, Group, Upcast, Unroll, Shuffle };

enum class OptOp : uint8_t { LOCAL, UPCAST, UNROLL, GROUP, SHUFFLE, STAGE };

// Split `axis` so that its last `amount` elements become a new axis of the op's kind:
// LOCAL and UPCAST take a global (or local, for UPCAST) axis, SHUFFLE a global one (at most one
// per kernel), UNROLL and GROUP a reduce axis. STAGE splits nothing: it names an unroll axis
// (amount: its size) and makes the kernel stage through shared memory, once per iteration of the
// reduce loop, every load inside the reduce that the workgroup's invocations share (constant
// along some local axis): they copy the tile (its extent along the local, upcast and unroll
// axes) cooperatively, BARRIER, read it from shared memory, BARRIER. Classic shared-memory
// tiling for GPUs; on Lavapipe shared memory and barriers are slow. Axes are kept in the order global, local, reduce,
// group, unroll, upcast and shuffle (these two as one class, in the order they were made): the
// new axis moves to its kind's place, and the numbers of axes of earlier kinds do not change.
struct Opt {
  OptOp op;
  int axis;
  int64_t amount;
  bool operator==(const Opt&) const = default;
  std::string str() const;  // "UPCAST(axis=0, amount=4)"
};

class Kernel {
 public:
  explicit Kernel(UOpPtr ast);

  const UOpPtr& ast() const { return ast_; }
  const Shape& full_shape() const { return full_shape_; }
  // A kernel over symbolic sizes (views with variables) has its shape as expressions too;
  // full_shape() then holds each size's maximum. Empty for a kernel of plain numbers.
  const std::vector<UOpPtr>& sym_full_shape() const { return sym_full_shape_; }
  bool symbolic() const { return !sym_full_shape_.empty(); }
  const std::vector<AxisKind>& kinds() const { return kinds_; }
  const std::vector<Opt>& applied() const { return applied_; }
  bool has_reduce() const;
  // The kernel's current view of a VIEW node of the AST.
  const ShapeTracker& view(const UOp* view_node) const;
  int shuffle_axis() const;  // the Shuffle axis, or -1
  bool staged() const;       // a STAGE opt was applied
  // Every (VIEW node, tracker) of the kernel, in AST order.
  const std::vector<std::pair<const UOp*, ShapeTracker>>& views() const { return views_; }
  // The output (first STORE's) tracker and the trackers of loads, for heuristics.
  const ShapeTracker& output_view() const;
  std::vector<const UOp*> loads() const;

  // Applies one opt. Throws vkg::Error naming the opt and the kernel's shape when the axis has
  // the wrong kind or the amount does not divide it; the kernel is unchanged then. A symbolic
  // kernel takes UPCAST and UNROLL on axes of plain size, and LOCAL on any global axis: one of
  // symbolic size n splits into ceil(n / amount) workgroups of `amount`, and the invocations
  // past n are guarded off (sym_guards). GROUP, SHUFFLE and STAGE stay off there.
  void apply(const Opt& opt);

  // A symbolic axis split by LOCAL: its size before the split and the amount.
  struct SymSplit {
    UOpPtr size;
    int64_t amount;
  };
  // What the invocations of a symbolic kernel must satisfy to compute an element, given each
  // axis's index (nullptr where an axis has none): outer * amount + inner < size for every
  // LOCAL split of a symbolic axis. Empty when nothing needs guarding.
  std::vector<UOpPtr> sym_guards(const std::vector<UOpPtr>& axis_idx) const;

  // tinygrad's kernel names: E_ for elementwise kernels, r_ for reductions, then the axis sizes
  // (E_4_4, r_2, r_16_4_64).
  std::string name() const;
  // "full_shape=(64, 64, 64) kinds=(G, G, R) opts=[UPCAST(axis=0, amount=4)]"
  std::string describe() const;

 private:
  void split(int axis, int64_t amount, AxisKind kind);
  // split() for a symbolic kernel: each view's last View splits the axis into (outer, amount)
  // by expressions. Throws vkg::Error (leaving the kernel as it was) where a view masks the axis.
  void split_sym(int axis, int64_t amount, AxisKind kind);
  void permute_axes(const std::vector<int64_t>& order);
  void sort_axes();  // into the canonical order of kinds (kind_rank), stably
  void merge_adjacent();
  void order_by_loads();

  UOpPtr ast_;
  Shape full_shape_;
  std::vector<UOpPtr> sym_full_shape_;
  std::vector<AxisKind> kinds_;
  std::vector<std::pair<const UOp*, ShapeTracker>> views_;
  std::unordered_map<const UOp*, size_t> view_index_;
  std::vector<Opt> applied_;
  std::vector<SymSplit> sym_splits_;
  // Per axis: which of sym_splits_ it is part of (-1: none), and whether as the inner part.
  std::vector<std::pair<int, bool>> split_part_;
};

char axis_kind_letter(AxisKind k);  // G L R P U N S (P: grouP, S: Shuffle)
// A kernel AST's LOAD(DEFINE_GLOBAL, VIEW, index...) with arg (stride, size) per index: it
// reads the element its VIEW addresses plus each index value times its stride (the scheduler's
// lowering of a tensor-level INDEX, core/indexed_load.hpp). Out of [0, size): 0.
inline bool is_indexed_load(const UOp* u) { return u->op == Ops::LOAD && u->src.size() > 2; }

// A kernel AST's STORE(DEFINE_GLOBAL, VIEW, value, index...) with arg {combine, then (stride,
// size) per index}: combines the value (core/scatter_combine.hpp) into the element its VIEW
// addresses plus each index value times its stride (the scheduler's lowering of a tensor-level
// SCATTER, core/indexed_load.hpp). An index out of [0, size) writes nothing.
inline bool is_scatter_store(const UOp* u) { return u->op == Ops::STORE && u->src.size() > 3; }

int kind_rank(AxisKind k);            // position of a kind in the canonical axis order

}  // namespace vkg
