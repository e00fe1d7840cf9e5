// DEVICE=VK: kernels rendered as GLSL, compiled to SPIR-V, and run through the Vulkan runtime.
// The adapter fills codegen's GlslTarget and DeviceTraits from the device's capabilities, keeps
// compiled kernels by AST, and records every kernel of a realize into one queue submission.
#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <deque>
#include <set>
#include <thread>
#include <utility>

#include <vkgrad/codegen/beam_cache.hpp>
#include <vkgrad/codegen/get_program.hpp>
#include <vkgrad/codegen/glsl_launch.hpp>
#include <vkgrad/codegen/glsl_renderer.hpp>
#include <vkgrad/codegen/spirv_compiler.hpp>
#include <vkgrad/core/context.hpp>
#include <vkgrad/core/device.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/host_worker.hpp>
#include <vkgrad/devices/kernel_cache.hpp>
#include <vkgrad/devices/vk_beam.hpp>
#include <vkgrad/devices/vk_target.hpp>
#include <vkgrad/vk/program.hpp>
#include <vkgrad/vk/queue.hpp>
#include <vkgrad/vk/runtime.hpp>

namespace vkg {

namespace {

struct VkAllocation final : Allocation {
  vk::Buffer buffer;
  // No command or host copy has touched it yet: the allocator hands out memory only once the
  // work submitted before it was freed has completed, so its first upload need not wait.
  bool fresh = true;
  // The compute-queue submissions that last wrote it and last used it (read or write), as the
  // timeline points they signal: a read from the host waits for its writer, an overwrite from
  // the host for its last user, never for the whole queue. An upload on the copy engine's queue
  // is kept as that queue's point (`uploaded`): a download, on that queue too, follows it in
  // queue order, and the compute queue learns of it by a semaphore wait.
  vk::Queue::Ticket last_write, last_use;
  uint64_t uploaded = 0;
  // A copy between devices that reads or writes it on the host (Device::host_uses).
  std::shared_future<void> host_use;
};

// "VK:n" is the n-th Vulkan device (vk::physical_device_for_index): the physical device is
// found on an instance of its own without validation, which only lists devices.
vk::RuntimeOptions options_for(const std::string& name) {
  vk::RuntimeOptions o;
  const auto colon = name.find(':');
  if (colon == std::string::npos) return o;
  const std::string index = name.substr(colon + 1);
  size_t n = 0;
  const auto [end, ec] = std::from_chars(index.data(), index.data() + index.size(), n);
  if (ec != std::errc() || end != index.data() + index.size())
    throw Error("no device named '" + name + "': a Vulkan device is VK or VK:<index>, as VK:1");
  if (n == 0) return o;
  const vk::Instance lister(vk::InstanceOptions{});
  const std::vector<vk::PhysicalDevice> devices = vk::list_physical_devices(lister);
  o.device.select = std::to_string(vk::physical_device_for_index(devices, o.device.select, n));
  return o;
}

// A kernel compiled for this device and how to launch it.
struct CompiledKernel {
  Program program;
  ArgLayout layout;
  std::array<uint32_t, 3> dims;
  std::unique_ptr<vk::Program> pipeline;
};

class VkDevice final : public Device {
 public:
  explicit VkDevice(std::string name)
      : name_(std::move(name)),
        rt_(options_for(name_)),
        queue_(rt_.device, rt_.allocator),
        target_(glsl_target_of(rt_.device.caps())),
        cache_(4096, target_.max_storage_buffer_range,
               target_.texel_loads ? target_.max_texel_buffer_elements : 0) {
    const auto& caps = rt_.device.caps();
    traits_.max_workgroup_invocations = caps.limits.max_workgroup_invocations;
    // CPU devices (Lavapipe) pay per load and lane, not per register: a taller matmul tile
    // (8 rows x vec4) halves the loads per multiply-add (bench_tensor BM_Tensor_Matmul_1024).
    // VKG_HEURISTICS=gpu gives a CPU device a GPU's traits: Lavapipe then makes the kernels a
    // discrete GPU gets (GROUP reductions, no shuffle tiles), to reproduce a GPU's failure in CI.
    // Any other value is an error (vk/env.hpp): a mistyped "GPU" would silently keep the CPU's
    // kernels and a CI rerun would check nothing.
    const std::string heuristics = vk::env_string("VKG_HEURISTICS");
    if (!heuristics.empty() && heuristics != "gpu")
      throw Error("VKG_HEURISTICS=" + heuristics +
                  " is not a setting: it takes 'gpu' (a GPU's kernel heuristics on any device) "
                  "or is unset or empty (the device's own)");
    if (caps.type == VK_PHYSICAL_DEVICE_TYPE_CPU && heuristics != "gpu") {
      traits_.tile_rows = 8;
      // ... and with subgroupShuffle, tiles whose broadcast operand is loaded once per lane and
      // shuffled: a load with a per-lane address is a loop over the lanes there, a shuffle one
      // permute (2.5x the register tile on a 1024 matmul: bench_tensor Matmul).
      if (target_.subgroup_shuffle && target_.subgroup_size >= 4 && target_.subgroup_size <= 16 &&
          int64_t(target_.subgroup_size) <= traits_.max_workgroup_invocations)
        traits_.shuffle_lanes = target_.subgroup_size;
      // Shared memory and barrier() are per-lane loops and coroutine switches: no GROUP (a 16 Mi
      // sum's first kernel: 0.6x with GROUP 16, 0.2x with GROUP 64; bench_tensor sum_variant).
      traits_.group_size = 0;
      traits_.stage_side = 0;
      traits_.reduce_outputs = 16;
      traits_.share_costly_ops = true;
    }
    // Identifies the device in the SPIR-V cache: the same source may be specialized by #defines
    // for a device, so entries of different devices are kept apart.
    device_key_ = caps.name + "/" + std::to_string(caps.driver_version);
  }
  ~VkDevice() override { finish(); }

  const std::string& name() const override { return name_; }

  std::shared_ptr<Allocation> allocate(const Buffer& buffer) override {
    auto a = std::make_shared<VkAllocation>();
    try {
      a->buffer = rt_.allocator.allocate(std::max<VkDeviceSize>(buffer.capacity_bytes(), 4));
    } catch (const OutOfMemory& e) {
      // The allocator speaks of bytes and Vulkan limits (maxMemoryAllocationSize, the heap); the
      // user made a tensor of some dtype and element count: say which. The bytes asked for are
      // the capacity's, room for max_count() elements where a captured step reserves it.
      std::string elements = std::to_string(buffer.capacity()) + " elements";
      if (buffer.capacity() != buffer.count())
        elements += " (room for every binding of its " + std::to_string(buffer.count()) + ")";
      throw OutOfMemory(name_ + ": no memory for a " + buffer.dtype().name() + " tensor of " +
                        elements + ": " + e.what());
    }
    return a;
  }
  void copy_in(Allocation& dst, std::span<const std::byte> src) override {
    // Nothing is written, so nothing is waited for: the buffer keeps its last writer and user
    // (clearing them would let a read skip the kernel that still writes it).
    if (src.empty()) return;
    auto& a = static_cast<VkAllocation&>(dst);
    const bool fresh = std::exchange(a.fresh, false);
    if (!fresh) wait_host_use(a);
    // Memory in use: the upload waits for its last user (a kernel may still read the old bytes).
    const vk::Transfer::Pending copied = rt_.transfer.upload(
        a.buffer, src, 0, /*wait_for_queue=*/!fresh, fresh ? 0 : point_of(a.last_use));
    // Done on return unless it went to the copy engine's queue: earlier users are done.
    a.last_write = a.last_use = nullptr;
    a.uploaded = copied.value;
    if (copied.semaphore) {
      // It ran on the copy engine's queue: kernels from now on start after it, and the point
      // submitted here (which buffers freed later wait for) too.
      queue_.wait_before_next(copied.semaphore, copied.value);
      queue_.submit();
    }
  }
  void copy_out(Allocation& src, std::span<std::byte> dst) override {
    auto& a = static_cast<VkAllocation&>(src);
    a.fresh = false;
    wait_host_use(a);  // a copy from another device may still be writing it
    // Only the submission that last wrote it is waited for, not later ones (nor the whole queue).
    rt_.transfer.download(a.buffer, dst, 0, point_of(a.last_write));
  }

  // Compiling is rendering, shaderc and pipeline creation (LLVM on Lavapipe): all of it happens
  // here, on as many threads as there are cores, so that recording a schedule never stops for it.
  // BEAM times candidates on the device and DEBUG>=3 prints per kernel: both compile in order.
  void prepare(std::span<const ScheduleItem> items, const RunOptions& options) override {
    cache_.trim();  // kernels of submissions still running are held by in_flight_kernels_
    std::vector<const ScheduleItem*> todo;
    std::set<std::pair<const UOp*, std::vector<int64_t>>> seen;
    for (const ScheduleItem& item : items) {
      if (item.buffers[0]->count() == 0 || cache_.contains(item, options)) continue;
      std::vector<int64_t> counts;
      for (const auto& b : item.buffers) counts.push_back(b->count());
      if (seen.emplace(item.ast.get(), std::move(counts)).second) todo.push_back(&item);
    }
    const bool in_order = (options.beam > 0 && !options.noopt) || options.debug >= 3;
    if (in_order && options.beam > 0 && !todo.empty()) finish();  // BEAM times an idle device
    const size_t threads =
        in_order ? 1
                 : std::min<size_t>(todo.size(), std::max(1u, std::thread::hardware_concurrency()));
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t i; (i = next++) < todo.size();) {
        try {
          cache_.get(*todo[i], options, [&] { return compile(*todo[i], options); });
        } catch (...) {
          // run() compiles it again and reports the error in schedule order.
        }
      }
    };
    std::vector<std::jthread> pool;
    for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
  }

  // VKG_NO_INT64_ATOMICS: as on a device without shaderBufferInt64Atomics, so the fallback runs
  // in CI (Lavapipe has the feature).
  bool atomics_64bit() const override {
    return target_.int64_atomics && setting("VKG_NO_INT64_ATOMICS") == 0;
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
           const RunOptions& options) override {
    pending_.push_back(dispatch(item, memory, options));
  }

  // One command buffer for the whole list, recorded once; a replay submits it again. Inputs
  // change by copies into the captured buffers (Device::copy) before it, not by new bindings:
  // push descriptors and pushed addresses live inside the command buffer, so rebinding would
  // mean recording again (or descriptor sets updated per replay). A copy of a batch of inputs
  // costs far less than recording (bench_nn BM_MlpAdamStep_Jit vs _BareSubmit).
  std::unique_ptr<Recording> record(std::span<const ScheduleItem> items,
                                    std::vector<std::vector<Allocation*>> memory,
                                    const RunOptions& options) override {
    prepare(items, options);
    auto r = std::make_unique<VkRecording>();
    queue_.begin_capture();
    try {
      for (size_t i = 0; i < items.size(); ++i)
        r->stats.push_back(dispatch(items[i], memory[i], options, r.get()));
      r->commands = queue_.end_capture();
    } catch (...) {
      queue_.cancel_capture();
      throw;
    }
    return r;
  }

  using Device::replay;
  std::vector<RunStat> replay(Recording& recording, const VarVals& var_vals) override {
    auto& r = static_cast<VkRecording&>(recording);
    // Checked first, so that a bad value changes nothing.
    for (const VarSlot& v : r.vars)
      if (auto it = var_vals.find(v.name);
          it != var_vals.end() && (it->second < v.min || it->second > v.max))
        throw Error("Jit replay: variable '" + v.name + "' = " + std::to_string(it->second) +
                    " is outside [" + std::to_string(v.min) + ", " + std::to_string(v.max) + "]");
    // The previous replay reads its argument buffers and workgroup counts until it ends: only
    // then may they be rewritten (a replay does not wait for its own end).
    if (!r.vars.empty() || !r.grids.empty()) queue_.wait(r.commands->last_replay());
    for (const VarSlot& v : r.vars) {
      auto it = var_vals.find(v.name);
      const int32_t word = int32_t(it != var_vals.end() ? it->second : v.recorded);
      std::memcpy(v.host, &word, sizeof word);
    }
    for (const GridSlot& g : r.grids) {
      std::vector<int64_t> values = g.recorded;
      for (size_t i = 0; i < values.size(); ++i)
        if (auto it = var_vals.find(g.program->vars[i].name); it != var_vals.end())
          values[i] = it->second;
      const std::array<uint32_t, 3> dims = launch_dims(*g.program, target_, values);
      std::memcpy(g.host, dims.data(), sizeof dims);
    }
    // Submitted, not waited for: what reads its results waits for them (each buffer it uses has
    // this replay as its last user), so replays of several devices overlap.
    const vk::Queue::Ticket ticket = vk::Queue::point_ticket(queue_.replay(*r.commands));
    staged_in_.clear();  // submitted before the replay
    for (const auto& [a, written] : r.touched) {
      a->last_use = ticket;
      if (written) a->last_write = ticket;
    }
    std::vector<RunStat> out = r.stats;
    if (queue_.timing()) {
      const std::vector<vk::KernelTime> times = queue_.replay_timings(*r.commands);
      for (size_t i = 0; i < out.size() && i < times.size(); ++i) out[i].ns = times[i].ns;
    }
    return out;
  }

  void copy(Allocation& src, Allocation& dst, size_t bytes) override {
    auto& s = static_cast<VkAllocation&>(src);
    auto& d = static_cast<VkAllocation&>(dst);
    s.fresh = d.fresh = false;
    queue_.copy(s.buffer, d.buffer, bytes);
    // (No ticket where nothing was recorded, 0 bytes: the buffers keep their last users.)
    if (const vk::Queue::Ticket ticket = queue_.ticket())
      s.last_use = d.last_use = d.last_write = ticket;
  }

  // Copies from and to other devices (core/copy_item.hpp). Host-visible memory is mapped for its
  // whole life, so a copy between two such devices is a memcpy on a host thread; the queue learns
  // that it is done from the bridge, a timeline semaphore that thread signals, which the next
  // submission waits on. Device-local memory (a discrete GPU's) is not mapped: those copies go
  // through staging buffers (stage_out, stage_in).
  std::byte* host_pointer(Allocation& memory) override {
    static_cast<VkAllocation&>(memory).fresh = false;  // the host may write it from now on
    return static_cast<VkAllocation&>(memory).buffer.mapped();
  }
  bool maps_memory() const override { return rt_.allocator.host_mapped(vk::Usage::Device); }
  std::function<void()> when_queued_done() override {
    const uint64_t point = queue_.submit();
    vk::Timeline* timeline = &rt_.device.timeline();
    return [timeline, point] { timeline->wait(point); };
  }
  std::function<void()> when_done_with(Allocation& memory, bool writing) override {
    auto& a = static_cast<VkAllocation&>(memory);
    const uint64_t point = point_of(writing ? a.last_use : a.last_write);  // submits if recorded
    vk::Timeline* timeline = &rt_.device.timeline();
    vk::Timeline* copies = rt_.device.transfer_timeline();
    return [timeline, point, copies, uploaded = copies ? a.uploaded : 0, host = a.host_use] {
      if (host.valid()) host.wait();
      if (uploaded) copies->wait(uploaded);
      timeline->wait(point);
    };
  }
  void host_uses(Allocation& memory, std::shared_future<void> event) override {
    static_cast<VkAllocation&>(memory).host_use = std::move(event);
  }
  // Device-local memory: the queue copies it to and from staging buffers, recorded in schedule
  // order with the kernels (the hazard tracker orders them with the kernels that write or read
  // it), and the copy thread waits for the point of the copy out, the queue for the bridge value
  // of the copy in. Neither blocks the realizing thread.
  Staged stage_out(Allocation& memory, size_t bytes) override {
    auto& a = static_cast<VkAllocation&>(memory);
    a.fresh = false;
    auto staging = std::make_shared<vk::Buffer>(rt_.allocator.allocate(bytes, vk::Usage::Staging));
    queue_.copy(a.buffer, *staging, bytes);
    const vk::Queue::Ticket ticket = queue_.ticket();
    a.last_use = ticket;                      // what overwrites it follows the copy on the queue
    const uint64_t point = point_of(ticket);  // submitted: the copy thread waits for it
    vk::Timeline* timeline = &rt_.device.timeline();
    std::byte* host = staging->mapped();
    return {host, [timeline, point] { timeline->wait(point); }, std::move(staging)};
  }
  Staged stage_in(const std::shared_ptr<Allocation>& memory, size_t bytes,
                  std::shared_future<void> filled) override {
    auto& a = static_cast<VkAllocation&>(*memory);
    a.fresh = false;
    auto staging = std::make_shared<vk::Buffer>(rt_.allocator.allocate(bytes, vk::Usage::Staging));
    wait_for(std::move(filled));  // submits what was recorded: only the copy below waits
    queue_.copy(*staging, a.buffer, bytes);
    a.last_use = a.last_write = queue_.ticket();
    // Both kept until the copy is submitted (a Buffer must outlive the recording that uses it):
    // the copy thread lets go of them after its memcpy, which may come first. The allocator then
    // hands them out again only once that submission has completed.
    staged_in_.push_back(staging);
    staged_in_.push_back(memory);
    std::byte* host = staging->mapped();
    return {host, {}, std::move(staging)};
  }
  void wait_for(std::shared_future<void> event) override {
    const uint64_t value = ++bridge_value_;
    bridge_worker_.post([this, event = std::move(event), value] {
      event.wait();
      bridge_.signal(value);  // in order: this worker signals its values one after another
    });
    queue_.wait_before_next(bridge_.semaphore(), value);
  }

  // Submits and returns: the kernels recorded are kept alive until their submission completes
  // (a cache trim may drop their entries meanwhile), and the allocator hands their buffers out
  // again only after it.
  std::vector<RunStat> flush() override {
    const uint64_t point = queue_.submit();
    // Taken before the throttle below, which throws when the device is lost: the kernels are
    // submitted with `point` either way, and the stats are this flush's, not the next one's.
    std::vector<RunStat> stats = std::exchange(pending_, {});
    if (!recorded_kernels_.empty())
      in_flight_kernels_.emplace_back(point, std::exchange(recorded_kernels_, {}));
    // A loop that never reads would otherwise run ahead of the device without bound, and every
    // step's memory stays held until its work is done: at most kRealizesInFlight realizes are
    // queued, the oldest waited for past that.
    flushed_.push_back(point);
    staged_in_.clear();  // their copies are submitted
    while (flushed_.size() > kRealizesInFlight) {
      queue_.wait(flushed_.front());
      flushed_.pop_front();
    }
    while (!in_flight_kernels_.empty() &&
           rt_.device.timeline().done(in_flight_kernels_.front().first))
      in_flight_kernels_.pop_front();
    save_pipeline_cache();
    return stats;
  }

  QueueCounts queue_counts() override {
    vk::Timeline& t = rt_.device.timeline();
    return {t.submitted(), t.completed(), t.host_waits() + bridge_.host_waits()};
  }

  std::vector<RunStat> synchronize() override {
    finish();
    save_pipeline_cache();
    std::vector<RunStat> out = std::exchange(pending_, {});
    // All of a realize's kernels are timed or none are (one RunOptions): times match in order.
    // The queue times its copies too (stage_out, stage_in, copy), which are no kernels of it.
    std::vector<vk::KernelTime> times = queue_.take_timings();
    std::erase_if(times, [](const vk::KernelTime& t) { return t.label == "copy"; });
    if (times.size() == out.size())
      for (size_t i = 0; i < out.size(); ++i) out[i].ns = times[i].ns;
    return out;
  }

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

  // Records one kernel into the queue's command buffer (or into `recording`, the capture under
  // way, which keeps its pipeline and learns where its variables lie).
  RunStat dispatch(const ScheduleItem& item, std::span<Allocation* const> memory,
                   const RunOptions& options, VkRecording* recording = nullptr) {
    const std::shared_ptr<CompiledKernel> compiled = cache_.get(item, options, [&] {
      ++compiled_in_run_;
      return compile(item, options);
    });
    if (recording)
      recording->kernels.push_back(compiled);
    else
      recorded_kernels_.push_back(compiled);
    const CompiledKernel& k = *compiled;
    // Timed per realize, as its DEBUG asks: timing serializes the kernels, so it is off otherwise.
    queue_.set_timing(options.debug >= 2);
    std::vector<uint64_t> addresses;
    std::vector<vk::BufferUse> uses;
    for (size_t slot = 0; slot < memory.size(); ++slot) {
      static_cast<VkAllocation*>(memory[slot])->fresh = false;
      const vk::Buffer& b = static_cast<VkAllocation*>(memory[slot])->buffer;
      addresses.push_back(b.address());
      const bool written = slot < k.program.buffers.size() && k.program.buffers[slot].written;
      // The bytes the kernel may touch, in whole words (16-bit elements may go two to a uint):
      // the tensor's own memory (room for every binding of a symbolic size under a Jit's
      // capture), not the block behind it, which the memory planner may have lent from a larger
      // tensor, past what a descriptor can span. Not the Program's count: a cached kernel serves
      // other bindings of a symbolic size.
      VkDeviceSize bytes = VK_WHOLE_SIZE;
      if (slot < item.buffers.size())
        bytes = std::min<VkDeviceSize>((item.buffers[slot]->capacity_bytes() + 3) / 4 * 4,
                                       b.capacity());
      uses.push_back({&b, written ? vk::Access::ReadWrite : vk::Access::Read, 0, bytes});
    }
    const std::vector<int64_t> vars = var_values(k.program, item);
    std::vector<std::byte> args = pack_args(k.program, k.layout, addresses, vars);
    if (k.layout.spilled) {
      std::byte* host = nullptr;
      args = pack_spill_address(queue_.spill(args, &host));
      if (recording)
        for (size_t v = 0; v < vars.size(); ++v) {
          const VarArg& var = k.program.vars[v];
          recording->vars.push_back({var.name, vars[v], var.min, var.max,
                                     host + arg_offset_of_var(k.program, k.layout, v)});
        }
    }
    // Launch only the workgroups this binding needs (launch_dims); a recording reads the count
    // from its argument ring, where a replay with other values writes theirs.
    const std::array<uint32_t, 3> dims =
        vars.empty() ? k.dims : launch_dims(k.program, target_, vars);
    const vk::Groups groups{dims[0], dims[1], dims[2]};
    if (recording && grid_follows_vars(k.program))
      recording->grids.push_back(
          {&k.program, vars,
           queue_.dispatch_indirect(*k.pipeline, groups, args, uses, k.program.name)});
    else
      queue_.dispatch(*k.pipeline, groups, args, uses, k.program.name);
    // Who uses each buffer: this submission, or (a capture) each replay of it.
    const vk::Queue::Ticket ticket = recording ? nullptr : queue_.ticket();
    for (size_t slot = 0; slot < memory.size(); ++slot) {
      auto* a = static_cast<VkAllocation*>(memory[slot]);
      const bool written = uses[slot].access != vk::Access::Read;
      if (recording) {
        recording->touched.push_back({a, written});
        continue;
      }
      a->last_use = ticket;
      if (written) a->last_write = ticket;
    }
    return RunStat{k.program.name, int(memory.size()), k.program.bytes, k.program.flops, 0};
  }

  CompiledKernel compile(const ScheduleItem& item, const RunOptions& options) {
    // VKG_NO_FLOAT16 renders float16 as on a device without shaderFloat16 (glsl_half.cpp).
    GlslTarget target = target_;
    if (options.no_float16) target.float16 = false;
    if (options.no_storage16) target.storage_16bit = false;
    CompiledKernel k;
    // BEAM times candidates without values for variables: symbolic kernels take the heuristics.
    if (options.beam > 0 && !options.noopt && item.var_vals.empty()) {
      const std::vector<Opt> opts = beam_opts(item, traits_, options, device_key_, [&] {
        std::vector<uint64_t> bytes;
        for (const auto& b : item.buffers) bytes.push_back(b->nbytes());
        return std::make_unique<VkBeamDevice>(rt_, target, device_key_, bytes);
      });
      k.program = get_program(item, traits_, options, &opts);
    } else {
      k.program = get_program(item, traits_, options);
    }
    const std::string glsl = render_glsl(k.program, target);
    if (options.debug >= 4) std::printf("%s\n", glsl.c_str());
    k.layout = arg_layout(k.program, target);
    k.dims = launch_dims(k.program, target_);
    SpirvCompileOptions opts;
    opts.device_key = device_key_;
    opts.name = k.program.name;
    const std::vector<uint32_t> spirv = compile_glsl(glsl, opts);
    try {
      k.pipeline = make_pipeline(k, spirv);
    } catch (const Error&) {
      // A module from the disk cache that the device rejects, though its entry's name and
      // checksum hold (a broken build wrote it), would fail every run: compile it again, which
      // replaces the entry. The same bytes again are not the cache's fault: report the error.
      opts.read_cache = false;
      const std::vector<uint32_t> fresh = compile_glsl(glsl, opts);
      if (fresh == spirv) throw;
      k.pipeline = make_pipeline(k, fresh);
    }
    ++compiled_;
    return k;
  }

  // The program and its pipeline, created now rather than at the first dispatch so that a module
  // the device rejects is found while it can still be compiled again.
  std::unique_ptr<vk::Program> make_pipeline(const CompiledKernel& k,
                                             const std::vector<uint32_t>& spirv) {
    auto p = std::make_unique<vk::Program>(rt_.device, k.program.name, spirv,
                                           k.layout.push_constant_bytes,
                                           bindings_of(k.layout, k.program.buffers.size()));
    p->pipeline();
    keep_exit_wait_after_driver_statics();  // the compile may have built LLVM's statics
    pipelines_unsaved_ = true;
    return p;
  }

  // The VkPipelineCache goes to disk after each realize that created pipelines. Its destructor's
  // save never runs (the device registry is immortal, so devices are never destroyed), and a hook
  // at exit would still miss every program that is killed or crashes. A training run creates
  // nearly all its pipelines in its first step, so the next run starts warm after one write;
  // later writes come only with new pipelines, which cost a driver compile each anyway. A cache
  // we cannot write only costs the next run its compiles, so failures are ignored.
  void save_pipeline_cache() {
    if (!pipelines_unsaved_.exchange(false)) return;
    try {
      rt_.device.pipeline_cache().save();
    } catch (const Error&) {
    }
  }

  // The point a ticket stands for, submitting what is recorded if the ticket is its batch's.
  // Still 0 after submit(): the batch's own submit failed (vkEndCommandBuffer or
  // vkQueueSubmit2 threw, and said so then) and the batch is gone. Nothing will write the point,
  // so waiting for 0 would read bytes nothing wrote, without an error: say so instead.
  uint64_t point_of(const vk::Queue::Ticket& ticket) {
    if (!ticket) return 0;
    if (*ticket == 0) queue_.submit();
    if (*ticket == 0)
      throw Error(name_ +
                  ": the submission that last used this buffer failed to submit, so its "
                  "contents are unknown (the error was thrown where it was submitted)");
    return *ticket;
  }
  // Waits for a copy between devices that reads or writes `a` on the host (host_uses). The copy
  // thread runs copies in order, so one waited for here never waits for a later one.
  static void wait_host_use(VkAllocation& a) {
    if (!a.host_use.valid()) return;
    a.host_use.wait();
    a.host_use = {};
  }

  // Waits for everything queued and every copy this device's queue waits for, and for the bridge
  // worker to have returned from its signals (the exit wait runs this before drivers' statics go).
  void finish() {
    queue_.finish();
    bridge_.wait(bridge_value_);
    bridge_worker_.drain();
    staged_in_.clear();
    recorded_kernels_.clear();  // submitted by finish() and done
    in_flight_kernels_.clear();
  }

  std::string name_;
  vk::Runtime rt_;
  vk::Queue queue_;
  // Signalled by bridge_worker_ as data from other devices arrives (wait_for).
  vk::Timeline bridge_{rt_.device.get(), VK_NULL_HANDLE, nullptr, rt_.device.host_signals()};
  uint64_t bridge_value_ = 0;
  HostWorker bridge_worker_;  // after bridge_: its destructor runs the last signals first
  GlslTarget target_;
  DeviceTraits traits_;
  std::string device_key_;
  KernelCache<CompiledKernel> cache_;
  std::vector<RunStat> pending_;
  static constexpr size_t kRealizesInFlight = 2;
  std::deque<uint64_t> flushed_;  // the points of the last flushes
  // Kernels recorded since the last submit, and those of submissions that may still run.
  std::vector<std::shared_ptr<CompiledKernel>> recorded_kernels_;
  std::deque<std::pair<uint64_t, std::vector<std::shared_ptr<CompiledKernel>>>> in_flight_kernels_;
  std::atomic<int64_t> compiled_{0}, compiled_in_run_{0};
  // Staging buffers whose copy into device memory (stage_in) may not be submitted yet.
  std::vector<std::shared_ptr<void>> staged_in_;  // and their destinations
  // Pipelines created since the pipeline cache was last saved (set by compiling threads).
  std::atomic<bool> pipelines_unsaved_ = false;
};

const bool registered =
    register_device("VK", [](const std::string& name) { return std::make_unique<VkDevice>(name); });

}  // namespace

}  // namespace vkg
