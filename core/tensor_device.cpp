// Tensor::to and to_: moving a value between devices as a COPY node of the lazy graph.
#include <vkgrad/core/device.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

Tensor Tensor::to(const std::string& target) const {
  const std::string dst = canonical_device(target);
  if (dst.empty()) throw Error("to: an empty device name (tensor of shape " + shape_str(shape()) + ")");
  if (canonical_device(device()) == dst) return *this;
  if (has_symbolic_shape())
    throw Error("to(" + dst + "): a tensor of symbolic shape " + shape_str(shape()) +
                " cannot be copied between devices yet; reshape it to plain sizes first");
  vkg::device(dst);  // a device that does not exist is an error here, not at realize
  // A bare constant has no buffer to copy from: it is computed into one first.
  const UOpPtr src = node()->op == Ops::CONST || node()->op == Ops::BIND ? contiguous().node() : node();
  const UOpPtr where = UOp::make(Ops::DEVICE, dtypes::void_, {}, dst);
  return Tensor(UOp::make(Ops::COPY, dtype(), {src, where}, dst));
}

Tensor& Tensor::to_(const std::string& target) {
  const std::string dst = canonical_device(target);
  if (canonical_device(device()) == dst) return *this;
  const bool leaf = state_->requires_grad;
  std::optional<Tensor> g = grad();
  if (leaf) requires_grad_(false);
  state_->node = to(dst).node();
  if (leaf) requires_grad_(true);  // a leaf again, on its new device
  if (g) set_grad(g->to(dst));
  return *this;
}

}  // namespace vkg
