// Horizontal merging: small in-place elementwise updates of one schedule that sit next to each
// other and touch nothing the others write (an optimizer's steps of biases and small weights,
// each writing its own parameter) become one kernel over their elements laid end to end. Each
// member's views are flattened and padded to the whole range at the member's offset, so its loads
// and its store are masked to its own elements; the members' outputs take slots 0..k-1.
//
// Why: a dispatch costs about 15-25 us on Lavapipe whatever it computes (bench_vk
// EmptyDispatchSubmitWait; far more on a loaded machine), and these kernels compute a few
// thousand elements each. The MLP 784-128-10 Adam step updates b1 (128), W2 (1280) and b2 (10)
// in one kernel instead of three.
//
// Members are elementwise (no reduce, no indexed load, no scatter, no variables), store one
// buffer each in order and whole, write a buffer from before the schedule (an assign's target:
// new intermediates are left to the memory planner), have at most kMaxElements elements, and run
// one after the other on one device. HORIZONTAL=0 turns the pass off.
#pragma once
#include <vkgrad/core/schedule.hpp>

namespace vkg {

// Merges runs of neighbouring small in-place elementwise kernels of `sched.items` (in their final
// order) into one kernel each where the rules above allow.
void merge_horizontal(Schedule& sched);

}  // namespace vkg
