// The bridge: page-aligned host memory that vkgrad allocates itself and that every device taking
// part in a copy between devices imports once (Vulkan's VK_EXT_external_memory_host), so that a
// copy where a side's memory is not mapped (a discrete GPU's device-local memory) passes through
// it chunk by chunk: the source's queue writes a chunk into a slot, the destination's queue (or
// the host, for a mapped or CPU side) reads it out, while the next chunk goes into the next slot
// (core/copy_item.cpp). It replaces importing the source's host-visible memory for every copy:
// no import per copy (each is a vkAllocateMemory that pins pages on a GPU), and no import of
// memory another Vulkan driver mapped, which the extension does not promise to allow.
//
// Bounded: kSlots slots of kSlotBytes each (8 x 4 MiB = 32 MiB, the size of a device's own
// staging area, vk/transfer.hpp), one allocation for the process, made at the first copy that
// uses it and freed once the last device that imported it is gone (devices hold it by
// shared_ptr). A larger copy reuses the slots in turn: its chunk i waits for chunk i - kSlots to
// have been read out.
#pragma once
#include <cstddef>
#include <future>
#include <memory>
#include <mutex>
#include <vector>

namespace vkg {

class HostBridge {
 public:
  static constexpr size_t kSlots = 8;
  static constexpr size_t kSlotBytes = size_t(4) << 20;
  // Of the block and every slot: at least any driver's minImportedHostPointerAlignment (4 KiB
  // on Mesa, NVIDIA and AMD; 64 KiB leaves room for large pages). A device refuses to import a
  // bridge whose alignment is below its own (it then stages).
  static constexpr size_t kAlign = size_t(64) << 10;

  // The process's bridge, made on first use; whoever keeps the pointer keeps its memory.
  static std::shared_ptr<HostBridge> shared();
  ~HostBridge();
  HostBridge(const HostBridge&) = delete;
  HostBridge& operator=(const HostBridge&) = delete;

  std::byte* bytes() const { return block_; }
  static constexpr size_t size() { return kSlots * kSlotBytes; }

  // One chunk of a copy: bytes [at, at + bytes) of the copy pass through slot `slot`. Whoever
  // writes the slot first waits for `free` (the previous chunk in that slot has been read out);
  // `release` is set once this chunk has been read out, and never before its `free` is ready
  // and every queued copy that touches the slot for this chunk is done.
  struct Step {
    size_t slot = 0;
    size_t at = 0, bytes = 0;
    std::shared_future<void> free;
    std::shared_ptr<std::promise<void>> release;
    std::byte* host = nullptr;  // the slot's bytes
  };
  // The chunks of a copy of `bytes` (> 0) bytes, taking the slots in turn after every lease
  // before. Every step's release must be set (Lease::release, release_after_free): the next
  // lease of the slot waits for it.
  struct Lease {
    std::vector<Step> steps;
    size_t released = 0;  // steps[0, released) are released
    // Releases steps up to `end` (exclusive), in order.
    void release(size_t end);
  };
  std::shared_ptr<Lease> lease(size_t bytes);

 private:
  HostBridge();
  std::byte* block_ = nullptr;
  std::mutex mu_;
  size_t next_ = 0;                             // the slot the next step takes
  std::vector<std::shared_future<void>> free_;  // per slot: its last step's release
};

}  // namespace vkg
