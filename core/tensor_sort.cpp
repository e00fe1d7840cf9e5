// Sorting: sort, argsort, topk, max/min with their indices, and unique. sort is a bitonic
// network built from views and wheres, as tinygrad's: the axis is padded to a power of two, and
// each of the log2(n) * (log2(n) + 1) / 2 compare-exchange steps is one elementwise kernel per
// output. Every element carries its original position, and ties are broken by it, so the sort is
// stable in both orders; nan sorts as the largest value (last ascending, first descending), and
// -0.0 ties with 0.0, as torch.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

namespace {

// Elements in sort order with their original positions (int32).
struct Keyed {
  Tensor values;
  Tensor positions;
};

// Where (a, ia) belongs after (b, ib). Positions at or past `real` are the padding, which goes
// after every element; among themselves and at ties, the lower position goes first.
Tensor belongs_after(const Keyed& a, const Keyed& b, bool descending, int64_t real) {
  Tensor later = descending ? b.values.gt(a.values) : a.values.gt(b.values);
  Tensor tie = a.values.eq(b.values);
  if (a.values.dtype().is_float()) {
    const Tensor an = a.values.isnan(), bn = b.values.isnan();
    later = later.logical_or(descending ? bn.logical_and(an.logical_not()) : an.logical_and(bn.logical_not()));
    tie = tie.logical_or(an.logical_and(bn));
  }
  const Tensor by_position = a.positions.gt(b.positions);
  const Tensor padding = a.positions.ge(real).logical_or(b.positions.ge(real));
  return padding.logical_or(tie).where(by_position, later);
}

// One compare-exchange step over the last axis viewed as (..., groups, 2, half): the first half
// of each group against the second (reversed when `mirror`, the first step of each merge, which
// makes every exchange go the same way). Each output is one kernel.
Keyed exchange(const Keyed& x, int64_t half, bool mirror, bool descending, int64_t real) {
  const Shape shape = x.values.shape();
  Shape grouped(shape.begin(), shape.end() - 1);
  const int64_t n = shape.back();
  grouped.insert(grouped.end(), {n / (2 * half), 2, half});
  auto split = [&](const Tensor& t, int64_t which) {
    std::vector<std::pair<int64_t, int64_t>> r;
    for (int64_t d : grouped) r.emplace_back(0, d);
    r[r.size() - 2] = {which, which + 1};
    Tensor part = t.reshape(grouped).shrink(r);
    return which == 1 && mirror ? part.flip({-1}) : part;
  };
  const Keyed lo{split(x.values, 0), split(x.positions, 0)};
  const Keyed hi{split(x.values, 1), split(x.positions, 1)};
  const Tensor swap = belongs_after(lo, hi, descending, real);
  auto join = [&](const Tensor& first, const Tensor& second) {
    const Tensor back = mirror ? second.flip({-1}) : second;
    const Tensor both[] = {first, back};
    return Tensor::cat(both, -2).reshape(shape).contiguous();
  };
  return {join(swap.where(hi.values, lo.values), swap.where(lo.values, hi.values)),
          join(swap.where(hi.positions, lo.positions), swap.where(lo.positions, hi.positions))};
}

// Sorts along the last axis.
Keyed bitonic_sort(const Tensor& x, bool descending) {
  const Shape shape = x.shape();
  const int64_t n = shape.back();
  const int64_t padded = int64_t(std::bit_ceil(uint64_t(std::max<int64_t>(n, 1))));
  Shape along(shape.size(), 1);
  along.back() = padded;
  std::vector<std::pair<int64_t, int64_t>> pads(shape.size(), {0, 0});
  pads.back() = {0, padded - n};
  Keyed k{x.pad(pads), Tensor::arange(0, padded, 1, x.device()).reshape(along).expand([&] {
            Shape s = shape;
            s.back() = padded;
            return s;
          }())};
  for (int64_t block = 2; block <= padded; block *= 2) {
    k = exchange(k, block / 2, true, descending, n);
    for (int64_t half = block / 4; half >= 1; half /= 2) k = exchange(k, half, false, descending, n);
  }
  std::vector<std::pair<int64_t, int64_t>> keep;
  for (int64_t d : shape) keep.emplace_back(0, d);
  return {k.values.shrink(keep), k.positions.shrink(keep)};
}

std::string desc(const Tensor& t) { return shape_str(t.shape()) + " " + t.dtype().name(); }

}  // namespace

std::pair<Tensor, Tensor> Tensor::sort(int64_t axis, bool descending) const {
  if (ndim() == 0) return {*this, Tensor::zeros({}, dtypes::int32, device())};
  const int ax = normalize_axis(axis, shape(), "sort");
  if (shape()[size_t(ax)] > int64_t(INT32_MAX))
    throw Error("sort: axis " + std::to_string(ax) + " of " + desc(*this) + " is too long for int32 positions");
  // Bools sort as bytes (a where over bools is fine, but gt is not defined for them).
  const Tensor keys = dtype().is_bool() ? cast(dtypes::uint8) : *this;
  Keyed sorted = bitonic_sort(keys.transpose(ax, -1), descending);
  Tensor values = sorted.values.transpose(ax, -1);
  if (dtype().is_bool()) values = values.cast(dtypes::bool_);
  return {values, sorted.positions.transpose(ax, -1)};
}

Tensor Tensor::argsort(int64_t axis, bool descending) const { return sort(axis, descending).second; }

std::pair<Tensor, Tensor> Tensor::topk(int64_t k, int64_t axis, bool largest) const {
  const Tensor x = ndim() == 0 ? reshape({1}) : *this;
  const int ax = normalize_axis(axis, x.shape(), "topk");
  const int64_t n = x.shape()[size_t(ax)];
  if (k < 0 || k > n)
    throw Error("topk: k = " + std::to_string(k) + " is outside [0, " + std::to_string(n) +
                "] for axis " + std::to_string(ax) + " of " + desc(*this));
  auto [values, positions] = x.sort(ax, largest);
  std::vector<std::pair<int64_t, int64_t>> keep;
  for (int64_t d : x.shape()) keep.emplace_back(0, d);
  keep[size_t(ax)] = {0, k};
  values = values.shrink(keep);
  positions = positions.shrink(keep);
  if (ndim() == 0) return {values.reshape({}), positions.reshape({})};
  return {values, positions};
}

std::pair<Tensor, Tensor> Tensor::max_with_indices(int64_t axis, bool keepdim) const {
  return {max(axis, keepdim), argmax(axis, keepdim)};
}

std::pair<Tensor, Tensor> Tensor::min_with_indices(int64_t axis, bool keepdim) const {
  return {min(axis, keepdim), argmin(axis, keepdim)};
}

// The sort runs on the device; the host reads where neighbours differ (nan differs from every
// value, itself included; -0.0 equals 0.0) and the sorted positions, and builds the three results
// from those (one host sync, then uploads).
std::tuple<Tensor, Tensor, Tensor> Tensor::unique() const {
  const Tensor flat = reshape({numel()});
  const int64_t n = flat.numel();
  if (n == 0)
    return {flat, Tensor::zeros(shape(), dtypes::int32, device()),
            Tensor::zeros({0}, dtypes::int32, device())};
  auto [sorted, positions] = flat.sort(0);
  const Tensor differs =
      sorted.shrink({{1, n}}).ne(sorted.shrink({{0, n - 1}})).cast(dtypes::int32);
  const std::vector<std::byte> sorted_bytes = sorted.bytes();
  const std::vector<int32_t> at = positions.to_vector<int32_t>();
  const std::vector<int32_t> step = differs.to_vector<int32_t>();
  const size_t item = size_t(dtype().itemsize());
  std::vector<std::byte> firsts(sorted_bytes.begin(), sorted_bytes.begin() + ptrdiff_t(item));
  std::vector<int32_t> inverse(static_cast<size_t>(n), 0), counts{1};
  for (int64_t i = 1; i < n; ++i) {
    if (step[size_t(i - 1)]) {
      counts.push_back(0);
      const auto from = sorted_bytes.begin() + ptrdiff_t(size_t(i) * item);
      firsts.insert(firsts.end(), from, from + ptrdiff_t(item));
    }
    ++counts.back();
    inverse[size_t(at[size_t(i)])] = int32_t(counts.size() - 1);
  }
  const int64_t groups = int64_t(counts.size());
  return {Tensor(std::span<const std::byte>(firsts), size_t(groups), dtype(), {groups}, device()),
          Tensor(inverse, shape(), device()), Tensor(counts, {groups}, device())};
}

}  // namespace vkg
