// Modules: what a layer or a model owns (its parameters and buffers, by name), and what can be done
// with that (collect parameters for an optimizer, save and load a state dict).
//
// Tensors are handles: a copy of a Tensor is an alias of the same tensor, as a Python reference
// is. So parameters() and state_dict() hand out aliases, and an optimizer that assigns to them
// updates the layer itself.
//
//   struct Net : nn::Module {
//     nn::Linear l1{784, 128}, l2{128, 10};
//     Tensor operator()(const Tensor& x) const { return l2(l1(x).relu()); }
//     nn::StateDict state_dict() const override { return nn::named({{"l1", &l1}, {"l2", &l2}}); }
//   };
#pragma once
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include <vkgrad/core/tensor.hpp>

namespace vkg::nn {

// Named tensors in a stable order ("l1.weight", "l1.bias", ...), as torch's state_dict.
using StateDict = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  virtual ~Module() = default;
  // Parameters and buffers (BatchNorm's running statistics), by dotted name.
  virtual StateDict state_dict() const = 0;
  // The tensors an optimizer trains: by default every floating-point entry of the state dict
  // that requires grad.
  virtual std::vector<Tensor> parameters() const;
  // Assigns each entry of `values` to the tensor of the same name. strict: every name must match
  // both ways. Shapes must agree; values are cast to each tensor's dtype.
  void load_state_dict(const StateDict& values, bool strict = true);
};

// The state dicts of child modules under their names: {"conv1", &conv1} gives "conv1.weight", ...
StateDict named(std::initializer_list<std::pair<std::string, const Module*>> children);

// Every parameter of the given modules, in order: parameters(l1, l2).
template <class... M>
std::vector<Tensor> parameters(const M&... modules) {
  std::vector<Tensor> out;
  (
      [&] {
        for (Tensor& t : modules.parameters()) out.push_back(t);
      }(),
      ...);
  return out;
}

// Computes every tensor of the list in one schedule (shared work runs once).
void realize_all(std::vector<Tensor> tensors);

}  // namespace vkg::nn
