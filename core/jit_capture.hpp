// What the realize engine does for vkg::Jit (core/jit.hpp): while a capture is active on a
// thread, every schedule realize runs there is also recorded into it; replays are reported as
// realize reports its kernels. Internal to core.
#pragma once
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include <vkgrad/core/binding_guard.hpp>
#include <vkgrad/core/device.hpp>
#include <vkgrad/core/schedule.hpp>

namespace vkg {

struct TensorState;
using HostBytes = std::shared_ptr<const std::vector<std::byte>>;

struct Capture {
  std::vector<ScheduleItem> items;  // every kernel run, in order (empty ones left out)
  std::vector<std::shared_ptr<const Buffer>> regenerated;  // host data renewed per run
  // Host data uploaded while capturing, with its bytes (the upload drops the buffer's copy).
  std::vector<std::pair<std::shared_ptr<const Buffer>, HostBytes>> uploaded;
  std::vector<std::weak_ptr<TensorState>> realized;  // tensors realize pointed at buffers
  // A kernel was left out for having no elements under this binding, though it has some under
  // others: the capture cannot replay another binding.
  bool skipped_symbolic = false;
  // What the function's ops checked with the captured binding's values (core/binding_guard.hpp).
  BindingGuards guards;
  // The records (node, buffer view) commit_realized made of nodes whose value depends on a
  // variable's binding: Jit::capture drops those whose buffer its plan writes, since each replay
  // writes its own binding's value there while the node stands for the captured binding's.
  std::vector<std::pair<UOpPtr, UOpPtr>> bound_records;
  // The in-place assigns the caller left lazy before the capture (pending_assigns), by ASSIGN
  // node: each tensor's current one and the older ones under it (a graph built between two
  // assigns reads the first). A realize of the capture whose graph reads some runs them first,
  // together and outside the capture, as an eager call of the function would run them once
  // (captured, every replay would run them again); the capture's schedule then takes their
  // recorded values (create_schedule never computes an assign's again).
  struct CallerAssign {
    UOpPtr node;                        // held, so that its address keys it
    std::weak_ptr<TensorState> tensor;  // the caller's tensor, pointed at the buffer where its
                                        // node is still this one
  };
  std::unordered_map<const UOp*, CallerAssign> callers_assigns;
};

// The capture this thread records into, or nullptr.
Capture*& active_capture();

// Where Tensor::assign notes the tensors it assigns to on this thread while vkg::Jit runs its
// function (the first call and the capture), or nullptr: the Jit realizes the assigns the
// function leaves lazy (core/jit.cpp says why).
std::vector<std::weak_ptr<TensorState>>*& active_assign_log();

// The tensors Tensor::assign wrote in place on this thread that may still be lazy: a vkg::Jit
// call realizes those the function uses first (core/jit.hpp: a caller's lazy assign would
// otherwise run inside the capture, on every replay, or after a replay that read the old
// value). Tensor::assign drops the entries already realized or gone as the list grows.
std::vector<std::weak_ptr<TensorState>>& pending_assigns();

// While true on a thread, the buffers of symbolic size its realizes make get memory for their
// variables' maxima (Buffer::reserve_max), so that a replay may bind the variables to other
// values: set by vkg::Jit while it copies its inputs and captures.
bool& reserve_symbolic_max();

// Serializes realizes and replays: allocation state lives in shared Buffers.
std::mutex& engine_mutex();
// Takes engine_mutex(). Once exit has begun on another thread (core/realize.cpp: the exit wait),
// the calling thread waits for the process to end instead (10 s, then a vkg::Error), so that a
// thread still running when main returned starts no new work under the drivers' teardown.
std::unique_lock<std::mutex> lock_engine();
// Takes the copies between devices that realizes left in flight and that have ended, without
// waiting for the others, and throws the error of one that failed (naming the copy and its
// realize). Under engine_mutex().
void settle_ended_copies();
// Once exit has begun on this thread (an atexit handler, a static destructor), waits for every
// device and copy in flight: the exit wait has run, and nothing waits for this work before the
// drivers' statics are destroyed. Nothing otherwise. Under engine_mutex().
void wait_if_exiting();

// Runs a captured copy between devices again, as a realize runs one (core/copy_item.hpp): after
// what uses its two buffers on their devices, without the host waiting where it can; a later read
// settles it (its DEBUG line, its error). Under engine_mutex().
void replay_copy(const ScheduleItem& item);

// Counts a replay's kernels and prints them at DEBUG=2, marked "(jit)". A replay over several
// devices reports each recorded step; only its first counts as a replay.
void report_replay(const Device& device, std::vector<RunStat> stats, bool first_step = true);
// Counts a replay that ran no kernel (a capture of copies only).
void count_replay();

}  // namespace vkg
