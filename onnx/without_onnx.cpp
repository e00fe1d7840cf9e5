// vkg::onnx in a build without libonnx-dev: every entry point says how to get it.
#include <vkgrad/onnx/model.hpp>

namespace vkg::onnx {

namespace {
[[noreturn]] void missing(const char* what) {
  throw Error(std::string("onnx: ") + what +
              ": this vkgrad was built without ONNX (install libonnx-dev libprotobuf-dev and "
              "configure with "
              "-DVKG_WITH_ONNX=ON)");
}
}  // namespace

struct Model::Impl {};
Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;
Model Model::load(const std::string&, const std::string&) { missing("Model::load"); }
Model Model::from_bytes(const std::string&, const std::string&) { missing("Model::from_bytes"); }
const std::vector<ValueInfo>& Model::inputs() const { missing("Model::inputs"); }
const std::vector<ValueInfo>& Model::outputs() const { missing("Model::outputs"); }
int64_t Model::opset() const { missing("Model::opset"); }
std::map<std::string, Tensor> Model::run(const std::map<std::string, Tensor>&) const {
  missing("Model::run");
}
std::map<std::string, Data> Model::run_data(const std::map<std::string, Data>&) const {
  missing("Model::run_data");
}
Tensor load_tensor(const std::string&, const std::string&) { missing("load_tensor"); }
Data load_data(const std::string&, ValueInfo::Kind, const std::string&) { missing("load_data"); }
bool available() { return false; }

}  // namespace vkg::onnx
