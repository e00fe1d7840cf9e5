// Reverse-mode differentiation of the tensor-level UOp graph, as tinygrad's compute_gradient: each
// op's gradient rule is one line of a table (gradient.cpp) that builds, from the gradient of a
// node's result, lazy tensor ops giving the gradients of its sources. The result is itself a lazy
// tensor graph: it fuses into kernels like forward code and may read forward values that were
// realized already.
#pragma once
#include <functional>
#include <optional>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <vkgrad/core/uop.hpp>

namespace vkg {

class Tensor;

// A composed op whose gradient is better written by hand than derived from its parts (a
// convolution's input gradient is a transposed convolution: one reduce, where the derived
// gradient of the pooling movement ops writes every window out and sums them back). Its value is
// DETACH(value) with this as the argument: the scheduler sees through it (the forward computes as
// composed), and the walk below calls `fn` with the node's gradient instead of entering `value`.
// `fn` returns one gradient (or none) per node of `inputs`, as lazy tensor graphs.
struct CustomGradient : ArgPayload {
  std::vector<UOpPtr> inputs;
  std::function<std::vector<std::optional<Tensor>>(const Tensor& grad)> fn;
  // Identity: every use is its own node (two equal convolutions are two nodes).
  size_t hash() const override { return std::hash<const void*>{}(this); }
  bool equals(const ArgPayload& other) const override { return this == &other; }
  std::string repr() const override { return "CustomGradient(" + std::to_string(inputs.size()) + " inputs)"; }
};

// `value` with its gradient given by `fn` with respect to `inputs` (see CustomGradient).
UOpPtr with_custom_gradient(const UOpPtr& value, std::vector<UOpPtr> inputs,
                            std::function<std::vector<std::optional<Tensor>>(const Tensor& grad)> fn);

// The nodes a gradient flows into from n: its sources, none for a DETACH or a graph leaf
// (BUFFER, CONST), a custom gradient's inputs.
std::span<const UOpPtr> gradient_sources(const UOp& n);

struct GradientRequest {
  UOpPtr root;  // the value being differentiated
  UOpPtr seed;  // d(loss)/d(root): root's shape and dtype
  // The nodes whose gradients are wanted. The walk never enters a DETACH (gradients stop there),
  // so a target that is a DETACH is reached only as itself.
  std::unordered_set<const UOp*> targets;
  // Nodes that stand for another node's value (a realized tensor's buffer view -> the lazy graph
  // it was computed by): the gradient passes through to that node unchanged.
  std::unordered_map<const UOp*, UOpPtr> aliases;
};

// d(root)/d(target), seeded with `seed`, for each target the root's graph reaches (absent for
// the others). Walks only the nodes on a path from the root to a target, iteratively (no
// recursion: graphs of any depth), and sums the gradients of a node used several times.
// Throws vkg::Error naming the op when a path runs through an op without a gradient rule.
std::unordered_map<const UOp*, UOpPtr> compute_gradient(const GradientRequest& request);

}  // namespace vkg
