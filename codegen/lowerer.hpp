// Lowering: a Kernel (AST, axis kinds, opts) to a linear Program. Global and local axes become
// invocation ids (SPECIAL), reduce axes loops (RANGE) around accumulators (DEFINE_ACC/ASSIGN),
// upcast and unroll axes copies of the expression with constant indexes; every LOAD, CONST and
// STORE reads its index and validity off its ShapeTracker. Then linearize() orders the result.
#pragma once
#include <cstdint>
#include <vector>

#include <vkgrad/codegen/kernel.hpp>
#include <vkgrad/codegen/program.hpp>

namespace vkg {

struct LowerOptions {
  // Invocations per workgroup for kernels without local axes (their global ids are spread over
  // workgroups of this size; the renderer guards the rounded-up tail).
  int64_t default_workgroup = 64;
};

// `buffer_counts[slot]` is the element count of the buffer bound at that slot.
Program lower(const Kernel& kernel, const std::vector<int64_t>& buffer_counts, const LowerOptions& options = {});

// Orders the nodes reachable from `stores` into a linear program: sources first; each node in
// the innermost loop it depends on and no deeper (loop-invariant work is hoisted); ENDRANGEs after
// the loop bodies; what reads an accumulator's final value after the loops close.
std::vector<UOpPtr> linearize(const std::vector<UOpPtr>& stores);

}  // namespace vkg
