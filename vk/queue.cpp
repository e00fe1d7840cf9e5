#include <vkgrad/vk/queue.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include <vkgrad/core/error.hpp>
#include <vkgrad/vk/allocator.hpp>
#include <vkgrad/vk/barriers.hpp>
#include <vkgrad/vk/check.hpp>
#include <vkgrad/vk/device.hpp>
#include <vkgrad/vk/structure.hpp>

namespace vkg::vk {

namespace {

constexpr VkDeviceSize kArgAlign = 64;             // covers every std430 alignment
constexpr VkDeviceSize kArgChunkBytes = 64 << 10;  // one ring chunk holds ~500 spilled blobs

}  // namespace

// Everything one submission owns, reused as a whole once its timeline point has completed.
struct Queue::Batch {
  UniqueCommandPool pool;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  uint64_t point = 0;
  std::vector<Buffer> arg_chunks;  // the argument ring: chunks filled in order
  size_t arg_chunk = 0;
  VkDeviceSize arg_used = 0;
  std::unique_ptr<Timestamps> timestamps;  // made on the first timed command
  std::shared_ptr<uint64_t> ticket;        // set to `point` by submit(); none in a capture
};

Queue::Queue(Device& device, Allocator& allocator, const QueueOptions& options)
    : device_(device), allocator_(allocator) {
  set_timing(options.timing);
}

Queue::~Queue() {
  try {
    device_.timeline().wait(last_point_);
  } catch (...) {
    // Lost device: nothing runs any more, so destroying the pools is safe.
  }
}

void Queue::set_timing(bool on) { timing_ = on && device_.caps().features.timestamps; }

void Queue::retire_completed() {
  while (!in_flight_.empty() && device_.timeline().done(in_flight_.front()->point)) {
    std::unique_ptr<Batch> b = std::move(in_flight_.front());
    in_flight_.pop_front();
    if (b->timestamps && !b->timestamps->empty()) b->timestamps->collect(timings_);
    b->arg_chunk = 0;
    b->arg_used = 0;
    check(vkResetCommandPool(device_.get(), b->pool.get(), 0), "vkResetCommandPool");
    idle_.push_back(std::move(b));
  }
}

std::unique_ptr<Queue::Batch> Queue::make_batch() {
  auto b = std::make_unique<Batch>();
  VkCommandPoolCreateInfo info =
      structure<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
  info.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
  info.queueFamilyIndex = device_.queue_family();
  VkCommandPool pool;
  check(vkCreateCommandPool(device_.get(), &info, nullptr, &pool), "vkCreateCommandPool");
  b->pool = UniqueCommandPool(device_.get(), pool);
  VkCommandBufferAllocateInfo alloc =
      structure<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
  alloc.commandPool = pool;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  check(vkAllocateCommandBuffers(device_.get(), &alloc, &b->cmd), "vkAllocateCommandBuffers");
  return b;
}

void Queue::begin_recording() {
  if (recording_) return;
  retire_completed();
  if (!idle_.empty()) {
    recording_ = std::move(idle_.back());
    idle_.pop_back();
  } else {
    recording_ = make_batch();
  }
  begin_batch(VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT);
  recording_->ticket = std::make_shared<uint64_t>(0);
}

Queue::Ticket Queue::ticket() const {
  return recording_ && !capturing_ ? recording_->ticket : nullptr;
}

void Queue::begin_batch(VkCommandBufferUsageFlags usage) {
  VkCommandBufferBeginInfo begin =
      structure<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
  begin.flags = usage;
  VkResult r = vkBeginCommandBuffer(recording_->cmd, &begin);
  if (r != VK_SUCCESS) {
    recording_.reset();
    throw_result(r, "vkBeginCommandBuffer");
  }
  record_barrier(recording_->cmd, waits_.empty() ? kSubmissionStart : kSubmissionStartAfterHost);
  hazards_.reset();
  bound_ = VK_NULL_HANDLE;
}

void Queue::before_command(std::span<const BufferUse> uses, std::string_view label) {
  ranges_.clear();
  for (const BufferUse& u : uses) {
    if (!u.buffer || !*u.buffer) throw Error("a command uses an empty Buffer");
    const Buffer& b = *u.buffer;
    // A whole-buffer use covers its capacity: fills round up, and capacities never overlap.
    VkDeviceSize size =
        u.size == VK_WHOLE_SIZE ? b.capacity() - std::min(u.offset, b.capacity()) : u.size;
    if (u.offset > b.capacity() || size > b.capacity() - u.offset)
      throw Error(fmt::format("a command uses bytes [{}, {}) of a buffer of {} bytes", u.offset,
                              u.offset + size, b.size()));
    const uint64_t begin = b.offset() + u.offset;
    ranges_.push_back({b.block_id(), begin, begin + size, u.access});
  }
  begin_recording();
  VkCommandBuffer cmd = recording_->cmd;
  if (timing_) {
    // Timed commands run one at a time so each interval is that command's alone.
    record_barrier(cmd, kMemoryHazard);
    hazards_.reset();
    hazards_.next(ranges_);
    if (!recording_->timestamps) recording_->timestamps = std::make_unique<Timestamps>(device_);
    recording_->timestamps->begin(cmd, label);
    return;
  }
  switch (hazards_.next(ranges_)) {
    case Hazard::None:
      return;
    case Hazard::Execution:
      record_barrier(cmd, kExecutionHazard);
      break;
    case Hazard::Memory:
      record_barrier(cmd, kMemoryHazard);
      break;
  }
  ++stats_.barriers;
}

void Queue::after_command() {
  if (timing_) recording_->timestamps->end(recording_->cmd);
}

void Queue::dispatch(const Program& program, Groups groups, std::span<const std::byte> push,
                     std::span<const BufferUse> uses, std::string_view label) {
  record_dispatch(program, groups, push, uses, label,
                  [&](VkCommandBuffer cmd) { vkCmdDispatch(cmd, groups.x, groups.y, groups.z); });
}

std::byte* Queue::dispatch_indirect(const Program& program, Groups groups,
                                    std::span<const std::byte> push,
                                    std::span<const BufferUse> uses, std::string_view label) {
  const uint32_t counts[3] = {groups.x, groups.y, groups.z};
  // Before record_dispatch: the ring may start the batch, which must not begin mid-command.
  const ArgSlot slot = reserve_args(sizeof counts);
  std::byte* host = slot.chunk->mapped() + slot.at;
  std::memcpy(host, counts, sizeof counts);
  // Host writes before vkQueueSubmit are visible to the indirect read: no barrier.
  record_dispatch(program, groups, push, uses, label, [&](VkCommandBuffer cmd) {
    vkCmdDispatchIndirect(cmd, slot.chunk->handle(), slot.chunk->offset() + slot.at);
  });
  return host;
}

template <class Issue>
void Queue::record_dispatch(const Program& program, Groups groups, std::span<const std::byte> push,
                            std::span<const BufferUse> uses, std::string_view label,
                            Issue&& issue) {
  if (push.size() != program.push_constant_bytes())
    throw Error(fmt::format("program '{}' takes {} bytes of push constants, got {}", program.name(),
                            program.push_constant_bytes(), push.size()));
  const Limits& l = device_.caps().limits;
  if (groups.x > l.max_workgroup_count[0] || groups.y > l.max_workgroup_count[1] ||
      groups.z > l.max_workgroup_count[2])
    throw Error(
        fmt::format("program '{}': {} x {} x {} workgroups exceed the device's {} x {} x {}",
                    program.name(), groups.x, groups.y, groups.z, l.max_workgroup_count[0],
                    l.max_workgroup_count[1], l.max_workgroup_count[2]));
  if (uses.size() < program.bound_buffers())
    throw Error(fmt::format("program '{}' binds {} buffers, got {}", program.name(),
                            program.bound_buffers(), uses.size()));
  VkPipeline pipeline = program.pipeline();  // created here on first use
  prepare_bindings(program, uses);           // throws before anything is recorded
  before_command(uses, label.empty() ? std::string_view(program.name()) : label);
  VkCommandBuffer cmd = recording_->cmd;
  if (pipeline != bound_) {
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
    bound_ = pipeline;
  }
  if (!bound_writes_.empty())
    device_.push_descriptor_set()(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, program.layout(), 0,
                                  uint32_t(bound_writes_.size()), bound_writes_.data());
  if (!push.empty())
    vkCmdPushConstants(cmd, program.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                       static_cast<uint32_t>(push.size()), push.data());
  issue(cmd);
  after_command();
  ++stats_.dispatches;
}

void Queue::prepare_bindings(const Program& program, std::span<const BufferUse> uses) {
  const std::vector<Binding>& bindings = program.bindings();
  const uint32_t n = uint32_t(bindings.size());
  const Limits& l = device_.caps().limits;
  const VkDeviceSize max_range = l.max_storage_buffer_range;
  bound_infos_.resize(n);
  bound_views_.resize(n);
  bound_writes_.resize(n);
  for (uint32_t k = 0; k < n; ++k) {
    const uint32_t i = bindings[k].use;
    const Buffer& b = *uses[i].buffer;
    // What the kernel can touch, from the descriptor's start at b.offset(): the use's range where
    // it gives one, else the buffer's size. Not the capacity: a Buffer may be a larger block lent
    // to a small tensor (core/memory_planner.cpp), which must not fail for the block's size.
    const VkDeviceSize bytes =
        uses[i].size == VK_WHOLE_SIZE ? b.size() : uses[i].offset + uses[i].size;
    if (bindings[k].kind != BindingKind::Storage) {
      // The view spans the buffer's capacity (256-byte multiples: whole texels), up to the texel
      // limit: one view per format serves every buffer that range is ever lent to.
      static constexpr VkFormat kFormats[] = {VK_FORMAT_R32_UINT, VK_FORMAT_R32G32_UINT,
                                              VK_FORMAT_R32G32B32A32_UINT};
      const int width_log2 = int(bindings[k].kind) - int(BindingKind::Texel32);
      const VkDeviceSize texel = 4ull << width_log2;
      const VkDeviceSize needed = (bytes + texel - 1) / texel;
      const VkDeviceSize range =
          std::min<VkDeviceSize>(std::max<VkDeviceSize>(b.capacity() / texel, 1),
                                 l.max_texel_buffer_elements) *
          texel;
      if (needed > l.max_texel_buffer_elements ||
          b.offset() % l.min_texel_buffer_offset_alignment != 0)
        throw Error(
            fmt::format("program '{}': buffer {} of {} bytes at offset {} cannot be a texel buffer "
                        "(maxTexelBufferElements {}, minTexelBufferOffsetAlignment {})",
                        program.name(), i, bytes, b.offset(), l.max_texel_buffer_elements,
                        l.min_texel_buffer_offset_alignment));
      bound_views_[k] = allocator_.texel_view(b, kFormats[width_log2], range);
      VkWriteDescriptorSet& w = bound_writes_[k];
      w = structure<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
      w.dstBinding = bindings[k].binding;
      w.descriptorCount = 1;
      w.descriptorType = VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
      w.pTexelBufferView = &bound_views_[k];
      continue;
    }
    // An empty buffer still binds a few bytes of its (256-byte) capacity: ranges must be > 0.
    // Whole words: a kernel may read 16-bit elements two to a uint (codegen/glsl_half.cpp).
    const VkDeviceSize range = std::max<VkDeviceSize>((bytes + 3) / 4 * 4, 4);
    if (range > max_range)
      throw Error(
          fmt::format("program '{}': buffer {} of {} bytes exceeds maxStorageBufferRange "
                      "({} bytes); bind it by device address",
                      program.name(), i, bytes, max_range));
    bound_infos_[k] = {b.handle(), b.offset(), range};
    VkWriteDescriptorSet& w = bound_writes_[k];
    w = structure<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
    w.dstBinding = bindings[k].binding;
    w.descriptorCount = 1;
    w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    w.pBufferInfo = &bound_infos_[k];
  }
}

void Queue::copy(const Buffer& src, const Buffer& dst, VkDeviceSize bytes, VkDeviceSize src_offset,
                 VkDeviceSize dst_offset) {
  if (bytes == 0) return;
  if (!src || !dst) throw Error("copy with an empty Buffer");
  if (src_offset > src.size() || bytes > src.size() - src_offset || dst_offset > dst.size() ||
      bytes > dst.size() - dst_offset)
    throw Error(
        fmt::format("copy of {} bytes from offset {} of a {}-byte buffer to offset {} of a "
                    "{}-byte buffer is out of bounds",
                    bytes, src_offset, src.size(), dst_offset, dst.size()));
  if (src.handle() == dst.handle() &&
      src.offset() + src_offset < dst.offset() + dst_offset + bytes &&
      dst.offset() + dst_offset < src.offset() + src_offset + bytes)
    throw Error("copy between overlapping ranges of one buffer");
  const BufferUse uses[] = {{&src, Access::Read, src_offset, bytes},
                            {&dst, Access::Write, dst_offset, bytes}};
  before_command(uses, "copy");
  VkBufferCopy region{src.offset() + src_offset, dst.offset() + dst_offset, bytes};
  vkCmdCopyBuffer(recording_->cmd, src.handle(), dst.handle(), 1, &region);
  after_command();
  ++stats_.transfers;
}

void Queue::fill(const Buffer& dst, uint32_t value) {
  if (!dst) throw Error("fill of an empty Buffer");
  if (dst.size() == 0) return;
  const BufferUse use{&dst, Access::Write};
  before_command({&use, 1}, "fill");
  // The capacity is a multiple of 256, so rounding the size up to whole words stays inside it.
  vkCmdFillBuffer(recording_->cmd, dst.handle(), dst.offset(), (dst.size() + 3) / 4 * 4, value);
  after_command();
  ++stats_.transfers;
}

uint64_t Queue::spill(std::span<const std::byte> blob, std::byte** mapped) {
  const ArgSlot slot = reserve_args(blob.size());
  std::byte* host = slot.chunk->mapped() + slot.at;
  // Host writes before vkQueueSubmit are visible to the submission's kernels: no barrier.
  if (!blob.empty()) std::memcpy(host, blob.data(), blob.size());
  if (mapped) *mapped = host;
  return slot.chunk->address() + slot.at;
}

Queue::ArgSlot Queue::reserve_args(VkDeviceSize bytes) {
  begin_recording();
  Batch& b = *recording_;
  for (;;) {
    if (b.arg_chunk < b.arg_chunks.size()) {
      const Buffer& chunk = b.arg_chunks[b.arg_chunk];
      const VkDeviceSize at = (b.arg_used + kArgAlign - 1) / kArgAlign * kArgAlign;
      if (at + bytes <= chunk.size()) {
        b.arg_used = at + std::max<VkDeviceSize>(bytes, 1);
        return {&chunk, at};
      }
      ++b.arg_chunk;
      b.arg_used = 0;
      continue;
    }
    b.arg_chunks.push_back(
        allocator_.allocate(std::max<VkDeviceSize>(kArgChunkBytes, bytes), Usage::Arguments));
    b.arg_chunk = b.arg_chunks.size() - 1;
    b.arg_used = 0;
  }
}

Queue::Recorded::Recorded(Device& device, std::unique_ptr<Batch> batch)
    : device_(device), batch_(std::move(batch)) {}

uint64_t Queue::Recorded::last_replay() const { return batch_->point; }

Queue::Recorded::~Recorded() {
  try {
    device_.timeline().wait(batch_->point);  // the pool and ring must outlive its last run
  } catch (...) {
    // Lost device: nothing runs any more.
  }
}

void Queue::begin_capture() {
  if (capturing_) throw Error("Queue: a capture is already under way");
  submit();
  recording_ = make_batch();
  // Not one-time-submit: replays submit it again. Replays never overlap (each waits for the one
  // before, see replay()), so no simultaneous-use either.
  begin_batch(0);
  capturing_ = true;
}

std::unique_ptr<Queue::Recorded> Queue::end_capture() {
  if (!capturing_) throw Error("Queue: end_capture without begin_capture");
  capturing_ = false;
  std::unique_ptr<Batch> b = std::move(recording_);
  record_barrier(b->cmd, kSubmissionEnd);
  check(vkEndCommandBuffer(b->cmd), "vkEndCommandBuffer");
  return std::unique_ptr<Recorded>(new Recorded(device_, std::move(b)));
}

void Queue::cancel_capture() {
  if (!capturing_) return;
  capturing_ = false;
  recording_.reset();  // never submitted: its pool can go at once
}

uint64_t Queue::replay(Recorded& recorded) {
  if (capturing_) throw Error("Queue: replay during a capture");
  submit();  // copies into the captured inputs, recorded just before
  Batch& b = *recorded.batch_;
  device_.timeline().wait(b.point);  // a command buffer may not be pending twice
  b.point = device_.timeline().submit(b.cmd);
  last_point_ = b.point;
  ++stats_.submits;
  return b.point;
}

std::vector<KernelTime> Queue::replay_timings(Recorded& recorded) {
  std::vector<KernelTime> out;
  Batch& b = *recorded.batch_;
  if (b.timestamps && !b.timestamps->empty()) {
    device_.timeline().wait(b.point);
    b.timestamps->collect(out, /*keep_labels=*/true);
  }
  return out;
}

void Queue::wait_before_next(VkSemaphore semaphore, uint64_t value) {
  if (capturing_) throw Error("Queue: a wait inside a capture (internal)");
  VkSemaphoreSubmitInfo w =
      structure<VkSemaphoreSubmitInfo>(VK_STRUCTURE_TYPE_SEMAPHORE_SUBMIT_INFO);
  w.semaphore = semaphore;
  w.value = value;
  w.stageMask = VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT;
  // Commands recorded before this call do not wait: they go now. The wait rides on the next
  // batch, which begins empty so that it exists even if nothing else is recorded before a replay.
  submit();
  waits_.push_back(w);
  begin_recording();
}

uint64_t Queue::submit() {
  if (capturing_) throw Error("Queue: submit during a capture (internal)");
  if (!recording_) return last_point_;
  std::unique_ptr<Batch> b = std::move(recording_);
  record_barrier(b->cmd, kSubmissionEnd);
  check(vkEndCommandBuffer(b->cmd), "vkEndCommandBuffer");
  b->point = device_.timeline().submit(b->cmd, waits_);
  waits_.clear();  // only once submitted: a failed batch's waits ride on the next one (callers
                   // count a wait as made once queued: VkDevice::wait_for_copies)
  if (b->ticket) *std::exchange(b->ticket, nullptr) = b->point;
  last_point_ = b->point;
  in_flight_.push_back(std::move(b));
  ++stats_.submits;
  return last_point_;
}

void Queue::wait(uint64_t point) {
  device_.timeline().wait(point);
  retire_completed();
}

std::vector<KernelTime> Queue::take_timings() {
  retire_completed();
  return std::exchange(timings_, {});
}

}  // namespace vkg::vk
