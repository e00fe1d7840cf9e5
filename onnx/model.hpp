// vkg::onnx: runs ONNX models as lazy vkgrad tensor graphs. A model file is parsed and checked
// once; each run() builds the graph of its nodes from the given inputs with the Tensor ops a user
// would write, so the whole model fuses into kernels, realizes on any device, and works inside a
// vkg::Jit. vkgrad has it where CMake finds Debian's libonnx-dev (VKG_WITH_ONNX, on by default);
// without it, load() throws vkg::Error.
//
//   vkg::onnx::Model m = vkg::onnx::Model::load("resnet.onnx");
//   auto out = m.run({{"input", Tensor::randn({1, 3, 224, 224})}});
//   std::vector<float> logits = out.at("output").to_vector<float>();
//
// Errors: a file that is not an ONNX model, an opset newer than ONNX 1.12's, and inputs of the
// wrong name, shape or dtype are vkg::Error; an operator, attribute or dtype vkgrad does not
// implement is vkg::onnx::Unsupported (a vkg::Error) naming the node.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <vkgrad/core/tensor.hpp>

namespace vkg::onnx {

// ONNX's non-tensor values, for models whose inputs or outputs are sequences or optionals.
using Sequence = std::vector<Tensor>;
struct None {};  // an optional holding nothing
// A tensor of ONNX's STRING dtype, row-major, kept on the host (vkgrad computes with numbers).
struct Strings {
  std::vector<int64_t> shape;
  std::vector<std::string> values;
};
using Data = std::variant<Tensor, Sequence, None, Strings>;

// An operator, attribute value or dtype the importer does not implement (as opposed to a model
// that is malformed). The message names the node and what is missing.
class Unsupported : public Error {
 public:
  using Error::Error;
};

// A graph input or output as the model declares it: dims of -1 are free (a symbolic name or none).
struct ValueInfo {
  enum class Kind { Tensor, Sequence, Optional };
  std::string name;
  Kind kind =
      Kind::Tensor;  // a sequence's dtype and shape are its elements'; an optional's, its value's
  std::optional<DType> dtype;  // none when the model leaves it out, or for strings
  bool strings = false;        // ONNX's STRING dtype (see Strings)
  std::vector<int64_t> shape;
  bool has_shape = false;
};

class Model {
 public:
  // Parses and checks the model: every node's operator must be one vkgrad implements at the
  // model's opset. Initializers become tensors on `device` (the default device when empty); the
  // file's bytes are released as they are converted, so no second host copy stays.
  static Model load(const std::string& path, const std::string& device = "");
  static Model from_bytes(const std::string& bytes, const std::string& device = "");
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  // The inputs a caller gives (initializers that are also declared inputs are left out: they
  // have defaults), and the outputs run() returns.
  const std::vector<ValueInfo>& inputs() const;
  const std::vector<ValueInfo>& outputs() const;
  // The default-domain opset the model imports.
  int64_t opset() const;

  // Builds the graph for these inputs (by name; initializers may be overridden by naming them)
  // and returns every graph output by name, lazy. Reads values on the host (a sync) only where a
  // shape depends on a tensor that is neither a constant nor an initializer.
  std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& inputs) const;
  // As run(), for models with sequence or optional inputs or outputs.
  std::map<std::string, Data> run_data(const std::map<std::string, Data>& inputs) const;

 private:
  struct Impl;
  explicit Model(std::unique_ptr<Impl> impl);
  // Checks the parsed model and turns its initializers into tensors.
  static Model finish_load(std::unique_ptr<Impl> impl, const std::string& base_dir);
  std::unique_ptr<Impl> impl_;
};

// A serialized onnx.TensorProto (the .pb files of ONNX's test data) as a tensor on `device`.
Tensor load_tensor(const std::string& path, const std::string& device = "");
// A serialized TensorProto, SequenceProto or OptionalProto (which one `kind` says).
Data load_data(const std::string& path, ValueInfo::Kind kind, const std::string& device = "");
// Whether this vkgrad was built with the ONNX importer.
bool available();

}  // namespace vkg::onnx
