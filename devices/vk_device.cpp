// DEVICE=VK: kernels rendered as GLSL, compiled to SPIR-V, and run through the Vulkan runtime.
// The adapter fills codegen's GlslTarget and DeviceTraits from the device's capabilities, keeps
// compiled kernels by AST, and records every kernel of a realize into one queue submission.
// Data movement is in vk_device_copies.cpp.
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
#include <vkgrad/codegen/glsl_renderer.hpp>
#include <vkgrad/codegen/spirv_compiler.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/devices/vk_beam.hpp>
#include <vkgrad/devices/vk_device.hpp>

namespace vkg {

namespace {

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

}  // namespace

VkDevice::VkDevice(std::string name)
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
  // A merged kernel's members run their code in each other's workgroups, masked off (an if on
  // the workgroup id is both branches on a CPU device): dispatch groups of at most 16 workgroups.
  // Jit replays of two elementwise kernels of n floats each (minimum kernel times, 2 Lavapipe
  // threads, load 5): n = 32768 (32 workgroups each) 125-150 us merged against 93-97 apart,
  // 16384: 66-70 against 65-81, 8192: 43-48 against 47-51, 1024: 41 against 68.
  if (caps.type == VK_PHYSICAL_DEVICE_TYPE_CPU) max_group_workgroups_ = 16;
  // Identifies the device in the SPIR-V cache: the same source may be specialized by #defines
  // for a device, so entries of different devices are kept apart.
  device_key_ = caps.name + "/" + std::to_string(caps.driver_version);
}

std::shared_ptr<Allocation> VkDevice::allocate(const Buffer& buffer) {
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

// Compiling is rendering, shaderc and pipeline creation (LLVM on Lavapipe): all of it happens
// here, on as many threads as there are cores, so that recording a schedule never stops for it.
// BEAM times candidates on the device and DEBUG>=3 prints per kernel: both compile in order.
void VkDevice::prepare(std::span<const ScheduleItem> items, const RunOptions& options) {
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

void VkDevice::run(const ScheduleItem& item, std::span<Allocation* const> memory,
                   const RunOptions& options) {
  pending_.push_back(dispatch(item, memory, options));
}

// One command buffer for the whole list, recorded once; a replay submits it again. Inputs
// change by copies into the captured buffers (Device::copy) before it, not by new bindings:
// push descriptors and pushed addresses live inside the command buffer, so rebinding would
// mean recording again (or descriptor sets updated per replay). A copy of a batch of inputs
// costs far less than recording (bench_nn BM_MlpAdamStep_Jit vs _BareSubmit).
std::unique_ptr<Recording> VkDevice::record(std::span<const ScheduleItem> items,
                                            std::vector<std::vector<Allocation*>> memory,
                                            const RunOptions& options) {
  prepare(items, options);
  auto r = std::make_unique<VkRecording>();
  const std::vector<DispatchGroup> groups = plan_groups(items, memory, options);
  queue_.begin_capture();
  try {
    for (const DispatchGroup& g : groups)
      r->stats.push_back(
          g.merged ? launch(g.merged, g.memory, g.bytes, {}, options, r.get(), int(g.items.size()))
                   : dispatch(items[g.items[0]], memory[g.items[0]], options, r.get()));
    r->commands = queue_.end_capture();
  } catch (...) {
    queue_.cancel_capture();
    throw;
  }
  return r;
}

std::vector<RunStat> VkDevice::replay(Recording& recording, const VarVals& var_vals) {
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
  // Copies on the copy engine's queue into its buffers (or out of those it writes) go first.
  for (const auto& [a, written] : r.touched) wait_for_copies(*a, written);
  // Submitted, not waited for: what reads its results waits for them (each buffer it uses has
  // this replay as its last user), so replays of several devices overlap.
  const vk::Queue::Ticket ticket = vk::Queue::point_ticket(queue_.replay(*r.commands));
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

// Submits and returns: the kernels recorded are kept alive until their submission completes
// (a cache trim may drop their entries meanwhile), and the allocator hands their buffers out
// again only after it.
std::vector<RunStat> VkDevice::flush() {
  const uint64_t point = queue_.submit();
  // Taken before the throttle below, which throws when the device is lost: the kernels are
  // submitted with `point` either way, and the stats are this flush's, not the next one's.
  std::vector<RunStat> stats = std::exchange(pending_, {});
  if (!recorded_kernels_.empty())
    in_flight_kernels_.emplace_back(point, std::exchange(recorded_kernels_, {}));
  // A loop that never reads would otherwise run ahead of the device without bound, and every
  // step's memory stays held until its work is done: at most kRealizesInFlight realizes are
  // queued, the oldest waited for past that.
  // Copies between devices queued on the copy queue count too: a loop of copies alone would
  // otherwise queue them without bound (each holding its staging memory).
  flushed_.push_back({point, rt_.transfer.timeline().submitted()});
  while (flushed_.size() > kRealizesInFlight) {
    queue_.wait(flushed_.front().first);
    rt_.transfer.timeline().wait(flushed_.front().second);
    flushed_.pop_front();
  }
  while (!in_flight_kernels_.empty() &&
         rt_.device.timeline().done(in_flight_kernels_.front().first))
    in_flight_kernels_.pop_front();
  save_pipeline_cache();
  return stats;
}

Device::QueueCounts VkDevice::queue_counts() {
  vk::Timeline& t = rt_.device.timeline();
  QueueCounts c{t.submitted(), t.completed(), t.host_waits() + bridge_.host_waits(),
                rt_.transfer.own_timeline(), copy_waits_};
  c.imported_copies = imported_copies_;
  c.host_imports = host_imports_;
  return c;
}

std::vector<RunStat> VkDevice::synchronize() {
  finish();
  save_pipeline_cache();
  std::vector<RunStat> out = std::exchange(pending_, {});
  // All of a realize's kernels are timed or none are (one RunOptions): times match in order.
  // The queue times its copies too (Device::copy), which are no kernels of it.
  std::vector<vk::KernelTime> times = queue_.take_timings();
  std::erase_if(times, [](const vk::KernelTime& t) { return t.label == "copy"; });
  if (times.size() == out.size())
    for (size_t i = 0; i < out.size(); ++i) out[i].ns = times[i].ns;
  return out;
}

// Records one kernel into the queue's command buffer (or into `recording`, the capture under
// way, which keeps its pipeline and learns where its variables lie).
RunStat VkDevice::dispatch(const ScheduleItem& item, std::span<Allocation* const> memory,
                           const RunOptions& options, VkRecording* recording) {
  const std::shared_ptr<CompiledKernel> compiled = cache_.get(item, options, [&] {
    ++compiled_in_run_;
    return compile(item, options);
  });
  // The bytes the kernel may touch, in whole words (16-bit elements may go two to a uint): the
  // tensor's own memory (room for every binding of a symbolic size under a Jit's capture), not
  // the block behind it, which the memory planner may have lent from a larger tensor, past what
  // a descriptor can span. Not the Program's count: a cached kernel serves other bindings of a
  // symbolic size.
  std::vector<VkDeviceSize> bytes(memory.size(), VK_WHOLE_SIZE);
  for (size_t slot = 0; slot < memory.size() && slot < item.buffers.size(); ++slot)
    bytes[slot] =
        std::min<VkDeviceSize>((item.buffers[slot]->capacity_bytes() + 3) / 4 * 4,
                               static_cast<VkAllocation*>(memory[slot])->buffer.capacity());
  return launch(compiled, memory, bytes, var_values(compiled->program, item), options, recording);
}

RunStat VkDevice::launch(const std::shared_ptr<CompiledKernel>& compiled,
                         std::span<Allocation* const> memory, std::span<const VkDeviceSize> bytes,
                         const std::vector<int64_t>& vars, const RunOptions& options,
                         VkRecording* recording, int kernels) {
  if (recording)
    recording->kernels.push_back(compiled);
  else
    recorded_kernels_.push_back(compiled);
  const CompiledKernel& k = *compiled;
  // Copies on the copy engine's queue that write its buffers (or read those it writes) go first:
  // before anything is recorded, since the wait may start a new batch (and argument ring).
  if (!recording)
    for (size_t slot = 0; slot < memory.size(); ++slot)
      wait_for_copies(*static_cast<VkAllocation*>(memory[slot]),
                      slot < k.program.buffers.size() && k.program.buffers[slot].written);
  // Timed per realize, as its DEBUG asks: timing serializes the kernels, so it is off otherwise.
  queue_.set_timing(options.debug >= 2);
  std::vector<uint64_t> addresses;
  std::vector<vk::BufferUse> uses;
  for (size_t slot = 0; slot < memory.size(); ++slot) {
    static_cast<VkAllocation*>(memory[slot])->fresh = false;
    const vk::Buffer& b = static_cast<VkAllocation*>(memory[slot])->buffer;
    addresses.push_back(b.address());
    const bool written = slot < k.program.buffers.size() && k.program.buffers[slot].written;
    uses.push_back({&b, written ? vk::Access::ReadWrite : vk::Access::Read, 0, bytes[slot]});
  }
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
  return RunStat{k.program.name, int(memory.size()), k.program.bytes, k.program.flops, 0, kernels};
}

CompiledKernel VkDevice::compile(const ScheduleItem& item, const RunOptions& options) {
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
  compile_program(k, target, options);
  return k;
}

// Renders, compiles and makes the pipeline of k.program.
void VkDevice::compile_program(CompiledKernel& k, const GlslTarget& target,
                               const RunOptions& options) {
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
}

// The program and its pipeline, created now rather than at the first dispatch so that a module
// the device rejects is found while it can still be compiled again.
std::unique_ptr<vk::Program> VkDevice::make_pipeline(const CompiledKernel& k,
                                                     const std::vector<uint32_t>& spirv) {
  auto p =
      std::make_unique<vk::Program>(rt_.device, k.program.name, spirv, k.layout.push_constant_bytes,
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
void VkDevice::save_pipeline_cache() {
  if (!pipelines_unsaved_.exchange(false)) return;
  try {
    rt_.device.pipeline_cache().save();
  } catch (const Error&) {
  }
}

// Waits for everything queued and every copy this device's queue waits for, and for the bridge
// worker to have returned from its signals (the exit wait runs this before drivers' statics go).
void VkDevice::finish() {
  queue_.finish();
  rt_.transfer.timeline().wait_all();  // copies between devices on the copy engine's queue
  bridge_.wait(bridge_value_);
  bridge_worker_.drain();
  recorded_kernels_.clear();  // submitted by finish() and done
  in_flight_kernels_.clear();
}

namespace {

const bool registered =
    register_device("VK", [](const std::string& name) { return std::make_unique<VkDevice>(name); });

}  // namespace

}  // namespace vkg
