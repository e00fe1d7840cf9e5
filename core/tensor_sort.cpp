// Sorting: sort, argsort, topk, max/min with their indices, and unique. sort is a bitonic
// network built from views and wheres, as tinygrad's: the axis is padded to a power of two, and
// each of the log2(n) * (log2(n) + 1) / 2 compare-exchange steps is one elementwise kernel.
// Every element carries its original position, and ties are broken by it, so the sort is stable
// in both orders; nan sorts as the largest value (last ascending, first descending), and -0.0 ties
// with 0.0, as torch.
//
// Two forms of the network. Values of up to 32 bits, when no gradient is wanted, sort as one
// uint64 per element: an order-preserving key in the high half and the position in the low half,
// so each step is one kernel comparing one number, and the values are then read back at the
// sorted positions (one indexed load). Otherwise values and positions move as two tensors (two
// kernels a step), so the gradient flows back through the exchanges' wheres.
//
// topk of a small k (at most 64) over a longer axis sorts nothing: a tournament of chunks
// (tournament_positions) keeps the k first of each chunk until one chunk remains.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/gradient.hpp>
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
    later = later.logical_or(descending ? bn.logical_and(an.logical_not())
                                        : an.logical_and(bn.logical_not()));
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
    for (int64_t half = block / 4; half >= 1; half /= 2)
      k = exchange(k, half, false, descending, n);
  }
  std::vector<std::pair<int64_t, int64_t>> keep;
  for (int64_t d : shape) keep.emplace_back(0, d);
  return {k.values.shrink(keep), k.positions.shrink(keep)};
}

std::string desc(const Tensor& t) { return shape_str(t.shape()) + " " + t.dtype().name(); }

// An order-preserving uint32 of each value (torch's order: nan canonical and largest, -0.0 as
// 0.0): floats flip all bits when negative and set the sign bit otherwise; signed integers flip
// the sign bit. Descending order inverts the key.
Tensor sort_key(const Tensor& x, bool descending) {
  const DType d = x.dtype();
  const Tensor sign = Tensor::full({}, int64_t(0x80000000u), dtypes::uint32, x.device());
  auto float_key = [&] {
    const Tensor f = x.cast(dtypes::float32);
    const Tensor zero = Tensor::zeros({}, dtypes::uint32, x.device());
    const Tensor canonical_nan = Tensor::full({}, int64_t(0x7fc00000), dtypes::uint32, x.device());
    const Tensor bits =
        f.isnan().where(canonical_nan, f.eq(0).where(zero, f.bitcast(dtypes::uint32)));
    return bits.rshift(31).ne(0).where(bits.bitwise_not(), bits.bitwise_or(sign));
  };
  const Tensor key = d.is_float() ? float_key()
                     : d.is_bool() || d.is_unsigned()
                         ? x.cast(dtypes::uint32)
                         : x.cast(dtypes::int32).bitcast(dtypes::uint32).bitwise_xor(sign);
  return descending ? key.bitwise_not() : key;
}

// The packed network over the last axis: the sorted positions (int32).
Tensor packed_sort_positions(const Tensor& x, bool descending) {
  const Shape shape = x.shape();
  const int64_t n = shape.back();
  const int64_t padded = int64_t(std::bit_ceil(uint64_t(std::max<int64_t>(n, 1))));
  std::vector<std::pair<int64_t, int64_t>> pads(shape.size(), {0, 0});
  pads.back() = {0, padded - n};
  // The padding's key is all ones and its positions come after every real one: it sorts last.
  const Tensor key = sort_key(x, descending).pad(pads, int64_t(0xffffffffu)).cast(dtypes::uint64);
  Shape along(shape.size(), 1);
  along.back() = padded;
  const Tensor position =
      Tensor::arange(0, padded, 1, x.device()).reshape(along).cast(dtypes::uint64);
  Tensor packed = key.lshift(32).bitwise_or(position).contiguous();
  Shape wide = shape;
  wide.back() = padded;
  auto step = [&](int64_t half, bool mirror) {
    Shape grouped(wide.begin(), wide.end() - 1);
    grouped.insert(grouped.end(), {padded / (2 * half), 2, half});
    auto part = [&](int64_t which) {
      std::vector<std::pair<int64_t, int64_t>> r;
      for (int64_t g : grouped) r.emplace_back(0, g);
      r[r.size() - 2] = {which, which + 1};
      const Tensor p = packed.reshape(grouped).shrink(r);
      return which == 1 && mirror ? p.flip({-1}) : p;
    };
    const Tensor lo = part(0), hi = part(1);
    const Tensor swap = lo.gt(hi);
    const Tensor second = swap.where(lo, hi);
    const Tensor both[] = {swap.where(hi, lo), mirror ? second.flip({-1}) : second};
    packed = Tensor::cat(both, -2).reshape(wide).contiguous();
  };
  for (int64_t block = 2; block <= padded; block *= 2) {
    step(block / 2, true);
    for (int64_t half = block / 4; half >= 1; half /= 2) step(half, false);
  }
  std::vector<std::pair<int64_t, int64_t>> keep;
  for (int64_t e : shape) keep.emplace_back(0, e);
  return packed.bitwise_and(Tensor::full({}, int64_t(0xffffffffu), dtypes::uint64, x.device()))
      .cast(dtypes::int32)
      .shrink(keep);
}

// topk's tournament, for a small k: the candidates (packed as in the packed sort, so no two are
// equal and the smaller goes first) are cut into chunks of `chunk`; one reduce kernel ranks each
// candidate within its chunk (chunk compares each, ties of the padding broken by place) and
// another keeps the k first of each chunk in order (the candidate of each rank), dividing the
// candidates by chunk / k per round until one chunk holds them all. O(n * chunk) work in
// 2 * log_{chunk/k}(n) kernels, where the sort takes log2(n)^2 / 2 kernels over all n. Returns
// the positions of the k first along the last axis, in order (int32).
Tensor tournament_positions(const Tensor& x, int64_t k, bool descending, int64_t chunk) {
  const Shape shape = x.shape();
  const int64_t n = shape.back();
  const std::string& device = x.device();
  Shape along(shape.size(), 1);
  along.back() = n;
  const Tensor position = Tensor::arange(0, n, 1, device).reshape(along).cast(dtypes::uint64);
  Tensor packed =
      sort_key(x, descending).cast(dtypes::uint64).lshift(32).bitwise_or(position).contiguous();
  const Shape batch(shape.begin(), shape.end() - 1);
  for (int64_t m = n;;) {
    const int64_t c = std::min(m, chunk), chunks = (m + c - 1) / c;
    std::vector<std::pair<int64_t, int64_t>> pads(shape.size(), {0, 0});
    pads.back() = {0, chunks * c - m};
    Shape cut = batch, across = batch, down = batch;
    cut.insert(cut.end(), {chunks, c});
    across.insert(across.end(), {chunks, c, 1});
    down.insert(down.end(), {chunks, 1, c});
    // The padding loses to every candidate: all ones (a real one has a position below 2^31).
    const Tensor padded = chunks * c == m ? packed : packed.pad(pads, int64_t(-1));
    const Tensor e = padded.reshape(across), f = padded.reshape(down);
    Shape place_e(cut.size() + 1, 1), place_f(cut.size() + 1, 1);
    place_e[place_e.size() - 2] = c;
    place_f.back() = c;
    const Tensor at = Tensor::arange(0, c, 1, device).cast(dtypes::int32);
    const Tensor earlier = at.reshape(place_f).lt(at.reshape(place_e));
    const Tensor rank = f.lt(e)
                            .logical_or(f.eq(e).logical_and(earlier))
                            .cast(dtypes::int32)
                            .sum(-1)
                            .cast(dtypes::int32);
    Shape ranks(cut.size() + 1, 1);
    ranks.back() = k;
    const Tensor chosen =
        rank.reshape(across).eq(Tensor::arange(0, k, 1, device).cast(dtypes::int32).reshape(ranks));
    Shape kept = batch;
    kept.push_back(chunks * k);
    packed = chosen.where(e, Tensor::zeros({}, dtypes::uint64, device)).max(-2).reshape(kept);
    if (chunks == 1) break;
    m = chunks * k;
  }
  return packed.bitwise_and(Tensor::full({}, int64_t(0xffffffffu), dtypes::uint64, device))
      .cast(dtypes::int32);
}

}  // namespace

std::pair<Tensor, Tensor> Tensor::sort(int64_t axis, bool descending) const {
  if (ndim() == 0) return {*this, Tensor::zeros({}, dtypes::int32, device())};
  const int ax = normalize_axis(axis, shape(), "sort");
  if (shape()[size_t(ax)] > int64_t(INT32_MAX))
    throw Error("sort: axis " + std::to_string(ax) + " of " + desc(*this) +
                " is too long for int32 positions");
  const Tensor last = transpose(ax, -1);
  if (dtype().scalar_size() <= 4 && !requires_grad()) {
    const Tensor positions = packed_sort_positions(last, descending);
    return {last.gather(-1, positions).transpose(ax, -1), positions.transpose(ax, -1)};
  }
  // Bools sort as bytes (a where over bools is fine, but gt is not defined for them).
  const Tensor keys = dtype().is_bool() ? cast(dtypes::uint8) : *this;
  Keyed sorted = bitonic_sort(keys.transpose(ax, -1), descending);
  Tensor values = sorted.values.transpose(ax, -1);
  if (dtype().is_bool()) values = values.cast(dtypes::bool_);
  return {values, sorted.positions.transpose(ax, -1)};
}

Tensor Tensor::argsort(int64_t axis, bool descending) const {
  return sort(axis, descending).second;
}

std::pair<Tensor, Tensor> Tensor::topk(int64_t k, int64_t axis, bool largest) const {
  const Tensor x = ndim() == 0 ? reshape({1}) : *this;
  const int ax = normalize_axis(axis, x.shape(), "topk");
  const int64_t n = x.shape()[size_t(ax)];
  if (k < 0 || k > n)
    throw Error("topk: k = " + std::to_string(k) + " is outside [0, " + std::to_string(n) +
                "] for axis " + std::to_string(ax) + " of " + desc(*this));
  // A small k takes the tournament (values of up to 32 bits, which pack with their positions);
  // the values are then read at the positions, so a gradient flows through that indexed load.
  const int64_t chunk = std::max<int64_t>(64, int64_t(std::bit_ceil(uint64_t(4 * k))));
  if (k > 0 && n > chunk && chunk <= 256 && dtype().scalar_size() <= 4) {
    const Tensor last = x.transpose(ax, -1);
    const Tensor positions = tournament_positions(last, k, largest, chunk);
    Tensor values = last.gather(-1, positions).transpose(ax, -1);
    const Tensor at = positions.transpose(ax, -1);
    if (ndim() == 0) return {values.reshape({}), at.reshape({})};
    return {values, at};
  }
  auto [values, positions] = x.sort(ax, largest);
  std::vector<std::pair<int64_t, int64_t>> keep;
  for (int64_t d : x.shape()) keep.emplace_back(0, d);
  keep[size_t(ax)] = {0, k};
  values = values.shrink(keep);
  positions = positions.shrink(keep);
  if (ndim() == 0) return {values.reshape({}), positions.reshape({})};
  return {values, positions};
}

namespace {

// torch.max(dim)'s gradient (value_selecting_reduction_backward): all to the position the index
// names, where max's own splits it among tied elements.
std::pair<Tensor, Tensor> to_named_position(const Tensor& x, const Tensor& values,
                                            const Tensor& index, int64_t axis, bool keepdim) {
  if (!x.requires_grad() || x.ndim() == 0) return {values, index};
  const int ax = normalize_axis(axis, x.shape(), "max_with_indices");
  const UOpPtr xn = x.node(), at = index.node();
  return {Tensor(with_custom_gradient(
              values.node(), {xn},
              [xn, at, ax, keepdim](const Tensor& g) {
                const Tensor src(xn);
                const Tensor i = keepdim ? Tensor(at) : Tensor(at).unsqueeze(ax);
                const Tensor gk = keepdim ? g : g.unsqueeze(ax);
                Shape along(size_t(src.ndim()), 1);
                along[size_t(ax)] = src.shape()[size_t(ax)];
                const Tensor position =
                    Tensor::arange(0, along[size_t(ax)], 1, src.device()).reshape(along);
                return std::vector<std::optional<Tensor>>{
                    position.eq(i.cast(position.dtype()))
                        .where(gk.expand(src.shape()), Tensor::zeros({}, gk.dtype(), src.device()))
                        .cast(src.dtype())};
              })),
          index};
}

}  // namespace

std::pair<Tensor, Tensor> Tensor::max_with_indices(int64_t axis, bool keepdim) const {
  return to_named_position(*this, max(axis, keepdim), argmax(axis, keepdim), axis, keepdim);
}

std::pair<Tensor, Tensor> Tensor::min_with_indices(int64_t axis, bool keepdim) const {
  return to_named_position(*this, min(axis, keepdim), argmin(axis, keepdim), axis, keepdim);
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
