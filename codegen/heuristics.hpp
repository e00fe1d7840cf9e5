// The opts a kernel gets by default (without NOOPT=1), chosen from its shape and the device's
// traits. Each choice is one line here with the reason; BEAM search will later try others.
#pragma once
#include <cstdint>

#include <vkgrad/codegen/kernel.hpp>

namespace vkg {

struct DeviceTraits {
  int64_t max_workgroup_invocations = 256;
  // Workgroup size for kernels without local axes.
  int64_t default_workgroup = 64;
  // ... and for elementwise ones, which stream: wide workgroups cost less per element on CPU-like
  // devices (Lavapipe's add peaks at 256) and are the common choice on GPUs.
  int64_t elementwise_workgroup = 256;
  // Register tiles for matmul-shaped kernels (upcast the outputs, unroll the reduce): what a
  // CPU-like device such as Lavapipe wants, and a good start on GPUs.
  bool register_tiles = true;
  // Rows of a matmul register tile (its columns are one vec4).
  int64_t tile_rows = 4;
};

void apply_heuristics(Kernel& kernel, const DeviceTraits& traits);

}  // namespace vkg
