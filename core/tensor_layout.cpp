// Ops that rearrange or mask elements by position: triu/tril, diag/diagonal, roll, meshgrid,
// repeat_interleave, unfold, and the replicate and circular pad modes. Each is a view (movement
// ops) or a where over an arange compare, so it costs no kernel of its own, fuses into what reads
// it, and takes its gradient from the primitives.
#include <algorithm>
#include <cstdint>
#include <numeric>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/tensor.hpp>
#include <vkgrad/core/tensor_pool.hpp>

namespace vkg {

namespace {

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

[[noreturn]] void fail(std::string_view op, const Tensor& t, const std::string& why) {
  throw Error(std::string(op) + ": " + why + " (tensor shape " + shape_str(t.shape()) + ", " +
              t.dtype().name() + ")");
}

Ranges full_ranges(const Shape& shape) {
  Ranges r;
  for (int64_t d : shape) r.emplace_back(0, d);
  return r;
}

// The part of x along `axis` in [begin, end).
Tensor slice(const Tensor& x, int axis, int64_t begin, int64_t end) {
  Ranges r = full_ranges(x.shape());
  r[size_t(axis)] = {begin, end};
  return x.shrink(std::move(r));
}

// Keeps x where column - row (over the last two axes) passes `keep`, zero elsewhere.
template <class Keep>
Tensor mask_triangle(const Tensor& x, int64_t diagonal, std::string_view op, Keep keep) {
  if (x.ndim() < 2) fail(op, x, "needs at least 2 dimensions");
  const int64_t rows = x.shape()[size_t(x.ndim() - 2)], cols = x.shape().back();
  const Tensor i = Tensor::arange(0, rows, 1, x.device()).reshape({rows, 1});
  const Tensor j = Tensor::arange(0, cols, 1, x.device()).reshape({1, cols});
  return keep(j - i, diagonal).where(x, Tensor::zeros({}, x.dtype(), x.device()));
}

}  // namespace

Tensor Tensor::triu(int64_t diagonal) const {
  return mask_triangle(*this, diagonal, "triu",
                       [](const Tensor& offset, int64_t k) { return offset.ge(k); });
}

Tensor Tensor::tril(int64_t diagonal) const {
  return mask_triangle(*this, diagonal, "tril",
                       [](const Tensor& offset, int64_t k) { return offset.le(k); });
}

// The diagonal of a square (m, m) block, as tinygrad: flatten it, pad each row by one, and the
// diagonal is the first column of the (m, m + 1) view. Movement ops only.
Tensor Tensor::diagonal(int64_t offset, int64_t dim1, int64_t dim2) const {
  if (ndim() < 2) fail("diagonal", *this, "needs at least 2 dimensions");
  const int a = normalize_axis(dim1, shape(), "diagonal"), b = normalize_axis(dim2, shape(), "diagonal");
  if (a == b) fail("diagonal", *this, "dim1 and dim2 name the same axis " + std::to_string(a));
  std::vector<int64_t> order;
  for (int d = 0; d < ndim(); ++d)
    if (d != a && d != b) order.push_back(d);
  order.push_back(a);
  order.push_back(b);
  Tensor t = permute(order);
  const int last = t.ndim() - 1, second = t.ndim() - 2;
  const int64_t rows = t.shape()[size_t(second)], cols = t.shape()[size_t(last)];
  // Skip to where the diagonal starts, then keep a square.
  const int64_t row0 = offset < 0 ? std::min(-offset, rows) : 0;
  const int64_t col0 = offset > 0 ? std::min(offset, cols) : 0;
  const int64_t m = std::min(rows - row0, cols - col0);
  t = slice(slice(t, second, row0, row0 + m), last, col0, col0 + m);
  Shape lead(t.shape().begin(), t.shape().end() - 2);
  if (m == 0) {
    lead.push_back(0);
    return Tensor::empty(lead, t.dtype(), t.device());
  }
  Shape flat = lead, wide = lead;
  flat.push_back(m * m);
  wide.insert(wide.end(), {m, m + 1});
  t = t.reshape(flat);
  Ranges pads(lead.size(), {0, 0});
  pads.emplace_back(0, m);
  t = t.pad(pads).reshape(wide);
  return slice(t, last, 0, 1).reshape([&] {
    Shape out = lead;
    out.push_back(m);
    return out;
  }());
}

// A vector to the square matrix with it on the `diagonal`-th diagonal (the inverse of the
// diagonal trick: pad each element by a row of m zeros and view m of those rows), or a matrix to
// its diagonal, as torch.diag.
Tensor Tensor::diag(int64_t diagonal) const {
  if (ndim() == 2) return this->diagonal(diagonal);
  if (ndim() != 1) fail("diag", *this, "needs a 1-D or 2-D tensor");
  const int64_t m = shape()[0];
  const Tensor square =
      m == 0 ? Tensor::zeros({0, 0}, dtype(), device())
             : reshape({m, 1}).pad({{0, 0}, {0, m}}).reshape({m * (m + 1)}).shrink({{0, m * m}}).reshape({m, m});
  const int64_t k = std::abs(diagonal);
  return diagonal >= 0 ? square.pad({{0, k}, {k, 0}}) : square.pad({{k, 0}, {0, k}});
}

Tensor Tensor::roll(std::vector<int64_t> shifts, std::vector<int64_t> axes) const {
  if (axes.empty()) {
    if (shifts.size() != 1)
      fail("roll", *this, "without axes it takes one shift, got " + std::to_string(shifts.size()));
    if (ndim() == 0) return *this;
    return reshape({numel()}).roll(shifts, {0}).reshape(shape());
  }
  if (shifts.size() != axes.size())
    fail("roll", *this,
         std::to_string(shifts.size()) + " shifts for " + std::to_string(axes.size()) + " axes");
  Tensor out = *this;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int a = normalize_axis(axes[i], shape(), "roll");
    const int64_t n = shape()[size_t(a)];
    if (n == 0) continue;
    const int64_t s = ((shifts[i] % n) + n) % n;
    if (s == 0) continue;
    const Tensor pieces[] = {slice(out, a, n - s, n), slice(out, a, 0, n - s)};
    out = Tensor::cat(pieces, a);
  }
  return out;
}

std::vector<Tensor> Tensor::meshgrid(std::span<const Tensor> tensors, std::string_view indexing) {
  if (indexing != "ij" && indexing != "xy")
    throw Error("meshgrid: indexing must be \"ij\" or \"xy\", got \"" + std::string(indexing) + "\"");
  Shape grid;
  for (const Tensor& t : tensors) {
    if (t.ndim() > 1) fail("meshgrid", t, "takes 0-d or 1-D tensors");
    grid.push_back(t.numel());
  }
  // "xy" is "ij" with the first two output axes swapped (numpy's Cartesian indexing).
  const bool xy = indexing == "xy" && tensors.size() >= 2;
  if (xy) std::swap(grid[0], grid[1]);
  std::vector<Tensor> out;
  for (size_t i = 0; i < tensors.size(); ++i) {
    size_t at = i;
    if (xy && i < 2) at = 1 - i;
    Shape s(grid.size(), 1);
    s[at] = grid[at];
    out.push_back(tensors[i].reshape(s).expand(grid));
  }
  return out;
}

Tensor Tensor::repeat_interleave(int64_t repeats, std::optional<int64_t> axis) const {
  if (repeats < 0) fail("repeat_interleave", *this, "repeats must not be negative, got " + std::to_string(repeats));
  if (!axis) return reshape({numel()}).repeat_interleave(repeats, 0);
  const int a = normalize_axis(*axis, shape(), "repeat_interleave");
  Shape wide = shape();
  wide.insert(wide.begin() + a + 1, repeats);
  return unsqueeze(a + 1).expand(wide).flatten(a, a + 1);
}

// torch's Tensor.unfold: the windows of `size` elements every `step` along `axis`, as a new last
// axis; `axis` then counts the windows. A view of the input, as conv2d's windows are.
Tensor Tensor::unfold(int64_t axis, int64_t size, int64_t step) const {
  if (ndim() == 0) fail("unfold", *this, "needs at least 1 dimension");
  const int a = normalize_axis(axis, shape(), "unfold");
  const int64_t n = shape()[size_t(a)];
  if (size < 0 || size > n)
    fail("unfold", *this,
         "window size " + std::to_string(size) + " does not fit axis " + std::to_string(a) + " of size " +
             std::to_string(n));
  if (step <= 0) fail("unfold", *this, "step must be positive, got " + std::to_string(step));
  // pool windows the last axis: (..., n) -> (..., windows, size). Swap `axis` there and back.
  const int last = ndim() - 1;
  if (size == 0) {  // pool needs a window; n + 1 empty windows, as torch
    Shape out = shape();
    out[size_t(a)] = n / step + 1;
    out.push_back(0);
    return Tensor::empty(out, dtype(), device());
  }
  const Tensor windows = pool(transpose(a, last), {size}, {step}, {1});
  return windows.transpose(a, last);
}

// Replicate repeats the edge element; circular wraps around (the pad before is the axis's end).
Tensor pad_by_copies(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& before_after,
                     PadMode mode) {
  const char* op = mode == PadMode::Replicate ? "pad (replicate)" : "pad (circular)";
  Tensor out = x;
  for (size_t d = 0; d < before_after.size(); ++d) {
    const auto [b, a] = before_after[d];
    if (b == 0 && a == 0) continue;
    if (b < 0 || a < 0) fail(op, x, "negative pads are only for constant padding");
    const int axis = int(d);
    const int64_t n = x.shape()[d];
    if (n == 0) fail(op, x, "cannot pad dimension " + std::to_string(d) + " of size 0");
    std::vector<Tensor> pieces;
    if (mode == PadMode::Replicate) {
      auto edge = [&](int64_t at, int64_t count) {
        Shape s = out.shape();
        s[d] = count;
        return slice(out, axis, at, at + 1).expand(s);
      };
      if (b > 0) pieces.push_back(edge(0, b));
      pieces.push_back(out);
      if (a > 0) pieces.push_back(edge(n - 1, a));
    } else {
      if (b > n || a > n)
        fail(op, x,
             "pads (" + std::to_string(b) + ", " + std::to_string(a) + ") must be at most dimension " +
                 std::to_string(d) + " of size " + std::to_string(n));
      if (b > 0) pieces.push_back(slice(out, axis, n - b, n));
      pieces.push_back(out);
      if (a > 0) pieces.push_back(slice(out, axis, 0, a));
    }
    out = Tensor::cat(pieces, axis);
  }
  return out;
}

}  // namespace vkg
