// Tensor creation, what a tensor is, and how it prints.
#include <vkgrad/core/tensor.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ostream>

#include <vkgrad/core/buffer.hpp>
#include <vkgrad/core/device.hpp>
#include <vkgrad/core/error.hpp>

namespace vkg {

bool Tensor::training = false;

std::string default_device() {
  const char* env = std::getenv("DEVICE");
  return (env && *env) ? std::string(env) : std::string("VK");
}

namespace {

// The device a new tensor lives on, spelled as realize spells it ("vk", "VK:0" -> "VK"), so tensors
// made with either spelling combine without a `to`.
std::string resolve_device(const std::string& device) {
  return canonical_device(device.empty() ? default_device() : device);
}

UOpPtr device_node(const std::string& device) {
  return UOp::make(Ops::DEVICE, dtypes::void_, {}, resolve_device(device));
}

// A tensor of `shape` whose every element is `value` (as dtype d): a 0-d CONST broadcast.
Tensor const_tensor(Scalarish value, DType d, const Shape& shape, const std::string& device) {
  UOpPtr c = UOp::make(Ops::CONST, d, {device_node(device)}, UOp::const_(d, value)->arg);
  Tensor t(c);
  if (shape.empty()) return t;
  return t.reshape(Shape(shape.size(), 1)).expand(shape);
}

DType literal_dtype(Scalarish v) {
  switch (v.kind()) {
    case ScalarKind::Bool: return dtypes::bool_;
    case ScalarKind::Int: return dtypes::default_int;
    case ScalarKind::Float: return dtypes::default_float;
  }
  return dtypes::default_float;
}

template <class T>
std::vector<std::byte> bytes_of(std::initializer_list<T> values) {
  std::vector<std::byte> out(values.size() * sizeof(T));
  if (values.size()) std::memcpy(out.data(), values.begin(), out.size());
  return out;
}

// bool is one byte per element in buffers (0 or 1).
std::vector<std::byte> bool_bytes(const std::vector<bool>& values) {
  std::vector<std::byte> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = std::byte(values[i] ? 1 : 0);
  return out;
}

}  // namespace

Tensor::Tensor(std::span<const std::byte> bytes, size_t count, DType dtype, Shape shape, std::string device) {
  check_size(shape, dtype.itemsize(), "Tensor");
  if (vkg::prod(shape) != int64_t(count))
    throw Error("Tensor: " + std::to_string(count) + " elements of data do not fill shape " + shape_str(shape) +
                " (" + std::to_string(vkg::prod(shape)) + " elements)");
  if (bytes.size() != count * size_t(dtype.itemsize()))
    throw Error("Tensor: " + std::to_string(bytes.size()) + " bytes do not hold " + std::to_string(count) +
                " elements of " + dtype.name());
  auto buffer = std::make_shared<Buffer>(resolve_device(device), dtype, int64_t(count));
  buffer->initial_data = std::make_shared<const std::vector<std::byte>>(bytes.begin(), bytes.end());
  UOpPtr b = UOp::make(Ops::BUFFER, dtype, {device_node(buffer->device())}, std::shared_ptr<const ArgPayload>(buffer));
  state_ = Tensor(b).reshape(std::move(shape)).state_;
}

Tensor::Tensor(const std::vector<bool>& data, Shape shape, std::string device)
    : Tensor(bool_bytes(data), data.size(), dtypes::bool_, std::move(shape), std::move(device)) {}

Tensor::Tensor(std::initializer_list<int> v)
    : Tensor(bytes_of(v), v.size(), dtypes::int32, Shape{int64_t(v.size())}) {}
Tensor::Tensor(std::initializer_list<float> v)
    : Tensor(bytes_of(v), v.size(), dtypes::float32, Shape{int64_t(v.size())}) {}
Tensor::Tensor(std::initializer_list<double> v)
    : Tensor(std::vector<float>(v.begin(), v.end()), Shape{int64_t(v.size())}) {}
Tensor::Tensor(std::initializer_list<bool> v)
    : Tensor(bytes_of(v), v.size(), dtypes::bool_, Shape{int64_t(v.size())}) {}
Tensor::Tensor(Scalarish value) : Tensor(const_tensor(value, literal_dtype(value), {}, "")) {}

Tensor Tensor::empty(Shape shape, DType dtype, std::string device) {
  check_size(shape, dtype.itemsize(), "empty");
  auto buffer = std::make_shared<Buffer>(resolve_device(device), dtype, vkg::prod(shape));
  UOpPtr b = UOp::make(Ops::BUFFER, dtype, {device_node(buffer->device())}, std::shared_ptr<const ArgPayload>(buffer));
  return Tensor(b).reshape(std::move(shape));
}

Tensor Tensor::full(Shape shape, Scalarish value, std::optional<DType> dtype, std::string device) {
  const DType d = dtype.value_or(literal_dtype(value));
  check_size(shape, d.itemsize(), "full");
  return const_tensor(value, d, shape, device);
}

// Checked here too, so that a bad shape's message names the op the user called.
Tensor Tensor::zeros(Shape shape, DType dtype, std::string device) {
  check_size(shape, dtype.itemsize(), "zeros");
  return full(std::move(shape), 0, dtype, std::move(device));
}
Tensor Tensor::ones(Shape shape, DType dtype, std::string device) {
  check_size(shape, dtype.itemsize(), "ones");
  return full(std::move(shape), 1, dtype, std::move(device));
}

// The values are computed on the host and uploaded: exact for every dtype, at the cost of host
// memory for the whole range.
Tensor Tensor::arange(Scalarish start, Scalarish stop, Scalarish step, std::string device) {
  const bool ints = start.kind() != ScalarKind::Float && stop.kind() != ScalarKind::Float &&
                    step.kind() != ScalarKind::Float;
  const double a = start.as_double(), b = stop.as_double(), s = step.as_double();
  if (s == 0) throw Error("arange: step must not be 0");
  const int64_t n = std::max<int64_t>(0, int64_t(std::ceil((b - a) / s)));
  if (ints) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = int32_t(int64_t(a) + i * int64_t(s));
    return Tensor(v, {n}, std::move(device));
  }
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(a + double(i) * s);
  return Tensor(v, {n}, std::move(device));
}

const Shape& Tensor::shape() const {
  const Shape* s = node()->shape();
  if (!s) throw Error("node " + std::string(op_name(node()->op)) + " is not a tensor-level node");
  return *s;
}

const std::string& Tensor::device() const {
  const UOp* d = node()->device_node();
  if (!d) throw Error("tensor node " + std::string(op_name(node()->op)) + " has no device");
  return d->arg_as<std::string>();
}

std::string Tensor::repr() const {
  return "<Tensor shape=" + shape_str(shape()) + " dtype=" + dtype().name() + " device=" + device() +
         " op=" + std::string(op_name(node()->op)) + ">";
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.repr(); }

}  // namespace vkg
