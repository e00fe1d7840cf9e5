#include <vkgrad/vk/buffer.hpp>

#include <utility>

#include <vkgrad/vk/allocator.hpp>

namespace vkg::vk {

Buffer::Buffer(Buffer&& other) noexcept { *this = std::move(other); }

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    owner_ = std::exchange(other.owner_, nullptr);
    block_ = std::exchange(other.block_, nullptr);
    handle_ = std::exchange(other.handle_, VK_NULL_HANDLE);
    offset_ = std::exchange(other.offset_, 0);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
    address_ = std::exchange(other.address_, 0);
    mapped_ = std::exchange(other.mapped_, nullptr);
    block_id_ = std::exchange(other.block_id_, 0);
    usage_ = other.usage_;
  }
  return *this;
}

void Buffer::release() noexcept {
  if (owner_) owner_->release(block_, offset_, capacity_);
  owner_ = nullptr;
  block_ = nullptr;
}

}  // namespace vkg::vk
