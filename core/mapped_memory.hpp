// Host access to a tensor's device memory where the device maps it into the host's address space
// (Lavapipe and unified-memory GPUs keep every buffer mapped; the CPU device's memory is host
// memory). Code that moves bytes through the host anyway (vkg::dist hands them to MPI) reads and
// writes them there, in place, instead of copying them out and uploading them again.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include <vkgrad/core/tensor.hpp>

namespace vkg {

class Allocation;

struct MappedMemory {
  std::byte* data = nullptr;  // null where the memory is not mapped: use bytes() and a new Tensor
  size_t size = 0;            // t.numel() * itemsize
  std::shared_ptr<Allocation> keep;  // keeps the memory alive (MPI may write it after a timeout)
  explicit operator bool() const { return data != nullptr; }
};

// Realizes `t` and returns the memory of the buffer it views, once the work queued so far that
// uses that buffer has finished (its writers and readers, and a copy between devices in flight;
// Device::when_done_with), not the rest of the device's queue: so the host may read it, and
// write it where nothing later reads the old contents. A tensor made by Tensor::empty gets fresh
// memory, with nothing written into it. Empty (data null) for a device whose memory the host does
// not map, a 0-element tensor, a sharded tensor, or a view that is not its whole buffer.
MappedMemory mapped_memory(Tensor& t);

// Whether `device` (one device's name) maps its memory, so that mapped_memory of a tensor made
// there that is its whole buffer has data: asked before allocating a buffer only to find out.
bool maps_memory(const std::string& device);

}  // namespace vkg
