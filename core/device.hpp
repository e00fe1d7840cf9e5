// What the realize engine asks of a device, and the registry that opens devices by name. core
// defines the interface; the adapters in devices/ implement it with codegen and the Vulkan runtime
// (VK) or the reference interpreter (CPU).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <vkgrad/core/run_options.hpp>
#include <vkgrad/core/schedule.hpp>

namespace vkg {

// A device's memory for one Buffer. Counted in GlobalCounters::mem_used while it lives.
class Allocation {
 public:
  virtual ~Allocation();

 private:
  friend Allocation& ensure_allocated(const Buffer& buffer, int debug);
  int64_t counted_bytes_ = 0;
};

// One kernel or copy a device ran, for DEBUG=2 lines.
struct RunStat {
  std::string name;     // kernel name, or "copy N, VK <- CPU"
  int buffers = 0;      // arguments
  int64_t bytes = 0;    // bytes the kernel's buffers hold (or the copy moved)
  int64_t flops = 0;
  double ns = 0;        // device time where measured, else host time
};

class Device {
 public:
  virtual ~Device() = default;
  virtual const std::string& name() const = 0;

  // Memory for `buffer` (uninitialized). Throws vkg::OutOfMemory when the device has none left.
  virtual std::shared_ptr<Allocation> allocate(const Buffer& buffer) = 0;
  // Host bytes in and out. copy_out waits for queued kernels that write the buffer.
  virtual void copy_in(Allocation& dst, std::span<const std::byte> src) = 0;
  virtual void copy_out(Allocation& src, std::span<std::byte> dst) = 0;

  // Queues one scheduled kernel; `memory[i]` backs item.buffers[i]. May return before it runs.
  // `options` are the settings of the realize it belongs to (opts, BEAM, DEBUG output).
  virtual void run(const ScheduleItem& item, std::span<Allocation* const> memory,
                   const RunOptions& options) = 0;
  // Waits for everything queued; returns what ran since the last call.
  virtual std::vector<RunStat> synchronize() = 0;
};

// The device called `name` ("VK", "CPU"; case-insensitive; "VK:1" picks a Vulkan device as
// VK_DEVICE does), opened on first use. Throws vkg::Error naming the known devices if none is.
Device& device(const std::string& name);

using DeviceFactory = std::function<std::unique_ptr<Device>(const std::string& name)>;
// Makes `prefix` ("VK", "CPU") a known device. Called by each adapter at load time.
bool register_device(const std::string& prefix, DeviceFactory factory);

// The allocation behind `buffer` on its device, allocating it (and uploading its initial data)
// on first use. `debug` is the DEBUG level of the realize it serves (2 prints the upload); the
// first form reads DEBUG itself. Call it under the realize engine's lock (core/realize.cpp).
Allocation& ensure_allocated(const Buffer& buffer, int debug);
Allocation& ensure_allocated(const Buffer& buffer);

}  // namespace vkg
