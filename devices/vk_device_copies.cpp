// DEVICE=VK, data movement: uploads and downloads between the host and the device's buffers
// (vk::Transfer), copies within the device (the compute queue), and this device's halves of
// copies between devices (core/copy_item.hpp): a memcpy where the host maps both memories, else
// staging buffers that the copy engine's queue copies out of and into (vk/queue_families.hpp),
// or, where the device has VK_EXT_external_memory_host, the host bridge (core/host_bridge.hpp):
// host memory imported once as a buffer (vk/host_import.hpp) that the copy engine's queue
// writes (bridge_out) or reads (bridge_in) chunk by chunk, no staging buffer on this side.
//
// Where the device has a copy engine, every staged copy (uploads, downloads, stage_out,
// stage_in) runs on its queue while kernels run on the compute queue. The two queues are ordered
// per buffer by their timeline semaphores, never by waiting on the host: a copy waits for the
// compute queue's point of its buffer's last writer (or last user, for a copy into it), and a
// kernel waits for the copy engine's point of the copies that write its buffers (or read a buffer
// it overwrites): VkAllocation::copy_write and copy_read, wait_for_copies. Kernels that use other
// buffers do not wait, so copies overlap them.
//
// Buffers are shared by both queue families (VK_SHARING_MODE_CONCURRENT, vk/allocator.cpp)
// rather than handed over with queue-family ownership transfers. A transfer is a release barrier
// on one queue and an acquire barrier on the other, both naming the buffer and its range: the
// compute queue would need a submission of its own for each acquire (or a split of its batch),
// and a copy between devices does not know, when it is queued, which kernel reads the data next.
// Our buffers are suballocated ranges of large blocks (one VkBuffer per block), so ownership
// would be per block while a transfer moves one tensor's range: a copy into one tensor would
// have to take the block from kernels using its neighbours. CONCURRENT costs at most some
// compression of device-local buffers, which drivers do not apply to buffers (only images);
// NVIDIA, AMD and Intel document no cost for buffers.
#include <algorithm>
#include <utility>
#include <vector>

#include <vkgrad/core/error.hpp>
#include <vkgrad/devices/vk_device.hpp>
#include <vkgrad/vk/host_import.hpp>
#include <vkgrad/vk/structure.hpp>

namespace vkg {

namespace {

VkSemaphoreSubmitInfo semaphore_wait(VkSemaphore semaphore, uint64_t value) {
  VkSemaphoreSubmitInfo w =
      vk::structure<VkSemaphoreSubmitInfo>(VK_STRUCTURE_TYPE_SEMAPHORE_SUBMIT_INFO);
  w.semaphore = semaphore;
  w.value = value;
  w.stageMask = VK_PIPELINE_STAGE_2_ALL_COMMANDS_BIT;
  return w;
}

}  // namespace

void VkDevice::copy_in(Allocation& dst, std::span<const std::byte> src) {
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
  // On the copy engine's queue: kernels that use the buffer wait for it (wait_for_copies), others
  // run meanwhile; the allocator hands the memory out again only after it too.
  if (copied.semaphore) a.copy_write = copied.value;
}

void VkDevice::copy_out(Allocation& src, std::span<std::byte> dst) {
  auto& a = static_cast<VkAllocation&>(src);
  a.fresh = false;
  wait_host_use(a);  // a copy from another device may still be writing it
  // Only the submission that last wrote it is waited for, not later ones (nor the whole queue).
  // Copies on the copy engine's queue that write it come before the download in queue order.
  rt_.transfer.download(a.buffer, dst, 0, point_of(a.last_write));
}

void VkDevice::copy(Allocation& src, Allocation& dst, size_t bytes) {
  auto& s = static_cast<VkAllocation&>(src);
  auto& d = static_cast<VkAllocation&>(dst);
  s.fresh = d.fresh = false;
  wait_for_copies(s, false);
  wait_for_copies(d, true);
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
std::byte* VkDevice::host_pointer(Allocation& memory) {
  static_cast<VkAllocation&>(memory).fresh = false;  // the host may write it from now on
  return static_cast<VkAllocation&>(memory).buffer.mapped();
}

std::function<void()> VkDevice::when_queued_done() {
  const uint64_t point = queue_.submit();
  vk::Timeline* timeline = &rt_.device.timeline();
  return [timeline, point] { timeline->wait(point); };
}

std::function<void()> VkDevice::when_done_with(Allocation& memory, bool writing) {
  auto& a = static_cast<VkAllocation&>(memory);
  const uint64_t point = point_of(writing ? a.last_use : a.last_write);  // submits if recorded
  const uint64_t copied = writing ? std::max(a.copy_write, a.copy_read) : a.copy_write;
  vk::Timeline* timeline = &rt_.device.timeline();
  vk::Timeline* copies = &rt_.transfer.timeline();
  return [timeline, point, copies, copied, host = a.host_use] {
    if (host.valid()) host.wait();
    copies->wait(copied);
    timeline->wait(point);
  };
}

// Device-local memory: staging buffers that the copy engine's queue (the compute queue's where
// there is none) copies into after the kernels that write the buffer, or out of once the host
// has filled them (the bridge values of `filled`), one submission per chunk: the host copies one
// chunk while the queue copies the next. The copy thread waits for the point of a chunk's copy
// out; the kernels that use the buffer wait for the last copy in (wait_for_copies). Neither
// blocks the realizing thread.
Device::Staged VkDevice::stage_out(Allocation& memory, size_t bytes, size_t chunk) {
  auto& a = static_cast<VkAllocation&>(memory);
  a.fresh = false;
  chunk = std::max<size_t>(chunk, 1);
  auto staging = std::make_shared<vk::Buffer>(rt_.allocator.allocate(bytes, vk::Usage::Staging));
  // Submits the batch that writes it if it is the one being recorded. On the compute queue's own
  // timeline the copies then follow it in queue order; kernels recorded since that read the
  // buffer may run after the copies (reads), and those that write it are submitted after them.
  const uint64_t written = point_of(a.last_write);
  std::vector<VkSemaphoreSubmitInfo> waits;
  if (rt_.transfer.own_timeline() && written > 0)
    waits.push_back(semaphore_wait(rt_.device.timeline().semaphore(), written));
  // Every chunk waits for the writer, not only the first: a semaphore wait makes the kernels'
  // writes visible to its own submission only (an already signalled wait costs nothing).
  std::vector<vk::Transfer::Copy> chunks;
  for (size_t at = 0; at < bytes; at += chunk)
    chunks.push_back({a.buffer, at, *staging, at, std::min(chunk, bytes - at)});
  // Each submitted chunk is tracked (what overwrites the buffer waits for the copies), also when
  // a submission throws midway.
  std::vector<uint64_t> points;
  points.reserve(chunks.size());
  try {
    rt_.transfer.queue_copies(
        chunks, [&](size_t) { return waits; }, /*host_wrote=*/false, points);
  } catch (...) {
    if (!points.empty()) a.copy_read = points.back();
    throw;
  }
  if (!points.empty()) a.copy_read = points.back();
  vk::Timeline* copies = &rt_.transfer.timeline();
  std::byte* host = staging->mapped();
  return {host,
          [copies, points = std::move(points), chunk](size_t n) {
            if (n > 0 && !points.empty())
              copies->wait(points[std::min(points.size(), (n + chunk - 1) / chunk) - 1]);
          },
          std::move(staging)};
}

Device::Staged VkDevice::stage_in(const std::shared_ptr<Allocation>& memory, size_t bytes,
                                  size_t chunk, std::span<const std::shared_future<void>> filled) {
  auto& a = static_cast<VkAllocation&>(*memory);
  auto staging = std::make_shared<vk::Buffer>(rt_.allocator.allocate(bytes, vk::Usage::Staging));
  // Submitted here, so the copy thread may let go of the staging memory and the destination
  // after its memcpy, before the copies have run: the allocator hands them out again only once
  // the copy queue's work submitted before their release has completed.
  try {
    queue_copies_in(a, *staging, bytes, chunk, filled, [](size_t, size_t at) { return at; });
  } catch (const PartialSubmit& e) {
    std::rethrow_exception(e.error);
  }
  std::byte* host = staging->mapped();
  return {host, {}, std::move(staging)};
}

const vk::HostImport* VkDevice::bridge_import() {
  std::lock_guard lock(bridge_mu_);
  if (!bridge_tried_) {
    bridge_tried_ = true;
    if (!imports_host_memory()) return nullptr;
    // Kept even where the import fails: copies then stage, and the bridge is not made again.
    bridge_memory_ = HostBridge::shared();
    // Imported whole and only here: the bridge's block is page-aligned memory of its own, so
    // the import covers nothing else of the heap (HostImport::make widens unaligned ranges).
    if (rt_.device.caps().limits.min_imported_host_pointer_alignment > HostBridge::kAlign)
      return nullptr;
    bridge_import_ = vk::HostImport::make(rt_.device, bridge_memory_->bytes(), HostBridge::size());
    if (bridge_import_) ++host_imports_;
  }
  return bridge_import_.get();
}

std::function<void(size_t)> VkDevice::bridge_out(Allocation& memory, HostBridge::Lease& lease) {
  const vk::HostImport* bridge = bridge_import();
  if (!bridge) return {};
  auto& a = static_cast<VkAllocation&>(memory);
  a.fresh = false;
  // As stage_out's: every chunk waits for the buffer's writer on the compute queue, and for its
  // slot to be free (the host relays that from whichever device read the slot last).
  const uint64_t written = point_of(a.last_write);
  std::vector<vk::Transfer::Copy> chunks;
  for (const HostBridge::Step& s : lease.steps)
    chunks.push_back({a.buffer, s.at, *bridge, s.slot * HostBridge::kSlotBytes, s.bytes});
  auto waits = [&](size_t i) {
    std::vector<VkSemaphoreSubmitInfo> w{
        semaphore_wait(bridge_.semaphore(), bridge_after(lease.steps[i].free))};
    if (rt_.transfer.own_timeline() && written > 0)
      w.push_back(semaphore_wait(rt_.device.timeline().semaphore(), written));
    return w;
  };
  std::vector<uint64_t> points;
  points.reserve(chunks.size());
  try {
    rt_.transfer.queue_copies(chunks, waits, /*host_wrote=*/true, points);
  } catch (...) {
    if (!points.empty()) a.copy_read = points.back();
    throw;
  }
  a.copy_read = points.back();
  ++imported_copies_;
  vk::Timeline* copies = &rt_.transfer.timeline();
  return [copies, points = std::move(points)](size_t i) { copies->wait(points.at(i)); };
}

std::function<void(size_t)> VkDevice::bridge_in(const std::shared_ptr<Allocation>& memory,
                                                HostBridge::Lease& lease,
                                                std::span<const std::shared_future<void>> filled) {
  const vk::HostImport* bridge = bridge_import();
  if (!bridge) return {};
  auto& a = static_cast<VkAllocation&>(*memory);
  std::vector<uint64_t> points;
  try {
    points = queue_copies_in(
        a, *bridge, lease.steps.back().at + lease.steps.back().bytes, HostBridge::kSlotBytes,
        filled, [&](size_t i, size_t) { return lease.steps[i].slot * HostBridge::kSlotBytes; });
  } catch (const PartialSubmit& e) {
    std::rethrow_exception(e.error);  // the chunks submitted run once their `filled` are set
  }
  ++imported_copies_;
  vk::Timeline* copies = &rt_.transfer.timeline();
  return [copies, points = std::move(points)](size_t i) { copies->wait(points.at(i)); };
}

bool VkDevice::copies_on_own_queue() const {
  return rt_.transfer.own_timeline() && rt_.device.transfer_family() != rt_.device.queue_family();
}

std::function<void()> VkDevice::when_copies_done() {
  vk::Timeline* copies = &rt_.transfer.timeline();
  const uint64_t last = copies->submitted();
  return [copies, last] { copies->wait(last); };
}

std::vector<uint64_t> VkDevice::queue_copies_in(
    VkAllocation& a, vk::Transfer::Range from, size_t bytes, size_t chunk,
    std::span<const std::shared_future<void>> filled,
    const std::function<size_t(size_t, size_t)>& from_at) {
  const bool fresh = std::exchange(a.fresh, false);
  chunk = std::max<size_t>(chunk, 1);
  // Kernels still reading its old bytes go first (submitted now if being recorded); earlier
  // copies on the copy queue that use it precede these in queue order.
  const uint64_t used = fresh ? 0 : point_of(a.last_use);
  // Every chunk's command buffer is recorded before the first bridge value is posted
  // (queue_copies): where one cannot be, nothing waits on `filled`, which the caller's fallback
  // does not set.
  std::vector<vk::Transfer::Copy> chunks;
  std::vector<size_t> chunk_of;  // chunks[j] is filled[chunk_of[j]] (empty chunks are skipped)
  for (size_t i = 0, at = 0; i < filled.size(); ++i, at += chunk) {
    const size_t n = std::min(chunk, bytes - std::min(at, bytes));
    if (n == 0) continue;
    chunks.push_back({from, from_at(i, at), a.buffer, at, n});
    chunk_of.push_back(i);
  }
  auto waits = [&](size_t j) {
    std::vector<VkSemaphoreSubmitInfo> w{
        semaphore_wait(bridge_.semaphore(), bridge_after(filled[chunk_of[j]]))};
    if (rt_.transfer.own_timeline() && used > 0)  // each chunk: as for stage_out's
      w.push_back(semaphore_wait(rt_.device.timeline().semaphore(), used));
    return w;
  };
  std::vector<uint64_t> points;
  points.reserve(chunks.size());
  try {
    rt_.transfer.queue_copies(chunks, waits, /*host_wrote=*/true, points);
  } catch (...) {
    if (points.empty()) throw;
    a.copy_write = points.back();  // kernels reading it wait for those
    throw PartialSubmit{std::current_exception(), points.back()};
  }
  if (!points.empty()) a.copy_write = points.back();
  return points;
}

uint64_t VkDevice::bridge_after(std::shared_future<void> event) {
  const uint64_t value = ++bridge_value_;
  bridge_worker_.post([this, event = std::move(event), value] {
    event.wait();
    bridge_.signal(value);  // in order: this worker signals its values one after another
  });
  return value;
}

void VkDevice::wait_for(std::shared_future<void> event) {
  queue_.wait_before_next(bridge_.semaphore(), bridge_after(std::move(event)));
}

void VkDevice::wait_for_copies(const VkAllocation& a, bool writing) {
  if (!rt_.transfer.own_timeline()) return;
  const uint64_t point = writing ? std::max(a.copy_write, a.copy_read) : a.copy_write;
  // A point seen complete on the host needs no wait: the host wait orders it before the
  // submission, as for a synchronous upload.
  if (point <= copies_waited_ || rt_.transfer.timeline().done(point)) return;
  queue_.wait_before_next(rt_.transfer.timeline().semaphore(), point);
  // Set once the wait is queued, before the batch carrying it is submitted: a submission that
  // fails keeps its waits for the next batch (vk::Queue::submit clears them only once
  // vkQueueSubmit2 returned), so the point stays waited for.
  copies_waited_ = point;
  ++copy_waits_;
}

// The point a ticket stands for, submitting what is recorded if the ticket is its batch's.
// Still 0 after submit(): the batch's own submit failed (vkEndCommandBuffer or
// vkQueueSubmit2 threw, and said so then) and the batch is gone. Nothing will write the point,
// so waiting for 0 would read bytes nothing wrote, without an error: say so instead.
uint64_t VkDevice::point_of(const vk::Queue::Ticket& ticket) {
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
void VkDevice::wait_host_use(VkAllocation& a) {
  if (!a.host_use.valid()) return;
  a.host_use.wait();
  a.host_use = {};
}

}  // namespace vkg
