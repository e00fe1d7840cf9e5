// Movement ops composed from the primitive ones (squeeze, flatten, repeat, cat, split, reflect
// padding) and indexing (slices, one_hot). Everything here is a view or a fused
// elementwise/reduce graph of existing ops, so it costs no kernel of its own and its gradient
// comes from the primitives'.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>

#include <vkgrad/core/advanced_index.hpp>
#include <vkgrad/core/binding_guard.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/index_check.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

namespace {

[[noreturn]] void fail(std::string_view op, const Shape& shape, const std::string& why) {
  throw Error(std::string(op) + ": " + why + " (tensor shape " + shape_str(shape) + ")");
}

std::vector<std::pair<int64_t, int64_t>> full_ranges(const Shape& shape) {
  std::vector<std::pair<int64_t, int64_t>> r;
  for (int64_t d : shape) r.emplace_back(0, d);
  return r;
}

// A tensor holding 0, 1, ..., n-1 (int32) laid along `axis` of an `ndim`-dimensional shape of
// ones: the right-hand side of the one-hot compares of gather, one_hot and embedding.
Tensor arange_along(int64_t n, int axis, int ndim, const std::string& device) {
  Shape s(size_t(ndim), 1);
  s[size_t(axis)] = n;
  return Tensor::arange(0, n, 1, device).reshape(s);
}

// Concatenation adds padded pieces; bool has no ADD, so bools concatenate as uint8. (A symbolic
// cat pads with +0.0, which turns a float -0.0 into +0.0.)
Tensor sum_of_pieces(const std::vector<Tensor>& pieces, DType dtype) {
  const bool as_bytes = dtype.is_bool();
  Tensor out = as_bytes ? pieces[0].cast(dtypes::uint8) : pieces[0];
  for (size_t i = 1; i < pieces.size(); ++i)
    out = out + (as_bytes ? pieces[i].cast(dtypes::uint8) : pieces[i]);
  return as_bytes ? out.cast(dtypes::bool_) : out;
}

}  // namespace

// ---- padding ----

// Defined in core/tensor_layout.cpp.
Tensor pad_by_copies(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& before_after,
                     PadMode mode);

Tensor Tensor::pad(std::vector<std::pair<int64_t, int64_t>> before_after, PadMode mode,
                   Scalarish value) const {
  if (mode == PadMode::Constant) return pad(std::move(before_after), value);
  if (before_after.size() != shape().size())
    fail(
        "pad", shape(),
        "needs one (before, after) pair per dimension, got " + std::to_string(before_after.size()));
  if (mode != PadMode::Reflect) return pad_by_copies(*this, before_after, mode);
  const Shape& in = shape();
  if (before_after.size() != in.size())
    fail(
        "pad", in,
        "needs one (before, after) pair per dimension, got " + std::to_string(before_after.size()));
  // Reflect mirrors without repeating the edge, as torch: x[b..1] ++ x ++ x[n-2..n-1-a]. The
  // mirrored pieces are flipped shrinks, joined by cat: all views, one fused kernel.
  Tensor out = *this;
  for (size_t d = 0; d < in.size(); ++d) {
    const auto [b, a] = before_after[d];
    const int64_t n = in[d];
    if (b < 0 || a < 0) fail("pad", in, "pads must not be negative");
    if (b == 0 && a == 0) continue;
    if (b >= n || a >= n)
      fail("pad", in,
           "reflect padding (" + std::to_string(b) + ", " + std::to_string(a) +
               ") must be smaller than dimension " + std::to_string(d) + " of size " +
               std::to_string(n));
    std::vector<Tensor> pieces;
    auto ranges = full_ranges(out.shape());
    if (b > 0) {
      ranges[d] = {1, b + 1};
      pieces.push_back(out.shrink(ranges).flip({int64_t(d)}));
    }
    pieces.push_back(out);
    if (a > 0) {
      ranges[d] = {n - 1 - a, n - 1};
      pieces.push_back(out.shrink(ranges).flip({int64_t(d)}));
    }
    out = Tensor::cat(pieces, int64_t(d));
  }
  return out;
}

// ---- adding and removing dimensions ----

Tensor Tensor::squeeze(std::optional<int64_t> axis) const {
  const Shape& in = shape();
  Shape out;
  if (axis) {
    if (in.empty()) {  // torch allows dims 0 and -1 on a 0-d tensor
      if (*axis != 0 && *axis != -1)
        fail("squeeze", in, "axis " + std::to_string(*axis) + " is out of range");
      return *this;
    }
    const int a = normalize_axis(*axis, in, "squeeze");
    if (in[size_t(a)] != 1) return *this;  // as torch: a dimension that is not 1 stays
    out = in;
    out.erase(out.begin() + a);
  } else {
    for (int64_t d : in)
      if (d != 1) out.push_back(d);
  }
  return reshape(out);
}

Tensor Tensor::unsqueeze(int64_t axis) const {
  const Shape& in = shape();
  const int64_t n = int64_t(in.size()) + 1;
  if (axis < -n || axis >= n)
    fail("unsqueeze", in,
         "axis " + std::to_string(axis) + " is out of range [" + std::to_string(-n) + ", " +
             std::to_string(n - 1) + "]");
  if (axis < 0) axis += n;
  if (has_symbolic_shape()) {
    // Said by position: a plain reshape of (n,) bound to 1 to (1, 1) cannot tell which 1 is n,
    // and took the last (x.unsqueeze(1).expand({n, 3}) read x[0], x[1], x[2] at n = 1).
    SymShape out = sym_shape();
    out.insert(out.begin() + axis, SymInt(1));
    return reshape(out);
  }
  Shape out = in;
  out.insert(out.begin() + axis, 1);
  return reshape(out);
}

Tensor Tensor::flatten(int64_t start, int64_t end) const {
  const Shape& in = shape();
  if (in.empty()) {  // a 0-d tensor flattens to one element, as torch
    if ((start != 0 && start != -1) || (end != 0 && end != -1))
      fail("flatten", in,
           "axes (" + std::to_string(start) + ", " + std::to_string(end) + ") are out of range");
    return reshape({1});
  }
  const int s = normalize_axis(start, in, "flatten"), e = normalize_axis(end, in, "flatten");
  if (s > e)
    fail("flatten", in,
         "start axis " + std::to_string(start) + " comes after end axis " + std::to_string(end));
  Shape out(in.begin(), in.begin() + s);
  out.push_back(
      std::accumulate(in.begin() + s, in.begin() + e + 1, int64_t(1), std::multiplies<>()));
  out.insert(out.end(), in.begin() + e + 1, in.end());
  return reshape(out);
}

Tensor Tensor::unflatten(int64_t axis, Shape sizes) const {
  const Shape& in = shape();
  const int a = normalize_axis(axis, in, "unflatten");
  if (sizes.empty()) fail("unflatten", in, "needs at least one size");
  int64_t known = 1, wild = 0;
  for (int64_t s : sizes) {
    if (s == -1)
      ++wild;
    else if (s < 0)
      fail("unflatten", in, "sizes " + shape_str(sizes) + " have a negative size");
    else
      known *= s;
  }
  if (wild > 1) fail("unflatten", in, "only one of the sizes " + shape_str(sizes) + " may be -1");
  if (wild == 1) {
    if (known == 0 || in[size_t(a)] % known != 0)
      fail("unflatten", in,
           "sizes " + shape_str(sizes) + " cannot split dimension " + std::to_string(a));
    *std::find(sizes.begin(), sizes.end(), -1) = in[size_t(a)] / known;
  } else if (known != in[size_t(a)]) {
    fail("unflatten", in,
         "sizes " + shape_str(sizes) + " do not multiply to dimension " + std::to_string(a) +
             " of size " + std::to_string(in[size_t(a)]));
  }
  Shape out(in.begin(), in.begin() + a);
  out.insert(out.end(), sizes.begin(), sizes.end());
  out.insert(out.end(), in.begin() + a + 1, in.end());
  return reshape(out);
}

// Each dimension d of size s becomes (1, s), expands to (r, s) and merges to r*s: whole copies
// one after another, as torch's repeat (not repeat_interleave).
Tensor Tensor::repeat(std::vector<int64_t> repeats) const {
  const Shape& in = shape();
  if (repeats.size() < in.size())
    fail("repeat", in, "needs at least one repeat per dimension, got " + shape_str(repeats));
  for (int64_t r : repeats)
    if (r < 0) fail("repeat", in, "repeats " + shape_str(repeats) + " must not be negative");
  Shape base(repeats.size() - in.size(), 1);
  base.insert(base.end(), in.begin(), in.end());
  Shape unit, tiled, out;
  for (size_t d = 0; d < base.size(); ++d) {
    unit.insert(unit.end(), {1, base[d]});
    tiled.insert(tiled.end(), {repeats[d], base[d]});
    out.push_back(repeats[d] * base[d]);
  }
  return reshape(base).reshape(unit).expand(tiled).reshape(out);
}

// ---- joining and splitting ----

Tensor Tensor::cat(std::span<const Tensor> tensors, int64_t axis) {
  if (tensors.empty()) throw Error("cat: needs at least one tensor");
  const Shape& first = tensors[0].shape();
  if (first.empty()) throw Error("cat: cannot concatenate 0-d tensors (use stack)");
  const int a = normalize_axis(axis, first, "cat");
  DType dtype = tensors[0].dtype();
  int64_t total = 0;
  std::string shapes;
  for (const Tensor& t : tensors)
    shapes += (shapes.empty() ? "" : ", ") + shape_str(t.shape()) + " " + t.dtype().name();
  for (const Tensor& t : tensors) {
    const Shape& s = t.shape();
    bool same = s.size() == first.size();
    for (size_t d = 0; same && d < s.size(); ++d) same = int(d) == a || s[d] == first[d];
    if (!same)
      throw Error("cat: shapes must match except along axis " + std::to_string(axis) + ", got " +
                  shapes);
    if (t.device() != tensors[0].device())
      throw Error("cat: tensors are on different devices (" + tensors[0].device() + " and " +
                  t.device() + ")");
    try {
      dtype = promote(dtype, t.dtype());
    } catch (const Error&) {
      throw Error("cat: cannot combine the dtypes of " + shapes);
    }
    total += s[size_t(a)];
  }
  if (tensors.size() == 1) return tensors[0];
  // Each piece is padded with zeros to the full length at its offset; their sum is the result
  // (one fused kernel; each piece's gradient is the matching shrink).
  std::vector<Tensor> pieces;
  if (std::any_of(tensors.begin(), tensors.end(),
                  [](const Tensor& t) { return t.has_symbolic_shape(); })) {
    // Symbolic sizes along the axis: the pads are expressions, so one kernel serves every binding.
    // The other axes matched by their values: a Jit's replays check that they still do.
    if (recording_guards()) {
      const SymShape first_sym = tensors[0].sym_shape();
      for (const Tensor& t : tensors) {
        const SymShape s = t.sym_shape();
        for (size_t d = 0; d < s.size(); ++d)
          if (int(d) != a)
            guard_same_value(s[d].expr() - first_sym[d].expr(), 0, [&] {
              return "cat: shapes must match except along axis " + std::to_string(axis) +
                     " (sizes " + first_sym[d].str() + " and " + s[d].str() + ")";
            });
      }
    }
    SymInt sym_total = 0, sym_at = 0;
    for (const Tensor& t : tensors) sym_total = sym_total + t.sym_shape()[size_t(a)];
    // Symbolic pads fill +0 only, and -0 + +0 is +0: float pieces are placed where their padded
    // all-true masks are instead of summed (a -0 came out +0: symbolic fuzzer seed 20261301).
    std::optional<Tensor> placed;
    for (const Tensor& t : tensors) {
      std::vector<std::pair<SymInt, SymInt>> pads(first.size(), {0, 0});
      const SymInt n = t.sym_shape()[size_t(a)];
      pads[size_t(a)] = {sym_at, sym_total - sym_at - n};
      pieces.push_back(t.cast(dtype).pad(pads));
      if (dtype.is_float()) {
        const Tensor inside = Tensor::full(Shape(first.size(), 1), true, dtypes::bool_, t.device())
                                  .expand(t.sym_shape())
                                  .pad(pads);
        placed = placed ? inside.where(pieces.back(), *placed) : pieces.back();
      }
      sym_at = sym_at + n;
    }
    return placed ? *placed : sum_of_pieces(pieces, dtype);
  }
  int64_t at = 0;
  for (const Tensor& t : tensors) {
    std::vector<std::pair<int64_t, int64_t>> pads(first.size(), {0, 0});
    const int64_t n = t.shape()[size_t(a)];
    pads[size_t(a)] = {at, total - at - n};
    // Floats pad with -0.0, the identity of addition: +0.0 would turn a -0.0 into +0.0.
    pieces.push_back(t.cast(dtype).pad(pads, dtype.is_float() ? Scalarish(-0.0) : Scalarish(0)));
    at += n;
  }
  return sum_of_pieces(pieces, dtype);
}

Tensor Tensor::stack(std::span<const Tensor> tensors, int64_t axis) {
  if (tensors.empty()) throw Error("stack: needs at least one tensor");
  const Shape& first = tensors[0].shape();
  for (const Tensor& t : tensors)
    if (t.shape() != first)
      throw Error("stack: every tensor needs the same shape, got " + shape_str(first) + " and " +
                  shape_str(t.shape()));
  const int64_t n = int64_t(first.size()) + 1;
  if (axis < -n || axis >= n)
    throw Error("stack: axis " + std::to_string(axis) + " is out of range for " +
                std::to_string(tensors.size()) + " tensors of shape " + shape_str(first));
  std::vector<Tensor> lifted;
  for (const Tensor& t : tensors) lifted.push_back(t.unsqueeze(axis));
  return cat(lifted, axis);
}

std::vector<Tensor> Tensor::split(int64_t size, int64_t axis) const {
  const Shape& in = shape();
  const int a = normalize_axis(axis, in, "split");
  if (size <= 0) fail("split", in, "piece size must be positive, got " + std::to_string(size));
  std::vector<int64_t> sizes;
  for (int64_t at = 0; at < in[size_t(a)]; at += size)
    sizes.push_back(std::min(size, in[size_t(a)] - at));
  if (sizes.empty()) sizes.push_back(0);  // torch gives one empty piece for an empty dimension
  return split(sizes, a);
}

std::vector<Tensor> Tensor::split(std::vector<int64_t> sizes, int64_t axis) const {
  const Shape& in = shape();
  const int a = normalize_axis(axis, in, "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) fail("split", in, "sizes " + shape_str(sizes) + " must not be negative");
    total += s;
  }
  if (total != in[size_t(a)])
    fail("split", in,
         "sizes " + shape_str(sizes) + " add up to " + std::to_string(total) + ", not dimension " +
             std::to_string(a) + " of size " + std::to_string(in[size_t(a)]));
  std::vector<Tensor> out;
  auto ranges = full_ranges(in);
  int64_t at = 0;
  for (int64_t s : sizes) {
    ranges[size_t(a)] = {at, at + s};
    out.push_back(shrink(ranges));
    at += s;
  }
  return out;
}

// As torch: pieces of ceil(n / chunks), so there may be fewer than `chunks` of them.
std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t axis) const {
  const Shape& in = shape();
  const int a = normalize_axis(axis, in, "chunk");
  if (chunks <= 0)
    fail("chunk", in, "needs a positive number of chunks, got " + std::to_string(chunks));
  const int64_t n = in[size_t(a)];
  return split(std::max<int64_t>(1, (n + chunks - 1) / chunks), a);
}

// ---- basic indexing ----

Tensor Tensor::operator[](int64_t index) const { return (*this)[std::vector<Index>{index}]; }

Tensor Tensor::operator[](std::vector<Index> index) const {
  if (has_index_tensor(index)) return index_with_tensors(*this, std::move(index));
  const Shape& in = shape();
  int64_t consumed = 0, ellipses = 0;
  for (const Index& i : index) {
    if (std::holds_alternative<Ellipsis>(i))
      ++ellipses;
    else if (!std::holds_alternative<NewAxis>(i))
      ++consumed;
  }
  if (ellipses > 1) fail("index", in, "at most one ellipsis is allowed");
  if (consumed > int64_t(in.size()))
    fail("index", in,
         "too many indices: " + std::to_string(consumed) + " for " + std::to_string(in.size()) +
             " dimensions");
  // Per input dimension: the slice to take (an integer is a slice of one that is then dropped).
  // Out of the loop come the shrinks, flips and strides, then one reshape that drops the integer
  // dimensions and inserts the new ones.
  auto ranges = full_ranges(in);
  std::vector<int64_t> flips, steps(in.size(), 1);
  Shape out_shape;
  size_t dim = 0;
  for (const Index& i : index) {
    if (std::holds_alternative<NewAxis>(i)) {
      out_shape.push_back(1);
    } else if (std::holds_alternative<Ellipsis>(i)) {
      for (int64_t k = 0; k < int64_t(in.size()) - consumed; ++k, ++dim)
        out_shape.push_back(in[dim]);
    } else if (const int64_t* at = std::get_if<int64_t>(&i)) {
      const int64_t n = in[dim];
      if (*at < -n || *at >= n)
        fail("index", in,
             "index " + std::to_string(*at) + " is out of bounds for dimension " +
                 std::to_string(dim) + " of size " + std::to_string(n));
      const int64_t k = *at < 0 ? *at + n : *at;
      ranges[dim] = {k, k + 1};
      ++dim;
    } else {
      const Slice& s = std::get<Slice>(i);
      const int64_t n = in[dim];
      if (s.step == 0)
        fail("index", in, "slice step cannot be zero (dimension " + std::to_string(dim) + ")");
      // Python's slice.indices: negative values count from the end, then clamp; a negative step
      // walks down from the end, so its bounds clamp to [-1, n-1].
      auto resolve = [&](std::optional<int64_t> v, int64_t fallback) {
        if (!v) return fallback;
        int64_t x = *v < 0 ? *v + n : *v;
        return s.step > 0 ? std::clamp<int64_t>(x, 0, n) : std::clamp<int64_t>(x, -1, n - 1);
      };
      const int64_t start = resolve(s.start, s.step > 0 ? 0 : n - 1);
      const int64_t stop = resolve(s.stop, s.step > 0 ? n : -1);
      // |step| without overflow: -INT64_MIN does not exist, and any step of n or more takes
      // at most one element, so INT64_MAX stands in for it.
      const int64_t step = s.step > 0 ? s.step : s.step == INT64_MIN ? INT64_MAX : -s.step;
      const int64_t dist = s.step > 0 ? stop - start : start - stop;  // within [-n-1, n+1]
      const int64_t len = dist <= 0 ? 0 : (dist - 1) / step + 1;
      // A negative step reads the flipped dimension forwards: element i sits at n-1-i there.
      const bool flipped = s.step < 0 && len > 1;
      const int64_t first = len == 0 ? 0 : flipped ? n - 1 - start : start;
      if (flipped) flips.push_back(int64_t(dim));
      ranges[dim] = {first, len == 0 ? first : first + (len - 1) * step + 1};
      steps[dim] = len > 1 ? step : 1;
      out_shape.push_back(len);
      ++dim;
    }
  }
  for (; dim < in.size(); ++dim) out_shape.push_back(in[dim]);
  Tensor x = flips.empty() ? *this : flip(flips);
  // A flipped dimension's range was computed in flipped coordinates, so shrink after the flip.
  x = x.shrink(ranges);
  if (std::any_of(steps.begin(), steps.end(), [](int64_t s) { return s > 1; })) {
    // Strides: pad each strided dimension of length (len-1)*step+1 to len*step, split it into
    // (len, step) and keep column 0.
    std::vector<std::pair<int64_t, int64_t>> pads;
    Shape split_shape;
    std::vector<std::pair<int64_t, int64_t>> keep;
    for (size_t d = 0; d < in.size(); ++d) {
      const int64_t have = x.shape()[d], step = steps[d];
      const int64_t len = step > 1 ? (have - 1) / step + 1 : have;
      pads.emplace_back(0, step > 1 ? len * step - have : 0);
      split_shape.insert(split_shape.end(), {len, step});
      keep.emplace_back(0, len);
      keep.emplace_back(0, 1);
    }
    x = x.pad(pads).reshape(split_shape).shrink(keep);
  }
  return x.reshape(out_shape);
}

// ---- one-hot (gather and embedding are indexed loads: core/tensor_gather.cpp) ----

Tensor Tensor::one_hot(int64_t num_classes, DType dtype) const {
  if (!this->dtype().is_int())
    throw Error("one_hot: needs an integer tensor of class indices, got " + this->dtype().name() +
                " of shape " + shape_str(shape()));
  if (num_classes <= 0)
    throw Error("one_hot: num_classes must be positive, got " + std::to_string(num_classes) +
                " (shape " + shape_str(shape()) + ")");
  check_index_values(*this, num_classes, "one_hot", "num_classes " + std::to_string(num_classes));
  const Tensor idx = unsqueeze(-1);
  return idx.eq(arange_along(num_classes, ndim(), ndim() + 1, device())).cast(dtype);
}

}  // namespace vkg
