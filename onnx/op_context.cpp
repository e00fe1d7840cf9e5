// OpContext (see op_context.hpp): inputs, attributes that remember being read, and errors that
// name the node.
#include <vkgrad/onnx/op_context.hpp>

#include <cstring>

namespace vkg::onnx {

namespace {
std::string kind_of(const Value& v) {
  return v.is_tensor()     ? "a tensor"
         : v.is_sequence() ? "a sequence"
         : v.is_strings()  ? "a string tensor"
                           : "an empty optional";
}
}  // namespace

const Tensor& Value::tensor() const {
  if (const Tensor* t = std::get_if<Tensor>(&data)) return *t;
  if (is_strings())
    throw Unsupported("onnx: string tensors reach an operator that computes with numbers");
  throw Error("onnx: expected a tensor, got " + kind_of(*this));
}
const Sequence& Value::sequence() const {
  if (const Sequence* s = std::get_if<Sequence>(&data)) return *s;
  throw Error("onnx: expected a sequence, got " + kind_of(*this));
}
const Strings& Value::strings() const {
  if (const Strings* s = std::get_if<Strings>(&data)) return *s;
  throw Error("onnx: expected a string tensor, got " + kind_of(*this));
}

OpContext::OpContext(const ::onnx::NodeProto& node, int64_t opset, std::vector<const Value*> inputs,
                     std::string device, SubgraphRunner subgraph)
    : node_(node),
      opset_(opset),
      inputs_(std::move(inputs)),
      device_(std::move(device)),
      subgraph_(std::move(subgraph)) {}

std::vector<Value> OpContext::run_subgraph(const ::onnx::GraphProto& g,
                                           const std::vector<Value>& inputs) const {
  if (!subgraph_) fail("has a subgraph, but nothing runs subgraphs here");
  return subgraph_(g, inputs);
}

const ::onnx::GraphProto& OpContext::graph_attr(std::string_view name) const {
  const auto* a = attr(name);
  if (!a || a->type() != ::onnx::AttributeProto::GRAPH)
    fail("attribute '" + std::string(name) + "' must be a graph");
  return a->g();
}

std::string OpContext::where() const {
  return "node '" +
         (node_.name().empty() ? (node_.output_size() ? node_.output(0) : std::string("?"))
                               : node_.name()) +
         "' (" + node_.op_type() + ")";
}

void OpContext::fail(const std::string& what) const {
  throw Error("onnx: " + where() + ": " + what);
}
void OpContext::unsupported(const std::string& what) const {
  throw Unsupported("onnx: " + where() + ": " + what + " is not supported");
}

const Value& OpContext::value(size_t i) const {
  if (!has(i)) fail("input " + std::to_string(i) + " is required but not given");
  return *inputs_[i];
}
const Tensor& OpContext::in(size_t i) const { return value(i).tensor(); }
std::optional<Tensor> OpContext::opt(size_t i) const {
  if (!has(i)) return std::nullopt;
  return inputs_[i]->tensor();
}

std::vector<int64_t> OpContext::ints_in(size_t i) const {
  const Value& v = value(i);
  if (v.host) return *v.host;
  const Tensor& t = v.tensor();
  if (!(t.dtype().is_int() || t.dtype().is_bool()))
    fail("input " + std::to_string(i) + " must hold integers, not " + t.dtype().name());
  return t.cast(dtypes::int64).to_vector<int64_t>();
}

std::vector<double> OpContext::doubles_in(size_t i) const {
  const Value& v = value(i);
  if (v.host) return {v.host->begin(), v.host->end()};
  if (v.real) return *v.real;
  return host_doubles(v.tensor());
}

int64_t OpContext::int_in(size_t i) const {
  const std::vector<int64_t> v = ints_in(i);
  if (v.empty()) fail("input " + std::to_string(i) + " is empty where a scalar is expected");
  return v[0];
}
double OpContext::double_in(size_t i) const {
  const std::vector<double> v = doubles_in(i);
  if (v.empty()) fail("input " + std::to_string(i) + " is empty where a scalar is expected");
  return v[0];
}

// Converted on the host, so devices without float64 read them too.
std::vector<double> host_doubles(const Tensor& t) {
  const std::vector<std::byte> raw = t.bytes();
  const size_t n = size_t(t.numel());
  std::vector<double> out(n);
  auto read = [&]<class T>(T) {
    for (size_t i = 0; i < n; ++i) {
      T v;
      std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
      out[i] = double(v);
    }
  };
  switch (t.dtype().scalar) {
    case Scalar::Float32:
      read(float{});
      break;
    case Scalar::Float64:
      read(double{});
      break;
    case Scalar::Float16:
      read(float16_t{0.0f});
      break;
    case Scalar::BFloat16:
      read(bfloat16_t{0.0f});
      break;
    case Scalar::Bool:
    case Scalar::UInt8:
      read(uint8_t{});
      break;
    case Scalar::Int8:
      read(int8_t{});
      break;
    case Scalar::Int16:
      read(int16_t{});
      break;
    case Scalar::UInt16:
      read(uint16_t{});
      break;
    case Scalar::Int32:
      read(int32_t{});
      break;
    case Scalar::UInt32:
      read(uint32_t{});
      break;
    case Scalar::Int64:
      read(int64_t{});
      break;
    case Scalar::UInt64:
      read(uint64_t{});
      break;
    default:
      throw Error("onnx: cannot read " + t.dtype().name() + " values on the host");
  }
  return out;
}

const ::onnx::AttributeProto* OpContext::attr(std::string_view name) const {
  for (const auto& a : node_.attribute())
    if (a.name() == name) {
      read_.insert(std::string(name));
      return &a;
    }
  return nullptr;
}
bool OpContext::has_attr(std::string_view name) const {
  for (const auto& a : node_.attribute())
    if (a.name() == name) return true;
  return false;
}
void OpContext::ignore_attr(std::string_view name) const { read_.insert(std::string(name)); }

std::optional<int64_t> OpContext::attr_i(std::string_view name) const {
  const auto* a = attr(name);
  if (!a) return std::nullopt;
  if (a->type() != ::onnx::AttributeProto::INT)
    fail("attribute '" + std::string(name) + "' must be an int");
  return a->i();
}
int64_t OpContext::attr_i(std::string_view name, int64_t fallback) const {
  return attr_i(name).value_or(fallback);
}
std::optional<float> OpContext::attr_f(std::string_view name) const {
  const auto* a = attr(name);
  if (!a) return std::nullopt;
  if (a->type() != ::onnx::AttributeProto::FLOAT)
    fail("attribute '" + std::string(name) + "' must be a float");
  return a->f();
}
float OpContext::attr_f(std::string_view name, float fallback) const {
  return attr_f(name).value_or(fallback);
}
std::string OpContext::attr_s(std::string_view name, std::string fallback) const {
  const auto* a = attr(name);
  if (!a) return fallback;
  if (a->type() != ::onnx::AttributeProto::STRING)
    fail("attribute '" + std::string(name) + "' must be a string");
  return a->s();
}
std::optional<std::vector<int64_t>> OpContext::attr_ints(std::string_view name) const {
  const auto* a = attr(name);
  if (!a) return std::nullopt;
  if (a->type() != ::onnx::AttributeProto::INTS)
    fail("attribute '" + std::string(name) + "' must be a list of ints");
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}
std::vector<int64_t> OpContext::attr_ints(std::string_view name,
                                          std::vector<int64_t> fallback) const {
  auto v = attr_ints(name);
  return v ? *v : fallback;
}
std::optional<std::vector<float>> OpContext::attr_floats(std::string_view name) const {
  const auto* a = attr(name);
  if (!a) return std::nullopt;
  if (a->type() != ::onnx::AttributeProto::FLOATS)
    fail("attribute '" + std::string(name) + "' must be a list of floats");
  return std::vector<float>(a->floats().begin(), a->floats().end());
}

std::vector<std::string> OpContext::unread_attrs() const {
  std::vector<std::string> out;
  for (const auto& a : node_.attribute())
    if (!read_.count(a.name())) out.push_back(a.name());
  return out;
}

int64_t axis_of(const OpContext& ctx, int64_t axis, int64_t rank) {
  // A scalar has no axis: callers index shape()[axis].
  if (axis < -rank || axis >= rank)
    ctx.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

void require_rank(const OpContext& ctx, const Tensor& t, int64_t min, const std::string& what) {
  if (t.ndim() < min)
    ctx.fail(what + " must have rank " + std::to_string(min) + " or more, not shape " +
             shape_str(t.shape()));
}

DType dtype_from_onnx(int32_t type, const std::string& where) {
  using TP = ::onnx::TensorProto;
  switch (type) {
    case TP::FLOAT:
      return dtypes::float32;
    case TP::UINT8:
      return dtypes::uint8;
    case TP::INT8:
      return dtypes::int8;
    case TP::UINT16:
      return dtypes::uint16;
    case TP::INT16:
      return dtypes::int16;
    case TP::INT32:
      return dtypes::int32;
    case TP::INT64:
      return dtypes::int64;
    case TP::BOOL:
      return dtypes::bool_;
    case TP::FLOAT16:
      return dtypes::float16;
    case TP::DOUBLE:
      return dtypes::float64;
    case TP::UINT32:
      return dtypes::uint32;
    case TP::UINT64:
      return dtypes::uint64;
    case TP::BFLOAT16:
      return dtypes::bfloat16;
    default: {
      const std::string name =
          TP::DataType_IsValid(type) ? TP::DataType_Name(TP::DataType(type)) : std::to_string(type);
      throw Unsupported("onnx: " + where + (where.empty() ? "" : ": ") + "dtype " + name +
                        " is not supported");
    }
  }
}

Value host_value(std::vector<int64_t> values, Shape shape, DType d, const std::string& device) {
  Tensor t = as_dtype(Tensor(values, shape, device), d);
  return Value(std::move(t), std::move(values));
}

Tensor as_dtype(const Tensor& t, DType d) { return t.dtype() == d ? t : t.cast(d); }

std::vector<int64_t> host_cast(std::vector<int64_t> v, DType d) {
  auto wrap = [&]<class T>(T) {
    for (int64_t& x : v) x = int64_t(T(x));
  };
  switch (d.scalar) {
    case Scalar::Bool:
      for (int64_t& x : v) x = x != 0;
      break;
    case Scalar::UInt8:
      wrap(uint8_t{});
      break;
    case Scalar::Int8:
      wrap(int8_t{});
      break;
    case Scalar::UInt16:
      wrap(uint16_t{});
      break;
    case Scalar::Int16:
      wrap(int16_t{});
      break;
    case Scalar::UInt32:
      wrap(uint32_t{});
      break;
    case Scalar::Int32:
      wrap(int32_t{});
      break;
    case Scalar::Int64:
      break;
    default:
      throw Error("onnx: host values cannot be kept as " + d.name());
  }
  return v;
}

int32_t onnx_from_dtype(DType d) {
  using TP = ::onnx::TensorProto;
  switch (d.scalar) {
    case Scalar::Float32:
      return TP::FLOAT;
    case Scalar::UInt8:
      return TP::UINT8;
    case Scalar::Int8:
      return TP::INT8;
    case Scalar::UInt16:
      return TP::UINT16;
    case Scalar::Int16:
      return TP::INT16;
    case Scalar::Int32:
      return TP::INT32;
    case Scalar::Int64:
      return TP::INT64;
    case Scalar::Bool:
      return TP::BOOL;
    case Scalar::Float16:
      return TP::FLOAT16;
    case Scalar::Float64:
      return TP::DOUBLE;
    case Scalar::UInt32:
      return TP::UINT32;
    case Scalar::UInt64:
      return TP::UINT64;
    case Scalar::BFloat16:
      return TP::BFLOAT16;
    default:
      return TP::UNDEFINED;
  }
}

}  // namespace vkg::onnx
