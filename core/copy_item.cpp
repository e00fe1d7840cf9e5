#include <vkgrad/core/copy_item.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <vkgrad/core/error.hpp>
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

// Test-only: VKG_TEST_FAIL_AFTER_IMPORT=1 throws once import_in or import_out has queued a
// copy's chunks, before the copy thread's task is posted (a throw nothing real makes there
// today but an allocation's). The device must keep the imported pages, and the memory under
// them, until its queued chunks are done (tests/tensor_copy_in_place_test.cpp).
void test_fail_after_import() {
  const char* v = std::getenv("VKG_TEST_FAIL_AFTER_IMPORT");
  if (v && std::string(v) == "1")
    throw Error("copy: failed after importing (VKG_TEST_FAIL_AFTER_IMPORT, a test's failure)");
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
  // Either side the host does not map (a discrete GPU's device-local memory) is staged: its
  // device's queue copies the source into staging memory after its writers, or the staging
  // memory into the destination once the host has filled it (the queue waits for that, the
  // realizing thread does not).
  auto done = std::make_shared<std::promise<void>>();
  const std::shared_future<void> arrived = done->get_future().share();
  std::byte* s = from_dev.host_pointer(src);
  std::byte* d = to_dev.host_pointer(dst);
  // The waits for the host's access to either side's own memory, asked for before anything is
  // queued (they may throw): once import_in or import_out has queued copies, nothing may throw
  // before the copy thread's task is posted (see test_fail_after_import).
  // (Both staging and in-place copies out of the source follow its writers on its queue; both
  // into the destination wait on its queue for its users.)
  std::function<void()> src_written = s ? from_dev.when_done_with(src, false) : [] {};
  std::function<void()> dst_free = d ? to_dev.when_done_with(dst, true) : [] {};
  Device::Staged out, in;
  Device::Imported imported;  // the destination reads the source's bytes in place
  Device::Imported exported;  // the source writes the destination's bytes in place
  // Staging takes the whole tensor's bytes in one allocation on each side: where that does not
  // fit (the heap, or maxMemoryAllocationSize: 4 GiB on an H100), the copy goes the synchronous
  // way below, whose transfers stage in fixed-size chunks. Both allocate before recording or
  // posting anything, so a refusal leaves nothing behind.
  const size_t chunk = staging_chunk(bytes);
  const size_t chunks = std::max<size_t>(1, (bytes + chunk - 1) / chunk);
  // filled[i]: chunk i is in the destination's staging memory (its queue copies it in then).
  std::shared_ptr<std::vector<std::promise<void>>> filled;
  // Into memory of a device that runs on the host (nothing queued uses it), the source's queue
  // copies in place where it can import it: no staging memory and no memcpy.
  try {
    if (!s && d && to_dev.runs_on_host())
      exported = from_dev.import_out(src, d, bytes, std::shared_ptr<void>(dst_memory));
  } catch (const OutOfMemory&) {
  }
  const bool out_place = bool(exported.done);
  try {
    if (!s && !out_place) s = (out = from_dev.stage_out(src, bytes, chunk)).bytes;
  } catch (const OutOfMemory&) {
  }
  try {
    // From a device that runs on the host, whose wait_for below blocks until the destination has
    // read the bytes, only where the destination's copies do not queue behind its kernels.
    std::vector<std::shared_future<void>> events;
    if (s && !d) {
      filled = std::make_shared<std::vector<std::promise<void>>>(chunks);
      for (auto& p : *filled) events.push_back(p.get_future().share());
    }
    if (s && !d && (!from_dev.runs_on_host() || to_dev.copies_on_own_queue())) {
      // Where the destination can import them, its queue copies the source's host-visible bytes
      // (its memory, or its staging memory) in place: no staging memory on this side and no
      // memcpy on the copy thread. Else it stages.
      imported = to_dev.import_in(dst_memory, s, bytes, chunk, events,
                                  out.memory ? out.memory : std::shared_ptr<void>(src_memory));
    }
    if (s && !d && !imported.done)
      d = (in = to_dev.stage_in(dst_memory, bytes, chunk, events)).bytes;
  } catch (const OutOfMemory&) {
    // stage_in records every chunk before submitting any, but a submission that failed midway
    // left the earlier chunks on the destination's queue waiting for their `filled`: the
    // fallback below waits for that queue (settle), so they must not wait for this copy. They
    // copy staging memory nobody filled; copy_in overwrites it after they are done.
    if (filled)
      for (auto& p : *filled) p.set_value();
    filled.reset();
  }
  const bool in_place = bool(imported.done);
  if (in_place || out_place) test_fail_after_import();
  if (!out_place && (!s || (!d && !in_place))) {
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
  if (out.bytes || out_place) src_written = [] {};
  std::function<void(size_t)> src_staged = std::move(out.ready);  // chunk by chunk
  const bool dst_queued = in.bytes || in_place;
  if (dst_queued) dst_free = [] {};
  if (!dst_queued) filled.reset();
  std::function<void()> dst_read = std::move(imported.done);   // empty unless in place
  std::function<void()> src_wrote = std::move(exported.done);  // likewise
  auto copied = std::make_shared<size_t>(0);                   // chunks whose `filled` is set
  auto task = std::make_shared<std::packaged_task<RunStat()>>(
      [stat, s, d, bytes, chunk, chunks, filled, copied, src_written = std::move(src_written),
       src_staged = std::move(src_staged), dst_free = std::move(dst_free), dst_read,
       src_wrote]() mutable {
        src_written();
        dst_free();
        if (src_wrote) {  // the source's queue copies it all: wait for that
          const auto t0 = std::chrono::steady_clock::now();
          src_wrote();
          stat.ns = ns_since(t0);
          return stat;
        }
        // The memcpys' own time, not the waits for the chunks between them; in place, from the
        // source's writers to the destination's last read.
        stat.ns = 0;
        const auto t0 = std::chrono::steady_clock::now();
        for (size_t i = 0, at = 0; i < chunks; ++i, at += chunk) {
          const size_t n = std::min(chunk, bytes - std::min(at, bytes));
          if (src_staged) src_staged(at + n);
          const auto start = std::chrono::steady_clock::now();
          if (n > 0 && !dst_read) std::memcpy(d + at, s + at, n);
          stat.ns += ns_since(start);
          if (filled) (*filled)[i].set_value();
          *copied = i + 1;
        }
        if (dst_read) {
          dst_read();
          stat.ns = ns_since(t0);
        }
        return stat;
      });
  std::shared_future<RunStat> result = task->get_future().share();
  copy_worker().post([task, done, filled, copied, dst_read = std::move(dst_read), src_wrote,
                      exported_pages = std::move(exported.memory),
                      src_memory = std::move(src_memory), dst_memory = std::move(dst_memory),
                      staged_out = std::move(out.memory), staged_in = std::move(in.memory),
                      imported_pages = std::move(imported.memory)]() mutable {
    (*task)();  // keeps its exception in `result`
    // A copy that failed (a lost device) still ends the destination queue's waits; its result
    // throws what it met.
    if (filled)
      for (size_t i = *copied; i < filled->size(); ++i) (*filled)[i].set_value();
    // In place, the source's memory is the destination queue's to read until it has: what
    // overwrites or frees it waits for `done` (imported_pages keeps it), also after a failure.
    if (dst_read) try {
        dst_read();
      } catch (...) {
      }
    if (src_wrote) try {  // the destination's memory is the source queue's until it is done
        src_wrote();
      } catch (...) {
      }
    done->set_value();
    imported_pages.reset();  // before the memory under them
    exported_pages.reset();
    src_memory.reset();  // (Allocator::release locks; GlobalCounters::mem_used is atomic)
    dst_memory.reset();
    staged_out.reset();
    staged_in.reset();
  });
  // The host's own reads and writes of either buffer wait for the copy, recorded first: the
  // task is posted, so it runs and writes `dst` even if a wait_for below throws. A staged side
  // is not touched by the host: its queue's copy orders it.
  if (!dst_queued) to_dev.host_uses(dst, arrived);
  const bool src_queued = out.bytes || out_place;  // what overwrites it follows it on its queue
  if (!src_queued) from_dev.host_uses(src, arrived);
  if (!dst_queued) to_dev.wait_for(arrived);    // what reads it (queued copies in wait already)
  if (!src_queued) from_dev.wait_for(arrived);  // what overwrites the source's memory next
  return result;
}

}  // namespace vkg
