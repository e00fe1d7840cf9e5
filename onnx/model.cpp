// Model (see model.hpp): parsing and checking a ModelProto, and building the graph of its nodes
// over Tensor ops on each run. A graph runs in a scope of named values; a subgraph (If's branches,
// Loop's and Scan's bodies) runs in a scope of its own that sees its enclosing graph's values.
#include <vkgrad/onnx/model.hpp>

#include <onnx/onnx-data_pb.h>

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

std::string node_name(const ::onnx::NodeProto& node) {
  return "node '" + (node.name().empty() && node.output_size() ? node.output(0) : node.name()) +
         "' (" + node.op_type() + ")";
}

void fill_tensor_type(ValueInfo& info, const ::onnx::TypeProto_Tensor& tt,
                      const std::string& where) {
  if (tt.elem_type() == ::onnx::TensorProto::STRING)
    info.strings = true;
  else if (tt.elem_type() != 0)
    info.dtype = dtype_from_onnx(tt.elem_type(), where);
  if (tt.has_shape()) {
    info.has_shape = true;
    for (const auto& d : tt.shape().dim())
      info.shape.push_back(d.has_dim_value() ? d.dim_value() : -1);
  }
}

ValueInfo value_info_of(const ::onnx::ValueInfoProto& v, const char* kind) {
  ValueInfo info;
  info.name = v.name();
  const std::string where = std::string("graph ") + kind + " '" + v.name() + "'";
  if (!v.has_type()) return info;
  const ::onnx::TypeProto* t = &v.type();
  if (t->has_optional_type()) {
    info.kind = ValueInfo::Kind::Optional;
    t = &t->optional_type().elem_type();
  } else if (t->has_sequence_type()) {
    info.kind = ValueInfo::Kind::Sequence;
  }
  if (t->has_sequence_type()) t = &t->sequence_type().elem_type();
  if (t->has_tensor_type())
    fill_tensor_type(info, t->tensor_type(), where);
  else if (t->value_case() != ::onnx::TypeProto::VALUE_NOT_SET)
    throw Unsupported("onnx: " + where +
                      " is neither a tensor nor a sequence or optional of tensors");
  return info;
}

// Every node's operator (also in subgraphs) is one the table has.
void check_graph(const ::onnx::GraphProto& g, const OpTable& table) {
  for (const auto& node : g.node()) {
    if (!table.count(op_key(node))) {
      if (!node.domain().empty() && node.domain() != "ai.onnx")
        throw Unsupported("onnx: " + node_name(node) + ": operator " + node.op_type() +
                          " of domain '" + node.domain() + "' is not supported");
      throw Unsupported("onnx: " + node_name(node) + ": operator " + node.op_type() +
                        " is not supported");
    }
    for (const auto& a : node.attribute())
      if (a.type() == ::onnx::AttributeProto::GRAPH) check_graph(a.g(), table);
  }
}

// Float values up to this many elements, known at load (initializers, Constant nodes), keep a host
// copy: Resize's scales, Pad's constant value and the like are then read without a device sync.
constexpr int64_t kHostFloatLimit = 64;

// `t` (converted at load) with its host values: the integers given, or its floats when few.
Value known_value(Tensor t, const std::optional<std::vector<int64_t>>& host) {
  if (host) return Value(std::move(t), *host);
  Value v(t);
  if (t.dtype().is_float() && t.numel() <= kHostFloatLimit) v.real = host_doubles(t);
  return v;
}

// What loading converts once rather than on every run: subgraphs' initializers and the values
// of Constant nodes (also those inside subgraphs, which would otherwise run every iteration).
struct Loaded {
  std::unordered_map<const ::onnx::GraphProto*, std::vector<std::pair<std::string, Value>>>
      initializers;
  std::unordered_map<const ::onnx::NodeProto*, Value> constants;
};

// Named values: a graph's own, and (read-only) its enclosing graph's.
struct Scope {
  std::unordered_map<std::string, Value> values;
  const Scope* outer = nullptr;
  const Loaded* loaded = nullptr;
  const Value* find(const std::string& name) const {
    auto it = values.find(name);
    if (it != values.end()) return &it->second;
    return outer ? outer->find(name) : nullptr;
  }
};

// Runs g's nodes [0, end) in scope. `leaves` (names -> tensors) are put back after any node
// writes them: Gradient's replay keeps its inputs as the leaves it differentiates by.
void run_nodes(const ::onnx::GraphProto& g, Scope& scope, int64_t opset, const std::string& device,
               int end = -1, const std::map<std::string, Tensor>* leaves = nullptr);

std::vector<Value> run_subgraph(const ::onnx::GraphProto& body, const std::vector<Value>& inputs,
                                const Scope& outer, int64_t opset, const std::string& device) {
  Scope inner;
  inner.outer = &outer;
  inner.loaded = outer.loaded;
  // Its initializers were converted at load (prepare): every subgraph of the model is there.
  if (!inner.loaded || !inner.loaded->initializers.count(&body))
    throw Error("onnx: subgraph '" + body.name() + "' was not prepared at load");
  for (const auto& [name, v] : inner.loaded->initializers.at(&body))
    inner.values.insert_or_assign(name, v);
  if (int(inputs.size()) > body.input_size())
    throw Error("onnx: subgraph '" + body.name() + "' takes " + std::to_string(body.input_size()) +
                " inputs, not " + std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i)
    inner.values.insert_or_assign(body.input(int(i)).name(), inputs[i]);
  run_nodes(body, inner, opset, device);
  std::vector<Value> out;
  for (const auto& o : body.output()) {
    const Value* v = inner.find(o.name());
    if (!v) throw Error("onnx: subgraph output '" + o.name() + "' is computed by no node");
    out.push_back(*v);
  }
  return out;
}

// The training domain's Gradient: the graph before this node runs again with the xs as fresh
// leaves that require grad, and backward from y (seeded with ones) gives d y / d xs.
std::vector<Value> gradient(const ::onnx::GraphProto& g, int at, Scope& scope, int64_t opset,
                            const std::string& device) {
  const auto& node = g.node(at);
  std::vector<std::string> xs;
  std::string y;
  for (const auto& a : node.attribute()) {
    if (a.name() == "xs")
      xs.assign(a.strings().begin(), a.strings().end());
    else if (a.name() == "y")
      y = a.s();
    else
      throw Unsupported("onnx: " + node_name(node) + ": attribute '" + a.name() +
                        "' is not supported");
  }
  Scope replay;
  replay.outer = scope.outer;
  replay.loaded = scope.loaded;
  replay.values = scope.values;
  std::map<std::string, Tensor> leaves;
  for (const auto& x : xs) {
    const Value* v = scope.find(x);
    if (!v) throw Error("onnx: " + node_name(node) + ": no value '" + x + "' to differentiate by");
    Tensor leaf = v->tensor().detach();
    leaf.requires_grad_();
    leaves.insert_or_assign(x, leaf);
    replay.values.insert_or_assign(x, Value(leaf));
  }
  run_nodes(g, replay, opset, device, at, &leaves);
  const Value* out = replay.find(y);
  if (!out) throw Error("onnx: " + node_name(node) + ": no value '" + y + "' to differentiate");
  out->tensor().backward(Tensor::ones_like(out->tensor()));
  std::vector<Value> grads;
  for (const auto& x : xs) {
    const Tensor& leaf = leaves.at(x);
    grads.emplace_back(leaf.grad() ? leaf.grad()->detach() : Tensor::zeros_like(leaf));
  }
  return grads;
}

void run_nodes(const ::onnx::GraphProto& g, Scope& scope, int64_t opset, const std::string& device,
               int end, const std::map<std::string, Tensor>* leaves) {
  const OpTable& table = op_table();
  for (int at = 0; at < (end < 0 ? g.node_size() : end); ++at) {
    const auto& node = g.node(at);
    if (op_key(node) == "ai.onnx.preview.training:Gradient") {
      auto grads = gradient(g, at, scope, opset, device);
      for (int i = 0; i < node.output_size() && size_t(i) < grads.size(); ++i)
        scope.values.insert_or_assign(node.output(i), grads[size_t(i)]);
      continue;
    }
    if (scope.loaded) {
      if (auto c = scope.loaded->constants.find(&node); c != scope.loaded->constants.end()) {
        scope.values.insert_or_assign(node.output(0), c->second);
        continue;
      }
    }
    std::vector<const Value*> ins;
    for (const auto& name : node.input()) {
      if (name.empty()) {
        ins.push_back(nullptr);
        continue;
      }
      const Value* v = scope.find(name);
      if (!v)
        throw Error("onnx: " + node_name(node) + " reads '" + name +
                    "', which no input, initializer or earlier node gives");
      ins.push_back(v);
    }
    OpContext ctx(node, opset, std::move(ins), device,
                  [&](const ::onnx::GraphProto& body, const std::vector<Value>& inputs) {
                    return run_subgraph(body, inputs, scope, opset, device);
                  });
    std::vector<Value> outs;
    try {
      outs = table.find(op_key(node))->second(ctx);
    } catch (const Unsupported& e) {
      const std::string_view m = e.what();
      if (m.find("node '") != std::string_view::npos) throw;
      throw Unsupported("onnx: " + ctx.where() + ": " +
                        std::string(m.substr(m.starts_with("onnx: ") ? 6 : 0)));
    } catch (const Error& e) {
      if (std::string_view(e.what()).starts_with("onnx: ")) throw;
      throw Error("onnx: " + ctx.where() + ": " + e.what());
    } catch (const std::logic_error& e) {
      // A check an op missed (std::out_of_range from .at(), std::length_error): still the node's
      // error, as vkg::Error.
      throw Error("onnx: " + ctx.where() + ": " + e.what());
    }
    if (auto unread = ctx.unread_attrs(); !unread.empty())
      ctx.unsupported("attribute '" + unread[0] + "'");
    for (int i = 0; i < node.output_size(); ++i) {
      if (node.output(i).empty()) continue;
      if (size_t(i) >= outs.size()) ctx.unsupported("output " + std::to_string(i));
      scope.values.insert_or_assign(node.output(i), std::move(outs[size_t(i)]));
      if (leaves && leaves->count(node.output(i)))
        scope.values.insert_or_assign(node.output(i), Value(leaves->at(node.output(i))));
    }
  }
}

}  // namespace

// Converts the initializers of g's subgraphs (g's own when not top: the main graph's are the
// model's) with external data beside the model, and evaluates Constant nodes, once.
void prepare(::onnx::GraphProto& g, Loaded& loaded, int64_t opset, const std::string& device,
             const std::string& base_dir, bool top) {
  if (!top) {
    auto& inits = loaded.initializers[&g];
    for (auto& init : *g.mutable_initializer()) {
      const std::string where = "initializer '" + init.name() + "'";
      auto host = host_ints_of(init, base_dir, kHostIntLimit);
      Tensor t = tensor_from_proto(init, device, where, base_dir, /*release=*/true);
      inits.emplace_back(init.name(), known_value(t, host));
    }
  }
  const OpFn& constant = op_table().at("Constant");
  for (auto& node : *g.mutable_node()) {
    if (op_key(node) == "Constant" && node.input_size() == 0 && node.output_size() == 1) {
      // One that fails here runs (and fails, naming the node) where the graph reaches it.
      try {
        OpContext ctx(node, opset, {}, device);
        std::vector<Value> out = constant(ctx);
        if (ctx.unread_attrs().empty() && out.size() == 1) {
          Value v = std::move(out[0]);
          if (v.is_tensor() && !v.host && v.tensor().dtype().is_float() &&
              v.tensor().numel() <= kHostFloatLimit)
            v.real = host_doubles(v.tensor());
          loaded.constants.insert_or_assign(&node, std::move(v));
        }
      } catch (const Error&) {
      }
    }
    for (auto& a : *node.mutable_attribute()) {
      if (a.type() == ::onnx::AttributeProto::GRAPH)
        prepare(*a.mutable_g(), loaded, opset, device, base_dir, false);
      for (auto& sub : *a.mutable_graphs()) prepare(sub, loaded, opset, device, base_dir, false);
    }
  }
}

struct Model::Impl {
  ::onnx::ModelProto proto;
  int64_t opset = 0;
  std::string device;
  std::unordered_map<std::string, Value> initializers;
  Loaded loaded;
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
  // A model of another domain's operators only (the training optimizers): its nodes are checked
  // below, and default-domain rules are those of the newest opset.
  if (impl->opset == 0 && proto.opset_import_size() > 0) impl->opset = kMaxOpset;
  if (impl->opset == 0) throw Error("onnx: the model imports no opset of the default ONNX domain");
  if (impl->opset > kMaxOpset)
    throw Unsupported("onnx: opset " + std::to_string(impl->opset) +
                      " is newer than ONNX 1.12's (" + std::to_string(kMaxOpset) +
                      ") and is not supported");
  auto& graph = *proto.mutable_graph();
  check_graph(graph, op_table());

  for (auto& init : *graph.mutable_initializer()) {
    const std::string where = "initializer '" + init.name() + "'";
    auto host = host_ints_of(init, base_dir, kHostIntLimit);
    Tensor t = tensor_from_proto(init, impl->device, where, base_dir, /*release=*/true);
    impl->initializers.insert_or_assign(init.name(), known_value(t, host));
  }
  prepare(graph, impl->loaded, impl->opset, impl->device, base_dir, /*top=*/true);
  for (const auto& in : graph.input())
    if (!impl->initializers.count(in.name())) impl->inputs.push_back(value_info_of(in, "input"));
  for (const auto& out : graph.output()) impl->outputs.push_back(value_info_of(out, "output"));
  return Model(std::move(impl));
}

std::map<std::string, Data> Model::run_data(const std::map<std::string, Data>& given) const {
  Scope scope;
  scope.values = impl_->initializers;
  scope.loaded = &impl_->loaded;
  std::vector<std::string> input_names;
  for (const auto& info : impl_->inputs) input_names.push_back(info.name);
  for (const auto& [name, data] : given) {
    const ValueInfo* info = nullptr;
    for (const auto& i : impl_->inputs)
      if (i.name == name) info = &i;
    if (!info && !impl_->initializers.count(name))
      throw Error("onnx: the model has no input '" + name + "' (its inputs: " + join(input_names) +
                  ")");
    if (const Tensor* t = std::get_if<Tensor>(&data)) {
      if (info && info->kind == ValueInfo::Kind::Sequence)
        throw Error("onnx: input '" + name + "' must be a sequence, not a tensor");
      if (info && info->dtype && *info->dtype != t->dtype())
        throw Error("onnx: input '" + name + "' must be " + info->dtype->name() + ", not " +
                    t->dtype().name());
      if (info && info->has_shape) {
        bool ok = info->shape.size() == t->shape().size();
        for (size_t d = 0; ok && d < info->shape.size(); ++d)
          ok = info->shape[d] < 0 || info->shape[d] == t->shape()[d];
        if (!ok)
          throw Error("onnx: input '" + name + "' has shape " + shape_str(t->shape()) +
                      ", the model wants " + shape_str(info->shape) + " (-1: any size)");
      }
    } else if (std::holds_alternative<Strings>(data)) {
      if (info && !info->strings)
        throw Error("onnx: input '" + name + "' must hold numbers, not strings");
    } else if (info && info->kind == ValueInfo::Kind::Tensor) {
      throw Error("onnx: input '" + name + "' must be a tensor");
    }
    scope.values.insert_or_assign(name, Value(data));
  }
  for (const auto& info : impl_->inputs)
    if (!scope.values.count(info.name))
      throw Error("onnx: input '" + info.name +
                  "' is not given (the model's inputs: " + join(input_names) + ")");

  run_nodes(impl_->proto.graph(), scope, impl_->opset, impl_->device);

  std::map<std::string, Data> result;
  for (const auto& out : impl_->proto.graph().output()) {
    const Value* v = scope.find(out.name());
    if (!v) throw Error("onnx: graph output '" + out.name() + "' is computed by no node");
    result.insert_or_assign(out.name(), v->data);
  }
  return result;
}

std::map<std::string, Tensor> Model::run(const std::map<std::string, Tensor>& inputs) const {
  std::map<std::string, Data> given(inputs.begin(), inputs.end());
  std::map<std::string, Tensor> result;
  for (auto& [name, data] : run_data(given)) {
    const Tensor* t = std::get_if<Tensor>(&data);
    if (!t) throw Error("onnx: output '" + name + "' is not a tensor: use run_data");
    result.insert_or_assign(name, *t);
  }
  return result;
}

namespace {

template <class Proto>
Proto parse_file(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("onnx: cannot open " + std::string(what) + " file '" + path + "'");
  Proto p;
  if (!p.ParseFromIstream(&f))
    throw Error("onnx: '" + path + "' is not a " + what + " (protobuf parse failed)");
  return p;
}

std::string dir_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

Sequence sequence_of(::onnx::SequenceProto& s, const std::string& device, const std::string& path) {
  if (s.elem_type() != ::onnx::SequenceProto::TENSOR && s.tensor_values_size() == 0 &&
      s.elem_type() != 0)
    throw Unsupported("onnx: '" + path + "': sequences of non-tensors are not supported");
  Sequence out;
  for (auto& t : *s.mutable_tensor_values())
    out.push_back(tensor_from_proto(t, device, "sequence file '" + path + "'", dir_of(path)));
  return out;
}

}  // namespace

Tensor load_tensor(const std::string& path, const std::string& device) {
  auto tp = parse_file<::onnx::TensorProto>(path, "TensorProto");
  return tensor_from_proto(tp, device.empty() ? default_device() : device,
                           "tensor file '" + path + "'", dir_of(path));
}

Data load_data(const std::string& path, ValueInfo::Kind kind, const std::string& device_name) {
  const std::string device = device_name.empty() ? default_device() : device_name;
  switch (kind) {
    case ValueInfo::Kind::Tensor: {
      auto tp = parse_file<::onnx::TensorProto>(path, "TensorProto");
      if (tp.data_type() == ::onnx::TensorProto::STRING)
        return Strings{{tp.dims().begin(), tp.dims().end()},
                       {tp.string_data().begin(), tp.string_data().end()}};
      return tensor_from_proto(tp, device, "tensor file '" + path + "'", dir_of(path));
    }
    case ValueInfo::Kind::Sequence: {
      auto s = parse_file<::onnx::SequenceProto>(path, "SequenceProto");
      return sequence_of(s, device, path);
    }
    case ValueInfo::Kind::Optional: {
      auto o = parse_file<::onnx::OptionalProto>(path, "OptionalProto");
      if (o.has_tensor_value())
        return tensor_from_proto(*o.mutable_tensor_value(), device, "optional file '" + path + "'",
                                 dir_of(path));
      if (o.has_sequence_value()) return sequence_of(*o.mutable_sequence_value(), device, path);
      return None{};
    }
  }
  return None{};
}

}  // namespace vkg::onnx
