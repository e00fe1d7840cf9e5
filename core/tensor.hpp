// Tensor: the user's handle on a lazy value. Every op builds a node of the tensor-level UOp graph
// (core/shape_rules.hpp lists its forms) and returns at once; nothing runs until a value is asked
// for. Tensors are cheap to copy: a copy is an alias of the same tensor (as a Python reference):
// it shares the node, requires_grad and grad, and sees realize() and assign() done through any
// alias. Ops return new tensors.
//
//   Tensor a = Tensor({1, 2}), b = Tensor({3, 4});       // int32
//   Tensor m(std::vector<float>(6, 1.5f), {2, 3});
//   Tensor s = (m * 2).sum(1);                            // shape (2,), float32
//
// Elementwise ops broadcast as numpy does and promote mixed dtypes on the lattice of
// core/dtype.hpp; a C++ scalar never upcasts a tensor of its own kind. Misuse throws vkg::Error
// naming the op, the shapes and the dtypes.
#pragma once
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include <vkgrad/core/dtype.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/shape.hpp>
#include <vkgrad/core/uop.hpp>
#include <vkgrad/core/variable.hpp>

namespace vkg {

class Tensor;

// One entry of a slicing index: an integer (removes its dimension; negative counts from the end),
// a Slice (start, stop and step as Python's, any may be negative), `ellipsis` (as many full
// dimensions as needed), `newaxis` (a new dimension of size 1), or a Tensor: integers index one
// dimension, bools as many as they have (advanced indexing, core/tensor_advanced_index.cpp).
struct Slice {
  std::optional<int64_t> start, stop;
  int64_t step = 1;
};
struct Ellipsis {};
struct NewAxis {};
inline constexpr Ellipsis ellipsis{};
inline constexpr NewAxis newaxis{};
using Index = std::variant<int64_t, Slice, Ellipsis, NewAxis, Tensor>;

// How scatter_reduce combines the values that land on one element (torch's "sum", "prod",
// "mean", "amax", "amin").
enum class ScatterReduce { Sum, Prod, Mean, Amax, Amin };

// A 2-D size (height, width) that a single number also spells: `.stride = 2` or `.padding = {1, 2}`.
struct Size2 {
  int64_t h = 0, w = 0;
  Size2(int64_t v) : h(v), w(v) {}
  Size2(int64_t h_, int64_t w_) : h(h_), w(w_) {}
};

struct Conv2dOptions {
  Size2 stride = 1, padding = 0, dilation = 1;
  int64_t groups = 1;
};
struct ConvTranspose2dOptions {
  Size2 stride = 1, padding = 0, output_padding = 0, dilation = 1;
  int64_t groups = 1;
};
struct Pool2dOptions {
  Size2 kernel = 2;
  std::optional<Size2> stride = std::nullopt;  // the kernel size when not given, as torch
  Size2 padding = 0, dilation = 1;
};

// Options of conv1d, conv3d and their transposes: one value per spatial axis, or one for all.
struct ConvOptions {
  std::vector<int64_t> stride{1}, padding{0}, dilation{1}, output_padding{0};  // output_padding: transposed only
  int64_t groups = 1;
};
// Options of the N-d pools (1 to 3 pooled axes, as many as kernel sizes); stride defaults to the
// kernel; padding, stride and dilation take one value per axis or one for all.
struct PoolOptions {
  std::vector<int64_t> kernel{2};
  std::optional<std::vector<int64_t>> stride = std::nullopt;
  std::vector<int64_t> padding{0}, dilation{1};
  bool ceil_mode = false, count_include_pad = true;
};

// Constant fills a value; Reflect mirrors without repeating the edge; Replicate repeats the edge;
// Circular wraps around (torch's F.pad modes).
enum class PadMode { Constant, Reflect, Replicate, Circular };
// How a loss folds its per-element values: their mean (the default), their sum, or none.
enum class Reduction { Mean, Sum, None };

struct TensorState;

class Tensor {
 public:
  // ---- creation ----
  // A 1-D tensor from a literal list: int32 from integers, float32 from floats, bool from bools.
  Tensor(std::initializer_list<int> values);
  Tensor(std::initializer_list<float> values);
  Tensor(std::initializer_list<double> values);
  Tensor(std::initializer_list<bool> values);
  // A 0-d tensor holding one scalar of the literal's default dtype.
  explicit Tensor(Scalarish value);
  // A tensor of `shape` holding a copy of `data` (row-major); its dtype is T's. Throws if the
  // element count and the shape disagree.
  template <class T>
  Tensor(const std::vector<T>& data, Shape shape, std::string device = "")
      : Tensor(std::as_bytes(std::span(data)), data.size(), dtype_of<T>(), std::move(shape), std::move(device)) {}
  // std::vector<bool> packs bits and has no data(): its elements are copied to bytes.
  Tensor(const std::vector<bool>& data, Shape shape, std::string device = "");
  template <class T>
  explicit Tensor(const std::vector<T>& data) : Tensor(data, Shape{int64_t(data.size())}) {}
  // From raw bytes holding `count` elements of `dtype`.
  Tensor(std::span<const std::byte> bytes, size_t count, DType dtype, Shape shape, std::string device = "");
  // Wraps a tensor-level node (in a NoGrad scope, detached: see NoGrad).
  explicit Tensor(UOpPtr node);

  // Uninitialized storage (its contents are whatever the device holds).
  static Tensor empty(Shape shape, DType dtype = dtypes::default_float, std::string device = "");
  static Tensor full(Shape shape, Scalarish value, std::optional<DType> dtype = {}, std::string device = "");
  static Tensor zeros(Shape shape, DType dtype = dtypes::default_float, std::string device = "");
  static Tensor ones(Shape shape, DType dtype = dtypes::default_float, std::string device = "");
  // [start, stop) in steps of `step`, int32 for integer arguments, the default float otherwise.
  static Tensor arange(Scalarish start, Scalarish stop, Scalarish step = 1, std::string device = "");
  static Tensor arange(Scalarish stop) { return arange(0, stop); }
  // `steps` values evenly from start to stop, both included.
  static Tensor linspace(Scalarish start, Scalarish stop, int64_t steps, DType dtype = dtypes::default_float,
                         std::string device = "");
  // An n x m identity matrix (m = n when m < 0).
  static Tensor eye(int64_t n, int64_t m = -1, DType dtype = dtypes::default_float, std::string device = "");
  static Tensor zeros_like(const Tensor& t);
  static Tensor ones_like(const Tensor& t);
  static Tensor full_like(const Tensor& t, Scalarish value);
  static Tensor empty_like(const Tensor& t);

  // ---- random (counter-based: the same seed gives the same values on every device) ----
  // Sets the seed of the global generator (0 until set) and restarts its counter; every random
  // tensor after it is reproducible. Needs a device with 64-bit integers (threefry2x32 on uint64).
  static void manual_seed(uint64_t seed);
  // Uniform in [0, 1).
  static Tensor rand(Shape shape, DType dtype = dtypes::default_float, std::string device = "");
  // Standard normal.
  static Tensor randn(Shape shape, DType dtype = dtypes::default_float, std::string device = "");
  // A random permutation of 0..n-1 (torch.randperm).
  static Tensor randperm(int64_t n, DType dtype = dtypes::int32, std::string device = "");
  // Class indices drawn with probabilities proportional to this (C) or (N, C) tensor's weights,
  // int32 (torch.multinomial).
  Tensor multinomial(int64_t num_samples, bool replacement = false) const;
  // Integers uniform in [low, high); high - low is at most 2^32.
  static Tensor randint(int64_t low, int64_t high, Shape shape, DType dtype = dtypes::int32, std::string device = "");
  static Tensor uniform(Shape shape, double low = 0.0, double high = 1.0, DType dtype = dtypes::default_float,
                        std::string device = "");
  static Tensor normal(Shape shape, double mean = 0.0, double std = 1.0, DType dtype = dtypes::default_float,
                       std::string device = "");
  static Tensor rand_like(const Tensor& t);
  static Tensor randn_like(const Tensor& t);
  // Initializers for a weight of `shape` = (fan_out, fan_in, *receptive field), as torch.nn.init:
  // kaiming (He) with leaky-relu slope `a`, glorot (Xavier) uniform.
  static Tensor kaiming_uniform(Shape shape, double a = 0.0, std::string device = "");
  static Tensor kaiming_normal(Shape shape, double a = 0.0, std::string device = "");
  static Tensor glorot_uniform(Shape shape, std::string device = "");

  // ---- what it is ----
  const Shape& shape() const;
  DType dtype() const { return node()->dtype; }
  int ndim() const { return int(shape().size()); }
  int64_t numel() const { return vkg::prod(shape()); }
  const std::string& device() const;
  const UOpPtr& node() const;
  // The shape with its symbolic sizes (core/variable.hpp): shape() holds their values.
  SymShape sym_shape() const;
  bool has_symbolic_shape() const { return node()->sym_shape() != nullptr; }

  // ---- elementwise ----
  Tensor operator-() const;
  Tensor exp2() const;
  Tensor log2() const;
  Tensor sin() const;
  // The Gauss error function, as torch.erf: erf(+-inf) = +-1, erf(-0) = -0; ints become floats.
  Tensor erf() const;
  // 1 - erf, computed directly so its tail keeps its digits (erfc(5) = 1.5e-12, not 0).
  Tensor erfc() const;
  Tensor sqrt() const;
  Tensor reciprocal() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor relu() const;
  Tensor abs() const;
  Tensor rsqrt() const;
  Tensor cos() const;
  Tensor tan() const;
  Tensor sign() const;
  Tensor square() const;
  Tensor trunc() const;
  Tensor floor() const;
  Tensor ceil() const;
  Tensor round() const;  // half to even, as torch
  Tensor leaky_relu(double negative_slope = 0.01) const;
  Tensor elu(double alpha = 1.0) const;
  Tensor gelu() const;  // tanh approximation, as tinygrad
  Tensor gelu(std::string_view approximate) const;  // "none": torch's exact x/2 (1 + erf(x/sqrt 2)); "tanh"
  Tensor silu() const;
  Tensor sigmoid() const;
  Tensor tanh() const;
  Tensor softplus(double beta = 1.0) const;
  Tensor hardswish() const;
  Tensor hardtanh(double min = -1.0, double max = 1.0) const;
  Tensor relu6() const;
  Tensor hardsigmoid() const;
  Tensor logsigmoid() const;
  Tensor softsign() const;
  Tensor mish() const;
  Tensor selu() const;
  Tensor celu(double alpha = 1.0) const;
  // Inverse trigonometric and hyperbolic functions, and log(1 + x), exp(x) - 1 and log10, to a
  // few ulps over the whole range (core/tensor_transcendental.cpp says how).
  Tensor log1p() const;
  Tensor expm1() const;
  Tensor log10() const;
  Tensor sinh() const;
  Tensor cosh() const;
  Tensor asinh() const;
  Tensor acosh() const;
  Tensor atanh() const;
  Tensor asin() const;
  Tensor acos() const;
  Tensor atan() const;
  // atan2(this = y, x), as C and torch: the angle of (x, y), in [-pi, pi].
  Tensor atan2(const Tensor& x) const;
  // The result has b's sign bit and this tensor's magnitude (floats; integers promote).
  Tensor copysign(const Tensor& b) const;
  // this + weight (end - this), as torch (exact at weight 0 and 1).
  Tensor lerp(const Tensor& end, const Tensor& weight) const;
  Tensor lerp(const Tensor& end, double weight) const;
  // log(exp(this) + exp(b)) without overflow.
  Tensor logaddexp(const Tensor& b) const;
  // |this - b| <= atol + rtol |b| where both are finite, or equal (so inf matches inf); nan
  // matches nan only with equal_nan. allclose: every element isclose (a host read).
  Tensor isclose(const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
                 bool equal_nan = false) const;
  bool allclose(const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
                bool equal_nan = false) const;
  Tensor clip(Scalarish min, Scalarish max) const;
  Tensor isnan() const;
  Tensor signbit() const;  // the sign bit: negative, -0, or a nan that has it
  Tensor isinf() const;
  Tensor isfinite() const;
  Tensor logical_not() const;

  Tensor add(const Tensor& b) const;
  Tensor sub(const Tensor& b) const;
  Tensor mul(const Tensor& b) const;
  Tensor div(const Tensor& b) const;       // true division: integers divide as floats
  Tensor idiv(const Tensor& b) const;      // integer division, truncating toward zero (C)
  Tensor mod(const Tensor& b) const;       // remainder with the dividend's sign (C)
  Tensor floordiv(const Tensor& b) const;  // floor(a / b): floats and integers (rounds down, as Python)
  // torch.fmod: C's remainder, with the dividend's sign; exact on floats (nan for b = 0 or an
  // infinite dividend). Integers: mod (x fmod 0 is x).
  Tensor fmod(const Tensor& b) const;
  Tensor fmod(Scalarish b) const;
  // torch.remainder (Python's %): the remainder with the divisor's sign, fmod moved by b where
  // the signs differ (that add rounds); a zero result keeps the dividend's sign, as torch.
  Tensor remainder(const Tensor& b) const;
  Tensor remainder(Scalarish b) const;
  Tensor pow(const Tensor& b) const;
  Tensor pow(Scalarish b) const;
  Tensor maximum(const Tensor& b) const;
  Tensor maximum(Scalarish b) const;
  Tensor minimum(const Tensor& b) const;
  Tensor minimum(Scalarish b) const;
  // Logical ops on bool tensors, bitwise ones on integer tensors (the same ops).
  Tensor bitwise_and(const Tensor& b) const;
  Tensor bitwise_or(const Tensor& b) const;
  Tensor bitwise_xor(const Tensor& b) const;
  Tensor bitwise_not() const;
  Tensor logical_and(const Tensor& b) const;
  Tensor logical_or(const Tensor& b) const;
  Tensor logical_xor(const Tensor& b) const;
  Tensor lshift(int64_t bits) const;
  Tensor rshift(int64_t bits) const;
  // By a tensor of amounts (broadcast), torch's rule outside [0, width): lshift gives 0, rshift
  // the sign fill.
  Tensor lshift(const Tensor& bits) const;
  Tensor rshift(const Tensor& bits) const;
  Tensor lt(const Tensor& b) const;
  Tensor gt(const Tensor& b) const;
  Tensor le(const Tensor& b) const;
  Tensor ge(const Tensor& b) const;
  Tensor eq(const Tensor& b) const;
  Tensor ne(const Tensor& b) const;
  Tensor lt(Scalarish b) const;
  Tensor gt(Scalarish b) const;
  Tensor le(Scalarish b) const;
  Tensor ge(Scalarish b) const;
  Tensor eq(Scalarish b) const;
  Tensor ne(Scalarish b) const;
  // cond ? a : b, broadcasting all three; cond is cast to bool.
  Tensor where(const Tensor& a, const Tensor& b) const;
  Tensor where(const Tensor& a, Scalarish b) const;
  Tensor where(Scalarish a, const Tensor& b) const;
  Tensor where(Scalarish a, Scalarish b) const;
  // A 0-d tensor holding v, in the dtype this tensor and a C++ literal v combine to.
  Tensor scalar_like(Scalarish v) const;
  // Float to integer truncates toward zero and saturates at the integer type's bounds; nan
  // becomes 0 (Rust's `as`, WebAssembly's trunc_sat), the same on every device. torch leaves
  // these to the CPU (x86 gives INT_MIN), so there is no torch rule to follow.
  Tensor cast(DType dtype) const;
  // The same bits read as another dtype: torch's view(dtype). Between sizes the last axis
  // changes length, bytes little-endian: float32 [.., 4] -> uint8 [.., 16], and back where the
  // last axis divides (a 0-d tensor cannot change size). The elements are this value's in
  // order: vkgrad tensors are values, so torch's rule that the last stride be 1 has no case
  // here (a permuted tensor is read as torch's x.contiguous().view(dtype)).
  Tensor bitcast(DType dtype) const;

  // ---- reductions (axes may be negative; none given means all) ----
  // One kernel each, except where one output reduces more than 32768 elements: that is two
  // kernels (partial results, then theirs), as one invocation must not loop that long.
  Tensor sum(Axes axes = {}, bool keepdim = false) const;
  // max and min are torch's amax and amin: their gradient is split evenly among tied elements
  // (torch.max(dim) instead picks the one its index names; use argmax for that).
  Tensor max(Axes axes = {}, bool keepdim = false) const;
  Tensor mean(Axes axes = {}, bool keepdim = false) const;
  // Variance with Bessel's correction by default (correction = 1), as torch and tinygrad.
  Tensor var(Axes axes = {}, bool keepdim = false, int64_t correction = 1) const;
  Tensor std(Axes axes = {}, bool keepdim = false, int64_t correction = 1) const;
  Tensor min(Axes axes = {}, bool keepdim = false) const;
  Tensor prod(Axes axes = {}, bool keepdim = false) const;
  Tensor any(Axes axes = {}, bool keepdim = false) const;  // bool
  Tensor all(Axes axes = {}, bool keepdim = false) const;  // bool
  // The index of the first largest (smallest) element along `axis` (over the flattened tensor when
  // none), int32.
  Tensor argmax(std::optional<int64_t> axis = {}, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> axis = {}, bool keepdim = false) const;
  Tensor softmax(int64_t axis = -1) const;
  Tensor log_softmax(int64_t axis = -1) const;
  Tensor logsumexp(Axes axes = {}, bool keepdim = false) const;
  // Running sums along axis, in sum's dtype (small integers and bools accumulate in 32 bits).
  Tensor cumsum(int64_t axis = 0) const;
  // Inner product over the last axis of this and the second-to-last of b (the last for a 1-D b);
  // leading (batch) axes broadcast, as numpy's matmul.
  Tensor dot(const Tensor& b) const;
  Tensor matmul(const Tensor& b) const;

  // ---- scans (along one axis; a 0-d tensor counts as one element) ----
  // cumprod accumulates as prod does. cummax and cummin answer the running extreme and, as torch,
  // the last position at or before each element that holds it (int32); a nan is the extreme from
  // where it appears. Their gradient goes to that position, as torch's.
  Tensor cumprod(int64_t axis = 0) const;
  std::pair<Tensor, Tensor> cummax(int64_t axis = 0) const;
  std::pair<Tensor, Tensor> cummin(int64_t axis = 0) const;
  Tensor logcumsumexp(int64_t axis = 0) const;  // in float (integers in the default float)

  // ---- sorting (core/tensor_sort.cpp) ----
  // Values and original positions (int32) along `axis`: stable in both orders, nan as the largest
  // value, -0.0 tied with 0.0 (torch's order). A bitonic network of O(n log^2 n) work in
  // log2(n)(log2(n) + 1) / 2 steps of two kernels each.
  std::pair<Tensor, Tensor> sort(int64_t axis = -1, bool descending = false) const;
  Tensor argsort(int64_t axis = -1, bool descending = false) const;
  // The k largest (smallest) along `axis`, in order, with their positions.
  std::pair<Tensor, Tensor> topk(int64_t k, int64_t axis = -1, bool largest = true) const;
  // torch.max(dim) / torch.min(dim): the extreme along `axis` and the first position of it. The
  // values' gradient goes all to that position, as torch's (max's splits it among ties).
  std::pair<Tensor, Tensor> max_with_indices(int64_t axis, bool keepdim = false) const;
  std::pair<Tensor, Tensor> min_with_indices(int64_t axis, bool keepdim = false) const;
  // torch.unique(sorted=True, return_inverse=True, return_counts=True) over all elements: the
  // distinct values in order, each element's place among them (this shape), and their counts
  // (int32). Its result's size depends on the values, so it waits for the device (a host sync).
  std::tuple<Tensor, Tensor, Tensor> unique() const;

  // ---- positions: triangles, diagonals, rolls, windows (core/tensor_layout.cpp) ----
  // Zeroes elements below (triu) or above (tril) the `diagonal`-th diagonal of the last two axes.
  Tensor triu(int64_t diagonal = 0) const;
  Tensor tril(int64_t diagonal = 0) const;
  // The `offset`-th diagonal of the (dim1, dim2) planes as a new last axis (a view).
  Tensor diagonal(int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1) const;
  // torch.diag: a vector to the square matrix with it on the given diagonal, a matrix to that
  // diagonal.
  Tensor diag(int64_t diagonal = 0) const;
  // Rotates elements by shifts[i] along axes[i]; with no axes, over the flattened tensor.
  Tensor roll(std::vector<int64_t> shifts, std::vector<int64_t> axes = {}) const;
  Tensor roll(int64_t shift, std::optional<int64_t> axis = {}) const {
    return axis ? roll(std::vector<int64_t>{shift}, std::vector<int64_t>{*axis})
                : roll(std::vector<int64_t>{shift});
  }
  // Coordinate grids of 0-d or 1-D tensors; "ij" indexes as matrices, "xy" swaps the first two
  // axes (numpy's default).
  static std::vector<Tensor> meshgrid(std::span<const Tensor> tensors, std::string_view indexing = "ij");
  // Repeats each element `repeats` times along `axis` (over the flattened tensor when none).
  Tensor repeat_interleave(int64_t repeats, std::optional<int64_t> axis = {}) const;
  // torch's Tensor.unfold: windows of `size` every `step` along `axis`, as a new last axis.
  Tensor unfold(int64_t axis, int64_t size, int64_t step) const;
  // Einstein summation as numpy and torch: "ij,jk->ik", "bij,bjk->bik", "ii->i", "...ij->...ji";
  // without "->", the output is the labels used once, in alphabetical order. One fused
  // multiply-and-reduce over all labels (core/tensor_einsum.cpp).
  static Tensor einsum(std::string_view formula, std::span<const Tensor> operands);

  // ---- movement (zero-copy: they only change how elements are addressed) ----
  // Sizes may be bound variables (Variable("n", 1, 512).bind(7), and sums and products of them):
  // the result has a symbolic shape, and the kernels that compute it are compiled once for every
  // value of n (core/variable.hpp). A braced list of plain numbers works as before. Symbolic
  // pads fill zeros only; a symbolic reshape needs a contiguous tensor or only adds or removes
  // dimensions of size 1.
  Tensor reshape(std::initializer_list<SymInt> shape) const { return reshape(SymShape(shape)); }
  Tensor reshape(const SymShape& shape) const;
  Tensor expand(std::initializer_list<SymInt> shape) const { return expand(SymShape(shape)); }
  Tensor expand(const SymShape& shape) const;
  Tensor pad(std::initializer_list<std::pair<SymInt, SymInt>> before_after,
             Scalarish value = 0) const {
    return pad(std::vector<std::pair<SymInt, SymInt>>(before_after), value);
  }
  Tensor pad(const std::vector<std::pair<SymInt, SymInt>>& before_after, Scalarish value = 0) const;
  Tensor shrink(std::initializer_list<std::pair<SymInt, SymInt>> begin_end) const {
    return shrink(std::vector<std::pair<SymInt, SymInt>>(begin_end));
  }
  Tensor shrink(const std::vector<std::pair<SymInt, SymInt>>& begin_end) const;
  // A 0-d int32 tensor holding a size's value: a constant, or the expression of bound variables
  // that kernels read at run time (mean over a symbolic axis divides by one).
  static Tensor from_size(const SymInt& size, std::string device = "");
  Tensor reshape(Shape shape) const;  // one dimension may be -1
  Tensor permute(std::vector<int64_t> order) const;
  Tensor expand(Shape shape) const;   // -1 keeps a dimension
  Tensor pad(std::vector<std::pair<int64_t, int64_t>> before_after, Scalarish value = 0) const;
  Tensor shrink(std::vector<std::pair<int64_t, int64_t>> begin_end) const;
  Tensor flip(std::vector<int64_t> axes) const;
  Tensor transpose(int64_t a = -2, int64_t b = -1) const;
  Tensor pad(std::vector<std::pair<int64_t, int64_t>> before_after, PadMode mode, Scalarish value = 0) const;
  Tensor squeeze(std::optional<int64_t> axis = {}) const;  // all size-1 dimensions when none
  Tensor unsqueeze(int64_t axis) const;
  Tensor flatten(int64_t start = 0, int64_t end = -1) const;
  Tensor unflatten(int64_t axis, Shape sizes) const;
  // Tiles the tensor `repeats[i]` times along dimension i (torch's repeat).
  Tensor repeat(std::vector<int64_t> repeats) const;
  static Tensor cat(std::span<const Tensor> tensors, int64_t axis = 0);
  static Tensor stack(std::span<const Tensor> tensors, int64_t axis = 0);
  // Pieces of `size` along axis (the last may be smaller), or of the given sizes.
  std::vector<Tensor> split(int64_t size, int64_t axis = 0) const;
  std::vector<Tensor> split(std::vector<int64_t> sizes, int64_t axis = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t axis = 0) const;
  // Basic indexing: t[{0, Slice{1, std::nullopt, 2}, ellipsis}], t[{newaxis}], t[-1]: a view.
  // Advanced indexing, with numpy's and torch's rules: t[{Slice{}, idx}] with an integer tensor
  // (negative counts from the end) reads through one indexed load; several index tensors
  // broadcast together, and their dimensions take the place of the indexed ones when the index
  // tensors (and integers, which then count as 0-d index tensors) sit next to each other, else
  // they go first. A bool tensor stands for its nonzero() coordinates: that reads the mask on the
  // host (a sync), as the result's shape depends on it.
  Tensor operator[](std::vector<Index> index) const;
  Tensor operator[](int64_t index) const;
  // out[i][j][k] = this[index[i][j][k]][j][k] for axis 0 (torch.gather); index is an integer tensor
  // of this rank, no larger than this on the other axes. One indexed load (core/indexed_load.hpp):
  // one kernel, O(1) per element. An index outside [0, size) reads 0, or is a vkg::Error with
  // CHECK_INDICES=1 (that waits for the device).
  Tensor gather(int64_t axis, const Tensor& index) const;
  // This tensor read as 1-D at `index` (any shape; negative counts from the end), as torch.take.
  Tensor take(const Tensor& index) const;
  // The entries of `index` (0-d or 1-d integers) along axis, as torch.index_select.
  Tensor index_select(int64_t axis, const Tensor& index) const;
  // The coordinates of the nonzero (true) elements, int32 of shape (count, ndim), in row-major
  // order, as torch.nonzero. Reads this tensor on the host (a sync): the count is its shape.
  Tensor nonzero() const;
  // The elements where `mask` (bool, broadcast with this) is true, 1-D, in row-major order, as
  // torch.masked_select. Reads the mask on the host (a sync), as nonzero.
  Tensor masked_select(const Tensor& mask) const;
  // `value` where `mask` (bool, broadcast to this shape) is true, this elsewhere.
  Tensor masked_fill(const Tensor& mask, Scalarish value) const;
  Tensor masked_fill(const Tensor& mask, const Tensor& value) const;
  // x[index] = value, in place (through assign: a realized tensor keeps its buffer); value is
  // broadcast to the shape of x[index] and cast to this dtype. Where advanced indices repeat an
  // element, the last value written wins. Returns this tensor.
  Tensor& setitem(std::vector<Index> index, const Tensor& value);
  Tensor& setitem(std::vector<Index> index, Scalarish value);
  // out = a copy of this with out[...][index[i][j]][...] = src[i][j] along axis (torch.scatter);
  // index has this rank and is no larger than this (except along axis) or src. Where indices
  // repeat, the value from the last position of index (row-major) wins; an index outside the
  // axis writes nothing. Each scatter op is a copy of this and one kernel that combines every
  // value into the copy atomically, O(1) work per value (core/indexed_load.hpp: the order floats
  // are summed in on a GPU, max and min at nan and -0.0). Mean, and include_self = false, add a
  // count of the values landing on each element.
  Tensor scatter(int64_t axis, const Tensor& index, const Tensor& src) const;
  Tensor scatter(int64_t axis, const Tensor& index, Scalarish value) const;
  // As scatter, adding every value that lands on an element (torch.scatter_add).
  Tensor scatter_add(int64_t axis, const Tensor& index, const Tensor& src) const;
  // As scatter, combining the values that land on an element with `reduce`, and this tensor's
  // own value there when include_self (torch.scatter_reduce). An element nothing lands on keeps
  // this tensor's value. Mean divides by the count (plus one with include_self); integer means
  // round toward negative infinity, as torch's.
  Tensor scatter_reduce(int64_t axis, const Tensor& index, const Tensor& src, ScatterReduce reduce,
                        bool include_self = true) const;
  // Integer class indices to one-hot rows of num_classes (a new last axis), in dtype.
  Tensor one_hot(int64_t num_classes, DType dtype = dtypes::default_float) const;

  // ---- nn functional (NCHW layouts, weights as torch's) ----
  // x @ weight^T + bias; weight is (out, in).
  Tensor linear(const Tensor& weight, const std::optional<Tensor>& bias = {}) const;
  // x (N, Cin, H, W) with weight (Cout, Cin/groups, KH, KW).
  Tensor conv2d(const Tensor& weight, const std::optional<Tensor>& bias = {}, Conv2dOptions options = {}) const;
  // x (N, Cin, H, W) with weight (Cin, Cout/groups, KH, KW).
  Tensor conv_transpose2d(const Tensor& weight, const std::optional<Tensor>& bias = {},
                          ConvTranspose2dOptions options = {}) const;
  // Its gradient goes to the first maximum of each window (row-major), as torch's. Both are
  // max_pool's and avg_pool's on two axes (core/tensor_pool_nd.cpp).
  Tensor max_pool2d(Pool2dOptions options = {}) const;
  Tensor avg_pool2d(Pool2dOptions options = {}) const;  // padding counts as zeros, as torch's default
  // Convolutions over (N, C, L) and (N, C, D, H, W) with weights as torch's; every convolution
  // and transposed one, 1-D to 3-D, is the same N-d code (core/tensor_conv.cpp).
  Tensor conv1d(const Tensor& weight, const std::optional<Tensor>& bias = {}, ConvOptions options = {}) const;
  Tensor conv3d(const Tensor& weight, const std::optional<Tensor>& bias = {}, ConvOptions options = {}) const;
  Tensor conv_transpose1d(const Tensor& weight, const std::optional<Tensor>& bias = {}, ConvOptions options = {}) const;
  Tensor conv_transpose3d(const Tensor& weight, const std::optional<Tensor>& bias = {}, ConvOptions options = {}) const;
  // Pools over the last options.kernel.size() axes (1 to 3) with torch's ceil_mode and
  // count_include_pad; the indices are torch's (input positions flattened over the pooled axes,
  // int32, each window's first maximum). As max_pool2d's and torch's, a window's gradient goes
  // to its first maximum (not split among tied maxima as max's is).
  Tensor max_pool(PoolOptions options) const;
  std::pair<Tensor, Tensor> max_pool_with_indices(PoolOptions options) const;
  Tensor avg_pool(PoolOptions options) const;
  // torch's adaptive_avg_pool1d/2d/3d over the last output_size.size() axes.
  Tensor adaptive_avg_pool(Shape output_size) const;
  // torch's F.interpolate to `size` over the last size.size() axes: "nearest", or "linear",
  // "bilinear", "trilinear" for 1, 2, 3 axes, with or without align_corners.
  Tensor interpolate(Shape size, std::string_view mode = "nearest", bool align_corners = false) const;
  // (x - mean) / sqrt(var + eps) over the given axes (default: the last), with the biased
  // variance, as torch's layer_norm without its affine part.
  Tensor layernorm(Axes axes = {-1}, double eps = 1e-5) const;
  // torch's F.rms_norm over the axes: x / sqrt(mean(x^2) + eps), eps the dtype's epsilon by default.
  Tensor rms_norm(Axes axes = {-1}, std::optional<double> eps = {}) const;
  // torch's F.group_norm and F.instance_norm on (N, C, *): statistics per sample over each group
  // of channels (each channel) and the spatial axes; weight and bias are (C,).
  Tensor group_norm(int64_t groups, const std::optional<Tensor>& weight = {},
                    const std::optional<Tensor>& bias = {}, double eps = 1e-5) const;
  Tensor instance_norm(const std::optional<Tensor>& weight = {}, const std::optional<Tensor>& bias = {},
                       double eps = 1e-5) const;
  // torch's F.scaled_dot_product_attention on this query (..., L, E), key (..., S, E) and value
  // (..., S, Ev): a bool mask keeps where true, a float mask adds; dropout_p applies whatever
  // Tensor::training says, as torch's.
  Tensor scaled_dot_product_attention(const Tensor& key, const Tensor& value,
                                      const std::optional<Tensor>& attn_mask = {}, double dropout_p = 0.0,
                                      bool is_causal = false, std::optional<double> scale = {}) const;
  // (x - mean) * invstd * weight + bias along `axis` (the channel axis), each of shape (C,).
  Tensor batchnorm(const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, const Tensor& mean,
                   const Tensor& invstd, int64_t axis = 1) const;
  // Zeroes elements with probability p and scales the rest by 1/(1-p), only while training
  // (Tensor::training); the identity otherwise.
  Tensor dropout(double p = 0.5) const;
  // Rows of `weight` (V, D) picked by this integer tensor of indices: shape (*this.shape, D). One
  // indexed load, as gather: an index outside [0, V) gives a row of zeros (CHECK_INDICES=1: an
  // error).
  Tensor embedding(const Tensor& weight) const;

  // ---- losses: this holds predictions (logits where said), target the truth ----
  // Class indices (integer, shape N or N,...) or class probabilities (the logits' shape).
  // With integer targets, `weight` (C,) weighs each class and targets equal to ignore_index count
  // for nothing; the mean divides by the counted targets' weights (torch's rules).
  Tensor cross_entropy(const Tensor& target, Reduction reduction = Reduction::Mean,
                       double label_smoothing = 0.0, const std::optional<Tensor>& weight = {},
                       int64_t ignore_index = -100) const;
  // torch's nll_loss on log-probabilities (N, C, ...) or (C) and integer targets (N, ...) or ().
  Tensor nll_loss(const Tensor& target, const std::optional<Tensor>& weight = {}, int64_t ignore_index = -100,
                  Reduction reduction = Reduction::Mean) const;
  // Logits (..., C) and integer class indices (...); targets equal to ignore_index count for
  // nothing, in the loss and in the mean's denominator.
  Tensor sparse_categorical_crossentropy(const Tensor& target, int64_t ignore_index = -1,
                                         double label_smoothing = 0.0,
                                         Reduction reduction = Reduction::Mean) const;
  Tensor binary_crossentropy(const Tensor& target, Reduction reduction = Reduction::Mean) const;
  Tensor binary_crossentropy_logits(const Tensor& target, Reduction reduction = Reduction::Mean) const;
  Tensor mse_loss(const Tensor& target, Reduction reduction = Reduction::Mean) const;
  Tensor l1_loss(const Tensor& target, Reduction reduction = Reduction::Mean) const;

  // Whether dropout (and layers such as BatchNorm) behave as in training; off by default.
  static bool training;

  // A tensor that is materialized in its own buffer when realized (a fusion boundary).
  Tensor contiguous() const;
  // A copy in a buffer of its own, also of a realized tensor (which contiguous() only views):
  // what keeps a JIT output past the next call. Gradients flow through it.
  Tensor clone() const;

  // ---- running ----
  // Computes the tensor (and everything it needs) now; afterwards it is a view of its buffer.
  Tensor& realize();
  // The elements, row-major. T must be the tensor's dtype's C++ type (float for float32,
  // float16_t for float16, bool for bool, ...); throws vkg::Error otherwise.
  template <class T>
  std::vector<T> to_vector() const {
    check_host_type(dtype_of<T>(), "to_vector");
    const std::vector<std::byte> raw = bytes();
    if constexpr (std::is_same_v<T, bool>) {  // a byte per element; vector<bool> packs bits
      std::vector<bool> out(raw.size());
      for (size_t i = 0; i < raw.size(); ++i) out[i] = raw[i] != std::byte{0};
      return out;
    } else {
      std::vector<T> out(raw.size() / sizeof(T));
      if (!out.empty()) std::memcpy(out.data(), raw.data(), out.size() * sizeof(T));  // not null
      return out;
    }
  }
  // The one element of a tensor with one element (any shape).
  template <class T>
  T item() const {
    if (numel() != 1) throw Error("item: tensor of shape " + shape_str(shape()) + " has " + std::to_string(numel()) + " elements, not 1");
    check_host_type(dtype_of<T>(), "item");
    return to_vector<T>()[0];
  }
  // The raw bytes of the elements, row-major.
  std::vector<std::byte> bytes() const;

  // "<Tensor shape=(2, 3) dtype=float32 device=VK op=ADD>"
  std::string repr() const;

  // ---- autograd ----
  // Reverse mode on the tensor-level graph (core/gradient.hpp): backward() builds the gradient
  // graph lazily, so it fuses into kernels like forward code and runs when a gradient is used.
  //
  //   Tensor w = Tensor::randn({4, 3}).requires_grad_();
  //   (x.matmul(w).relu() * 2).sum().backward();       // w.grad(): shape (4, 3), lazy
  //   w.assign(w - *w.grad() * 0.1);  w.set_grad({});   // an SGD step
  //
  // requires_grad_(true) makes this tensor a leaf: its value so far is detached from any graph,
  // and it gets a node of its own (equal values are one node otherwise, see the .cpp). Only float
  // tensors can require gradients.
  Tensor& requires_grad_(bool on = true);
  // True for a leaf with requires_grad_ and for a result computed from one outside NoGrad, as
  // torch: (w * 2).sum().requires_grad() is true when w requires grad.
  bool requires_grad() const;
  // No gradient history: a tensor that requires grad itself, or one that does not require grad
  // (torch's is_leaf). Optimizers take leaves only.
  bool is_leaf() const;
  // The accumulated gradient (the leaf's shape and dtype), none before the first backward.
  std::optional<Tensor> grad() const;
  // Replaces the gradient; set_grad({}) clears it (zero_grad).
  void set_grad(std::optional<Tensor> grad);
  // Adds d(this)/d(leaf) to the .grad of every tensor with requires_grad that this tensor's graph
  // reaches. This tensor must have one element (it is seeded with 1), or pass `gradient`, the
  // seed of this tensor's shape. Gradients accumulate over calls until set_grad({}).
  void backward() const;
  void backward(const Tensor& gradient) const;
  // The same value with no gradient flowing back through it.
  Tensor detach() const;

  // ---- devices ----
  // This tensor's value on `device` ("VK", "VK:1", "CPU"): a lazy COPY that the scheduler turns
  // into a copy between the two devices' buffers (DEBUG=2 lists it), not a kernel. Gradients flow
  // back through it to this tensor's device. The tensor itself when it is there already.
  Tensor to(const std::string& device) const;
  // Moves this tensor (every alias) to `device`. A leaf that requires grad stays a leaf, there,
  // and its gradient so far moves with it.
  Tensor& to_(const std::string& device);
  // This tensor split along `axis` over `devices` ("VK", "VK:1"): shard i holds the i-th equal
  // slice, on devices[i]; without an axis every device holds all of it (replicated, as weights
  // in data-parallel training). Ops on the result run per shard (core/multi.hpp says how);
  // to(device) gathers it. The axis must divide evenly. Gradients flow back to this tensor: each
  // shard's slice of the gradient, copied home (a replicated tensor's shards' gradients add up,
  // as data parallelism sums the replicas').
  Tensor shard(const std::vector<std::string>& devices, std::optional<int64_t> axis = std::nullopt) const;
  // Shards this tensor in place (every alias); a leaf that requires grad stays a leaf.
  Tensor& shard_(const std::vector<std::string>& devices, std::optional<int64_t> axis = std::nullopt);
  // Replaces this tensor's value (lazily) by `value` cast to this dtype; the shapes must agree.
  // Every alias sees the new value; the value's graph is detached (optimizer updates). A leaf
  // stays the same leaf: graphs built after the assign send its gradient here.
  //
  // A realized tensor (one that holds a whole buffer) is written in place: its buffer keeps its
  // memory, which is what lets a JIT replay a training step over fixed buffers. Kernels of the
  // same realize that read the old value run before the write. A lazy graph built before the
  // assign and realized only after it, though, reads the buffer's new contents (as a torch view
  // would): realize (or clone) what must keep the old value before the assign is realized.
  // Tensors that share a buffer (detach() of a realized tensor; equal expressions realized while
  // both are alive) see each other's in-place writes: make state that is assigned with clone().
  Tensor& assign(const Tensor& value);

 private:
  Tensor binary(Ops op, const Tensor& b, std::string_view name) const;
  Tensor unary_float(Ops op, std::string_view name) const;
  Tensor reduce(Ops op, const Axes& axes, bool keepdim, std::string_view name) const;
  Tensor broadcast_to(const Shape& shape) const;
  Tensor broadcast_to(const SymShape& shape) const;
  // A symbolic movement node (core/symbolic_shape.hpp): values, one expression per value, and
  // the bindings of the sizes given (this tensor's own are added).
  Tensor sym_movement(Ops op, std::vector<int64_t> values, std::vector<UOpPtr> exprs,
                      const std::vector<Binding>& bindings = {}) const;
  // The symbolic shape `ts` broadcast to (their values broadcast to `s`), or nullopt when none of
  // them has a symbolic shape.
  static std::optional<SymShape> symbolic_broadcast(std::initializer_list<const Tensor*> ts,
                                                    const Shape& s);
  // This symbolic tensor made ready to expand to `target` (values `values`, same rank): a
  // symbolic size bound to 1 that broadcasts is shrunk to a plain 1, and the sizes the expand
  // takes as equal by their values are guarded for a Jit's replays (core/binding_guard.hpp).
  Tensor broadcast_from(const std::vector<UOpPtr>& target, const Shape& values) const;
  Tensor movement(Ops op, std::vector<int64_t> arg) const;
  void check_host_type(DType wanted, std::string_view op) const;
  // Points the tensor at the buffer view holding its value, keeping what autograd needs.
  void set_realized(UOpPtr view);
  friend void realize(std::span<Tensor* const> tensors);
  friend class Jit;

  std::shared_ptr<TensorState> state_;
};

// What a Tensor handle and its aliases share.
struct TensorState {
  UOpPtr node;
  bool requires_grad = false;
  std::optional<Tensor> grad;
  // The lazy node this tensor had before realize() pointed it at a buffer, kept while it may carry
  // a gradient (core/autograd.cpp). A non-leaf holds it: backward of the realized tensor, and of
  // graphs that use its buffer, walks it. A leaf only watches it: graphs built before the realize
  // refer to it (and keep it alive), and their gradient belongs to the leaf.
  UOpPtr unrealized;
  std::weak_ptr<const UOp> leaf_before_realize;

  explicit TensorState(UOpPtr n) : node(std::move(n)) {}
  ~TensorState();
};

inline const UOpPtr& Tensor::node() const { return state_->node; }

// While one is alive (on this thread; they nest), op results carry no gradient back to their
// inputs: each result is detached (wrapped in a DETACH node) when some tensor requires grad.
// Tensors made inside may still be set to require grad, and backward still works.
//
//   { vkg::NoGrad ng; w.assign(w - lr * *w.grad()); }
class NoGrad {
 public:
  NoGrad();
  ~NoGrad();
  NoGrad(const NoGrad&) = delete;
  NoGrad& operator=(const NoGrad&) = delete;
  static bool active();
};

// Operators read like the math; a scalar on either side becomes a tensor of the other's dtype
// (see promote_with_scalar).
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalarish b);
Tensor operator-(const Tensor& a, Scalarish b);
Tensor operator*(const Tensor& a, Scalarish b);
Tensor operator/(const Tensor& a, Scalarish b);
Tensor operator+(Scalarish a, const Tensor& b);
Tensor operator-(Scalarish a, const Tensor& b);
Tensor operator*(Scalarish a, const Tensor& b);
Tensor operator/(Scalarish a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, Scalarish b);
Tensor operator>(const Tensor& a, Scalarish b);
Tensor operator<=(const Tensor& a, Scalarish b);
Tensor operator>=(const Tensor& a, Scalarish b);
Tensor operator&(const Tensor& a, const Tensor& b);
Tensor operator|(const Tensor& a, const Tensor& b);
Tensor operator^(const Tensor& a, const Tensor& b);
Tensor operator~(const Tensor& a);

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// The device new tensors go to when none is named: $DEVICE, else "VK".
std::string default_device();

// Computes several tensors in one schedule (shared work runs once).
void realize(std::span<Tensor* const> tensors);

}  // namespace vkg
