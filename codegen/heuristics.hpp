// The opts a kernel gets by default (without NOOPT=1), chosen from its shape and the device's
// traits. Each choice is one line here with the reason; BEAM search will later try others.
#pragma once
#include <cstdint>

#include <vkgrad/codegen/kernel.hpp>

namespace vkg {

struct DeviceTraits {
  int64_t max_workgroup_invocations = 256;
  // Workgroup size for kernels without local axes.
  int64_t default_workgroup = 64;
  // ... and for elementwise ones, which stream: wide workgroups cost less per element on CPU-like
  // devices (Lavapipe's add peaks at 256) and are the common choice on GPUs.
  int64_t elementwise_workgroup = 256;
  // Register tiles for matmul-shaped kernels (upcast the outputs, unroll the reduce): what a
  // CPU-like device such as Lavapipe wants, and a good start on GPUs.
  bool register_tiles = true;
  // Rows of a matmul register tile (its columns are one vec4).
  int64_t tile_rows = 4;
  // Matmul-shaped kernels big enough get classic shared-memory tiling (GPUs): a workgroup of
  // stage_side x stage_side invocations, each with its register tile, stages the operands'
  // tiles of 8 steps of the reduce in shared memory (STAGE); 0 for none. Not measured on a GPU
  // here (the CI device is Lavapipe, where it is off: shared memory and barriers are slow).
  int64_t stage_side = 16;
  // Subgroup-shuffle tiles (AxisKind::Shuffle): the subgroup width to build them for, 0 for none.
  // For CPU-like devices with subgroupShuffle, where a load whose address differs per lane is a
  // loop over the lanes and a shuffle is one permute (Lavapipe: 8). GPUs want shared-memory
  // tiles instead and leave it 0.
  int64_t shuffle_lanes = 0;
  // Rows each lane of a shuffle tile loads at most (the tile is shuffle_lanes * this rows by 4
  // columns; fewer where they do not divide the axis).
  int64_t shuffle_rows_per_lane = 4;
  // A costly op (an exact division, exp2) that every column of a register tile shares gets 16
  // columns per invocation instead of 4, a quarter of its cost per output, on small outputs. For
  // CPU-like devices (tuned on Lavapipe); GPUs, where it is not measured, leave it off.
  bool share_costly_ops = false;
  // Outputs per invocation of a reduce without reuse across outputs (a split sum's first step),
  // as vec4s: 4 on GPUs; CPU-like devices read longer runs per lane for the same loop (Lavapipe:
  // 16 outputs read 64 contiguous bytes per lane and step, 1.6-2x faster than 4).
  int64_t reduce_outputs = 4;
  // Reduces with few outputs spread each output over this many invocations of a workgroup that
  // combine their partial results in shared memory (GROUP); 0 for none. GPUs want it (one
  // invocation per output leaves most of the device idle); on CPU-like devices shared memory
  // and barrier() are slow (Lavapipe: a per-lane loop and a coroutine switch).
  int64_t group_size = 64;
};

void apply_heuristics(Kernel& kernel, const DeviceTraits& traits);

// The same for a kernel over symbolic sizes, compiled once for every binding: the choices are
// made on its plain axes and the sizes' maxima. Elementwise kernels upcast a plain last axis by
// 4, reduces unroll a plain reduce axis by 4. No LOCAL: without GROUP or STAGE (not on symbolic
// kernels) a local axis only reorders the invocations, which the flat launch already groups.
void apply_symbolic_heuristics(Kernel& kernel, const DeviceTraits& traits);

}  // namespace vkg
