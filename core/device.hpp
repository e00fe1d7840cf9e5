// What the realize engine asks of a device, and the registry that opens devices by name. core
// defines the interface; the adapters in devices/ implement it with codegen and the Vulkan runtime
// (VK) or the reference interpreter (CPU).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <vkgrad/core/host_bridge.hpp>
#include <vkgrad/core/run_options.hpp>
#include <vkgrad/core/schedule.hpp>

namespace vkg {

// A device's memory for one Buffer. Counted in GlobalCounters::mem_used while it lives.
class Allocation {
 public:
  virtual ~Allocation();

 private:
  friend Allocation& ensure_allocated(const Buffer& buffer, int debug);
  int64_t counted_bytes_ = 0;
};

// A device's record of a sequence of kernels over fixed memory, which it can run again without
// recording anything (what vkg::Jit replays).
class Recording {
 public:
  virtual ~Recording() = default;
};

// One kernel or copy a device ran, for DEBUG=2 lines.
struct RunStat {
  std::string name;   // kernel name, or "copy N, VK <- CPU"
  int buffers = 0;    // arguments
  int64_t bytes = 0;  // bytes the kernel's buffers hold (or the copy moved)
  int64_t flops = 0;
  double ns = 0;    // device time where measured, else host time
  int kernels = 1;  // the kernels it ran: more than one for a dispatch group
};

class Device {
 public:
  virtual ~Device() = default;
  virtual const std::string& name() const = 0;

  // Memory for `buffer` (uninitialized). Throws vkg::OutOfMemory when the device has none left.
  virtual std::shared_ptr<Allocation> allocate(const Buffer& buffer) = 0;
  // Host bytes in and out. copy_out waits for queued kernels that write the buffer.
  virtual void copy_in(Allocation& dst, std::span<const std::byte> src) = 0;
  virtual void copy_out(Allocation& src, std::span<std::byte> dst) = 0;

  // Compiles the kernels of `items` it has not compiled yet, in parallel where there are cores,
  // so that run() records them without waiting on a compiler. The realize engine calls it with a
  // whole schedule before running its first kernel. A kernel that fails to compile here is left
  // for run() to compile again and report, in schedule order.
  virtual void prepare(std::span<const ScheduleItem> items, const RunOptions& options) {
    (void)items, (void)options;
  }
  // Queues one scheduled kernel; `memory[i]` backs item.buffers[i]. May return before it runs.
  // `options` are the settings of the realize it belongs to (opts, BEAM, DEBUG output).
  virtual void run(const ScheduleItem& item, std::span<Allocation* const> memory,
                   const RunOptions& options) = 0;
  // Waits for everything queued; returns what ran since the last call.
  virtual std::vector<RunStat> synchronize() = 0;
  // Submits everything queued and returns at once with what was queued since the last call (or
  // synchronize), untimed: what a realize ends with, so that the host waits only where it reads
  // a value (copy_out), reuses memory, or exits. The default, for devices that run each item
  // before run() returns, is synchronize(). An error met on the device after flush() returns is
  // thrown by the next call that waits (synchronize, copy_out) as a vkg::Error.
  virtual std::vector<RunStat> flush() { return synchronize(); }
  // Submissions to the device's queue so far, how many of them have completed, and how often the
  // host has blocked waiting for one (0s where the device runs everything before run() returns):
  // what tests read to see that a realize did not wait.
  struct QueueCounts {
    uint64_t submitted = 0;
    uint64_t completed = 0;
    uint64_t host_waits = 0;
    // Whether staged copies run on a queue of their own (a copy engine), and how often a kernel
    // was made to wait for one there: only kernels that use a buffer a copy writes (or overwrite
    // one it reads) wait, and only while that copy has not completed.
    bool copy_queue = false;
    uint64_t copy_waits = 0;
    // Copies between this device and another that this device's queue made through the host
    // bridge (bridge_out, bridge_in), and imports of host memory it made for them: one per
    // bridge, however many copies pass (core/host_bridge.hpp).
    uint64_t imported_copies = 0;
    uint64_t host_imports = 0;
  };
  virtual QueueCounts queue_counts() { return {}; }

  // Records `items` (memory[i][j] backs items[i].buffers[j], all allocated) for replay(). The
  // default keeps the list and runs it again item by item; the Vulkan device records one command
  // buffer and submits it again.
  virtual std::unique_ptr<Recording> record(std::span<const ScheduleItem> items,
                                            std::vector<std::vector<Allocation*>> memory,
                                            const RunOptions& options);
  // Runs a recording once more; returns what ran. It may return before the recording has run
  // (the Vulkan device submits it): reads of its buffers wait for it (copy_out, when_done_with),
  // and a later replay of it follows it. `var_vals` gives variables
  // (by name) other values than the recorded items had: the kernels read them at run time, so a
  // recording over buffers with room for every binding (Buffer::reserve_max) serves them all.
  // Variables not named keep their recorded values.
  using VarVals = std::map<std::string, int64_t>;
  virtual std::vector<RunStat> replay(Recording& recording, const VarVals& var_vals);
  std::vector<RunStat> replay(Recording& recording) { return replay(recording, {}); }
  // Queues a copy of `bytes` bytes between two allocations of this device, done before the next
  // replay or kernel runs. The default goes through the host.
  virtual void copy(Allocation& src, Allocation& dst, size_t bytes);

  // ---- what a copy between two devices asks (core/copy_item.hpp) ----
  // The allocation's bytes where the host may read and write them directly (host-visible
  // memory: every buffer on Lavapipe and unified-memory GPUs, the CPU device's memory), else
  // nullptr; the copy then goes through staging memory (stage_out, stage_in).
  virtual std::byte* host_pointer(Allocation& memory) {
    (void)memory;
    return nullptr;
  }
  // Whether host_pointer gives every allocation's bytes: asked before allocating memory only
  // to find out (core/mapped_memory.hpp).
  virtual bool maps_memory() const { return false; }
  // Submits what is queued and returns a function that blocks until that has run, callable from
  // any thread. The default is for devices that run each item before run() returns.
  virtual std::function<void()> when_queued_done() {
    return [] {};
  }
  // Work queued on this device after this call starts only once `event` is ready; the calling
  // thread does not wait for it. The default waits here. synchronize() also waits for events.
  virtual void wait_for(std::shared_future<void> event) { event.wait(); }
  // Like when_queued_done, for the work queued so far that uses `memory`: what writes it, and
  // with `writing` also what reads it (all that must end before the host overwrites it). The
  // Vulkan device tracks each allocation's last writer and user on its timeline, so a read of
  // one buffer does not wait for a long kernel queued after its writer.
  virtual std::function<void()> when_done_with(Allocation& memory, bool writing) {
    (void)memory, (void)writing;
    return when_queued_done();
  }
  // The host reads or writes `memory` (a copy between devices, core/copy_item.hpp) until `event`
  // is ready: the host's own later accesses to it (copy_out, copy_in, when_done_with) wait for
  // it too. The default keeps nothing: enough only for a device whose wait_for blocks until the
  // event is ready (the CPU device), since Tensor::bytes and mapped_memory wait for a copy into
  // this device's memory only through wait_for and this record, not for every copy in flight.
  virtual void host_uses(Allocation& memory, std::shared_future<void> event) {
    (void)memory, (void)event;
  }
  // Where host_pointer gives nullptr (device-local memory, a discrete GPU's): host-visible
  // staging memory that stands in for the allocation in a copy between devices, so that the copy
  // runs off the realizing thread as between mapped memories. `bytes` is null where the device
  // cannot stage (the default): the copy then goes through copy_out and copy_in, both devices
  // finished first. Both throw vkg::OutOfMemory where the staging memory does not fit (the whole
  // copy is one allocation); run_copy then copies that way too.
  // The device copies in chunks of `chunk` bytes (the last may be shorter), each on its own, so
  // that the host's copy of one chunk overlaps the device's copies of the others.
  struct Staged {
    std::byte* bytes = nullptr;
    // stage_out: blocks until the first n bytes are there (any thread; n a chunk's end).
    std::function<void(size_t n)> ready;
    std::shared_ptr<void> memory;  // the staging memory, kept until the host is done with it
  };
  // Queues copies of `memory`'s first `bytes` bytes into staging memory after the work queued so
  // far that writes it; work queued later that overwrites `memory` follows those copies.
  virtual Staged stage_out(Allocation& memory, size_t bytes, size_t chunk) {
    (void)memory, (void)bytes, (void)chunk;
    return {};
  }
  // Staging memory that the host fills, and copies of it into `memory`, chunk i's queued behind a
  // wait for filled[i] (as wait_for): work queued later sees the bytes, and a read from the host
  // (copy_out) waits for them; the calling thread does not wait. The device keeps `memory` until
  // those copies are submitted (whoever else holds it may let go first).
  virtual Staged stage_in(const std::shared_ptr<Allocation>& memory, size_t bytes, size_t chunk,
                          std::span<const std::shared_future<void>> filled) {
    (void)memory, (void)bytes, (void)chunk, (void)filled;
    return {};
  }
  // Instead of stage_out and stage_in, where the device can import host memory (Vulkan's
  // VK_EXT_external_memory_host): copies through the host bridge (core/host_bridge.hpp), whose
  // memory the device imports once. bridge_out queues a copy of each step's bytes of `memory`
  // into the step's slot, after the work queued so far that writes `memory` and after the
  // step's `free`; work queued later that overwrites `memory` follows those copies. It returns
  // a function that blocks (any thread) until step i's bytes are in its slot. bridge_in queues a
  // copy of each step's slot into `memory`, behind a wait for filled[i] (as wait_for) and the
  // work queued so far that uses `memory`; work queued later sees the bytes. It returns a
  // function that blocks until step i's slot has been read. Both give an empty function where
  // the device cannot import the bridge (the copy then stages), and throw vkg::OutOfMemory where
  // a submission fails; copies submitted before it still run (when_copies_done).
  virtual std::function<void(size_t)> bridge_out(Allocation& memory, HostBridge::Lease& lease) {
    (void)memory, (void)lease;
    return {};
  }
  virtual std::function<void(size_t)> bridge_in(const std::shared_ptr<Allocation>& memory,
                                                HostBridge::Lease& lease,
                                                std::span<const std::shared_future<void>> filled) {
    (void)memory, (void)lease, (void)filled;
    return {};
  }
  // Blocks until the copies queued so far on this device (bridge_out, bridge_in, stage_out,
  // stage_in) are done: a copy that failed midway lets go of its bridge slots after it.
  virtual std::function<void()> when_copies_done() {
    return [] {};
  }
  // Whether the device runs each item on the host before run() returns (the CPU device).
  virtual bool runs_on_host() const { return false; }
  // Whether the device's copies run on a queue of their own (a copy engine's), beside its
  // kernels rather than behind them: a copy from a runs_on_host device longer than the bridge,
  // whose wait_for then blocks until the destination has emptied slots, goes through the
  // bridge only where this is true (core/copy_item.cpp).
  virtual bool copies_on_own_queue() const { return false; }
  // Whether bridge_out and bridge_in can import host memory at all (Vulkan's
  // VK_EXT_external_memory_host, present and not turned off by VKG_NO_HOST_IMPORT).
  virtual bool imports_host_memory() const { return false; }

  // Kernels compiled so far, and how many of them run() had to compile itself (0 when prepare
  // saw every kernel first): tests pin that recording never waits on a compiler.
  struct CompileCounts {
    int64_t compiled = 0;
    int64_t compiled_in_run = 0;
  };
  virtual CompileCounts compile_counts() const { return {}; }

  // Device memory in live buffers now, and the most since reset_peak_bytes() (0 where the
  // device does not count): what the memory planner's figures are measured in.
  struct MemoryCounts {
    int64_t live_bytes = 0;
    int64_t peak_bytes = 0;
  };
  virtual MemoryCounts memory_counts() const { return {}; }
  virtual void reset_peak_bytes() {}

  // Whether kernels can combine into 64-bit elements atomically (Vulkan's
  // shaderBufferInt64Atomics): without it a 64-bit scatter sum takes the one-hot form
  // (core/indexed_load.cpp). Asked while a graph is built, so it may read settings.
  virtual bool atomics_64bit() const { return true; }

  // The most iterations one invocation of a kernel may loop before the driver ends its loops
  // early without a word, or 0 where loops run to their end (the CPU device, GPUs). llvmpipe
  // (Lavapipe) stops after 65535, LP_MAX_TGSI_LOOP_ITERATIONS, nested loops counted together: a
  // Jit capture of a reduce there records that a replay stays within one kernel's share
  // (core/tensor_reduce.cpp).
  virtual int64_t loop_iteration_limit() const { return 0; }
};

// The device called `name` ("VK", "CPU"; case-insensitive), opened on first use. "VK:n" is the
// n-th Vulkan device (devices/vk_device.cpp: one per physical device, VK:1 a second logical
// device where there is one physical device); "VK" is "VK:0". Throws vkg::Error naming the known
// devices if none is, or saying which indices exist.
Device& device(const std::string& name);

// For a device whose driver may have built new statics (a driver's shader compiler constructs
// some on its first compiles): registers the exit wait for work in flight again, so that it runs
// before their destructors (atexit runs handlers in reverse order of registration). Lavapipe's
// queue thread crashed in LLVM's destructors at exit otherwise. Running the wait twice is harmless.
void keep_exit_wait_after_driver_statics();

// The name a device is known by: upper case, with ":0" dropped ("vk:0" -> "VK"), so that two
// spellings of one device compare equal on tensors.
std::string canonical_device(const std::string& name);

using DeviceFactory = std::function<std::unique_ptr<Device>(const std::string& name)>;
// Makes `prefix` ("VK", "CPU") a known device. Called by each adapter at load time.
bool register_device(const std::string& prefix, DeviceFactory factory);

// The allocation behind `buffer` on its device, allocating it (and uploading its initial data)
// on first use. `debug` is the DEBUG level of the realize it serves (2 prints the upload); the
// first form reads DEBUG itself. Call it under the realize engine's lock (core/realize.cpp).
Allocation& ensure_allocated(const Buffer& buffer, int debug);
Allocation& ensure_allocated(const Buffer& buffer);

}  // namespace vkg
