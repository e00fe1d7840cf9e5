// Tensor: the user's handle on a lazy value. Every op builds a node of the tensor-level UOp graph
// (core/shape_rules.hpp lists its forms) and returns at once; nothing runs until a value is asked
// for. Tensors are cheap to copy: a copy shares the node.
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
#include <iosfwd>
#include <span>
#include <string>
#include <vector>

#include <vkgrad/core/dtype.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/shape.hpp>
#include <vkgrad/core/uop.hpp>

namespace vkg {

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
  // Wraps a tensor-level node.
  explicit Tensor(UOpPtr node) : node_(std::move(node)) {}

  // Uninitialized storage (its contents are whatever the device holds).
  static Tensor empty(Shape shape, DType dtype = dtypes::default_float, std::string device = "");
  static Tensor full(Shape shape, Scalarish value, std::optional<DType> dtype = {}, std::string device = "");
  static Tensor zeros(Shape shape, DType dtype = dtypes::default_float, std::string device = "");
  static Tensor ones(Shape shape, DType dtype = dtypes::default_float, std::string device = "");
  // [start, stop) in steps of `step`, int32 for integer arguments, the default float otherwise.
  static Tensor arange(Scalarish start, Scalarish stop, Scalarish step = 1, std::string device = "");
  static Tensor arange(Scalarish stop) { return arange(0, stop); }

  // ---- what it is ----
  const Shape& shape() const;
  DType dtype() const { return node_->dtype; }
  int ndim() const { return int(shape().size()); }
  int64_t numel() const { return prod(shape()); }
  const std::string& device() const;
  const UOpPtr& node() const { return node_; }

  // ---- elementwise ----
  Tensor operator-() const;
  Tensor exp2() const;
  Tensor log2() const;
  Tensor sin() const;
  Tensor sqrt() const;
  Tensor reciprocal() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor relu() const;
  Tensor abs() const;

  Tensor add(const Tensor& b) const;
  Tensor sub(const Tensor& b) const;
  Tensor mul(const Tensor& b) const;
  Tensor div(const Tensor& b) const;       // true division: integers divide as floats
  Tensor idiv(const Tensor& b) const;      // integer division, truncating toward zero (C)
  Tensor mod(const Tensor& b) const;       // remainder with the dividend's sign (C)
  Tensor maximum(const Tensor& b) const;
  Tensor minimum(const Tensor& b) const;
  Tensor lt(const Tensor& b) const;
  Tensor gt(const Tensor& b) const;
  Tensor le(const Tensor& b) const;
  Tensor ge(const Tensor& b) const;
  Tensor eq(const Tensor& b) const;
  Tensor ne(const Tensor& b) const;
  // cond ? a : b, broadcasting all three; cond is cast to bool.
  Tensor where(const Tensor& a, const Tensor& b) const;
  Tensor cast(DType dtype) const;
  // The same bits read as another dtype of the same size.
  Tensor bitcast(DType dtype) const;

  // ---- reductions (axes may be negative; none given means all) ----
  // One kernel each, except where one output reduces more than 32768 elements: that is two
  // kernels (partial results, then theirs), as one invocation must not loop that long.
  Tensor sum(Axes axes = {}, bool keepdim = false) const;
  Tensor max(Axes axes = {}, bool keepdim = false) const;
  Tensor mean(Axes axes = {}, bool keepdim = false) const;
  // Variance with Bessel's correction by default (correction = 1), as torch and tinygrad.
  Tensor var(Axes axes = {}, bool keepdim = false, int64_t correction = 1) const;
  Tensor dot(const Tensor& b) const;
  Tensor matmul(const Tensor& b) const;

  // ---- movement (zero-copy: they only change how elements are addressed) ----
  Tensor reshape(Shape shape) const;  // one dimension may be -1
  Tensor permute(std::vector<int64_t> order) const;
  Tensor expand(Shape shape) const;   // -1 keeps a dimension
  Tensor pad(std::vector<std::pair<int64_t, int64_t>> before_after, Scalarish value = 0) const;
  Tensor shrink(std::vector<std::pair<int64_t, int64_t>> begin_end) const;
  Tensor flip(std::vector<int64_t> axes) const;
  Tensor transpose(int64_t a = -2, int64_t b = -1) const;

  // A tensor that is materialized in its own buffer when realized (a fusion boundary).
  Tensor contiguous() const;

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
    return to_vector<T>()[0];
  }
  // The raw bytes of the elements, row-major.
  std::vector<std::byte> bytes() const;

  // "<Tensor shape=(2, 3) dtype=float32 device=VK op=ADD>"
  std::string repr() const;

 private:
  Tensor binary(Ops op, const Tensor& b, std::string_view name) const;
  Tensor unary_float(Ops op, std::string_view name) const;
  Tensor reduce(Ops op, const Axes& axes, bool keepdim, std::string_view name) const;
  Tensor broadcast_to(const Shape& shape) const;
  Tensor movement(Ops op, std::vector<int64_t> arg) const;
  void check_host_type(DType wanted, std::string_view op) const;

  UOpPtr node_;
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

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// The device new tensors go to when none is named: $DEVICE, else "VK".
std::string default_device();

// Computes several tensors in one schedule (shared work runs once).
void realize(std::span<Tensor* const> tensors);

}  // namespace vkg
