// Process CPU seconds so far (Lavapipe's worker threads included): on a shared machine a
// steadier measure of a step's work than wall time, which counts the time other processes hold
// the cores.
#pragma once
#include <ctime>

namespace vkg::bench {

inline double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

}  // namespace vkg::bench
