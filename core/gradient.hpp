// Reverse-mode differentiation of the tensor-level UOp graph, as tinygrad's compute_gradient: each
// op's gradient rule is one line of a table (gradient.cpp) that builds, from the gradient of a
// node's result, lazy tensor ops giving the gradients of its sources. The result is itself a lazy
// tensor graph: it fuses into kernels like forward code and may read forward values that were
// realized already.
#pragma once
#include <unordered_map>
#include <unordered_set>

#include <vkgrad/core/uop.hpp>

namespace vkg {

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
