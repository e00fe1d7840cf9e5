#include <vkgrad/codegen/heuristics.hpp>

#include <optional>

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

}  // namespace

void apply_heuristics(Kernel& k, const DeviceTraits& traits) {
  if (!k.has_reduce()) {
    // Elementwise: 4 elements per invocation amortize the per-invocation cost of index math.
    const int axis = last_axis_of(k, AxisKind::Global);
    if (divides(k, axis, 4) && k.full_shape()[size_t(axis)] >= 4 * traits.elementwise_workgroup)
      k.apply({OptOp::UPCAST, axis, 4});
    return;
  }
  if (traits.register_tiles && count_axes(k, AxisKind::Global) >= 2 && reuses_loads(k)) {
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
    if (m >= 0) k.apply({OptOp::UPCAST, m, rows});
  } else if (count_axes(k, AxisKind::Global) >= 1) {
    // Many outputs without reuse (the first step of a split sum): 4 outputs per invocation that
    // read neighbouring inputs load them as one vec4 and keep a vec4 accumulator. Only where
    // enough invocations remain to fill the device.
    const int axis = contiguous_global_axis(k);
    int64_t outputs = 1;
    for (size_t a = 0; a < k.kinds().size(); ++a)
      if (k.kinds()[a] == AxisKind::Global) outputs *= k.full_shape()[a];
    if (divides(k, axis, 4) && outputs >= 16 * traits.default_workgroup)
      k.apply({OptOp::UPCAST, axis, 4});
  }
  // Unrolling the reduce by 4 cuts loop overhead and lets loads of one tile share addresses.
  const int r = last_axis_of(k, AxisKind::Reduce);
  if (divides(k, r, 4) && k.full_shape()[size_t(r)] >= 8) k.apply({OptOp::UNROLL, r, 4});
}

}  // namespace vkg
