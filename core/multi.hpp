// Sharded tensors, as tinygrad's multi-device tensors: one logical tensor whose value lives in
// pieces (shards) on several devices. Tensor::shard makes one: a MULTI node
//
//   MULTI  src (DEVICE "VK,VK:1", shard 0, shard 1, ...)   arg int64 axis (-1: replicated)
//
// whose shards split the value along `axis` in device order, or each hold all of it. Ops on
// sharded tensors build the ordinary logical graph (shapes are the whole value's; the device is
// the joined name "VK,VK:1", so mixing it with a one-device tensor is the usual device error).
// At realize, lower_multi rewrites that graph into one graph per device, which the scheduler
// runs as usual:
//  - elementwise ops run per shard; a replicated operand is cut to each shard's slice, and one
//    sharded on another axis is resharded (each device fetches its slice from every shard);
//  - movement ops move each shard (a reshape or permute carries the axis along). A pad, shrink
//    or flip across the sharded axis moves rows between devices: each shard of the result
//    fetches the input range it shows from the shards holding it; the result stays sharded in
//    equal parts where its length splits evenly, else it is replicated. A reshape that mixes
//    the sharded axis with others gathers the whole value to every device (replicated);
//  - a reduction over the sharded axis reduces each shard, then every device sums (or maxes)
//    the partials of the others, copied to it: an all-reduce, whose result is replicated;
//  - indexed loads (INDEX: gather, embedding, x[int_tensor]) split as their indices, or as a
//    source sharded on an axis not indexed; a source sharded on an indexed axis is gathered to
//    every device first. A scatter (sum, prod, max or min) of values sharded on an indexed axis
//    (a sum is their backward) scatters per device into the combine's identity and all-reduces
//    the partial results with the combine;
//  - constants and host data on the joined device are replicated.
// Tensor::to(device) gathers the shards (a copy each, joined by cat). Gradients flow back
// through a MULTI to its shards' sources (multi_gradient).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <vkgrad/core/uop.hpp>

namespace vkg {

// "VK,VK:1" names the devices of a sharded tensor; one device's name has no comma.
inline bool is_multi_device(const std::string& device) {
  return device.find(',') != std::string::npos;
}
std::vector<std::string> split_devices(const std::string& device);
std::string join_devices(const std::vector<std::string>& devices);

// A value lowered to one node per device. axis -1: every shard holds the whole value.
struct Sharded {
  std::vector<std::string> devices;
  std::vector<UOpPtr> shards;
  int64_t axis = -1;
};

class Tensor;

// The gradients of a MULTI node's sources (none for its DEVICE, then one per shard, on that
// shard's device) given the gradient g of its whole value: g's part in each shard's slice. For a
// replicated MULTI (a weight copied to every device) the shards' gradients add up to g at the
// source, as data parallelism sums the replicas' gradients: g's shards where g is sharded (each
// padded with zeros to the whole shape), all of it on the first device where g is replicated.
std::vector<std::optional<Tensor>> multi_gradient(const UOp& multi, const Tensor& g);

// g (a one-device tensor of `like`'s whole shape) split as `like` is: each shard's slice copied
// to its device, as a MULTI. What a gather (Tensor::to) sends back as the gradient.
UOpPtr split_like(const Tensor& g, const Sharded& like);

// The MULTI node of `s`.
UOpPtr make_multi(const Sharded& s);
// The per-device graphs computing a node of a sharded tensor (its device is a joined name).
// Throws vkg::Error naming the op and the shapes for what cannot be sharded.
Sharded lower_multi(const UOpPtr& node);

}  // namespace vkg
