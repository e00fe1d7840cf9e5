#include <vkgrad/core/copy_item.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/host_bridge.hpp>
#include <vkgrad/core/host_worker.hpp>

namespace vkg {

ScheduleItem copy_item(std::shared_ptr<const Buffer> dst, std::shared_ptr<const Buffer> src) {
  if (dst->dtype() != src->dtype() || dst->count() != src->count())
    throw Error("copy: " + src->repr() + " into " + dst->repr() + " (internal: they must match)");
  ScheduleItem item;
  item.ast = UOp::make(Ops::COPY, dst->dtype(), {}, int64_t(dst->nbytes()));
  item.buffers = {std::move(dst), std::move(src)};
  return item;
}

namespace {

// Runs the host side of copies off the realizing thread, each as soon as it is posted: a copy
// waits for its own buffers' writers and earlier host uses (including earlier copies of them), so
// copies of different buffers do not queue behind one another.
HostPool& copy_worker() {
  static HostPool pool;
  // The exit wait must run before the pool's destructor joins its threads (core/realize.cpp). The
  // main thread's own wait runs before every static destructor, but where only other threads
  // open devices the wait is an atexit handler registered at the first device's opening, before
  // this pool was built: registered again now, it runs first (it waits once, at its latest
  // registration).
  static const bool waits_first = (keep_exit_wait_after_driver_statics(), true);
  (void)waits_first;
  return pool;
}

std::string copy_name(const Buffer& to, const Device& to_dev, const Device& from_dev) {
  return "copy " + std::to_string(to.nbytes()) + ", " + to_dev.name() + " <- " + from_dev.name();
}

double ns_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
}

// How many bytes of a staged copy move at a time: the copy thread copies one chunk while the
// devices' queues copy the next out of the source and the previous into the destination, so the
// three stages overlap instead of running one after the other. About eight chunks, at least
// 1 MiB: each is a queue submission on each staged side (and a bridge signal on the destination's),
// some tens of microseconds. 4 KiB multiples keep the host's memcpy page-aligned.
size_t staging_chunk(size_t bytes) {
  constexpr size_t kMin = size_t(1) << 20, kPage = 4096;
  return std::max(kMin, (bytes / 8 + kPage - 1) / kPage * kPage);
}

// Test-only: VKG_TEST_FAIL_AFTER_IMPORT=1 throws once bridge_out or bridge_in has queued a
// copy's chunks, before the copy thread's task is posted (a throw nothing real makes there
// today but an allocation's). The bridge's slots must go to later copies only once the queued
// chunks are done, and the library must stay usable (tests/tensor_copy_in_place_test.cpp).
void test_fail_after_import() {
  const char* v = std::getenv("VKG_TEST_FAIL_AFTER_IMPORT");
  if (v && std::string(v) == "1")
    throw Error("copy: failed after importing (VKG_TEST_FAIL_AFTER_IMPORT, a test's failure)");
}

// Leases of the bridge and the submissions of their chunks, in one order for every device: a
// chunk waits (through the host) for the slot's previous lease, whose chunks must then be on
// their queues before it, never behind it on the same queue.
std::mutex& bridge_order() {
  static std::mutex mu;
  return mu;
}

// Lets go of a lease's slots whose copy stopped midway (a failed submission, a lost device):
// filled[i] (the destination queue's chunks wait for them) are set first, then every step, the
// last in each slot only once both devices' queued copies are done (`drains`): they may still
// write or read the slots, which later copies take next.
// `pool` runs the waits; nullptr: this thread does (a copy task of the pool itself, which must
// not wait for pool work posted after it: later copies posted there may wait for these slots).
void abandon(const std::shared_ptr<HostBridge::Lease>& lease,
             const std::shared_ptr<std::vector<std::promise<void>>>& filled, size_t filled_set,
             std::vector<std::function<void()>> drains, HostPool* pool) {
  if (filled)
    for (size_t i = filled_set; i < filled->size(); ++i) (*filled)[i].set_value();
  if (!lease || lease->released == lease->steps.size()) return;
  auto let_go = [lease, drains = std::move(drains)] {
    const size_t n = lease->steps.size();
    const size_t tail = n > HostBridge::kSlots ? n - HostBridge::kSlots : 0;
    // A step that another of this lease's reuses: its own chunks run after it on every queue.
    for (size_t i = lease->released; i < tail; ++i) {
      lease->steps[i].free.wait();
      lease->release(i + 1);
    }
    for (size_t i = std::max(lease->released, tail); i < n; ++i) lease->steps[i].free.wait();
    for (const auto& drain : drains) try {
        drain();
      } catch (...) {  // a lost device runs nothing more
      }
    lease->release(n);
  };
  if (pool)
    pool->post(std::move(let_go));
  else
    let_go();
}

}  // namespace

std::shared_future<RunStat> run_copy(const ScheduleItem& item,
                                     std::shared_ptr<Allocation> dst_memory,
                                     std::shared_ptr<Allocation> src_memory,
                                     const std::function<void(Device&)>& settle) {
  Allocation& dst = *dst_memory;
  Allocation& src = *src_memory;
  const Buffer& to = *item.buffers[0];
  const Buffer& from = *item.buffers[1];
  Device& to_dev = device(to.device());
  Device& from_dev = device(from.device());
  const size_t bytes = to.nbytes();
  RunStat stat{copy_name(to, to_dev, from_dev), 2, int64_t(bytes), 0, 0};
  std::promise<RunStat> now;
  const auto t0 = std::chrono::steady_clock::now();
  if (&to_dev == &from_dev) {
    to_dev.copy(src, dst, bytes);
    stat.ns = ns_since(t0);
    now.set_value(stat);
    return now.get_future().share();
  }
  // Nothing to move, nothing to wait for (as Device::copy_in of no bytes).
  if (bytes == 0) {
    now.set_value(stat);
    return now.get_future().share();
  }
  // Either side the host does not map (a discrete GPU's device-local memory) goes through the
  // host bridge where its device imports host memory (core/host_bridge.hpp), else through
  // staging memory: its device's queue copies the source into the bridge or staging memory
  // after its writers, or that into the destination once the host has filled it (the queue
  // waits for that, the realizing thread does not).
  auto done = std::make_shared<std::promise<void>>();
  const std::shared_future<void> arrived = done->get_future().share();
  // The source's bytes have all been read (by the host, or by the destination's queue):
  // earlier than `done` where the host copies them into the bridge.
  auto read = std::make_shared<std::promise<void>>();
  const std::shared_future<void> src_read = read->get_future().share();
  std::byte* s = from_dev.host_pointer(src);
  std::byte* d = to_dev.host_pointer(dst);
  // The waits for the host's access to either side's own memory, asked for before anything is
  // queued (they may throw).
  // (Both staged and bridged copies out of the source follow its writers on its queue; both
  // into the destination wait on its queue for its users.)
  std::function<void()> src_written = s ? from_dev.when_done_with(src, false) : [] {};
  std::function<void()> dst_free = d ? to_dev.when_done_with(dst, true) : [] {};
  Device::Staged out, in;
  std::shared_ptr<HostBridge> bridge;
  std::shared_ptr<HostBridge::Lease> lease;
  std::function<void(size_t)> src_bridged, dst_bridged;  // step i is in its slot / read out
  // filled[i]: chunk i is in the destination's staging memory or in its bridge slot (its queue
  // copies it in then).
  std::shared_ptr<std::vector<std::promise<void>>> filled;
  auto make_filled = [&](size_t n) {
    filled = std::make_shared<std::vector<std::promise<void>>>(n);
    std::vector<std::shared_future<void>> events;
    for (auto& p : *filled) events.push_back(p.get_future().share());
    return events;
  };
  std::unique_lock order(bridge_order(), std::defer_lock);
  if ((!s && from_dev.imports_host_memory()) || (!d && to_dev.imports_host_memory())) try {
      order.lock();
      bridge = HostBridge::shared();
      lease = bridge->lease(bytes);
      if (!s && from_dev.imports_host_memory()) src_bridged = from_dev.bridge_out(src, *lease);
      // From a device that runs on the host, longer than the bridge: the host refills slots only
      // as the destination empties them, and the source's wait_for blocks until it is done, so
      // only where the destination's copies do not queue behind its kernels (else it stages).
      const bool src_waits = from_dev.runs_on_host() && lease->steps.size() > HostBridge::kSlots;
      if (!d && to_dev.imports_host_memory() && (!src_waits || to_dev.copies_on_own_queue())) {
        const std::vector<std::shared_future<void>> events = make_filled(lease->steps.size());
        dst_bridged = to_dev.bridge_in(dst_memory, *lease, events);
        if (!dst_bridged) filled.reset();
      }
    } catch (const OutOfMemory&) {
      // Chunks submitted before the failure run once their `filled` are set; the slots go
      // once they are done. The copy then stages, or goes the synchronous way below.
      abandon(lease, filled, 0, {from_dev.when_copies_done(), to_dev.when_copies_done()},
              &copy_worker());
      lease.reset();
      filled.reset();
      src_bridged = dst_bridged = {};
    } catch (...) {
      // Any other failure (a lost device): the chunks already queued may still write the slots,
      // which the next lease must not take before they are done. Then the copy fails.
      abandon(lease, filled, 0, {from_dev.when_copies_done(), to_dev.when_copies_done()},
              &copy_worker());
      throw;
    }
  if (lease && !src_bridged && !dst_bridged) {  // neither side took it: nothing uses the slots
    abandon(lease, nullptr, 0, {}, &copy_worker());
    lease.reset();
  }
  if (order.owns_lock()) order.unlock();
  // Staging takes the whole tensor's bytes in one allocation on each side: where that does not
  // fit (the heap, or maxMemoryAllocationSize: 4 GiB on an H100), the copy goes the synchronous
  // way below, whose transfers stage in fixed-size chunks. Both allocate before recording or
  // posting anything, so a refusal leaves nothing behind. Beside the bridge, a staged side moves
  // a slot at a time.
  const size_t chunk = lease ? HostBridge::kSlotBytes : staging_chunk(bytes);
  const size_t chunks = lease ? lease->steps.size() : (bytes + chunk - 1) / chunk;
  try {
    if (!s && !src_bridged) s = (out = from_dev.stage_out(src, bytes, chunk)).bytes;
  } catch (const OutOfMemory&) {
  } catch (...) {  // as above
    abandon(lease, filled, 0, {from_dev.when_copies_done(), to_dev.when_copies_done()},
            &copy_worker());
    throw;
  }
  try {
    if (!d && !dst_bridged && (s || src_bridged))
      d = (in = to_dev.stage_in(dst_memory, bytes, chunk, make_filled(chunks))).bytes;
  } catch (const OutOfMemory&) {
    // stage_in records every chunk before submitting any, but a submission that failed midway
    // left the earlier chunks on the destination's queue waiting for their `filled`: the
    // fallback below waits for that queue (settle), so they must not wait for this copy. They
    // copy staging memory nobody filled; copy_in overwrites it after they are done.
    if (filled)
      for (auto& p : *filled) p.set_value();
    filled.reset();
  } catch (...) {  // as above
    abandon(lease, filled, 0, {from_dev.when_copies_done(), to_dev.when_copies_done()},
            &copy_worker());
    throw;
  }
  const bool src_ok = s || src_bridged, dst_ok = d || dst_bridged;
  if (lease && (!src_ok || !dst_ok)) {
    abandon(lease, filled, 0, {from_dev.when_copies_done(), to_dev.when_copies_done()},
            &copy_worker());
    lease.reset();
    filled.reset();
    src_bridged = dst_bridged = {};
  }
  if (lease) try {
      test_fail_after_import();
    } catch (...) {
      abandon(lease, filled, 0, {from_dev.when_copies_done(), to_dev.when_copies_done()},
              &copy_worker());
      throw;
    }
  if (!src_ok || !dst_ok) {
    out = {};  // its staging memory (submitted, never read): copy_out below stages its own
    settle(from_dev);
    settle(to_dev);
    std::vector<std::byte> host(bytes);
    from_dev.copy_out(src, host);
    to_dev.copy_in(dst, host);
    stat.ns = ns_since(t0);
    now.set_value(stat);
    return now.get_future().share();
  }
  // The copy thread owns both allocations (and the staging memory) until its memcpy is done:
  // whoever held them (a Jit's plan, reset or destroyed while the copy waits) may let go first,
  // and a released range is handed out again once the device's queue is past it, which knows
  // nothing of this thread. It lets go only after `filled` and `done` are set: releasing locks
  // the allocator, whose out-of-memory path waits for the queues, which wait for those.
  const bool src_queued = out.bytes || src_bridged;  // what overwrites it follows its queue
  const bool dst_queued = in.bytes || dst_bridged;
  if (src_queued) src_written = [] {};
  std::function<void(size_t)> src_staged = std::move(out.ready);  // chunk by chunk
  if (dst_queued) dst_free = [] {};
  auto copied = std::make_shared<size_t>(0);  // chunks whose `filled` is set
  std::vector<std::function<void()>> drains;
  if (lease) drains = {from_dev.when_copies_done(), to_dev.when_copies_done()};
  auto task = std::make_shared<std::packaged_task<RunStat()>>(
      [stat, s, d, bytes, chunk, chunks, filled, copied, lease, read,
       src_written = std::move(src_written), src_staged = std::move(src_staged),
       dst_free = std::move(dst_free), src_bridged, dst_bridged]() mutable {
        src_written();
        dst_free();
        // The memcpys' own time, not the waits for the chunks between them; through the bridge
        // with both sides queued, from the source's writers to the destination's last read.
        stat.ns = 0;
        const auto t0 = std::chrono::steady_clock::now();
        // Waits for the destination to have read steps before `end` out of their slots, and
        // lets those slots go.
        auto release_through = [&](size_t end) {
          for (size_t j = lease->released; j < end; ++j) {
            dst_bridged(j);
            lease->release(j + 1);
          }
        };
        for (size_t i = 0, at = 0; i < chunks; ++i, at += chunk) {
          const size_t n = std::min(chunk, bytes - std::min(at, bytes));
          // Step i takes the slot of step i - kSlots, which must have been read out.
          if (dst_bridged && i >= HostBridge::kSlots) release_through(i + 1 - HostBridge::kSlots);
          const std::byte* from = s ? s + at : nullptr;
          if (src_bridged) {
            src_bridged(i);
            from = lease->steps[i].host;
          } else if (src_staged) {
            src_staged(at + n);
          }
          const auto start = std::chrono::steady_clock::now();
          if (lease && !src_bridged) {  // the host fills the slot the destination's queue reads
            lease->steps[i].free.wait();
            std::memcpy(lease->steps[i].host, from, n);
          }
          if (!dst_bridged) {
            std::memcpy(d + at, from, n);
            if (lease) lease->release(i + 1);
          }
          stat.ns += ns_since(start);
          if (filled) (*filled)[i].set_value();
          *copied = i + 1;
        }
        read->set_value();  // the host or the source's queue has read it all
        if (dst_bridged) {
          release_through(chunks);
          if (src_bridged) stat.ns = ns_since(t0);
        }
        return stat;
      });
  std::shared_future<RunStat> result = task->get_future().share();
  copy_worker().post([task, done, filled, copied, lease, read, drains = std::move(drains), bridge,
                      src_memory = std::move(src_memory), dst_memory = std::move(dst_memory),
                      staged_out = std::move(out.memory),
                      staged_in = std::move(in.memory)]() mutable {
    (*task)();  // keeps its exception in `result`
    // A copy that failed (a lost device) still ends the destination queue's waits and lets its
    // slots go once the queues are done with them; its result throws what it met.
    try {
      read->set_value();
    } catch (const std::future_error&) {  // set by the task, which got that far
    }
    abandon(lease, filled, *copied, std::move(drains), nullptr);
    done->set_value();
    src_memory.reset();  // (Allocator::release locks; GlobalCounters::mem_used is atomic)
    dst_memory.reset();
    staged_out.reset();
    staged_in.reset();
  });
  // The host's own reads and writes of either buffer wait for the copy, recorded first: the
  // task is posted, so it runs and writes `dst` even if a wait_for below throws. A staged side
  // is not touched by the host: its queue's copy orders it.
  if (!dst_queued) to_dev.host_uses(dst, arrived);
  if (!src_queued) from_dev.host_uses(src, src_read);
  if (!dst_queued) to_dev.wait_for(arrived);     // what reads it (queued copies in wait already)
  if (!src_queued) from_dev.wait_for(src_read);  // what overwrites the source's memory next
  return result;
}

}  // namespace vkg
