// Pooling in 1 to 3 dimensions with torch's options (ceil_mode, count_include_pad, max-pool
// indices), adaptive average pooling, and interpolate (nearest, linear, bilinear, trilinear). The
// pools are reduces over a pooling view of the padded input (core/tensor_pool.hpp); adaptive
// pooling and interpolation are, per spatial axis, a product with a small (out, in) matrix of
// weights built on the host, so each is exact, differentiable and one fused kernel per axis.
#include <algorithm>
#include <cmath>
#include <limits>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/gradient.hpp>
#include <vkgrad/core/spatial_options.hpp>
#include <vkgrad/core/tensor.hpp>
#include <vkgrad/core/tensor_pool.hpp>

namespace vkg {

namespace {

using Pads = std::vector<std::pair<int64_t, int64_t>>;

// The pooled axes' geometry: kernel, stride, dilation, and the pads before and after (the after
// pad grows by what ceil_mode's last window needs).
struct Geometry {
  std::vector<int64_t> k, s, d;
  Pads pads;   // the user's padding, both sides
  Pads extra;  // pads including ceil_mode's overhang
};

Geometry geometry(const Tensor& x, const PoolOptions& o, std::string_view op) {
  const size_t dims = o.kernel.size();
  if (dims < 1 || dims > 3 || size_t(x.ndim()) < dims + 1)
    throw Error(std::string(op) +
                ": needs 1 to 3 kernel sizes and an input with a leading axis before the pooled "
                "ones, got kernel of " +
                std::to_string(dims) + " and input " + desc(x));
  Geometry g;
  g.k = o.kernel;
  g.s = o.stride ? per_axis(*o.stride, dims, "stride", op, x) : o.kernel;
  g.d = per_axis(o.dilation, dims, "dilation", op, x);
  const std::vector<int64_t> p = per_axis(o.padding, dims, "padding", op, x);
  check_at_least(g.k, 1, "kernel", op, x);
  check_at_least(g.s, 1, "stride", op, x);
  check_at_least(g.d, 1, "dilation", op, x);
  check_at_least(p, 0, "padding", op, x);
  const size_t lead = size_t(x.ndim()) - dims;
  std::vector<int64_t> padded(dims);
  for (size_t a = 0; a < dims; ++a) {
    // As torch: a window over an empty axis would hold only padding.
    if (x.shape()[lead + a] == 0)
      throw Error(std::string(op) + ": the pooled axes of input " + desc(x) + " must not be empty");
    if (2 * p[a] > g.k[a])
      throw Error(std::string(op) + ": padding " + values_str(p) +
                  " must be at most half the kernel " + values_str(g.k) + " (as torch; input " +
                  desc(x) + ")");
    padded[a] = x.shape()[lead + a] + 2 * p[a];
  }
  g.pads.assign(lead, {0, 0});
  g.extra.assign(lead, {0, 0});
  for (size_t a = 0; a < dims; ++a) {
    const int64_t n = x.shape()[lead + a], span = g.d[a] * (g.k[a] - 1) + 1,
                  room = n + 2 * p[a] - span;
    if (room < 0)
      throw Error(std::string(op) + ": the kernel " + values_str(g.k) + " with dilation " +
                  values_str(g.d) + " is larger than the padded input " + values_str(padded) +
                  " (input " + desc(x) + ")");
    int64_t out = (o.ceil_mode ? (room + g.s[a] - 1) / g.s[a] : room / g.s[a]) + 1;
    // torch: the last window must start inside the input or its left padding.
    if (o.ceil_mode && (out - 1) * g.s[a] >= n + p[a]) --out;
    g.pads.emplace_back(p[a], p[a]);
    g.extra.emplace_back(p[a], std::max<int64_t>(p[a], (out - 1) * g.s[a] + span - n - p[a]));
  }
  return g;
}

Axes last_axes(size_t n) {
  Axes a;
  for (size_t i = 0; i < n; ++i) a.list.push_back(-1 - int64_t(i));
  return a;
}

// Windows of x padded with `fill` (the user's padding and ceil_mode's overhang alike).
Tensor windows_of(const Tensor& x, const Geometry& g, Scalarish fill) {
  return pool(x.pad(g.extra, fill), g.k, g.s, g.d);
}

// Rows of weights that map `in` positions to `out` along one axis; applied as a product over
// that axis.
Tensor apply_along(const Tensor& x, int axis, const std::vector<double>& weights, int64_t out,
                   int64_t in) {
  const Tensor m = Tensor(weights, {out, in}, x.device()).cast(x.dtype());
  return x.transpose(axis, -1).matmul(m.transpose()).transpose(axis, -1);
}

// Where torch's max pools find each window's maximum in `flat` (windows flattened to (..., k)),
// given the max `value` (..., 1): the first element equal to it, or where the max is a nan, the
// last nan (torch's kernels move on to an element when `val > max || isnan(val)`). `inside`
// (..., k), where there is padding, leaves it out: window [pad, -inf] has its max at the -inf.
Tensor max_positions(const Tensor& flat, const Tensor& value, const std::optional<Tensor>& inside) {
  Tensor hit = flat.eq(value);
  if (inside) hit = hit.logical_and(*inside);
  // Integers have no nan: the first hit, where the running count of hits is 1.
  if (!flat.dtype().is_float()) return hit.logical_and(hit.cast(dtypes::int32).cumsum(-1).eq(1));
  hit = hit.logical_or(flat.isnan());  // a nan max equals nothing; padding is never a nan
  const int64_t k = flat.shape().back();
  if (k > 256) {  // a scan in blocks (cumsum's), and the total in a reduce of its own
    const Tensor hits = hit.cast(dtypes::int32);
    return hit.logical_and(hits.cumsum(-1).eq(value.isnan().where(hits.sum(-1, true), 1)));
  }
  // One reduce with a mask that is the same for every window (as a cumsum's): position i counts
  // the hits before it times 2^bits (> k) plus those after it. The first hit has none before it
  // (count < 2^bits), the last none after it (count's low bits 0); a mask of the count's bits
  // picks which to test, per window.
  int bits = 1;
  while ((int64_t(1) << bits) <= k) ++bits;
  const int64_t high = int64_t(1) << bits;
  const Tensor i = Tensor::arange(0, k, 1, flat.device()).reshape({k, 1});
  const Tensor j = Tensor::arange(0, k, 1, flat.device()).reshape({1, k});
  Shape row = flat.shape();
  row.insert(row.end() - 1, 1);  // (..., 1, k) against the (k, k) weights
  const Tensor weight = j.lt(i).where(high, j.gt(i).cast(dtypes::int32));
  const Tensor counts = hit.reshape(row).where(weight, 0).sum(-1);
  const Tensor bits_tested = value.isnan().where(high - 1, -high).cast(dtypes::int32);
  return hit.logical_and(counts.bitwise_and(bits_tested).eq(0));
}

// The max over each window, reduced over the window's axes as they are (not flattened: the
// kernel indexes them without a division). The index of each window's maximum is that of the
// input position (flattened over the pooled axes, as torch's) that max_positions picks: a pooled
// view of the positions, padded with -1, holds them.
std::pair<Tensor, Tensor> max_pool_of(const Tensor& x, const PoolOptions& o, std::string_view op) {
  const Geometry g = geometry(x, o, op);
  const size_t dims = o.kernel.size(), lead = size_t(x.ndim()) - dims;
  const double lowest = x.dtype().is_float() ? -std::numeric_limits<double>::infinity()
                                             : dtypes::min_value(x.dtype());
  const Tensor windows = windows_of(x, g, lowest);
  Shape flat(windows.shape().begin(), windows.shape().end() - int64_t(dims)), one = flat;
  int64_t kprod = 1;
  for (int64_t k : g.k) kprod *= k;
  flat.push_back(kprod);
  one.push_back(1);
  // Positions 0..prod(spatial)-1 laid over the pooled axes, padded with -1.
  Shape spatial(x.shape().begin() + int64_t(lead), x.shape().end());
  int64_t positions = 1;
  for (int64_t n : spatial) positions *= n;
  Shape ones(lead, 1);
  ones.insert(ones.end(), spatial.begin(), spatial.end());
  const Tensor where_from = Tensor::arange(0, positions, 1, x.device()).reshape(ones);
  const Tensor index_windows =
      pool(where_from.pad(g.extra, -1), g.k, g.s, g.d).expand(windows.shape()).reshape(flat);
  std::optional<Tensor> inside;
  for (const auto& [before, after] : g.extra)
    if (before || after) inside = index_windows.ge(0);
  const Tensor max = windows.max(last_axes(dims));
  Tensor values = max;
  if (x.dtype().is_float()) {
    // torch's gradient: each window's maximum as max_positions picks it takes all of it (max's
    // own rule would split it among tied maxima).
    const UOpPtr wn = windows.node(), mn = max.node();
    values = Tensor(with_custom_gradient(
        mn, {wn},
        [wn, mn, flat, one, inside](const Tensor& grad) -> std::vector<std::optional<Tensor>> {
          const Tensor w(wn);
          const Tensor at = max_positions(w.reshape(flat), Tensor(mn).reshape(one), inside);
          return {at.where(grad.reshape(one).expand(flat), 0).reshape(w.shape())};
        }));
  }
  const Tensor at = max_positions(windows.reshape(flat), max.reshape(one), inside);
  const Tensor indices = at.where(index_windows, 0).sum(-1).cast(dtypes::int32);
  return {values, indices};
}

// count_include_pad counts the user's padding (not ceil_mode's overhang) in each window's divisor,
// as torch; otherwise only the input's elements count.
Tensor avg_pool_of(const Tensor& input, const PoolOptions& o, std::string_view op) {
  const Geometry g = geometry(input, o, op);
  const size_t dims = o.kernel.size();
  const Tensor x = input.dtype().is_float() ? input : input.cast(dtypes::default_float);
  const Tensor sums = windows_of(x, g, 0).sum(last_axes(dims));
  // Every window counts all its k elements when nothing it covers is left out: no ceil_mode
  // overhang, and padding counted or absent. Then the divisor is that constant.
  bool uniform = true;
  for (size_t a = 0; a < g.extra.size(); ++a)
    uniform &= g.extra[a] == g.pads[a] &&
               (o.count_include_pad || g.pads[a] == std::make_pair<int64_t, int64_t>(0, 0));
  if (uniform) {
    int64_t k = 1;
    for (int64_t v : g.k) k *= v;
    return sums / double(k);
  }
  // Otherwise the divisor: ones over what counts, padded with zeros, pooled the same way.
  Tensor counted = Tensor::ones(x.shape(), x.dtype(), x.device());
  Pads rest = g.extra;
  if (o.count_include_pad) {
    counted = counted.pad(g.pads, 1);
    for (size_t a = 0; a < rest.size(); ++a) rest[a] = {0, g.extra[a].second - g.pads[a].second};
  }
  const Tensor divisor = pool(counted.pad(rest), g.k, g.s, g.d).sum(last_axes(dims));
  return sums / divisor;
}

// max_pool2d's and avg_pool2d's options as the N-d pools', for a (C, H, W) or (N, C, H, W) input
// as torch's.
PoolOptions options_2d(const Tensor& x, const Pool2dOptions& o, std::string_view op) {
  if (x.ndim() != 3 && x.ndim() != 4)
    throw Error(std::string(op) + ": needs a 3-D (C, H, W) or 4-D (N, C, H, W) input, got " +
                desc(x));
  const Size2 stride = o.stride.value_or(o.kernel);
  return {.kernel = {o.kernel.h, o.kernel.w},
          .stride = std::vector<int64_t>{stride.h, stride.w},
          .padding = {o.padding.h, o.padding.w},
          .dilation = {o.dilation.h, o.dilation.w}};
}

}  // namespace

Tensor Tensor::max_pool(PoolOptions o) const { return max_pool_of(*this, o, "max_pool").first; }

std::pair<Tensor, Tensor> Tensor::max_pool_with_indices(PoolOptions o) const {
  return max_pool_of(*this, o, "max_pool");
}

Tensor Tensor::max_pool2d(Pool2dOptions o) const {
  return max_pool_of(*this, options_2d(*this, o, "max_pool2d"), "max_pool2d").first;
}

Tensor Tensor::avg_pool(PoolOptions o) const { return avg_pool_of(*this, o, "avg_pool"); }

Tensor Tensor::avg_pool2d(Pool2dOptions o) const {
  return avg_pool_of(*this, options_2d(*this, o, "avg_pool2d"), "avg_pool2d");
}

// torch's adaptive_avg_pool: output cell i along an axis of n averages inputs
// [floor(i n / out), ceil((i + 1) n / out)).
Tensor Tensor::adaptive_avg_pool(Shape output_size) const {
  const size_t dims = output_size.size();
  if (dims < 1 || size_t(ndim()) < dims + 1)
    throw Error("adaptive_avg_pool: needs an input with a leading axis before the " +
                std::to_string(dims) + " pooled ones, got " + desc(*this));
  Tensor x = dtype().is_float() ? *this : cast(dtypes::default_float);
  for (size_t a = 0; a < dims; ++a) {
    const int axis = int(ndim() - int64_t(dims) + int64_t(a));
    const int64_t n = shape()[size_t(axis)], out = output_size[a];
    if (out <= 0 || n <= 0)
      throw Error("adaptive_avg_pool: output size " + shape_str(output_size) + " and input " +
                  desc(*this) + " must be positive");
    std::vector<double> w(size_t(out * n), 0.0);
    for (int64_t i = 0; i < out; ++i) {
      const int64_t begin = i * n / out, end = ((i + 1) * n + out - 1) / out;
      for (int64_t j = begin; j < end; ++j) w[size_t(i * n + j)] = 1.0 / double(end - begin);
    }
    x = apply_along(x, axis, w, out, n);
  }
  return x;
}

// torch's F.interpolate over the last size.size() axes. nearest: source floor(i * in / out).
// linear (bilinear, trilinear: one axis after another): source (i + 0.5) * in / out - 0.5 clamped
// at 0, or i * (in - 1) / (out - 1) with align_corners.
Tensor Tensor::interpolate(Shape size, std::string_view mode, bool align_corners) const {
  const size_t dims = size.size();
  const bool nearest = mode == "nearest";
  const bool linear = (mode == "linear" && dims == 1) || (mode == "bilinear" && dims == 2) ||
                      (mode == "trilinear" && dims == 3);
  if (!nearest && !linear)
    throw Error("interpolate: mode \"" + std::string(mode) + "\" does not fit " +
                std::to_string(dims) +
                " output sizes (nearest, or linear/bilinear/trilinear for 1/2/3)");
  if (nearest && align_corners) throw Error("interpolate: align_corners needs a linear mode");
  if (dims < 1 || size_t(ndim()) < dims + 1)
    throw Error("interpolate: needs an input (N, C, ...) with " + std::to_string(dims) +
                " spatial axes, got " + desc(*this));
  Tensor x = dtype().is_float() ? *this : cast(dtypes::default_float);
  for (size_t a = 0; a < dims; ++a) {
    const int axis = int(ndim() - int64_t(dims) + int64_t(a));
    const int64_t n = shape()[size_t(axis)], out = size[a];
    if (out <= 0 || n <= 0)
      throw Error("interpolate: sizes must be positive, got " + shape_str(size) + " for input " +
                  desc(*this));
    std::vector<double> w(size_t(out * n), 0.0);
    const double scale = double(n) / double(out);
    for (int64_t i = 0; i < out; ++i) {
      if (nearest) {
        const int64_t src = std::min<int64_t>(int64_t(std::floor(double(i) * scale)), n - 1);
        w[size_t(i * n + src)] = 1;
        continue;
      }
      double src = align_corners ? (out > 1 ? double(i) * double(n - 1) / double(out - 1) : 0.0)
                                 : std::max(0.0, (double(i) + 0.5) * scale - 0.5);
      const int64_t i0 = std::min<int64_t>(int64_t(std::floor(src)), n - 1),
                    i1 = std::min<int64_t>(i0 + 1, n - 1);
      const double t = src - double(i0);
      w[size_t(i * n + i0)] += 1 - t;
      w[size_t(i * n + i1)] += t;
    }
    x = apply_along(x, axis, w, out, n);
  }
  return x;
}

}  // namespace vkg
