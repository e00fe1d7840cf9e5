// The shape of each tensor-level node, derived from its op, argument and sources. The tensor-level
// graph that Tensor builds and the scheduler reads has these forms:
//
//   BUFFER       arg Buffer payload                   shape (count,)
//   CONST        arg value                            shape () — broadcast by RESHAPE + EXPAND
//   RESHAPE      arg vector new shape                 EXPAND   arg vector new shape
//   PERMUTE      arg vector order                     FLIP     arg vector of 0/1 per axis
//   PAD          arg vector {before0, after0, ...}    SHRINK   arg vector {begin0, end0, ...}
//   REDUCE_AXIS  arg ReduceArg {op, axes}             shape of the source with those axes = 1
//   ALU ops, CAST, BITCAST, CONTIGUOUS, DETACH, COPY, ASSIGN: the sources' common shape
//
// Arguments are checked by Tensor before a node is built; here a malformed node simply has no
// shape.
#pragma once
#include <optional>

#include <vkgrad/core/shape.hpp>

namespace vkg {

class UOp;

std::optional<Shape> compute_shape(const UOp& u);

}  // namespace vkg
