// Reductions that answer with positions or running totals: argmax, argmin and the scans (cumsum,
// cumprod, cummax, cummin, logcumsumexp). All are composed from ordinary reduces over masks, so
// they fuse and differentiate like the rest.
#include <limits>

#include <vkgrad/core/binding_guard.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/gradient.hpp>
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

// Blocks of this many elements are scanned by a triangular mask: each output reduces at most this
// many inputs, and larger axes recurse on the blocks' totals, so the work is n * kScanBlock and no
// reduce comes near the 32768-element split.
constexpr int64_t kScanBlock = 256;

// The associative operations a scan runs. Each has an identity (what masked-out and "nothing
// before" positions hold) and a reduce over the last axis that keeps the dtype.
enum class ScanOp { Sum, Prod, Max, LogSumExp };

Scalarish identity(ScanOp op, DType dtype) {
  switch (op) {
    case ScanOp::Sum:  // -0.0 for floats: with +0.0 in masked-out places, -0.0 summed to +0.0
      return dtype.is_float() ? Scalarish(-0.0) : Scalarish(int64_t(0));
    case ScanOp::Prod:
      return int64_t(1);
    case ScanOp::Max:
      if (dtype.is_float()) return -std::numeric_limits<double>::infinity();
      return int64_t(dtypes::min_value(dtype));
    case ScanOp::LogSumExp:
      return -std::numeric_limits<double>::infinity();
  }
  return int64_t(0);
}

Tensor reduce_last(const Tensor& t, ScanOp op) {
  switch (op) {
    case ScanOp::Sum:
      return t.sum(-1);
    case ScanOp::Prod:
      return t.prod(-1);
    case ScanOp::Max:
      return t.max(-1);
    case ScanOp::LogSumExp:
      return t.logsumexp(-1);
  }
  return t;
}

Tensor combine(const Tensor& a, const Tensor& b, ScanOp op) {
  switch (op) {
    case ScanOp::Sum:
      return a + b;
    case ScanOp::Prod:
      return a * b;
    case ScanOp::Max:
      return a.maximum(b);
    case ScanOp::LogSumExp:
      return a.logaddexp(b);
  }
  return a;
}

// x's sizes, symbolic where x's are: the reshapes and shrinks below keep the leading axes' sizes
// as expressions of their variables, so a kernel (and a Jit replay) serves every binding.
SymShape sizes_of(const Tensor& x) {
  if (x.has_symbolic_shape()) return x.sym_shape();
  return SymShape(x.shape().begin(), x.shape().end());
}

// The inclusive scan of x over its last axis (a plain size); x is already in the dtype the scan
// accumulates in.
Tensor scan_last(const Tensor& x, ScanOp op) {
  const int64_t n = x.shape().back();
  const SymShape sizes = sizes_of(x);
  const SymShape lead(sizes.begin(), sizes.end() - 1);
  const Tensor fill = Tensor::full({}, identity(op, x.dtype()), x.dtype(), x.device());
  if (n <= kScanBlock) {
    // lower[i][j] = j <= i: output i reduces inputs 0..i.
    const Tensor i = Tensor::arange(0, n, 1, x.device()).reshape({n, 1});
    const Tensor j = Tensor::arange(0, n, 1, x.device()).reshape({1, n});
    SymShape row = lead;
    row.push_back(1);
    row.push_back(n);
    return reduce_last(j.le(i).where(x.reshape(row), fill), op);
  }
  // (..., blocks, kScanBlock): the scan inside each block, combined with the scan of all earlier
  // blocks. The padding at the end only reaches outputs that are trimmed away.
  const int64_t blocks = (n + kScanBlock - 1) / kScanBlock;
  std::vector<std::pair<SymInt, SymInt>> pads(lead.size(), {0, 0});
  pads.emplace_back(0, blocks * kScanBlock - n);
  SymShape blocked = lead;
  blocked.push_back(blocks);
  blocked.push_back(kScanBlock);
  const Tensor b = x.pad(pads).reshape(blocked);
  const Tensor inside = scan_last(b, op);
  // The scan of the earlier blocks: that of the totals shifted right by one (the identity first),
  // not the scan with this block's total taken out again, which is inf - inf = nan for sums after
  // an inf and has no inverse for max.
  const Tensor totals = reduce_last(b, op);
  std::vector<std::pair<SymInt, SymInt>> shift(lead.size(), {0, 0}), first;
  shift.emplace_back(1, 0);
  for (const SymInt& d : lead) first.emplace_back(0, d);
  first.emplace_back(0, blocks);
  const Tensor before = scan_last(totals.pad(shift, identity(op, x.dtype())).shrink(first), op);
  SymShape flat = lead;
  flat.push_back(blocks * kScanBlock);
  std::vector<std::pair<SymInt, SymInt>> keep;
  for (const SymInt& d : lead) keep.emplace_back(0, d);
  keep.emplace_back(0, n);
  SymShape column = lead;
  column.push_back(blocks);
  column.push_back(1);
  return combine(inside, before.reshape(column), op).reshape(flat).shrink(keep);
}

// The scan along any axis: moved last and back. A 0-d tensor scans as one element. Along a
// symbolic axis the triangular mask would need a symbolic arange: the axis is taken at its bound
// value (a plain size, as the plain program has it) and a Jit's capture replays only that value
// (core/binding_guard.hpp). Such an axis arises where a size n broadcasts with an equal plain one
// (binding fuzzer seeds 8400048, 8401202: n = 2 plus a plain 2 is n), so refusing it threw where
// the plain program computes.
Tensor scan(const Tensor& x, int64_t axis, ScanOp op, std::string_view name) {
  if (x.ndim() == 0) return scan(x.reshape({1}), 0, op, name).reshape({});
  const int ax = normalize_axis(axis, x.shape(), name);
  if (x.has_symbolic_shape() && x.sym_shape()[size_t(ax)].is_symbolic()) {
    const SymShape s = x.sym_shape();
    const SymInt& d = s[size_t(ax)];
    guard_same_value(d.expr(), d.value(), [&] {
      return std::string(name) + " scans axis " + std::to_string(axis) + " of size " + d.str() +
             " at the capture's value " + std::to_string(d.value());
    });
    // A pad and a shrink to the plain size: the shrink's end names the size as a number.
    std::vector<std::pair<SymInt, SymInt>> pads(s.size(), {SymInt(0), SymInt(0)}), keep;
    pads[size_t(ax)] = {SymInt(0), SymInt(1)};
    for (size_t i = 0; i < s.size(); ++i)
      keep.emplace_back(SymInt(0), i == size_t(ax) ? SymInt(d.value()) : s[i]);
    const Tensor plain = x.pad(pads).shrink(keep);
    if (plain.has_symbolic_shape() && plain.sym_shape()[size_t(ax)].is_symbolic())
      throw Error(std::string(name) + ": internal: axis " + std::to_string(axis) +
                  " stayed symbolic");
    return scan(plain, ax, op, name);
  }
  if (x.shape()[size_t(ax)] == 0) return x;
  return scan_last(x.transpose(ax, -1), op).transpose(ax, -1);
}

// x shifted one place along axis (the last element dropped), `fill` first.
Tensor shift_right(const Tensor& x, int ax, Scalarish fill) {
  std::vector<std::pair<SymInt, SymInt>> pads(size_t(x.ndim()), {0, 0}), keep;
  pads[size_t(ax)] = {1, 0};
  for (const SymInt& d : sizes_of(x)) keep.emplace_back(0, d);
  return x.pad(pads, fill).shrink(keep);
}

// cummax over the order-preserving image `key` of the input (the input itself for cummax).
// The index is torch's: the last position at or before i that holds the running maximum, found
// as the running max of the positions where the key reaches the maximum so far (ties included;
// a nan always does, and then stays the maximum).
std::pair<Tensor, Tensor> running_max(const Tensor& key, int64_t axis, std::string_view name) {
  if (key.ndim() == 0) {
    auto [v, i] = running_max(key.reshape({1}), 0, name);
    return {v.reshape({}), i.reshape({})};
  }
  const int ax = normalize_axis(axis, key.shape(), name);
  const Tensor values = scan(key, ax, ScanOp::Max, name);
  const int64_t n = key.shape()[size_t(ax)];
  if (n == 0) return {values, Tensor::zeros(key.shape(), dtypes::int32, key.device())};
  const Tensor before = shift_right(values, ax, identity(ScanOp::Max, key.dtype()));
  Tensor reaches = key.ge(before);
  if (key.dtype().is_float()) reaches = reaches.logical_or(key.isnan());
  Shape along(size_t(key.ndim()), 1);
  along[size_t(ax)] = n;
  const Tensor position = Tensor::arange(0, n, 1, key.device()).reshape(along);
  const Tensor indices = scan(reaches.where(position, 0), ax, ScanOp::Max, name);
  if (!key.requires_grad()) return {values, indices};
  // torch's gradient (cummaxmin_backward): each running extreme's to the position its index names,
  // not split among tied elements as the scan's own would be.
  const UOpPtr k = key.node(), at = indices.node();
  return {Tensor(with_custom_gradient(values.node(), {k},
                                      [k, at, ax](const Tensor& g) {
                                        return std::vector<std::optional<Tensor>>{
                                            Tensor::zeros_like(Tensor(k)).scatter_add(
                                                ax, Tensor(at), g.cast(Tensor(k).dtype()))};
                                      })),
          indices};
}

}  // namespace

// Accumulates in sum's dtype (small integers and bools in 32 bits, half floats in float32).
Tensor Tensor::cumsum(int64_t axis) const {
  const Tensor out = scan(cast(sum_acc_dtype(dtype())), axis, ScanOp::Sum, "cumsum");
  return dtype().is_float() ? out.cast(dtype()) : out;
}

// Accumulates as prod does. The gradient is that of the masked products, so a zero input gets
// the product of the others, as torch's.
Tensor Tensor::cumprod(int64_t axis) const {
  const DType acc = sum_acc_dtype(dtype());
  const Tensor out = scan(cast(acc), axis, ScanOp::Prod, "cumprod");
  return dtype().is_float() ? out.cast(dtype()) : out;
}

Tensor Tensor::logcumsumexp(int64_t axis) const {
  const Tensor x = dtype().is_float() ? *this : cast(dtypes::default_float);
  return scan(x, axis, ScanOp::LogSumExp, "logcumsumexp");
}

std::pair<Tensor, Tensor> Tensor::cummax(int64_t axis) const {
  if (dtype().is_bool()) {
    auto [v, i] = running_max(cast(dtypes::uint8), axis, "cummax");
    return {v.cast(dtypes::bool_), i};
  }
  return running_max(*this, axis, "cummax");
}

// Through the order-reversing image argmin uses (negation for floats, bitwise not for integers),
// so ties and nans follow cummax's rules.
std::pair<Tensor, Tensor> Tensor::cummin(int64_t axis) const {
  if (dtype().is_bool()) {
    auto [v, i] = logical_not().cast(dtypes::uint8).cummax(axis);
    return {v.cast(dtypes::bool_).logical_not(), i};
  }
  if (dtype().is_float()) {
    auto [v, i] = running_max(-*this, axis, "cummin");
    return {-v, i};
  }
  auto [v, i] = running_max(bitwise_not(), axis, "cummin");
  return {v.bitwise_not(), i};
}

}  // namespace vkg
