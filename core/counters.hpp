// Running totals of what the realize engine has done, as tinygrad's GlobalCounters: read them
// before and after a step to see how many kernels it ran.
#pragma once
#include <cstdint>

namespace vkg {

struct GlobalCounters {
  int64_t schedules = 0;  // calls of realize that ran at least one kernel
  int64_t kernels = 0;    // kernels run
  int64_t uploads = 0;    // host buffers copied to a device
  int64_t mem_used = 0;   // bytes of device memory held by buffers alive now (requested sizes)
  int64_t replays = 0;    // vkg::Jit calls that replayed a capture (their kernels count above)
  // Launches on a device: fewer than kernels where a Jit replay runs several in one dispatch
  // (devices/vk_dispatch_groups.cpp).
  int64_t dispatches = 0;
};

GlobalCounters global_counters();

}  // namespace vkg
