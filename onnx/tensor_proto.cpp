// TensorProto to Tensor (see tensor_proto.hpp). Typed fields widen small types into int32_data
// (float16 and bfloat16 as their bit patterns), so those are narrowed here; raw_data is the
// device layout already and goes to the tensor as it is.
#include <vkgrad/onnx/tensor_proto.hpp>

#include <charconv>
#include <cstring>
#include <fstream>

#include <vkgrad/onnx/op_context.hpp>

namespace vkg::onnx {
namespace {

std::vector<int64_t> dims_of(const ::onnx::TensorProto& tp) {
  return {tp.dims().begin(), tp.dims().end()};
}

template <class To, class Field>
std::vector<std::byte> narrow(const Field& field) {
  std::vector<std::byte> out(size_t(field.size()) * sizeof(To));
  for (int i = 0; i < field.size(); ++i) {
    const To v = To(field.Get(i));
    std::memcpy(out.data() + size_t(i) * sizeof(To), &v, sizeof(To));
  }
  return out;
}

// A decimal byte count of external_data, whole and not negative (std::stoll would accept "12abc"
// and throw std::invalid_argument on "abc").
int64_t byte_count(const std::string& key, const std::string& value, const std::string& where) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size() || v < 0)
    throw Error(where + ": external data " + key + " '" + value + "' is not a byte count");
  return v;
}

std::vector<std::byte> read_external(const ::onnx::TensorProto& tp, const std::string& base_dir,
                                     const std::string& where) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : tp.external_data()) {
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset")
      offset = byte_count("offset", kv.value(), where);
    else if (kv.key() == "length")
      length = byte_count("length", kv.value(), where);
  }
  if (location.empty() || location.find("..") != std::string::npos || location[0] == '/')
    throw Error(where + ": external data location '" + location +
                "' is not a file beside the model");
  const std::string path = base_dir.empty() ? location : base_dir + "/" + location;
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(where + ": cannot open external data file " + path);
  f.seekg(0, std::ios::end);
  const int64_t size = f.tellg();
  // offset and length are not negative here; compared so that offset + length cannot overflow.
  if (offset > size || (length >= 0 && length > size - offset))
    throw Error(where + ": external data " + path + " holds " + std::to_string(size) +
                " bytes, fewer than offset " + std::to_string(offset) + " and length " +
                (length < 0 ? std::string("(the rest)") : std::to_string(length)) + " ask for");
  if (length < 0) length = size - offset;
  std::vector<std::byte> out(static_cast<size_t>(length));
  f.seekg(offset);
  f.read(reinterpret_cast<char*>(out.data()), length);
  return out;
}

// Empties a repeated field and frees its storage (Clear() keeps the capacity).
template <class Field>
void free_field(Field* f) {
  Field().Swap(f);
}

// The element bytes of a non-raw TensorProto, in the device layout of `d`.
std::vector<std::byte> typed_bytes(const ::onnx::TensorProto& tp, DType d) {
  switch (d.scalar) {
    case Scalar::Float32:
      return narrow<float>(tp.float_data());
    case Scalar::Float64:
      return narrow<double>(tp.double_data());
    case Scalar::Int64:
      return narrow<int64_t>(tp.int64_data());
    case Scalar::Int32:
      return narrow<int32_t>(tp.int32_data());
    case Scalar::Int16:
      return narrow<int16_t>(tp.int32_data());
    case Scalar::Int8:
      return narrow<int8_t>(tp.int32_data());
    case Scalar::UInt16:
    case Scalar::Float16:
    case Scalar::BFloat16:
      return narrow<uint16_t>(tp.int32_data());
    case Scalar::UInt8:
      return narrow<uint8_t>(tp.int32_data());
    case Scalar::Bool:
      return narrow<uint8_t>(tp.int32_data());
    case Scalar::UInt32:
      return narrow<uint32_t>(tp.uint64_data());
    case Scalar::UInt64:
      return narrow<uint64_t>(tp.uint64_data());
    default:
      return {};
  }
}

template <class T>
void widen(const std::byte* p, size_t n, std::vector<int64_t>& out) {
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));
    out.push_back(int64_t(v));
  }
}

}  // namespace

Tensor tensor_from_proto(::onnx::TensorProto& tp, const std::string& device,
                         const std::string& where, const std::string& base_dir, bool release) {
  const DType d = dtype_from_onnx(tp.data_type(), where);
  const Shape shape = dims_of(tp);
  check_size(shape, d.itemsize(), where);
  const int64_t count = vkg::prod(shape);
  const size_t want = size_t(count) * size_t(d.itemsize());
  auto make = [&](std::span<const std::byte> bytes) {
    if (bytes.size() != want)
      throw Error(where + ": holds " + std::to_string(bytes.size()) + " bytes of data, but shape " +
                  shape_str(shape) + " of " + d.name() + " needs " + std::to_string(want));
    return Tensor(bytes, size_t(count), d, shape, device);
  };
  Tensor t = [&] {
    if (tp.data_location() == ::onnx::TensorProto::EXTERNAL)
      return make(read_external(tp, base_dir, where));
    if (tp.has_raw_data())
      return make(std::as_bytes(std::span(tp.raw_data().data(), tp.raw_data().size())));
    return make(typed_bytes(tp, d));
  }();
  if (release) {  // the tensor's buffer holds the bytes now (until its upload)
    // clear_*() keeps the storage's capacity; swapping with empty ones frees it.
    if (tp.has_raw_data()) std::string().swap(*tp.mutable_raw_data());
    tp.clear_raw_data();
    free_field(tp.mutable_float_data());
    free_field(tp.mutable_int32_data());
    free_field(tp.mutable_int64_data());
    free_field(tp.mutable_double_data());
    free_field(tp.mutable_uint64_data());
  }
  return t;
}

std::optional<std::vector<int64_t>> host_ints_of(const ::onnx::TensorProto& tp,
                                                 const std::string& base_dir, size_t limit) {
  DType d;
  try {
    d = dtype_from_onnx(tp.data_type(), "");
  } catch (const Error&) {
    return std::nullopt;
  }
  if (!(d.is_int() || d.is_bool()) || d == dtypes::uint64) return std::nullopt;
  // Stops at the limit, so a huge or negative dims list cannot overflow the product.
  size_t count = 1;
  for (int64_t n : tp.dims()) {
    if (n < 0) return std::nullopt;
    if (n == 0) {
      count = 0;
      break;
    }
    if (count > limit / size_t(n)) return std::nullopt;
    count *= size_t(n);
  }
  if (count > limit) return std::nullopt;
  std::vector<std::byte> bytes;
  if (tp.data_location() == ::onnx::TensorProto::EXTERNAL)
    bytes = read_external(tp, base_dir, "initializer");
  else if (tp.has_raw_data())
    bytes = std::vector<std::byte>(
        reinterpret_cast<const std::byte*>(tp.raw_data().data()),
        reinterpret_cast<const std::byte*>(tp.raw_data().data()) + tp.raw_data().size());
  else
    bytes = typed_bytes(tp, d);
  const size_t n = count;
  if (bytes.size() != n * size_t(d.itemsize())) return std::nullopt;
  std::vector<int64_t> out;
  out.reserve(n);
  switch (d.scalar) {
    case Scalar::Bool:
    case Scalar::UInt8:
      widen<uint8_t>(bytes.data(), n, out);
      break;
    case Scalar::Int8:
      widen<int8_t>(bytes.data(), n, out);
      break;
    case Scalar::Int16:
      widen<int16_t>(bytes.data(), n, out);
      break;
    case Scalar::UInt16:
      widen<uint16_t>(bytes.data(), n, out);
      break;
    case Scalar::Int32:
      widen<int32_t>(bytes.data(), n, out);
      break;
    case Scalar::UInt32:
      widen<uint32_t>(bytes.data(), n, out);
      break;
    case Scalar::Int64:
      widen<int64_t>(bytes.data(), n, out);
      break;
    default:
      return std::nullopt;
  }
  return out;
}

}  // namespace vkg::onnx
