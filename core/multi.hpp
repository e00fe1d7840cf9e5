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
//  - elementwise ops run per shard; a replicated operand is cut to each shard's slice;
//  - movement ops move each shard (a reshape or permute carries the axis along; a pad, shrink
//    or flip across the sharded axis is an error);
//  - a reduction over the sharded axis reduces each shard, then every device sums (or maxes)
//    the partials of the others, copied to it: an all-reduce, whose result is replicated;
//  - constants and host data on the joined device are replicated.
// Tensor::to(device) gathers the shards (a copy each, joined by cat).
#pragma once
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

// The MULTI node of `s`.
UOpPtr make_multi(const Sharded& s);
// The per-device graphs computing a node of a sharded tensor (its device is a joined name).
// Throws vkg::Error naming the op and the shapes for what cannot be sharded.
Sharded lower_multi(const UOpPtr& node);

}  // namespace vkg
