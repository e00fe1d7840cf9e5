// What an ONNX operator's implementation sees: the node's inputs as tensors (with their values on
// the host where they are known without running anything: initializers, constants, shapes), its
// attributes, and the opset. Ops are small functions from an OpContext to output values, kept in
// a table by operator name (onnx/op_table.hpp); one file per family registers its rows.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <onnx/onnx_pb.h>

#include <vkgrad/core/tensor.hpp>
#include <vkgrad/onnx/model.hpp>

namespace vkg::onnx {

// A value flowing along a graph edge: a tensor, a sequence of tensors or an empty optional.
// `host` holds a tensor's elements as int64 when they are known without running the graph
// (integer initializers and constants, Shape, and ops folded over those), so shape-computing ops
// never wait for the device.
struct Value {
  Data data;
  std::optional<std::vector<int64_t>> host;
  // A float tensor's elements when they are known at load (small initializers and constants):
  // scalar operands such as Resize's scales are read from here without a device sync.
  std::optional<std::vector<double>> real;
  Value(Tensor t) : data(std::move(t)) {}
  Value(Tensor t, std::vector<int64_t> h) : data(std::move(t)), host(std::move(h)) {}
  Value(Sequence s) : data(std::move(s)) {}
  Value(None n) : data(n) {}
  Value(Strings s) : data(std::move(s)) {}
  Value(Data d) : data(std::move(d)) {}
  bool is_tensor() const { return std::holds_alternative<Tensor>(data); }
  bool is_sequence() const { return std::holds_alternative<Sequence>(data); }
  bool is_none() const { return std::holds_alternative<None>(data); }
  bool is_strings() const { return std::holds_alternative<Strings>(data); }
  // The tensor; a vkg::Error when this is a sequence or none.
  const Tensor& tensor() const;
  const Sequence& sequence() const;
  const Strings& strings() const;
};

class OpContext {
 public:
  using SubgraphRunner =
      std::function<std::vector<Value>(const ::onnx::GraphProto&, const std::vector<Value>&)>;
  OpContext(const ::onnx::NodeProto& node, int64_t opset, std::vector<const Value*> inputs,
            std::string device, SubgraphRunner subgraph = {});

  const ::onnx::NodeProto& node() const { return node_; }
  int64_t opset() const { return opset_; }
  const std::string& device() const { return device_; }
  // "node 'conv1' (Conv)": how errors name the node.
  std::string where() const;

  // Inputs: position i may be absent (past the end, or named "" for a skipped optional input).
  size_t num_inputs() const { return inputs_.size(); }
  bool has(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }
  const Tensor& in(size_t i) const;
  std::optional<Tensor> opt(size_t i) const;
  const Value& value(size_t i) const;
  // Input i's elements as integers: from the host when known, else read from the device (a sync).
  std::vector<int64_t> ints_in(size_t i) const;
  // Input i's elements as doubles (a host read unless known): for scalar operands such as Clip's.
  std::vector<double> doubles_in(size_t i) const;
  // The first element of input i (a scalar operand); an error naming the node when it is empty.
  int64_t int_in(size_t i) const;
  double double_in(size_t i) const;

  // Attributes. Each read marks the attribute as understood; the runner rejects a node whose
  // attributes were not all read (an attribute vkgrad ignores would silently change the result).
  bool has_attr(std::string_view name) const;
  int64_t attr_i(std::string_view name, int64_t fallback) const;
  std::optional<int64_t> attr_i(std::string_view name) const;
  float attr_f(std::string_view name, float fallback) const;
  std::optional<float> attr_f(std::string_view name) const;
  std::string attr_s(std::string_view name, std::string fallback) const;
  std::optional<std::vector<int64_t>> attr_ints(std::string_view name) const;
  std::vector<int64_t> attr_ints(std::string_view name, std::vector<int64_t> fallback) const;
  std::optional<std::vector<float>> attr_floats(std::string_view name) const;
  const ::onnx::AttributeProto* attr(std::string_view name) const;
  // Marks an attribute as read without reading it (one whose every value means the same to us).
  void ignore_attr(std::string_view name) const;
  // The attributes nothing read.
  std::vector<std::string> unread_attrs() const;

  // Runs a graph attribute's subgraph (If's branches, Loop's and Scan's body) on `inputs`, with
  // this node's scope visible to it; returns its outputs.
  std::vector<Value> run_subgraph(const ::onnx::GraphProto& g,
                                  const std::vector<Value>& inputs) const;
  const ::onnx::GraphProto& graph_attr(std::string_view name) const;

  [[noreturn]] void fail(const std::string& what) const;  // vkg::Error naming the node
  [[noreturn]] void unsupported(
      const std::string& what) const;  // onnx::Unsupported naming the node

 private:
  const ::onnx::NodeProto& node_;
  int64_t opset_;
  std::vector<const Value*> inputs_;
  std::string device_;
  SubgraphRunner subgraph_;
  mutable std::set<std::string, std::less<>> read_;
};

using OpFn = std::function<std::vector<Value>(OpContext&)>;
using OpTable = std::map<std::string, OpFn, std::less<>>;

// The table of every operator vkgrad implements (built once). Default-domain operators are keyed
// by name, others by "domain:name".
const OpTable& op_table();
std::string op_key(const ::onnx::NodeProto& node);

// Small helpers ops share.
// An axis counted from the end when negative, checked against rank (an error naming the node).
// A scalar (rank 0) has no axis.
int64_t axis_of(const OpContext& ctx, int64_t axis, int64_t rank);
// An error naming the node unless t has at least `min` axes (`what` names the input).
void require_rank(const OpContext& ctx, const Tensor& t, int64_t min, const std::string& what);
// ONNX dtype numbers (TensorProto.DataType) to vkgrad's; Unsupported for strings and complex.
DType dtype_from_onnx(int32_t type, const std::string& where);
int32_t onnx_from_dtype(DType d);
// The elements of t as doubles, read on the host (a sync unless t is realized).
std::vector<double> host_doubles(const Tensor& t);
// A value known on the host: `values` as a tensor of `shape` and dtype `d` (an integer or bool
// dtype), with the values kept for later shape computations.
Value host_value(std::vector<int64_t> values, Shape shape, DType d, const std::string& device);
// The value of `t` cast to dtype d (a no-op when it has that dtype).
Tensor as_dtype(const Tensor& t, DType d);
// Host values converted as a cast to the integer or bool dtype d converts them on the device:
// wrapped to d's width (-1 as uint8 is 255), nonzero as bool is 1.
std::vector<int64_t> host_cast(std::vector<int64_t> v, DType d);

}  // namespace vkg::onnx
