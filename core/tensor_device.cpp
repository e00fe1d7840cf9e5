// Tensor::to, to_, shard and shard_: moving a value between devices as a COPY node of the lazy
// graph, and splitting it over several (a MULTI node, core/multi.hpp).
#include <algorithm>

#include <vkgrad/core/device.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/gradient.hpp>
#include <vkgrad/core/multi.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

Tensor Tensor::to(const std::string& target) const {
  const std::string dst = canonical_device(target);
  if (dst.empty())
    throw Error("to: an empty device name (tensor of shape " + shape_str(shape()) + ")");
  if (is_multi_device(dst))
    throw Error("to(" + target + "): one device at a time; shard() splits a tensor over several");
  if (canonical_device(device()) == dst) return *this;
  if (has_symbolic_shape())
    throw Error("to(" + dst + "): a tensor of symbolic shape " + shape_str(shape()) +
                " cannot be copied between devices yet; reshape it to plain sizes first");
  vkg::device(dst);                 // a device that does not exist is an error here, not at realize
  if (is_multi_device(device())) {  // gather: each shard copied over, joined along the axis
    const Sharded s = lower_multi(node());
    Tensor gathered = Tensor(s.shards[0]).to(dst);
    if (s.axis != -1) {
      std::vector<Tensor> pieces;
      for (const UOpPtr& shard : s.shards) pieces.push_back(Tensor(shard).to(dst));
      gathered = Tensor::cat(pieces, s.axis);
    }
    // The gathered graph is made of the shards' per-device nodes, which a sharded leaf or a
    // realized sharded value is not: the gradient goes back to this tensor itself, split as it is
    // (the gathered graph holds the shards anyway).
    return Tensor(with_custom_gradient(gathered.node(), {node()},
                                       [s](const Tensor& g) -> std::vector<std::optional<Tensor>> {
                                         return {Tensor(split_like(g, s))};
                                       }));
  }
  // A bare constant has no buffer to copy from: it is computed into one first.
  const UOpPtr src =
      node()->op == Ops::CONST || node()->op == Ops::BIND ? contiguous().node() : node();
  const UOpPtr where = UOp::make(Ops::DEVICE, dtypes::void_, {}, dst);
  return Tensor(UOp::make(Ops::COPY, dtype(), {src, where}, dst));
}

Tensor Tensor::shard(const std::vector<std::string>& targets, std::optional<int64_t> axis) const {
  std::vector<std::string> devices;
  for (const auto& t : targets) devices.push_back(canonical_device(t));
  const std::string what =
      "shard: a tensor of shape " + shape_str(shape()) + " (" + dtype().name() + ")";
  if (devices.empty()) throw Error(what + " over no devices");
  if (is_multi_device(device()))
    throw Error(what + " is sharded already (over " + device() + "); gather it with to() first");
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i].empty() || is_multi_device(devices[i]))
      throw Error(what + ": a bad device name '" + targets[i] + "'");
    if (std::count(devices.begin(), devices.end(), devices[i]) > 1)
      throw Error(what + ": device " + devices[i] + " is named twice");
    vkg::device(devices[i]);
  }
  Sharded s{devices, {}, -1};
  if (axis) {
    const int64_t a = *axis < 0 ? *axis + ndim() : *axis;
    if (a < 0 || a >= ndim())
      throw Error(what + ": axis " + std::to_string(*axis) + " is out of range for " +
                  std::to_string(ndim()) + " dimensions");
    const int64_t n = shape()[size_t(a)], k = int64_t(devices.size());
    if (n % k != 0)
      throw Error(what + ": axis " + std::to_string(a) + " of size " + std::to_string(n) +
                  " does not split evenly over " + std::to_string(k) + " devices");
    s.axis = a;
    for (int64_t i = 0; i < k; ++i) {
      std::vector<std::pair<SymInt, SymInt>> slice;
      for (int64_t d = 0; d < ndim(); ++d)
        slice.emplace_back(d == a ? i * (n / k) : 0,
                           d == a ? (i + 1) * (n / k) : shape()[size_t(d)]);
      s.shards.push_back(shrink(slice).to(devices[size_t(i)]).node());
    }
  } else {
    for (const auto& d : devices) s.shards.push_back(to(d).node());
  }
  if (devices.size() == 1) return Tensor(s.shards[0]);
  return Tensor(make_multi(s));
}

// Both replace the node of every alias. A leaf drops its leaf identity for the move and takes a
// new one on the result, so it stays a leaf (there), with its gradient so far moved along.
Tensor& Tensor::to_(const std::string& target) {
  if (canonical_device(device()) == canonical_device(target)) return *this;
  const bool leaf = state_->requires_grad;
  const std::optional<Tensor> g = grad();
  if (leaf) requires_grad_(false);
  state_->node = to(target).node();
  if (leaf) requires_grad_(true);
  if (g) set_grad(g->to(target));
  return *this;
}

Tensor& Tensor::shard_(const std::vector<std::string>& devices, std::optional<int64_t> axis) {
  const bool leaf = state_->requires_grad;
  const std::optional<Tensor> g = grad();
  Tensor sharded = shard(devices, axis);  // checks everything before anything changes
  std::optional<Tensor> moved_grad;
  if (g) moved_grad = g->shard(devices, axis);
  if (leaf) requires_grad_(false);
  state_->node = sharded.node();
  if (leaf) requires_grad_(true);
  if (g) set_grad(moved_grad);
  return *this;
}

}  // namespace vkg
