// The scheduler: cuts the lazy tensor graph into kernels (fusion), orders them, and names the
// buffers each one reads and writes.
//
// A kernel AST is a SINK of STOREs over these forms (every VIEW's ShapeTracker is in the kernel's
// coordinates: the full shape for what feeds a reduce, the full shape with 1 at the reduced axes
// for what comes after it; all have the same number of dimensions):
//
//   SINK           src (STORE...)
//   STORE          src (DEFINE_GLOBAL slot, VIEW st, value)
//   LOAD   T       src (DEFINE_GLOBAL slot, VIEW st)            element st addresses in that buffer
//   CONST  T       src (VIEW st)    arg value                   the value where st is valid, else 0
//   REDUCE_AXIS T  src (value)      arg ReduceArg {op, axes}    axes of the full shape
//   ALU ops, CAST, BITCAST          src (values)
//   DEFINE_GLOBAL  dtype T.ptr()    arg int64 slot              slot 0 is the output
//   VIEW           arg ShapeTracker (ShapeTracker::to_arg)
//
// Fusion rules:
//  - Elementwise chains, and movement ops anywhere in them, become one kernel: a movement op is a
//    change of ShapeTracker on the loads below it, never a copy.
//  - Elementwise producers fuse into a reduce (a dot product is one kernel), and elementwise work
//    on a reduce's result fuses after it, when nothing but reshapes lies between them.
//  - A reduce whose result is expanded back (or moved otherwise) before use ends its kernel: it is
//    realized into a buffer, so var() is two kernels and softmax three.
//  - One kernel holds reduces of one full shape and axes only, never a reduce inside another's
//    input; the inner or differing one is realized.
//  - Padding an op that does not map 0 to 0 (exp2, comparisons, division, ...) realizes that op,
//    since the pad must read 0 and not f(0).
//  - Realized buffers, the tensors being realized, and contiguous() are boundaries.
//  - Shared work: a node is computed once per kernel that needs it. Elementwise work may be
//    recomputed by each kernel that reads it (at most one pass over that chain per consumer
//    kernel); a reduce is never recomputed: a reduce needed by two kernels is realized.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <vkgrad/core/buffer.hpp>
#include <vkgrad/core/uop.hpp>

namespace vkg {

struct ScheduleItem {
  UOpPtr ast;                                          // SINK of STOREs
  std::vector<std::shared_ptr<const Buffer>> buffers;  // by DEFINE_GLOBAL slot; outputs first
  // The values of the variables the AST reads (DEFINE_VARs, by name): its symbolic sizes bound
  // for this run. The AST is the same for every binding; these go to the kernel at launch.
  std::map<std::string, int64_t> var_vals;
  // Slots 0 .. outputs-1 are the buffers the kernel writes (more than one for a kernel of several
  // STOREs: core/schedule_multi_output.hpp); a copy writes slot 0.
  size_t outputs = 1;
};

struct Schedule {
  std::vector<ScheduleItem> items;  // in an order that runs every producer before its consumers
  // Each realized node (the outputs included) and the BUFFER node holding its value, viewed in
  // the node's shape (a RESHAPE of the BUFFER, or the BUFFER itself).
  std::unordered_map<const UOp*, UOpPtr> realized;
  // BUFFER nodes that carry host data to upload before the items run.
  std::vector<std::shared_ptr<const Buffer>> uploads;
};

// Schedules the computation of `outputs` (tensor-level nodes). Each output ends up in a buffer of
// its own shape, row-major: either one a kernel writes, or the buffer it already views when that
// view is the whole buffer in order.
Schedule create_schedule(const std::vector<UOpPtr>& outputs);

// Records that `sched` has run: later schedules read its realized nodes from their buffers
// instead of computing them again. Call it only once every item has run. Nodes held in one of
// `lent` (buffers whose memory the memory planner passed on to others) are left out.
void commit_realized(const Schedule& sched, const std::unordered_set<int64_t>& lent = {});

// Drops node n's realized value if it is still `view` (vkg::Jit: one a replay overwrites).
void forget_realized(const UOp* n, const UOp* view);

// How many nodes have a realized value recorded for later schedules (for tests of freeing).
size_t realized_node_count();

// The Buffer of a BUFFER node as a shared pointer.
std::shared_ptr<const Buffer> buffer_ptr(const UOp& buffer_node);

}  // namespace vkg
