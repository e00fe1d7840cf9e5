// Model (see model.hpp): parsing and checking a ModelProto, and building the graph of its nodes
// over Tensor ops on each run.
#include <vkgrad/onnx/model.hpp>

#include <fstream>
#include <sstream>
#include <unordered_map>

#include <vkgrad/onnx/op_context.hpp>
#include <vkgrad/onnx/tensor_proto.hpp>

namespace vkg::onnx {
namespace {

// The default domain's opset of ONNX 1.12, the newest this importer knows the operators of.
constexpr int64_t kMaxOpset = 17;
// Integer initializers up to this many elements keep a host copy of their values: shape inputs.
constexpr size_t kHostIntLimit = 4096;

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

ValueInfo value_info_of(const ::onnx::ValueInfoProto& v, const char* kind) {
  ValueInfo info;
  info.name = v.name();
  if (!v.has_type()) return info;
  if (!v.type().has_tensor_type())
    throw Unsupported("onnx: graph " + std::string(kind) + " '" + v.name() +
                      "' is not a tensor (sequences, maps and optionals are not supported)");
  const auto& tt = v.type().tensor_type();
  if (tt.elem_type() != 0)
    info.dtype =
        dtype_from_onnx(tt.elem_type(), std::string("graph ") + kind + " '" + v.name() + "'");
  if (tt.has_shape()) {
    info.has_shape = true;
    for (const auto& d : tt.shape().dim())
      info.shape.push_back(d.has_dim_value() ? d.dim_value() : -1);
  }
  return info;
}

}  // namespace

struct Model::Impl {
  ::onnx::ModelProto proto;
  int64_t opset = 0;
  std::string device;
  std::unordered_map<std::string, Value> initializers;
  std::vector<ValueInfo> inputs, outputs;
};

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

const std::vector<ValueInfo>& Model::inputs() const { return impl_->inputs; }
const std::vector<ValueInfo>& Model::outputs() const { return impl_->outputs; }
int64_t Model::opset() const { return impl_->opset; }
bool available() { return true; }

Model Model::load(const std::string& path, const std::string& device) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("onnx: cannot open model file '" + path + "'");
  auto impl = std::make_unique<Impl>();
  impl->device = device.empty() ? default_device() : device;
  if (!impl->proto.ParseFromIstream(&f))
    throw Error("onnx: '" + path + "' is not an ONNX model (protobuf parse failed)");
  const size_t slash = path.find_last_of('/');
  return finish_load(std::move(impl), slash == std::string::npos ? "." : path.substr(0, slash));
}

Model Model::from_bytes(const std::string& bytes, const std::string& device) {
  auto impl = std::make_unique<Impl>();
  impl->device = device.empty() ? default_device() : device;
  if (!impl->proto.ParseFromString(bytes))
    throw Error("onnx: the bytes are not an ONNX model (protobuf parse failed)");
  return finish_load(std::move(impl), ".");
}

Model Model::finish_load(std::unique_ptr<Impl> impl, const std::string& base_dir) {
  auto& proto = impl->proto;
  if (!proto.has_graph()) throw Error("onnx: the model has no graph");
  for (const auto& op : proto.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") impl->opset = op.version();
  }
  if (impl->opset == 0) {
    for (const auto& op : proto.opset_import())  // a model of another domain's operators only
      throw Unsupported("onnx: operator domain '" + op.domain() + "' is not supported");
    throw Error("onnx: the model imports no opset of the default ONNX domain");
  }
  if (impl->opset > kMaxOpset)
    throw Unsupported("onnx: opset " + std::to_string(impl->opset) +
                      " is newer than ONNX 1.12's (" + std::to_string(kMaxOpset) +
                      ") and is not supported");
  auto& graph = *proto.mutable_graph();

  const OpTable& table = op_table();
  for (const auto& node : graph.node()) {
    const std::string name =
        "node '" + (node.name().empty() && node.output_size() ? node.output(0) : node.name()) +
        "' (" + node.op_type() + ")";
    if (!node.domain().empty() && node.domain() != "ai.onnx")
      throw Unsupported("onnx: " + name + ": operator domain '" + node.domain() +
                        "' is not supported");
    if (!table.count(node.op_type()))
      throw Unsupported("onnx: " + name + ": operator " + node.op_type() + " is not supported");
  }

  for (auto& init : *graph.mutable_initializer()) {
    const std::string where = "initializer '" + init.name() + "'";
    auto host = host_ints_of(init, base_dir, kHostIntLimit);
    Tensor t = tensor_from_proto(init, impl->device, where, base_dir, /*release=*/true);
    impl->initializers.insert_or_assign(init.name(), host ? Value(t, *host) : Value(t));
  }
  for (const auto& in : graph.input())
    if (!impl->initializers.count(in.name())) impl->inputs.push_back(value_info_of(in, "input"));
  for (const auto& out : graph.output()) impl->outputs.push_back(value_info_of(out, "output"));
  return Model(std::move(impl));
}

std::map<std::string, Tensor> Model::run(const std::map<std::string, Tensor>& given) const {
  const auto& graph = impl_->proto.graph();
  std::unordered_map<std::string, Value> env = impl_->initializers;

  std::vector<std::string> input_names;
  for (const auto& info : impl_->inputs) input_names.push_back(info.name);
  for (const auto& [name, t] : given) {
    const ValueInfo* info = nullptr;
    for (const auto& i : impl_->inputs)
      if (i.name == name) info = &i;
    if (!info && !impl_->initializers.count(name))
      throw Error("onnx: the model has no input '" + name + "' (its inputs: " + join(input_names) +
                  ")");
    if (info && info->dtype && *info->dtype != t.dtype())
      throw Error("onnx: input '" + name + "' must be " + info->dtype->name() + ", not " +
                  t.dtype().name());
    if (info && info->has_shape) {
      bool ok = info->shape.size() == t.shape().size();
      for (size_t d = 0; ok && d < info->shape.size(); ++d)
        ok = info->shape[d] < 0 || info->shape[d] == t.shape()[d];
      if (!ok)
        throw Error("onnx: input '" + name + "' has shape " + shape_str(t.shape()) +
                    ", the model wants " + shape_str(info->shape) + " (-1: any size)");
    }
    if (t.dtype() == dtypes::bfloat16 && impl_->device != "CPU")
      throw Unsupported("onnx: input '" + name + "': bfloat16 on device " + impl_->device +
                        " is not supported");
    env.insert_or_assign(name, Value(t));
  }
  for (const auto& info : impl_->inputs)
    if (!env.count(info.name))
      throw Error("onnx: input '" + info.name +
                  "' is not given (the model's inputs: " + join(input_names) + ")");

  const OpTable& table = op_table();
  for (const auto& node : graph.node()) {
    std::vector<const Value*> ins;
    for (const auto& name : node.input()) {
      if (name.empty()) {
        ins.push_back(nullptr);
        continue;
      }
      auto it = env.find(name);
      if (it == env.end())
        throw Error("onnx: node '" + node.name() + "' (" + node.op_type() + ") reads '" + name +
                    "', which no input, initializer or earlier node gives");
      ins.push_back(&it->second);
    }
    OpContext ctx(node, impl_->opset, std::move(ins), impl_->device);
    std::vector<Value> outs;
    try {
      outs = table.find(node.op_type())->second(ctx);
    } catch (const Unsupported&) {
      throw;
    } catch (const Error& e) {
      if (std::string_view(e.what()).starts_with("onnx: ")) throw;
      throw Error("onnx: " + ctx.where() + ": " + e.what());
    }
    if (auto unread = ctx.unread_attrs(); !unread.empty())
      ctx.unsupported("attribute '" + unread[0] + "'");
    for (int i = 0; i < node.output_size(); ++i) {
      if (node.output(i).empty()) continue;
      if (size_t(i) >= outs.size()) ctx.unsupported("output " + std::to_string(i));
      env.insert_or_assign(node.output(i), std::move(outs[size_t(i)]));
    }
  }

  std::map<std::string, Tensor> result;
  for (const auto& out : graph.output()) {
    auto it = env.find(out.name());
    if (it == env.end())
      throw Error("onnx: graph output '" + out.name() + "' is computed by no node");
    result.insert_or_assign(out.name(), it->second.tensor);
  }
  return result;
}

Tensor load_tensor(const std::string& path, const std::string& device) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("onnx: cannot open tensor file '" + path + "'");
  ::onnx::TensorProto tp;
  if (!tp.ParseFromIstream(&f))
    throw Error("onnx: '" + path + "' is not a TensorProto (protobuf parse failed)");
  const size_t slash = path.find_last_of('/');
  return tensor_from_proto(tp, device.empty() ? default_device() : device,
                           "tensor file '" + path + "'",
                           slash == std::string::npos ? "." : path.substr(0, slash));
}

}  // namespace vkg::onnx
