// DEVICE=VK: the adapter between core's Device interface and the Vulkan runtime. Its work is in
// two files: vk_device.cpp compiles kernels and records them into the queue (the realize's
// kernels, Jit recordings and replays); vk_device_copies.cpp moves data (uploads, downloads,
// copies within the device and the device's halves of copies between devices, staged on the
// copy engine's queue where memory is not mapped). Private to devices/.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <vkgrad/codegen/glsl_launch.hpp>
#include <vkgrad/codegen/glsl_target.hpp>
#include <vkgrad/codegen/heuristics.hpp>
#include <vkgrad/codegen/program.hpp>
#include <vkgrad/core/context.hpp>
#include <vkgrad/core/device.hpp>
#include <vkgrad/core/host_worker.hpp>
#include <vkgrad/devices/kernel_cache.hpp>
#include <vkgrad/devices/vk_target.hpp>
#include <vkgrad/vk/host_import.hpp>
#include <vkgrad/vk/program.hpp>
#include <vkgrad/vk/queue.hpp>
#include <vkgrad/vk/runtime.hpp>

namespace vkg {

struct VkAllocation final : Allocation {
  vk::Buffer buffer;
  // No command or host copy has touched it yet: the allocator hands out memory only once the
  // work submitted before it was freed has completed, so its first upload need not wait.
  bool fresh = true;
  // The compute-queue submissions that last wrote it and last used it (read or write), as the
  // timeline points they signal: a read from the host waits for its writer, an overwrite from
  // the host for its last user, never for the whole queue.
  vk::Queue::Ticket last_write, last_use;
  // Copies on the copy engine's queue (vk::Transfer::timeline()) that write it (an upload, the
  // copy into it of a copy from another device) and read it (the copy out of it of a copy to
  // another device), as that timeline's points. Kernels that use it wait for the first, kernels
  // that overwrite it for both (VkDevice::wait_for_copies); later copies on that queue follow
  // them in queue order. 0: none.
  uint64_t copy_write = 0, copy_read = 0;
  // A copy between devices that reads or writes it on the host (Device::host_uses).
  std::shared_future<void> host_use;
};

// A kernel compiled for this device and how to launch it.
struct CompiledKernel {
  Program program;
  ArgLayout layout;
  std::array<uint32_t, 3> dims;
  std::unique_ptr<vk::Program> pipeline;
};

class VkDevice final : public Device {
 public:
  explicit VkDevice(std::string name);
  ~VkDevice() override { finish(); }

  const std::string& name() const override { return name_; }
  std::shared_ptr<Allocation> allocate(const Buffer& buffer) override;

  // ---- kernels (vk_device.cpp) ----
  void prepare(std::span<const ScheduleItem> items, const RunOptions& options) override;
  // VKG_NO_INT64_ATOMICS: as on a device without shaderBufferInt64Atomics, so the fallback runs
  // in CI (Lavapipe has the feature).
  bool atomics_64bit() const override {
    return target_.int64_atomics && setting("VKG_NO_INT64_ATOMICS") == 0;
  }
  // At most how many workgroups one dispatch group's members have together (0: any).
  int64_t max_group_workgroups() const { return max_group_workgroups_; }
  int64_t loop_iteration_limit() const override {
    return rt_.device.caps().driver_name == "llvmpipe" ? 65535 : 0;
  }
  CompileCounts compile_counts() const override {
    return {compiled_.load(), compiled_in_run_.load()};
  }
  MemoryCounts memory_counts() const override {
    const vk::AllocatorStats s = rt_.allocator.stats();
    return {int64_t(s.live_bytes), int64_t(s.peak_live_bytes)};
  }
  void reset_peak_bytes() override { rt_.allocator.reset_peak(); }
  void run(const ScheduleItem& item, std::span<Allocation* const> memory,
           const RunOptions& options) override;
  std::unique_ptr<Recording> record(std::span<const ScheduleItem> items,
                                    std::vector<std::vector<Allocation*>> memory,
                                    const RunOptions& options) override;
  using Device::replay;
  std::vector<RunStat> replay(Recording& recording, const VarVals& var_vals) override;
  std::vector<RunStat> flush() override;
  QueueCounts queue_counts() override;
  std::vector<RunStat> synchronize() override;

  // ---- data movement (vk_device_copies.cpp) ----
  void copy_in(Allocation& dst, std::span<const std::byte> src) override;
  void copy_out(Allocation& src, std::span<std::byte> dst) override;
  void copy(Allocation& src, Allocation& dst, size_t bytes) override;
  std::byte* host_pointer(Allocation& memory) override;
  bool maps_memory() const override { return rt_.allocator.host_mapped(vk::Usage::Device); }
  std::function<void()> when_queued_done() override;
  std::function<void()> when_done_with(Allocation& memory, bool writing) override;
  void host_uses(Allocation& memory, std::shared_future<void> event) override {
    static_cast<VkAllocation&>(memory).host_use = std::move(event);
  }
  Staged stage_out(Allocation& memory, size_t bytes, size_t chunk) override;
  Staged stage_in(const std::shared_ptr<Allocation>& memory, size_t bytes, size_t chunk,
                  std::span<const std::shared_future<void>> filled) override;
  bool imports_host_memory() const override {
    return rt_.device.caps().features.external_memory_host;
  }
  std::function<void(size_t)> bridge_out(Allocation& memory, HostBridge::Lease& lease) override;
  std::function<void(size_t)> bridge_in(const std::shared_ptr<Allocation>& memory,
                                        HostBridge::Lease& lease,
                                        std::span<const std::shared_future<void>> filled) override;
  std::function<void()> when_copies_done() override;
  bool copies_on_own_queue() const override;
  void wait_for(std::shared_future<void> event) override;

 private:
  // Where a recorded kernel reads one variable: an int32 in its argument buffer, which the
  // recording owns (vk::Queue::spill), rewritten by a replay with another value.
  struct VarSlot {
    std::string name;
    int64_t recorded = 0, min = 0, max = 0;
    std::byte* host = nullptr;
  };
  // A recorded dispatch whose grid follows the variables (grid_follows_vars): where its three
  // workgroup counts lie, rewritten by a replay with other values.
  struct GridSlot {
    const Program* program;         // of a kernel the recording keeps
    std::vector<int64_t> recorded;  // Program::vars' values at the recording
    std::byte* host = nullptr;
  };
  struct VkRecording final : Recording {
    std::vector<VarSlot> vars;
    std::vector<GridSlot> grids;
    std::vector<std::shared_ptr<CompiledKernel>> kernels;  // its pipelines, past cache trims
    std::unique_ptr<vk::Queue::Recorded> commands;         // destroyed first: it uses them
    std::vector<RunStat> stats;
    // Every allocation its kernels use and whether they write it, kept alive by the Jit's plan
    // (vkg::Jit keeps every buffer a recording uses): a replay becomes their last user.
    std::vector<std::pair<VkAllocation*, bool>> touched;
  };

  // ---- kernels (vk_device.cpp) ----
  // Records one kernel into the queue's command buffer (or into `recording`, the capture under
  // way, which keeps its pipeline and learns where its variables lie).
  RunStat dispatch(const ScheduleItem& item, std::span<Allocation* const> memory,
                   const RunOptions& options, VkRecording* recording = nullptr);
  // Records a compiled kernel over `memory` (bytes[i]: what slot i may touch) with `vars`;
  // `kernels`: how many scheduled kernels it runs (a dispatch group's members).
  RunStat launch(const std::shared_ptr<CompiledKernel>& compiled,
                 std::span<Allocation* const> memory, std::span<const VkDeviceSize> bytes,
                 const std::vector<int64_t>& vars, const RunOptions& options,
                 VkRecording* recording, int kernels = 1);
  CompiledKernel compile(const ScheduleItem& item, const RunOptions& options);
  void compile_program(CompiledKernel& k, const GlslTarget& target, const RunOptions& options);

  // ---- dispatch groups (vk_dispatch_groups.cpp) ----
  // Kernels of a recording that share one dispatch (codegen/program_merge.hpp): `items` (their
  // indices, in the order they joined) run as `merged` over `memory`; a group of one runs as
  // usual (no merged). The groups are in the order they run, which may move a small kernel
  // ahead of kernels it does not depend on (vk_dispatch_groups.cpp).
  struct DispatchGroup {
    std::vector<size_t> items;
    std::shared_ptr<CompiledKernel> merged;
    std::vector<Allocation*> memory;
    std::vector<VkDeviceSize> bytes;
  };
  // Splits `items` (each over memory[i], compiled by prepare) into dispatch groups and compiles
  // the merged kernels, in parallel where there are cores. DISPATCH_GROUPS=0: groups of one.
  std::vector<DispatchGroup> plan_groups(std::span<const ScheduleItem> items,
                                         const std::vector<std::vector<Allocation*>>& memory,
                                         const RunOptions& options);
  std::unique_ptr<vk::Program> make_pipeline(const CompiledKernel& k,
                                             const std::vector<uint32_t>& spirv);
  void save_pipeline_cache();
  void finish();

  // ---- data movement (vk_device_copies.cpp) ----
  uint64_t point_of(const vk::Queue::Ticket& ticket);
  static void wait_host_use(VkAllocation& a);
  // Commands recorded on the compute queue from now on that use `a` (`writing`: overwrite it)
  // start after the copies on the copy engine's queue that write it (and read it). Nothing where
  // copies run on the compute queue's timeline, whose order covers them.
  void wait_for_copies(const VkAllocation& a, bool writing);
  // The bridge value that bridge_worker_ signals once `event` is ready.
  uint64_t bridge_after(std::shared_future<void> event);
  // The host bridge imported into this device, imported at its first use and kept for the
  // device's life (nullptr where the driver refuses it: copies then stage).
  const vk::HostImport* bridge_import();
  // stage_in's and bridge_in's copies of `from` into `a`, chunk by chunk (chunk i of `chunk`
  // bytes, read from `from` at from_at(i, at)), each behind its `filled` event (bridge_after)
  // and a's last user; returns their points on the copy timeline.
  // A submission that fails after others were submitted throws PartialSubmit (the submitted
  // chunks still read `from` once their events are set); one before any throws what it met.
  struct PartialSubmit {
    std::exception_ptr error;
    uint64_t last;  // the copy timeline's point of the last chunk submitted
  };
  std::vector<uint64_t> queue_copies_in(VkAllocation& a, vk::Transfer::Range from, size_t bytes,
                                        size_t chunk,
                                        std::span<const std::shared_future<void>> filled,
                                        const std::function<size_t(size_t, size_t)>& from_at);

  std::string name_;
  vk::Runtime rt_;
  vk::Queue queue_;
  // Signalled by bridge_worker_ as data from other devices arrives (wait_for).
  vk::Timeline bridge_{rt_.device.get(), VK_NULL_HANDLE, nullptr, rt_.device.host_signals()};
  uint64_t bridge_value_ = 0;
  HostWorker bridge_worker_;  // after bridge_: its destructor runs the last signals first
  // The highest point of the copy engine's timeline that commands recorded on the compute queue
  // from now on wait for (wait_for_copies): the compute queue runs its submissions in order.
  uint64_t copies_waited_ = 0;
  uint64_t copy_waits_ = 0;                   // QueueCounts::copy_waits
  std::atomic<uint64_t> imported_copies_{0};  // QueueCounts::imported_copies
  std::atomic<uint64_t> host_imports_{0};     // QueueCounts::host_imports
  // The host bridge and its import (bridge_import): declared after rt_, so destroyed before the
  // device, and after finish() (the destructor's) has waited for every copy that uses it.
  std::mutex bridge_mu_;
  bool bridge_tried_ = false;
  std::shared_ptr<HostBridge> bridge_memory_;
  std::unique_ptr<vk::HostImport> bridge_import_;
  GlslTarget target_;
  DeviceTraits traits_;
  // At most how many workgroups the members of one dispatch group have together (0: any).
  // Lavapipe runs both sides of a branch, masked, so every workgroup of a merged kernel runs
  // every member's code: two 32-workgroup elementwise kernels took 1.3-1.5x as long merged as
  // apart, two of 8 as long, two of 1 0.6x (vk_device.cpp). A GPU branches on the workgroup id
  // for free.
  int64_t max_group_workgroups_ = 0;
  std::string device_key_;
  KernelCache<CompiledKernel> cache_;
  std::vector<RunStat> pending_;
  static constexpr size_t kRealizesInFlight = 2;
  // The points of the last flushes: the compute queue's and the copy queue's (Transfer).
  std::deque<std::pair<uint64_t, uint64_t>> flushed_;
  // Kernels recorded since the last submit, and those of submissions that may still run.
  std::vector<std::shared_ptr<CompiledKernel>> recorded_kernels_;
  std::deque<std::pair<uint64_t, std::vector<std::shared_ptr<CompiledKernel>>>> in_flight_kernels_;
  std::atomic<int64_t> compiled_{0}, compiled_in_run_{0};
  // Pipelines created since the pipeline cache was last saved (set by compiling threads).
  std::atomic<bool> pipelines_unsaved_ = false;
};

}  // namespace vkg
