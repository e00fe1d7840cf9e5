// Packs kernel arguments (buffer addresses and scalars) into bytes with the std430 layout a GLSL
// push_constant block (or a spilled argument buffer) uses: each scalar aligned to its own size.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include <vkgrad/vk/buffer.hpp>

namespace vkg::vk {

class ArgPack {
 public:
  ArgPack& address(const Buffer& b) { return put<uint64_t>(b.address()); }
  ArgPack& address(uint64_t device_address) { return put<uint64_t>(device_address); }
  ArgPack& u64(uint64_t v) { return put(v); }
  ArgPack& i64(int64_t v) { return put(v); }
  ArgPack& u32(uint32_t v) { return put(v); }
  ArgPack& i32(int32_t v) { return put(v); }
  ArgPack& f32(float v) { return put(v); }

  // The packed bytes, zero-padded to a multiple of 4 as vkCmdPushConstants requires.
  std::span<const std::byte> bytes() const { return bytes_; }
  std::size_t size() const { return bytes_.size(); }

 private:
  template <class T>
  ArgPack& put(T v) {
    std::size_t at = (bytes_.size() + sizeof(T) - 1) / sizeof(T) * sizeof(T);
    bytes_.resize(at + sizeof(T));
    std::memcpy(bytes_.data() + at, &v, sizeof(T));
    return *this;
  }
  std::vector<std::byte> bytes_;
};

}  // namespace vkg::vk
