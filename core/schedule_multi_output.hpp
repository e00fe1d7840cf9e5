// Multi-output kernels: elementwise kernels of one schedule that run over the same iteration space
// become one kernel with several STOREs (as tinygrad's scheduler groups stores), so that the
// inputs they share are read once and one dispatch replaces several. An Adam update of one
// parameter (new m, new v, new weight) is one kernel; so is SGD's velocity and weight.
//
// Two kernels merge when both are
//  - elementwise (no reduce, no indexed load, no scatter), with no variables bound,
//  - stores of one buffer each, through equal views (the same shape and element order), on one
//    device;
// they share an input, or one reads the other's output where that output is a buffer from before
// the schedule (an assign's target: a chain of new intermediates stays apart, so that the memory
// planner can reuse their memory); and merging keeps every dependency:
//  - a later kernel may read an earlier one's output only at the element it stores (the same
//    view): the merged kernel uses the value it computes instead of loading it;
//  - no kernel of the group reads or writes a buffer another one of it writes otherwise (an
//    in-place write of a buffer another output reads at the old value is left as two kernels);
//  - the merged kernel runs where the group's last kernel ran: no kernel between a member and it
//    reads what the member writes, or writes what the member reads or writes.
// At most kMaxBuffers (16) buffers per merged kernel: past a device's binding limit buffers go by
// device address (codegen/glsl_launch.hpp), so this only keeps a kernel's argument list modest.
// MULTI_OUTPUT=0 turns the pass off.
#pragma once
#include <vkgrad/core/schedule.hpp>

namespace vkg {

// Merges the kernels of `sched.items`, which are in their final order, into multi-output kernels
// where the rules above allow.
void merge_multi_output(Schedule& sched);

}  // namespace vkg
