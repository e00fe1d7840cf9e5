// The runtime the vk benchmarks share (validation follows VKG_VALIDATION, off by default), and a
// staging-only allocator and transfer on the same device so both transfer paths can be measured.
#pragma once
#include <memory>

#include <vkgrad/vk/runtime.hpp>

namespace vkg::bench {

struct VkBench {
  vk::Runtime rt;
  vk::Allocator staged_alloc{rt.device, vk::AllocatorOptions{.force_staging = true}};
  vk::Transfer staged{rt.device, staged_alloc};
};

inline VkBench& vk_bench() {
  static VkBench bench;  // lives until exit; benchmarks destroy their buffers before returning
  return bench;
}

}  // namespace vkg::bench
