// Dispatch groups: several lowered programs that share no buffer one of them writes run as one
// program, so one dispatch replaces several. Why: on Lavapipe a dispatch costs ~45 us of thread
// hand-offs whatever it computes (the queue thread wakes the worker threads and waits for them;
// tests/tensor_jit_dispatch_groups_test.cpp), and a training step's small
// kernels (bias gradients, a loss's reduces, optimizer updates) compute for less than that. On
// GPUs it spares the barrier between the kernels.
//
// The merged program's workgroups are the members' laid end to end along axis 0: workgroup w
// runs member m when O_m <= w < O_m + W_m, under an IF on the workgroup id (uniform across the
// workgroup, so barriers inside stay legal). Lavapipe runs both sides of an IF with the lanes
// masked off, so there every workgroup runs every member's code (devices/vk_device.hpp's
// max_group_workgroups_ bounds the cost); a GPU branches. Each member
// sees its own workgroup and invocation ids, recomputed from w - O_m:
//   - a member whose workgroup size is the merged one keeps its grid (flattened and decomposed);
//   - a member of another workgroup size is re-tiled: its invocations are numbered flat, laid
//     over the merged workgroups in order, and their ids decomposed from that number. Only
//     members whose invocations do not talk to each other (no BARRIER, DEFINE_LOCAL or SHUFFLE)
//     can be re-tiled; those that talk must all have the merged workgroup size.
// The invocations past a member's own sizes (its SPECIALs' guards) do nothing, as the renderer's
// early return did. Nodes two members compute alike (constants, loads at fixed indices) are
// computed once before the members' blocks; every node that depends on a member's ids, loops,
// accumulators or shared memory is the member's own (loop, accumulator and shared-memory ids are
// renumbered).
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <vkgrad/codegen/program.hpp>

namespace vkg {

struct MergeMember {
  const Program* program = nullptr;
  std::vector<int64_t> slots;  // the merged slot of each of the program's buffer slots
};

// Why the members cannot share one program, or "" when they can: variables (a symbolic kernel
// launches by its binding), members that talk within their workgroups at different sizes, or
// more workgroup-shared memory than `max_shared_bytes` in all (each member keeps its own arrays).
// The merged program's workgroups: the members' laid end to end, each re-tiled to the merged
// workgroup size where its own differs.
int64_t merged_workgroups(const std::vector<MergeMember>& members);

std::string merge_refusal(const std::vector<MergeMember>& members,
                          int64_t max_shared_bytes = std::numeric_limits<int64_t>::max());

// The program running every member (in the order given, each over its own workgroups). `buffers`
// are the merged program's arguments by merged slot. Throws vkg::Error with merge_refusal's
// reason when there is one, or when a member's buffer does not match its merged slot's dtype.
Program merge_programs(const std::vector<MergeMember>& members, std::vector<BufferParam> buffers);

}  // namespace vkg
