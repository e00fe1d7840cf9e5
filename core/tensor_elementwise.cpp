// Elementwise ops: broadcasting, dtype promotion, and the derived functions built from ALU ops.
#include <cmath>
#include <numbers>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

namespace {

Tensor scalar_like(const Tensor& t, Scalarish v) { return t.scalar_like(v); }

void check_same_device(const Tensor& a, const Tensor& b, std::string_view op) {
  if (a.device() != b.device())
    throw Error(std::string(op) + ": tensors are on different devices (" + a.device() + " and " +
                b.device() + ")");
}

}  // namespace

Tensor Tensor::scalar_like(Scalarish v) const {
  return Tensor::full({}, v, promote_with_scalar(dtype(), v.kind()), device());
}

// not b, for a bool tensor: b != true (other dtypes are cast to bool first).
Tensor Tensor::logical_not() const {
  return cast(dtypes::bool_).ne(Tensor::full({}, true, dtypes::bool_, device()));
}

Tensor Tensor::broadcast_to(const Shape& target) const {
  if (shape() == target) return *this;
  Shape padded = shape();
  padded.insert(padded.begin(), target.size() - padded.size(), 1);  // align right, as numpy
  return reshape(padded).expand(target);
}

Tensor Tensor::binary(Ops op, const Tensor& b, std::string_view name) const {
  check_same_device(*this, b, name);
  DType out;
  try {
    out = promote(dtype(), b.dtype());
  } catch (const Error&) {
    throw Error(std::string(name) + ": cannot combine " + dtype().name() + " and " +
                b.dtype().name());
  }
  const Shape s = broadcast_shape(shape(), b.shape(), name);
  if (const std::optional<SymShape> ss = symbolic_broadcast({this, &b}, s)) {
    const Tensor x = cast(out).broadcast_to(*ss), y = b.cast(out).broadcast_to(*ss);
    return Tensor(UOp::make(op, is_comparison(op) ? dtypes::bool_ : out, {x.node(), y.node()}));
  }
  const Tensor x = cast(out).broadcast_to(s), y = b.cast(out).broadcast_to(s);
  const DType result = is_comparison(op) ? dtypes::bool_ : out;
  return Tensor(UOp::make(op, result, {x.node(), y.node()}));
}

Tensor Tensor::unary_float(Ops op, std::string_view) const {
  const Tensor x = dtype().is_float() ? *this : cast(dtypes::default_float);
  return Tensor(UOp::make(op, x.dtype(), {x.node()}));
}

Tensor Tensor::operator-() const {
  if (dtype().is_bool()) throw Error("neg: not defined for bool tensors (use logical not)");
  return Tensor(UOp::make(Ops::NEG, dtype(), {node()}));
}

Tensor Tensor::exp2() const { return unary_float(Ops::EXP2, "exp2"); }
Tensor Tensor::log2() const { return unary_float(Ops::LOG2, "log2"); }
Tensor Tensor::sin() const { return unary_float(Ops::SIN, "sin"); }
Tensor Tensor::cos() const { return unary_float(Ops::COS, "cos"); }
Tensor Tensor::erf() const { return unary_float(Ops::ERF, "erf"); }
Tensor Tensor::erfc() const { return unary_float(Ops::ERFC, "erfc"); }
Tensor Tensor::sqrt() const { return unary_float(Ops::SQRT, "sqrt"); }
Tensor Tensor::reciprocal() const { return unary_float(Ops::RECIP, "reciprocal"); }
Tensor Tensor::exp() const {
  const Tensor x = dtype().is_float() ? *this : cast(dtypes::default_float);
  return (x * (1.0 / std::numbers::ln2)).exp2();
}
Tensor Tensor::log() const { return log2() * std::numbers::ln2; }
// nan passes through as torch's relu; relu(-0) is +0 and relu'(0) is 0, as torch.
Tensor Tensor::relu() const {
  const Tensor keep =
      dtype().is_float() ? gt(scalar_like(0)).logical_or(isnan()) : gt(scalar_like(0));
  return keep.where(*this, scalar_like(0));
}
// What is neither below nor above 0 is +-0 or nan: x * x makes it +0 (or nan) with gradient
// 2x = 0, so abs(-0) = +0 and abs'(0) = 0, as torch.
Tensor Tensor::abs() const {
  return lt(scalar_like(0)).where(-*this, gt(scalar_like(0)).where(*this, *this * *this));
}

Tensor Tensor::add(const Tensor& b) const { return binary(Ops::ADD, b, "add"); }
Tensor Tensor::sub(const Tensor& b) const {
  // Said here, in the user's terms, rather than by the device that cannot render it.
  if (dtype().is_bool() && b.dtype().is_bool())
    throw Error("sub: not defined for bool tensors (use ne for xor)");
  return binary(Ops::SUB, b, "sub");
}
Tensor Tensor::mul(const Tensor& b) const { return binary(Ops::MUL, b, "mul"); }
Tensor Tensor::maximum(const Tensor& b) const { return binary(Ops::MAX, b, "maximum"); }
// Through MAX, so that a nan propagates as it does there (a where on a < b would drop a nan a):
// negation reverses the order of floats, bitwise not that of every integer dtype (no overflow).
Tensor Tensor::minimum(const Tensor& b) const {
  DType out;
  try {
    out = promote(dtype(), b.dtype());
  } catch (const Error&) {
    throw Error("minimum: cannot combine " + dtype().name() + " and " + b.dtype().name());
  }
  if (out.is_bool()) return logical_and(b);
  if (out.is_float()) return -(-cast(out)).maximum(-b.cast(out));
  return cast(out).bitwise_not().maximum(b.cast(out).bitwise_not()).bitwise_not();
}
Tensor Tensor::lt(const Tensor& b) const { return binary(Ops::CMPLT, b, "lt"); }
Tensor Tensor::gt(const Tensor& b) const { return b.lt(*this); }
Tensor Tensor::ne(const Tensor& b) const { return binary(Ops::CMPNE, b, "ne"); }
// not (a > b) is a <= b only without nan: for floats, nan <= x and nan >= x are false.
Tensor Tensor::le(const Tensor& b) const {
  if (promote(dtype(), b.dtype()).is_float()) return lt(b).logical_or(eq(b));
  return gt(b).logical_not();
}
Tensor Tensor::ge(const Tensor& b) const {
  if (promote(dtype(), b.dtype()).is_float()) return gt(b).logical_or(eq(b));
  return lt(b).logical_not();
}
Tensor Tensor::eq(const Tensor& b) const { return ne(b).logical_not(); }

Tensor Tensor::div(const Tensor& b) const {
  const bool floats = promote(dtype(), b.dtype()).is_float();
  const Tensor x = floats ? *this : cast(dtypes::default_float);
  const Tensor y = floats ? b : b.cast(dtypes::default_float);
  return x.binary(Ops::FDIV, y, "div");
}

Tensor Tensor::idiv(const Tensor& b) const {
  if (!promote(dtype(), b.dtype()).is_int())
    throw Error("idiv: needs integer tensors, got " + dtype().name() + " and " + b.dtype().name());
  return binary(Ops::IDIV, b, "idiv");
}

Tensor Tensor::mod(const Tensor& b) const {
  if (!promote(dtype(), b.dtype()).is_int())
    throw Error("mod: needs integer tensors, got " + dtype().name() + " and " + b.dtype().name());
  return binary(Ops::MOD, b, "mod");
}

Tensor Tensor::where(const Tensor& a, const Tensor& b) const {
  check_same_device(*this, a, "where");
  check_same_device(*this, b, "where");
  const DType out = promote(a.dtype(), b.dtype());
  const Shape s = broadcast_shape(broadcast_shape(shape(), a.shape(), "where"), b.shape(), "where");
  if (const std::optional<SymShape> ss = symbolic_broadcast({this, &a, &b}, s)) {
    const Tensor c = cast(dtypes::bool_).broadcast_to(*ss);
    const Tensor x = a.cast(out).broadcast_to(*ss), y = b.cast(out).broadcast_to(*ss);
    return Tensor(UOp::make(Ops::WHERE, out, {c.node(), x.node(), y.node()}));
  }
  const Tensor c = cast(dtypes::bool_).broadcast_to(s);
  const Tensor x = a.cast(out).broadcast_to(s), y = b.cast(out).broadcast_to(s);
  return Tensor(UOp::make(Ops::WHERE, out, {c.node(), x.node(), y.node()}));
}

Tensor Tensor::cast(DType d) const {
  if (d.count != 1 || d.is_ptr() || d.scalar == Scalar::Void)
    throw Error("cast: cannot cast a tensor to " + d.name());
  if (d == dtype()) return *this;
  return Tensor(UOp::make(Ops::CAST, d, {node()}));
}

namespace {

DType unsigned_of_size(int bytes) {
  return bytes == 1   ? dtypes::uint8
         : bytes == 2 ? dtypes::uint16
         : bytes == 4 ? dtypes::uint32
                      : dtypes::uint64;
}

// Elementwise reinterpretation between dtypes of one size; bool is its byte (0 or 1).
Tensor same_size_bitcast(const Tensor& x, DType d) {
  if (d == x.dtype()) return x;
  if (x.dtype().is_bool()) return x.cast(dtypes::uint8).bitcast(d);
  if (d.is_bool()) return x.bitcast(dtypes::uint8).ne(0);
  return Tensor(UOp::make(Ops::BITCAST, d, {x.node()}));
}

// The byte offsets 0, step, 2 step, ... of the r pieces of a wider word, in dtype w, as bit
// counts: piece k of a little-endian word sits k * step bytes up.
Tensor piece_shifts(int64_t r, int step, DType w, const std::string& device) {
  std::vector<uint64_t> bits;
  for (int64_t k = 0; k < r; ++k) bits.push_back(uint64_t(k * step * 8));
  return Tensor(bits, {r}, device).cast(w);
}

}  // namespace

// Between sizes, in integer arithmetic on the words (no memory aliasing, so it fuses like any
// elementwise op): a wide word splits into its pieces by shifts and truncating casts; pieces
// join by shifts into disjoint bit fields and a sum, which is their or. 16-bit words shift in
// 32 bits, but a 16-bit piece is still a uint16 value on the way (the same-size bitcast and the
// cast to or from the 32-bit word), so on Vulkan a 16-bit side needs shaderInt16 as well as
// 16-bit storage, as any uint16 tensor does.
Tensor Tensor::bitcast(DType d) const {
  if (d.count != 1 || d.is_ptr() || d.scalar == Scalar::Void)
    throw Error("bitcast: cannot reinterpret " + dtype().name() + " as " + d.name());
  const int from = dtype().itemsize(), to = d.itemsize();
  if (from == to) return same_size_bitcast(*this, d);
  const Shape s = shape();
  const std::string what =
      "bitcast: cannot view " + dtype().name() + " " + shape_str(s) + " as " + d.name() + ": ";
  if (s.empty())
    throw Error(what + "a 0-d tensor cannot change its element size (reshape it to [1] first)");
  const int64_t n = s.back();
  Shape lead(s.begin(), s.end() - 1);
  const int wide_size = std::max(4, std::max(from, to));
  const DType wide = unsigned_of_size(wide_size);
  if (from > to) {
    const int64_t r = from / to;
    Shape pieces = lead, out = lead;
    pieces.push_back(n), pieces.push_back(r);
    out.push_back(n * r);
    Shape one = lead;
    one.push_back(n), one.push_back(1);
    const Tensor word = same_size_bitcast(*this, unsigned_of_size(from)).cast(wide);
    const Tensor parts =
        word.reshape(one).expand(pieces).rshift(piece_shifts(r, to, wide, device()));
    return same_size_bitcast(parts.cast(unsigned_of_size(to)), d).reshape(out);
  }
  const int64_t r = to / from;
  if (n % r != 0)
    throw Error(what + "its last dimension (" + std::to_string(n) + ") must be divisible by " +
                std::to_string(r) + ", the number of " + dtype().name() + " elements in one " +
                d.name());
  Shape pieces = lead;
  pieces.push_back(n / r), pieces.push_back(r);
  const Tensor part = same_size_bitcast(*this, unsigned_of_size(from)).cast(wide).reshape(pieces);
  const Tensor word = part.lshift(piece_shifts(r, from, wide, device())).sum({-1});
  return same_size_bitcast(word.cast(unsigned_of_size(to)), d);
}

Tensor operator+(const Tensor& a, const Tensor& b) { return a.add(b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return a.sub(b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return a.mul(b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return a.div(b); }
Tensor operator+(const Tensor& a, Scalarish b) { return a.add(scalar_like(a, b)); }
Tensor operator-(const Tensor& a, Scalarish b) { return a.sub(scalar_like(a, b)); }
Tensor operator*(const Tensor& a, Scalarish b) { return a.mul(scalar_like(a, b)); }
Tensor operator/(const Tensor& a, Scalarish b) { return a.div(scalar_like(a, b)); }
Tensor operator+(Scalarish a, const Tensor& b) { return scalar_like(b, a).add(b); }
Tensor operator-(Scalarish a, const Tensor& b) { return scalar_like(b, a).sub(b); }
Tensor operator*(Scalarish a, const Tensor& b) { return scalar_like(b, a).mul(b); }
Tensor operator/(Scalarish a, const Tensor& b) { return scalar_like(b, a).div(b); }

}  // namespace vkg
