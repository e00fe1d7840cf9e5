#include <vkgrad/codegen/heuristics.hpp>

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

bool divides(const Kernel& k, int axis, int64_t amount) {
  return axis >= 0 && k.full_shape()[size_t(axis)] % amount == 0 &&
         k.full_shape()[size_t(axis)] >= amount;
}

}  // namespace

void apply_heuristics(Kernel& k, const DeviceTraits& traits) {
  if (!k.has_reduce()) {
    // Elementwise: 4 elements per invocation amortize the per-invocation cost of index math.
    const int axis = last_axis_of(k, AxisKind::Global);
    if (divides(k, axis, 4) && k.full_shape()[size_t(axis)] >= 4 * traits.elementwise_workgroup)
      k.apply({OptOp::UPCAST, axis, 4});
    return;
  }
  if (traits.register_tiles && count_axes(k, AxisKind::Global) >= 2) {
    // Matmul-shaped: a tile of outputs per invocation reuses each loaded element across the tile.
    // n (the output's contiguous axis) is upcast first so that it is the innermost upcast axis,
    // whose lanes the lowerer stores, loads and accumulates as vec4s.
    const int n = last_axis_of(k, AxisKind::Global);
    const int m = n - 1;
    if (divides(k, n, 4) && k.full_shape()[size_t(n)] >= 16) k.apply({OptOp::UPCAST, n, 4});
    const int64_t rows = traits.tile_rows;
    if (divides(k, m, rows) && k.full_shape()[size_t(m)] >= 4 * rows)
      k.apply({OptOp::UPCAST, m, rows});
  } else if (count_axes(k, AxisKind::Global) == 1) {
    // Many outputs of one axis (the first step of a split sum): 4 neighbouring outputs per
    // invocation read neighbouring inputs as one vec4 and keep a vec4 accumulator. Only where
    // enough invocations remain to fill the device.
    const int axis = last_axis_of(k, AxisKind::Global);
    if (divides(k, axis, 4) && k.full_shape()[size_t(axis)] >= 16 * traits.default_workgroup)
      k.apply({OptOp::UPCAST, axis, 4});
  }
  // Unrolling the reduce by 4 cuts loop overhead and lets loads of one tile share addresses.
  const int r = last_axis_of(k, AxisKind::Reduce);
  if (divides(k, r, 4) && k.full_shape()[size_t(r)] >= 8) k.apply({OptOp::UNROLL, r, 4});
}

}  // namespace vkg
