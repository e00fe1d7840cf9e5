#include <vkgrad/core/host_bridge.hpp>

#include <algorithm>
#include <cstdlib>
#include <new>

#include <vkgrad/core/error.hpp>

namespace vkg {

namespace {

std::shared_future<void> ready_now() {
  std::promise<void> p;
  p.set_value();
  return p.get_future().share();
}

}  // namespace

std::shared_ptr<HostBridge> HostBridge::shared() {
  static std::mutex mu;
  static std::weak_ptr<HostBridge> current;
  std::lock_guard lock(mu);
  // Weak: the memory goes with the last device that holds it, and a later device makes it anew.
  std::shared_ptr<HostBridge> b = current.lock();
  if (!b) {
    b.reset(new HostBridge());
    current = b;
  }
  return b;
}

HostBridge::HostBridge() : free_(kSlots, ready_now()) {
  static_assert(size() % kAlign == 0 && kSlotBytes % kAlign == 0);
  // Whole pages of our own: an import covers exactly this block and nothing else of the heap.
  block_ = static_cast<std::byte*>(std::aligned_alloc(kAlign, size()));
  if (!block_) throw OutOfMemory("copy between devices: the host bridge's 32 MiB");
}

HostBridge::~HostBridge() { std::free(block_); }

std::shared_ptr<HostBridge::Lease> HostBridge::lease(size_t bytes) {
  auto out = std::make_shared<Lease>();
  const size_t n = std::max<size_t>(1, (bytes + kSlotBytes - 1) / kSlotBytes);
  out->steps.reserve(n);
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < n; ++i) {
    Step s;
    s.slot = next_++ % kSlots;
    s.at = i * kSlotBytes;
    s.bytes = std::min(kSlotBytes, bytes - std::min(bytes, s.at));
    s.free = free_[s.slot];
    s.release = std::make_shared<std::promise<void>>();
    free_[s.slot] = s.release->get_future().share();
    s.host = block_ + s.slot * kSlotBytes;
    out->steps.push_back(std::move(s));
  }
  return out;
}

void HostBridge::Lease::release(size_t end) {
  for (; released < std::min(end, steps.size()); ++released) steps[released].release->set_value();
}

}  // namespace vkg
