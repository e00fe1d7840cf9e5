#include <vkgrad/core/mapped_memory.hpp>

#include <mutex>

#include <vkgrad/core/buffer.hpp>
#include <vkgrad/core/device.hpp>
#include <vkgrad/core/jit_capture.hpp>
#include <vkgrad/core/multi.hpp>

namespace vkg {

MappedMemory mapped_memory(Tensor& t) {
  if (is_multi_device(t.device()) || t.numel() == 0) return {};
  t.realize();
  const UOp* n = t.node().get();
  while (n->op != Ops::BUFFER) {
    if (n->src.empty()) return {};
    n = n->src[0].get();
  }
  const Buffer& b = buffer_of(*n);
  const size_t bytes = size_t(t.numel()) * size_t(t.dtype().itemsize());
  if (b.nbytes() != bytes || b.dtype() != t.dtype()) return {};
  const auto lock = lock_engine();
  settle_ended_copies();
  Device& dev = device(b.device());
  const bool fresh = !b.storage().allocation;  // nothing has used its memory: no need to wait
  Allocation& memory = ensure_allocated(b);
  std::byte* data = dev.host_pointer(memory);
  if (!data) return {};
  // What writes it, or reads its old contents, is done (not the rest of the device's queue), and
  // with them the copies between devices that fed it (not copies of other buffers).
  if (!fresh) dev.when_done_with(memory, /*writing=*/true)();
  // A copy that fed `t` and failed leaves stale bytes in its memory: its error, not them, goes on.
  settle_ended_copies();
  return {data, bytes, b.allocation};
}

bool maps_memory(const std::string& name) {
  return !is_multi_device(name) && device(name).maps_memory();
}

}  // namespace vkg
