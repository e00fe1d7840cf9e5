// Reductions that answer with positions or running totals: argmax, argmin and cumsum. Both are
// composed from ordinary reduces over masks, so they fuse and differentiate like the rest.
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

namespace {

// tinygrad's trick: where x equals its max, put n - i (a descending arange), else 0; the largest
// of those is the first position of the max, read back as n - it. A nan counts as the largest
// value (the max propagates it), as torch's argmax.
Tensor first_max_index(const Tensor& x, std::optional<int64_t> axis, bool keepdim,
                       std::string_view op) {
  if (!axis || x.ndim() == 0) {
    const Tensor flat = first_max_index(x.reshape({x.numel()}), 0, false, op);
    return keepdim ? flat.reshape(Shape(size_t(x.ndim()), 1)) : flat;
  }
  const int ax = normalize_axis(*axis, x.shape(), op);
  const int64_t n = x.shape()[size_t(ax)];
  if (n == 0)
    throw Error(std::string(op) + ": cannot reduce an axis with no elements (axis " +
                std::to_string(*axis) + " of shape " + shape_str(x.shape()) + ")");
  const Tensor hit = x.eq(x.max(ax, true)).logical_or(x.isnan());
  Shape along(size_t(x.ndim() - ax), 1);
  along[0] = n;
  const Tensor descending = Tensor::arange(n, 0, -1, x.device()).reshape(along);
  const Tensor first = hit.where(descending, 0).max(ax, keepdim);
  return (n - first).cast(dtypes::int32);
}

}  // namespace

Tensor Tensor::argmax(std::optional<int64_t> axis, bool keepdim) const {
  return first_max_index(*this, axis, keepdim, "argmax");
}

// Through an order-reversing map (negation for floats, bitwise not for integers and bools), so
// the first smallest is the first largest of the image.
Tensor Tensor::argmin(std::optional<int64_t> axis, bool keepdim) const {
  return first_max_index(dtype().is_float() ? -*this : bitwise_not(), axis, keepdim, "argmin");
}

namespace {

// Blocks of this many elements are summed by a triangular mask: each output adds at most this
// many inputs, and larger axes recurse on the blocks' totals, so the work is n * kScanBlock and no
// reduce comes near the 32768-element split.
constexpr int64_t kScanBlock = 256;

// cumsum over the last axis.
Tensor cumsum_last(const Tensor& x) {
  const int64_t n = x.shape().back();
  Shape lead(x.shape().begin(), x.shape().end() - 1);
  if (n <= kScanBlock) {
    // lower[i][j] = j <= i: output i sums inputs 0..i.
    const Tensor i = Tensor::arange(0, n, 1, x.device()).reshape({n, 1});
    const Tensor j = Tensor::arange(0, n, 1, x.device()).reshape({1, n});
    Shape row = lead;
    row.push_back(1);
    row.push_back(n);
    return j.le(i).where(x.reshape(row), 0).sum(-1);
  }
  // (..., blocks, kScanBlock): the scan inside each block, plus the sum of all earlier blocks.
  const int64_t blocks = (n + kScanBlock - 1) / kScanBlock;
  std::vector<std::pair<int64_t, int64_t>> pads(lead.size(), {0, 0});
  pads.emplace_back(0, blocks * kScanBlock - n);
  Shape blocked = lead;
  blocked.push_back(blocks);
  blocked.push_back(kScanBlock);
  const Tensor b = x.pad(pads).reshape(blocked);
  const Tensor inside = cumsum_last(b);
  // The sum of all earlier blocks: the scan of the totals shifted right by one, not the scan
  // minus the totals, which is inf - inf = nan for every block after an inf.
  const Tensor totals = b.sum(-1);
  std::vector<std::pair<int64_t, int64_t>> shift(lead.size(), {0, 0}), first(lead.size());
  shift.emplace_back(1, 0);
  for (size_t d = 0; d < lead.size(); ++d) first[d] = {0, lead[d]};
  first.emplace_back(0, blocks);
  const Tensor before = cumsum_last(totals.pad(shift).shrink(first));
  Shape flat = lead;
  flat.push_back(blocks * kScanBlock);
  std::vector<std::pair<int64_t, int64_t>> keep(lead.size() + 1, {0, 0});
  for (size_t d = 0; d < lead.size(); ++d) keep[d] = {0, lead[d]};
  keep.back() = {0, n};
  Shape column = lead;
  column.push_back(blocks);
  column.push_back(1);
  return (inside + before.reshape(column)).reshape(flat).shrink(keep);
}

}  // namespace

// Accumulates in sum's dtype (small integers and bools in 32 bits).
Tensor Tensor::cumsum(int64_t axis) const {
  if (ndim() == 0) return reshape({1}).cumsum(0).reshape({});
  const int ax = normalize_axis(axis, shape(), "cumsum");
  return cumsum_last(transpose(ax, -1)).transpose(ax, -1);
}

}  // namespace vkg
