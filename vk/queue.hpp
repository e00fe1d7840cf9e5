// A Queue records dispatches and copies into one command buffer, places barriers only where a
// command depends on an earlier one, and submits the lot as one point on the device timeline that
// the host can wait for. Command buffers, argument rings and timestamp pools are reused once their
// point completes, so recording a dispatch creates no Vulkan object. One thread records at a time.
//
// Binding has two paths, chosen per kernel by the code generator (codegen/glsl_launch.hpp's
// ArgLayout is the one place that decides):
//   - push descriptors (VK_KHR_push_descriptor, Lavapipe and the desktop drivers have it): the
//     kernel's buffers are storage buffers at set 0, bindings 0..n-1, written into the command
//     buffer by vkCmdPushDescriptorSetKHR. Nothing is allocated per dispatch: no descriptor pool
//     or set. Used when every buffer fits maxStorageBufferRange and the count fits
//     maxPushDescriptors and maxPerStageDescriptorStorageBuffers. Why it exists: drivers see
//     the binding and its bounds, so they can vectorize; Lavapipe scalarizes every load through a
//     raw device address per lane, and the same vec4 add runs ~6x faster bound as descriptors
//     (bench_vk BM_AddF32_16Mi vs BM_AddF32_16Mi_DescriptorsForComparison). A Program may bind
//     a buffer it only reads as uniform texel buffer views instead (vk::Binding): Lavapipe gathers
//     texel fetches where it loops over the lanes for storage-buffer loads (bench_vk
//     BM_TexelLoads_*); the views come from Allocator::texel_view.
//   - device addresses (GL_EXT_buffer_reference) in push constants, for everything else: no
//     limit on how many buffers a kernel takes, and no maxStorageBufferRange window (128 MiB on
//     Lavapipe and some mobile GPUs), so a kernel addresses a tensor of any size the allocator
//     can make. When the arguments exceed maxPushConstantsSize (128 bytes is common: 16
//     addresses), the generator writes them with spill(), which copies them to a host-visible
//     ring owned by the submission, and pushes only the ring address.
#pragma once
#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include <vkgrad/vk/buffer.hpp>
#include <vkgrad/vk/hazards.hpp>
#include <vkgrad/vk/program.hpp>
#include <vkgrad/vk/timestamps.hpp>

namespace vkg::vk {

class Allocator;
class Device;

// One buffer a command touches, and how. offset and size select a byte range of the buffer for
// finer tracking; by default the whole buffer. A dispatch's descriptor for the buffer spans
// [0, offset + size) of it, else its size(): what the kernel may touch, so that a tensor lent a
// larger block binds only its own bytes (the block may exceed maxStorageBufferRange).
struct BufferUse {
  const Buffer* buffer;
  Access access;
  VkDeviceSize offset = 0;
  VkDeviceSize size = VK_WHOLE_SIZE;
};

struct QueueOptions {
  // Timestamps around each command (where the queue supports them). Off, they cost nothing.
  bool timing = false;
};

struct QueueStats {
  uint64_t dispatches = 0;
  uint64_t transfers = 0;  // copies and fills
  uint64_t barriers = 0;   // placed for a hazard between two commands of one submission
  uint64_t submits = 0;
};

class Queue {
 private:
  struct Batch;

 public:
  Queue(Device& device, Allocator& allocator, const QueueOptions& options = {});
  // Waits for what it submitted; commands recorded but not submitted are dropped.
  ~Queue();
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  // Records program over `groups` workgroups. `push` holds exactly program.push_constant_bytes()
  // bytes (see ArgPack); `uses` declares every buffer the kernel reads or writes, which is what
  // barrier placement goes by. A program with bound_buffers() == n binds uses[0..n-1], whole
  // buffers, at bindings 0..n-1. `label` names the dispatch in timings (default: the program name).
  void dispatch(const Program& program, Groups groups, std::span<const std::byte> push,
                std::span<const BufferUse> uses, std::string_view label = {});
  void dispatch(const Program& program, Groups groups, std::span<const std::byte> push,
                std::initializer_list<BufferUse> uses, std::string_view label = {}) {
    dispatch(program, groups, push, std::span(uses.begin(), uses.size()), label);
  }
  // The same with the workgroup counts read from this submission's argument ring when the
  // command runs (vkCmdDispatchIndirect). Returns where the three uint32 counts (initially
  // `groups`) lie in host memory: in a capture, a replay may rewrite them first, each at most
  // the device's limit, to launch another grid without recording again.
  std::byte* dispatch_indirect(const Program& program, Groups groups,
                               std::span<const std::byte> push, std::span<const BufferUse> uses,
                               std::string_view label = {});
  // Copies bytes between buffers (ranges must not overlap when src and dst are one buffer).
  void copy(const Buffer& src, const Buffer& dst, VkDeviceSize bytes, VkDeviceSize src_offset = 0,
            VkDeviceSize dst_offset = 0);
  // Sets every 32-bit word of dst (its size rounded up to 4 bytes) to value.
  void fill(const Buffer& dst, uint32_t value);

  // Copies an argument blob into this submission's argument ring and returns its device address
  // (64-byte aligned), valid for the commands of the submission being recorded.
  // `mapped`, when given, receives where the copy lies in host memory: in a capture it lives as
  // long as the Recorded, and rewriting it between replays changes what the next replay reads
  // (replays never overlap, so the last one has finished with it).
  uint64_t spill(std::span<const std::byte> blob, std::byte** mapped = nullptr);

  // Capture, for a JIT: commands recorded between begin_capture() and end_capture() go into a
  // command buffer of their own that replay() submits again, as often as asked, with the same
  // buffers, arguments and barriers. Nothing is recorded on a replay. A Recorded owns its
  // command buffer, argument ring and timestamps; destroying it waits for its last replay.
  class Recorded;
  // Submits what was recorded before, then starts the capture.
  void begin_capture();
  std::unique_ptr<Recorded> end_capture();
  // Drops a capture that failed halfway (a dispatch threw).
  void cancel_capture();
  // Submits commands recorded since the last submit, then `recorded` again; returns its point.
  uint64_t replay(Recorded& recorded);
  // The timings of the last replay of `recorded`, once it has completed (empty without timing).
  std::vector<KernelTime> replay_timings(Recorded& recorded);

  // The submission being recorded, as the timeline point it will signal: 0 until submit() hands
  // the point out, then that point. What a caller keeps per buffer, so that a read waits for the
  // buffer's last writer rather than for the whole queue. Null where nothing is being recorded
  // or during a capture (whose replays have points of their own: point_ticket).
  using Ticket = std::shared_ptr<const uint64_t>;
  Ticket ticket() const;
  // A ticket already holding `point` (a replay's).
  static Ticket point_ticket(uint64_t point) { return std::make_shared<const uint64_t>(point); }

  // Submits what was recorded; returns its timeline point (the last point if nothing was).
  uint64_t submit();
  // Commands recorded after this call start only once `semaphore` (a timeline semaphore of this
  // device) reaches `value`: the next submission waits for it, and later ones follow it in
  // submission order through the barrier that ends every submission. What another device or a
  // host thread produces for this queue (core/copy_item.hpp) arrives this way.
  void wait_before_next(VkSemaphore semaphore, uint64_t value);
  // Blocks until `point` has completed. Throws vkg::DeviceLost if the device was lost.
  void wait(uint64_t point);
  void finish() { wait(submit()); }
  uint64_t last_submitted() const { return last_point_; }

  // Turns timestamps on or off from the next command. Stays off where the device has none.
  void set_timing(bool on);
  bool timing() const { return timing_; }
  // The timings of completed submissions not yet taken, in recording order.
  std::vector<KernelTime> take_timings();

  const QueueStats& stats() const { return stats_; }

 private:
  void begin_recording();
  // Begins recording_'s command buffer with `usage` and resets the state a new batch starts from.
  void begin_batch(VkCommandBufferUsageFlags usage);
  std::unique_ptr<Batch> make_batch();
  void retire_completed();
  void before_command(std::span<const BufferUse> uses, std::string_view label);
  void after_command();
  // Checks a dispatch's arguments, binds its pipeline, buffers and push constants, and calls
  // `issue` with the command buffer to record the dispatch itself.
  template <class Issue>
  void record_dispatch(const Program& program, Groups groups, std::span<const std::byte> push,
                       std::span<const BufferUse> uses, std::string_view label, Issue&& issue);
  // A place for `bytes` bytes in the argument ring of the batch being recorded.
  struct ArgSlot {
    const Buffer* chunk;
    VkDeviceSize at;
  };
  ArgSlot reserve_args(VkDeviceSize bytes);
  // Fills the push-descriptor writes of a program that binds buffers.
  void prepare_bindings(const Program& program, std::span<const BufferUse> uses);

  Device& device_;
  Allocator& allocator_;
  bool timing_ = false;
  std::unique_ptr<Batch> recording_;
  bool capturing_ = false;  // recording_ is a capture: submit() must not take it
  std::deque<std::unique_ptr<Batch>> in_flight_;
  std::vector<std::unique_ptr<Batch>> idle_;
  HazardTracker hazards_;
  std::vector<Range> ranges_;                        // scratch, reused by every command
  std::vector<VkDescriptorBufferInfo> bound_infos_;  // scratch for push descriptors
  std::vector<VkBufferView> bound_views_;            // the texel buffers among them
  std::vector<VkWriteDescriptorSet> bound_writes_;
  VkPipeline bound_ = VK_NULL_HANDLE;
  uint64_t last_point_ = 0;
  std::vector<VkSemaphoreSubmitInfo> waits_;  // for the next submission
  std::vector<KernelTime> timings_;
  QueueStats stats_;
};

class Queue::Recorded {
 public:
  ~Recorded();
  // The point of its last replay (0 before any): what must complete before a replay's
  // arguments in host memory are rewritten.
  uint64_t last_replay() const;
  Recorded(const Recorded&) = delete;
  Recorded& operator=(const Recorded&) = delete;

 private:
  friend class Queue;
  Recorded(Device& device, std::unique_ptr<Batch> batch);
  Device& device_;
  std::unique_ptr<Batch> batch_;
};

}  // namespace vkg::vk
