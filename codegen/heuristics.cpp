#include <vkgrad/codegen/heuristics.hpp>

#include <algorithm>
#include <optional>
#include <unordered_set>

#include <vkgrad/core/error.hpp>

namespace vkg {

namespace {

int last_axis_of(const Kernel& k, AxisKind kind) {
  for (int i = int(k.kinds().size()) - 1; i >= 0; --i)
    if (k.kinds()[size_t(i)] == kind) return i;
  return -1;
}

int count_axes(const Kernel& k, AxisKind kind) {
  int n = 0;
  for (AxisKind a : k.kinds()) n += a == kind;
  return n;
}

// The stride of a load's elements along `axis` (nullopt where it is not affine there).
std::optional<int64_t> load_stride(const Kernel& k, const UOp* load, int axis) {
  return k.view(load->src[1].get()).real_strides(true)[size_t(axis)];
}

// Some input is the same for every element along a global axis (a matmul's A along n, B along
// m): a register tile reuses each load across it. Without that, tiles only add registers.
bool reuses_loads(const Kernel& k) {
  for (const UOp* load : k.loads())
    for (size_t a = 0; a < k.kinds().size(); ++a)
      if (k.kinds()[a] == AxisKind::Global && k.full_shape()[a] > 1 &&
          load_stride(k, load, int(a)) == 0)
        return true;
  return false;
}

// The global axis along which the first input is contiguous (its lanes load as one vector), else
// the last global axis.
int contiguous_global_axis(const Kernel& k) {
  const std::vector<const UOp*> loads = k.loads();
  if (!loads.empty())
    for (int a = int(k.kinds().size()) - 1; a >= 0; --a)
      if (k.kinds()[size_t(a)] == AxisKind::Global && load_stride(k, loads[0], a) == 1) return a;
  return last_axis_of(k, AxisKind::Global);
}

bool divides(const Kernel& k, int axis, int64_t amount) {
  return axis >= 0 && k.full_shape()[size_t(axis)] % amount == 0 &&
         k.full_shape()[size_t(axis)] >= amount;
}

// The last global axis of at least `min_size` that `amount` divides, along which some load is
// reused (stride 0) that is not reused along `other` (when given): tiling there saves loads.
int tile_axis(const Kernel& k, int64_t amount, int64_t min_size, int other) {
  for (int a = int(k.kinds().size()) - 1; a >= 0; --a) {
    if (a == other || k.kinds()[size_t(a)] != AxisKind::Global || !divides(k, a, amount) ||
        k.full_shape()[size_t(a)] < min_size)
      continue;
    for (const UOp* load : k.loads())
      if (load_stride(k, load, a) == 0 && (other < 0 || load_stride(k, load, other) != 0)) return a;
  }
  return -1;
}

int64_t output_count(const Kernel& k) {
  int64_t outputs = 1;
  for (size_t a = 0; a < k.kinds().size(); ++a)
    if (k.kinds()[a] == AxisKind::Global) outputs *= k.full_shape()[a];
  return outputs;
}

// The two output axes of a shuffle tile (AxisKind::Shuffle): a reduce whose output has two axes
// with broadcast loads, as a matmul (C[m, n] = A[m, k] B[k, n]), a convolution (out[b, co, y, x]
// from w[co, ...] and x[b, ..., y + ky, x + kx]) and their gradients have. Along `lane`, some load
// B varies and another, A, is constant; along `shuffle`, A varies and B is constant, so A's
// elements are the ones the lanes share. Best where B is contiguous along `lane` and the axis
// takes 4 columns per lane (vec4 loads and stores); else 4 columns of any stride; else one.
struct ShuffleAxes {
  int lane = -1, shuffle = -1;
  bool four_columns = false;
  const UOp* shared = nullptr;  // A: the load the lanes share
};

// Loads that vary along some reduce axis: the operands of the reduce's products. A load that is
// the same for the whole reduce (a bias added before a relu whose output is reduced) is read
// once per output and is no operand to tile for, however its strides look.
std::vector<const UOp*> reduce_operands(const Kernel& k) {
  std::vector<const UOp*> out;
  for (const UOp* load : k.loads())
    for (size_t a = 0; a < k.kinds().size(); ++a)
      if (k.kinds()[a] == AxisKind::Reduce && k.full_shape()[a] > 1 &&
          load_stride(k, load, int(a)) != 0) {
        out.push_back(load);
        break;
      }
  return out;
}

// A short global axis (2 to 8 long) for a register tile's rows, taken whole: one along which an
// operand of the reduce that varies along the columns' axis `n` is reused.
int whole_rows_axis(const Kernel& k, int n) {
  const std::vector<const UOp*> operands = reduce_operands(k);
  for (int a = int(k.kinds().size()) - 1; a >= 0; --a) {
    const int64_t size = k.full_shape()[size_t(a)];
    if (a == n || k.kinds()[size_t(a)] != AxisKind::Global || size < 2 || size > 8) continue;
    for (const UOp* load : operands)
      if (load_stride(k, load, a) == 0 && load_stride(k, load, n) != 0) return a;
  }
  return -1;
}

std::optional<ShuffleAxes> shuffle_axes(const Kernel& k, int64_t lanes, int64_t rows_per_lane) {
  const std::vector<const UOp*> loads = reduce_operands(k);
  const auto& shape = k.full_shape();
  for (int level = 0; level < 3; ++level) {
    const int64_t columns = level < 2 ? 4 : 1;
    for (int l = int(shape.size()) - 1; l >= 0; --l) {
      if (k.kinds()[size_t(l)] != AxisKind::Global || shape[size_t(l)] % (columns * lanes) != 0)
        continue;
      for (const UOp* b : loads) {
        const std::optional<int64_t> bl = load_stride(k, b, l);
        if (level == 0 ? bl != 1 : bl == 0) continue;
        for (const UOp* a : loads) {
          // Shuffles move 32-bit values (see the lowerer).
          if (load_stride(k, a, l) != 0 || a->dtype.scalar_size() != 4 || a->dtype.is_bool())
            continue;
          // The shuffled axis: one that also takes the rows each lane loads (a convolution's
          // batch rather than its 24-wide image rows), else any that takes the lanes.
          std::optional<ShuffleAxes> fallback;
          for (int s = int(shape.size()) - 1; s >= 0; --s) {
            if (s == l || k.kinds()[size_t(s)] != AxisKind::Global || shape[size_t(s)] % lanes != 0)
              continue;
            if (load_stride(k, a, s) == 0 || load_stride(k, b, s) != 0) continue;
            if (shape[size_t(s)] % (lanes * rows_per_lane) == 0)
              return ShuffleAxes{l, s, columns == 4, a};
            if (!fallback) fallback = ShuffleAxes{l, s, columns == 4, a};
          }
          if (fallback) return fallback;
        }
      }
    }
  }
  return std::nullopt;
}

// Whether some view's mask cuts `axis` (a pad: part of a cat or stack along it).
bool cuts_along(const Kernel& k, int axis) {
  for (const auto& [node, st] : k.views()) {
    const View& v = st.views().back();
    if (v.mask && ((*v.mask)[size_t(axis)].first != 0 ||
                   (*v.mask)[size_t(axis)].second != v.shape[size_t(axis)]))
      return true;
  }
  return false;
}

// Accumulators per invocation a shuffle tile may hold (columns x lanes x width x rows): twice
// BEAM's kMaxOutputs, which its own search keeps to: the heuristics' 448 took less CPU time
// than 224 on Lavapipe (see apply_heuristics); nothing larger was measured.
constexpr int64_t kMaxShuffleOutputs = 512;

// Rows per lane of a shuffle tile: `most`, else the largest number under 2 * most that divides
// what is left of the shuffled axis, else a smaller one; 0 for none. A first layer's weight
// gradient shuffles 784 inputs over 8 lanes, 98 each: 7 rows rather than 2 (98 = 2 * 7 * 7)
// read each row of the other operand (and recompute what is fused into it, a relu's backward)
// for 3.5x as many outputs: 1.17x faster on Lavapipe (bench/tensor_opts_bench.cpp, mlp_variant).
// `limit` bounds the rows whatever `most` says (the accumulators' budget).
int64_t shuffle_rows(const Kernel& k, int axis, int64_t most, int64_t limit) {
  most = std::min(most, limit);
  if (divides(k, axis, most)) return most;
  for (int64_t rows = std::min(2 * most - 1, limit); rows > most; --rows)
    if (divides(k, axis, rows)) return rows;
  for (int64_t rows = most - 1; rows > 1; --rows)
    if (divides(k, axis, rows)) return rows;
  return 0;
}

// Ops that a CPU-like device runs as a long software routine (codegen/glsl_helpers.cpp: exact
// division, exp2, log2, sin, ...), not one instruction.
bool is_costly(Ops op) {
  switch (op) {
    case Ops::FDIV:
    case Ops::RECIP:
    case Ops::EXP2:
    case Ops::LOG2:
    case Ops::SIN:
    case Ops::COS:
    case Ops::ERF:
    case Ops::ERFC:
    case Ops::FMOD:
    case Ops::REMAINDER:
      return true;
    default:
      return false;
  }
}

// Whether the reduce computes a costly op that is the same for every output along `axis` (every
// load below it has stride 0 there): a softmax's backward fused into the next weight gradient
// (dlogits[b, c] = exp(..) / sum(..) - onehot, the same for every input o of w2[c, o]).
// With `varying` >= 0, only an op that also varies along that axis counts. Only ops fused into
// the reduce (below a REDUCE_AXIS) count: one after it (a matmul's rows scaled by 1 / norm[b])
// runs once per output whatever the tile, and a per-row op there would otherwise drop the tile
// of a plain matmul (3-5x slower on Lavapipe).
bool shares_costly_op(const Kernel& k, int axis, int varying = -1) {
  std::unordered_set<const UOp*> below_reduce;
  for (const UOp* r : toposort(k.ast().get()))
    if (r->op == Ops::REDUCE_AXIS)
      for (const UOp* x : toposort(r->src[0].get())) below_reduce.insert(x);
  for (const UOp* u : below_reduce) {
    if (!is_costly(u->op)) continue;
    bool varies = false, loads = false, varies_there = varying < 0;
    for (const UOp* x : toposort(u))
      if (x->op == Ops::LOAD) {
        loads = true;
        varies = varies || load_stride(k, x, axis) != 0;
        varies_there = varies_there || load_stride(k, x, varying) != 0;
      }
    if (loads && !varies && varies_there) return true;
  }
  return false;
}

// Classic shared-memory tiling of a register-tiled matmul (see DeviceTraits::stage_side): local
// axes on both output axes, the reduce unrolled by 8 and staged. False (and the kernel
// unchanged) where the shape does not take it.
bool stage_tiles(Kernel& k, int n, int m, const DeviceTraits& traits) {
  const int64_t side = traits.stage_side;
  const int r = last_axis_of(k, AxisKind::Reduce);
  if (side <= 0 || side * side > traits.max_workgroup_invocations || !divides(k, n, side) ||
      !divides(k, m, side) || !divides(k, r, 8))
    return false;
  k.apply({OptOp::LOCAL, n, side});
  k.apply({OptOp::LOCAL, m, side});
  k.apply({OptOp::UNROLL, last_axis_of(k, AxisKind::Reduce), 8});
  k.apply({OptOp::STAGE, last_axis_of(k, AxisKind::Unroll), 8});
  return true;
}

// The largest power of two up to `most` that divides the reduce axis and leaves each
// invocation at least 4 elements; 0 for none under 16.
int64_t group_amount(const Kernel& k, int axis, int64_t most) {
  for (int64_t g = most; g >= 16; g /= 2)
    if (k.full_shape()[size_t(axis)] % g == 0 && k.full_shape()[size_t(axis)] >= 4 * g) return g;
  return 0;
}

}  // namespace

void apply_heuristics(Kernel& k, const DeviceTraits& traits) {
  if (!k.has_reduce()) {
    // Elementwise: 4 elements per invocation amortize the per-invocation cost of index math,
    // and what the 4 share is computed once: a per-channel term broadcast over an image (a
    // BatchNorm backward's divisions and square root: beautiful_mnist's E_512_32_400).
    const int axis = last_axis_of(k, AxisKind::Global);
    if (divides(k, axis, 4) && output_count(k) >= 4 * traits.elementwise_workgroup)
      k.apply({OptOp::UPCAST, axis, 4});
    // Then a cat or stack along a short axis (Adam's two moments in one tensor, each updated from
    // its old value): that axis whole in registers, so that each part's pad mask is a constant per
    // register (outside the 4 elements, so that those stay one vector). Each invocation then
    // computes every part once, from unmasked loads, and reads what the parts share (the gradient)
    // once; else every element computes each part under a mask, its loads masked too (1.1x the time
    // of two separate kernels on Lavapipe).
    for (int a = 0; a < int(k.kinds().size()); ++a)
      if (k.kinds()[size_t(a)] == AxisKind::Global && k.full_shape()[size_t(a)] >= 2 &&
          k.full_shape()[size_t(a)] <= 4 && cuts_along(k, a))
        k.apply({OptOp::UPCAST, a, k.full_shape()[size_t(a)]});
    return;
  }
  std::optional<ShuffleAxes> tile =
      traits.shuffle_lanes > 0 ? shuffle_axes(k, traits.shuffle_lanes, traits.shuffle_rows_per_lane)
                               : std::nullopt;
  // A shuffle tile's lanes hand their loaded rows to each other, and what the kernel computes
  // from those rows every lane computes for every row of the tile: a costly op fused into the
  // reduce (a softmax's backward in the matmul after it, dlogits[b, c] @ w2[c, o]) then runs 8
  // times per tile and again in each column group. Where such an op varies along the shuffled
  // rows and is the same along the columns, the tile takes columns only: one row per
  // invocation, up to 64 columns while a workgroup's worth of invocations is left. (An op that
  // is the same along the rows too, a per-channel scale in a convolution's reduce, is computed
  // once per lane and keeps the tile.) The MLP step's hidden-layer input gradient (128 x 128
  // from dlogits 128 x 10): 162 -> 90 us on Lavapipe (DEBUG=2, load 10); beautiful_mnist's last
  // layer's (512 x 576 from 512 x 10), the only kernel of its step that changes: a median of
  // 3.07 -> 1.51 ms over 5 steps at load 8 (noisy). A device trait, as share_costly_ops below.
  if (tile && traits.share_costly_ops && shares_costly_op(k, tile->lane, tile->shuffle)) {
    const int n = tile->lane;
    for (int i = 0; i < 3; ++i)  // output_count: the invocations left
      if (divides(k, n, 4) && output_count(k) / 4 >= traits.default_workgroup)
        k.apply({OptOp::UPCAST, n, 4});
    tile.reset();
  } else if (tile) {
    // One subgroup per workgroup. Its lanes take neighbouring vec4 columns (`lane`); each lane
    // loads rows_per_lane rows of A's tile and shuffles hand them to the others: every
    // invocation keeps a (lanes * rows_per_lane) x 4 block of outputs, and per 4 steps of the
    // reduce loads rows_per_lane + 4 vec4s for 16 * lanes * rows_per_lane multiply-adds.
    const int64_t lanes = traits.shuffle_lanes;
    if (tile->four_columns) k.apply({OptOp::UPCAST, tile->lane, 4});
    k.apply({OptOp::LOCAL, tile->lane, lanes});
    // Where A is contiguous along the shuffled axis (a weight gradient's x[b, i] along i, the
    // reduce running over b), each lane loads a vector of `width` neighbouring rows, not one:
    // Lavapipe runs every load as a loop over the SIMD lanes, whatever its width. The rows per
    // lane then count vectors, halved for vec4s; shuffle_rows takes up to 2 * most - 1 of them,
    // so a tile holds up to 4 columns x 8 lanes x 2 x 7 = 448 accumulators (the MLP's first
    // weight gradient, 784 inputs: vec2s, 7 per lane), past the 256 BEAM allows itself
    // (kMaxOutputs in beam.cpp) but within kMaxShuffleOutputs. It takes less CPU time than 7
    // single rows (224 accumulators): 1.87 -> 1.73 CPU ms at load 9; 1.83 -> 1.74 (against 2
    // rows in the same run: 1.28x -> 1.34x) at load 5.7. Wall times there were noise-bound
    // (1.69 -> 2.14 ms in one run, 2.23 -> 2.16 in the next).
    // (bench_tensor --benchmark_filter=mlp_variant/dwmask, shuffle_56x4 against olanes_v2_32x112).
    // Only with four columns: without them, no vector load forms (the columns' operand is read
    // one element at a time) and the width would only double the rows per lane.
    int64_t width = 1;
    // A mask along the shuffled axis (x padded or concatenated there) is not in the stride: its
    // lanes' masks differ and the lowerer rejects every vector, so no width there either.
    if (tile->four_columns && load_stride(k, tile->shared, tile->shuffle) == 1 &&
        !cuts_along(k, tile->shuffle))
      for (const int64_t w : {4, 2})
        if (divides(k, tile->shuffle, w * lanes)) {
          width = w;
          break;
        }
    if (width > 1) k.apply({OptOp::UPCAST, tile->shuffle, width});
    k.apply({OptOp::SHUFFLE, tile->shuffle, lanes});
    const int64_t most =
        std::max<int64_t>(1, traits.shuffle_rows_per_lane * 2 / std::max<int64_t>(width, 2));
    const int64_t per_row = (tile->four_columns ? 4 : 1) * lanes * width;
    if (const int64_t rows = shuffle_rows(k, tile->shuffle, most,
                                          std::max<int64_t>(1, kMaxShuffleOutputs / per_row)))
      k.apply({OptOp::UPCAST, tile->shuffle, rows});
  } else if (traits.register_tiles && count_axes(k, AxisKind::Global) >= 2 && reuses_loads(k)) {
    // Matmul-shaped: a tile of outputs per invocation reuses each loaded element across the tile.
    // Its columns are 4 along the last global axis where some load is reused (a matmul's n,
    // which is also the output's contiguous axis, so the lowerer stores, loads and accumulates
    // vec4s there; a convolution's output channels, when its output width is not a multiple of
    // 4); its rows run along a global axis where a load that differs along the columns is reused
    // (a matmul's m; a convolution's batch).
    const int n = tile_axis(k, 4, 16, -1);
    if (n >= 0) k.apply({OptOp::UPCAST, n, 4});
    const int64_t rows = traits.tile_rows;
    const int m = tile_axis(k, rows, 4 * rows, n);
    int64_t accumulators = n >= 0 ? 4 : 1;  // outputs per invocation
    if (m >= 0) {
      k.apply({OptOp::UPCAST, m, rows});
    } else if (n >= 0) {
      // No long axis for the rows: short ones taken whole, up to 128 accumulators (a
      // convolution's kernel height and width when its weight gradient has one input channel:
      // beautiful_mnist's first layer, 0.7 -> 9 GFLOPS on Lavapipe with both, 4 with one).
      for (int whole = whole_rows_axis(k, n); whole >= 0; whole = whole_rows_axis(k, n)) {
        const int64_t size = k.full_shape()[size_t(whole)];
        if (accumulators * size > 128) break;
        k.apply({OptOp::UPCAST, whole, size});
        accumulators *= size;
      }
    }
    // A costly op the columns share is computed once per invocation and step of the reduce:
    // more columns per invocation (16) divide its cost by 4. Only on small outputs (at most 64
    // workgroups' worth of invocations), where that op is most of the work, and while enough
    // invocations are left to fill a workgroup: the MLP's second weight gradient (10 x 128
    // outputs, 2.0x faster) and beautiful_mnist's last (10 x 576, 6x), not its max-pool backward
    // (32 x 128 x 10 x 10 outputs, a 2x2 reduce: 1.4x slower with it). The accumulators stay
    // within the 128 of the whole rows above. Measured on Lavapipe only: a trait of the device.
    if (traits.share_costly_ops && n >= 0 && m < 0 && accumulators * 4 <= 128 &&
        shares_costly_op(k, n) && divides(k, n, 4) &&
        output_count(k) / 4 >= traits.default_workgroup &&
        output_count(k) <= 64 * traits.default_workgroup)
      k.apply({OptOp::UPCAST, n, 4});
    if (n >= 0 && m >= 0 && stage_tiles(k, n, m, traits)) return;
  } else if (count_axes(k, AxisKind::Global) >= 1) {
    // Many outputs without reuse (the first step of a split sum): 4 outputs per invocation that
    // read neighbouring inputs load them as one vec4 and keep a vec4 accumulator. Only where
    // enough invocations remain to fill the device.
    const int axis = contiguous_global_axis(k);
    if (divides(k, axis, 4) && output_count(k) >= 16 * traits.default_workgroup) {
      k.apply({OptOp::UPCAST, axis, 4});
      const int64_t more = traits.reduce_outputs / 4;
      if (more > 1 && divides(k, axis, more) &&
          output_count(k) >= 4 * more * traits.default_workgroup)
        k.apply({OptOp::UPCAST, axis, more});
    }
  }
  // Few outputs, each a long reduce: spread each over a workgroup (GROUP) so that the device has
  // enough invocations to run. Split off the innermost part of the reduce, so that neighbouring
  // invocations read neighbouring elements.
  if (traits.group_size > 0 && !tile && output_count(k) <= 2048) {
    const int r = last_axis_of(k, AxisKind::Reduce);
    if (r >= 0)
      if (const int64_t g = group_amount(k, r, traits.group_size)) k.apply({OptOp::GROUP, r, g});
  }
  // Unrolling the reduce by 4 cuts loop overhead and lets loads of one tile share addresses. The
  // innermost reduce axis that takes it; where that is short and odd (a convolution's 5-wide
  // kernel rows), an outer one (its channels): the unrolled copies still run in the innermost
  // loop, whose trips cost Lavapipe more than their multiply-adds (beautiful_mnist's conv2 at
  // batch 512: forward 0.99 -> 0.78, input gradient 1.31 -> 1.09 CPU seconds).
  for (int r = int(k.kinds().size()) - 1; r >= 0; --r)
    if (k.kinds()[size_t(r)] == AxisKind::Reduce && divides(k, r, 4) &&
        k.full_shape()[size_t(r)] >= 8) {
      k.apply({OptOp::UNROLL, r, 4});
      break;
    }
}

void apply_symbolic_heuristics(Kernel& k, const DeviceTraits& traits) {
  auto plain = [&](int axis) { return axis >= 0 && k.sym_full_shape()[size_t(axis)]->is_const(); };
  // A symbolic view padded along the axis (a cat) does not split: that opt is left out (the
  // kernel is unchanged when apply throws).
  auto try_apply = [&](const Opt& o) {
    try {
      k.apply(o);
      return true;
    } catch (const Error&) {
      return false;
    }
  };
  if (!k.has_reduce()) {
    // As apply_heuristics: 4 elements per invocation, where the last axis is a plain size.
    const int axis = last_axis_of(k, AxisKind::Global);
    if (plain(axis) && divides(k, axis, 4) && output_count(k) >= 4 * traits.elementwise_workgroup)
      try_apply({OptOp::UPCAST, axis, 4});
    return;
  }
  for (int r = int(k.kinds().size()) - 1; r >= 0; --r)
    if (k.kinds()[size_t(r)] == AxisKind::Reduce && plain(r) && divides(k, r, 4) &&
        k.full_shape()[size_t(r)] >= 8 && try_apply({OptOp::UNROLL, r, 4}))
      break;
}

}  // namespace vkg
