// A Buffer is one suballocation of device memory: a range of a larger VkBuffer that the Allocator
// carved from a memory block. Kernels see it only through its device address, so a Buffer needs no
// VkBuffer of its own; copies use the block's VkBuffer at offset().
#pragma once
#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>

namespace vkg::vk {

class Allocator;
namespace detail {
struct Block;
}

// What the memory is for; it picks the memory type.
enum class Usage : uint8_t {
  Device,     // kernels read and write it; the fastest memory for the GPU
  Staging,    // the host writes and reads it; the GPU copies to and from it
  Arguments,  // the host writes it once, kernels read it (argument blobs)
};

class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  // Returns the memory to the allocator's cache. The GPU may still be running commands that use
  // the buffer; its memory is reused only after everything submitted so far has completed. It must
  // not be destroyed while commands that use it are recorded but not yet submitted.
  ~Buffer() { release(); }

  explicit operator bool() const { return owner_ != nullptr; }
  VkDeviceSize size() const { return size_; }          // what was asked for
  VkDeviceSize capacity() const { return capacity_; }  // what was reserved (>= size, 256-aligned)
  uint64_t address() const { return address_; }        // device address, 256-byte aligned
  VkBuffer handle() const { return handle_; }          // the block's VkBuffer ...
  VkDeviceSize offset() const { return offset_; }      // ... and where this buffer starts in it
  // Host pointer to the memory when the host may access it directly (staging and argument
  // buffers; device buffers on unified-memory devices), else nullptr.
  std::byte* mapped() const { return mapped_; }
  Usage usage() const { return usage_; }
  // Identifies the memory block: two buffers overlap only if they share it (barrier tracking).
  uint64_t block_id() const { return block_id_; }

 private:
  friend class Allocator;
  void release() noexcept;

  Allocator* owner_ = nullptr;
  detail::Block* block_ = nullptr;
  VkBuffer handle_ = VK_NULL_HANDLE;
  VkDeviceSize offset_ = 0, size_ = 0, capacity_ = 0;
  uint64_t address_ = 0;
  std::byte* mapped_ = nullptr;
  uint64_t block_id_ = 0;
  Usage usage_ = Usage::Device;
};

}  // namespace vkg::vk
