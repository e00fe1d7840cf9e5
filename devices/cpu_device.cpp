// DEVICE=CPU: runs every kernel on the reference interpreter (codegen/cpu_interpreter.hpp). Slow,
// simple and exact: the oracle the tests hold the Vulkan device to.
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <span>

#include <vkgrad/codegen/cpu_interpreter.hpp>
#include <vkgrad/codegen/get_program.hpp>
#include <vkgrad/core/device.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/devices/kernel_cache.hpp>

namespace vkg {

namespace {

// Freed blocks of 1 MiB or more, up to 256 MiB in all, kept for the next allocation of the same
// size: the kernel maps a fresh large block page by page on first touch, which made the result
// of a 64 MiB vkg::dist all_reduce slower to fault in than MPI was to fill it (bench_dist).
class HostPool {
 public:
  std::unique_ptr<std::byte[]> take(size_t bytes) {
    if (bytes >= kMin) {
      std::lock_guard lock(mu_);
      if (auto it = free_.find(bytes); it != free_.end()) {
        std::unique_ptr<std::byte[]> block = std::move(it->second);
        free_.erase(it);
        cached_ -= bytes;
        return block;
      }
    }
    return std::unique_ptr<std::byte[]>(new std::byte[bytes]);  // default-initialized: not zeroed
  }
  // Frees every cached block: the host is short of memory (CpuDevice::allocate). Returns
  // whether there was any.
  bool clear() {
    std::multimap<size_t, std::unique_ptr<std::byte[]>> freed;
    std::lock_guard lock(mu_);
    freed.swap(free_);
    cached_ = 0;
    return !freed.empty();
  }
  void give(std::unique_ptr<std::byte[]> block, size_t bytes) {
    if (bytes < kMin) return;
    std::lock_guard lock(mu_);
    if (cached_ + bytes > kMaxCached) return;  // freed with `block`
    free_.emplace(bytes, std::move(block));
    cached_ += bytes;
  }

 private:
  static constexpr size_t kMin = size_t(1) << 20, kMaxCached = size_t(256) << 20;
  std::mutex mu_;
  std::multimap<size_t, std::unique_ptr<std::byte[]>> free_;
  size_t cached_ = 0;
};

// Uninitialized, as Device::allocate promises: zeroing a buffer that a kernel, an upload or MPI
// (vkg::dist) overwrites next cost a pass over it (a tenth of a 64 MiB all_reduce).
// Plain host memory, not page-aligned memory that Vulkan devices import and keep imported for
// the allocation's life: copies between it and a device whose memory the host does not map go
// through the host bridge (core/host_bridge.hpp), the host copying between this memory and the
// bridge's slots while the device's queue fills or empties the others. An import per
// allocation would pin every CPU tensor that ever met a GPU for as long as it lives, with no
// bound, one vkAllocateMemory per tensor per device (a count drivers limit); and it would save
// nothing on the common paths, where each copy meets a fresh tensor (a batch going up, a result
// coming down) and so imports anyway. A free would also have to reach every device that
// imported the memory and wait for its queued copies. The bridge pins 32 MiB, once.
struct HostAllocation final : Allocation {
  HostPool* pool = nullptr;  // the device's, which outlives every allocation (devices are immortal)
  std::unique_ptr<std::byte[]> data;
  std::span<std::byte> bytes;
  ~HostAllocation() override {
    if (pool) pool->give(std::move(data), bytes.size());
  }
};

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(std::string name) : name_(std::move(name)) {}
  const std::string& name() const override { return name_; }

  std::shared_ptr<Allocation> allocate(const Buffer& buffer) override {
    auto a = std::make_shared<HostAllocation>();
    try {
      // The pool's cached blocks (up to 256 MiB, not in mem_used: they hold no tensor) go back
      // to the host first when it is short, and the allocation is tried once more.
      try {
        a->data = pool_.take(buffer.capacity_bytes());
      } catch (const std::bad_alloc&) {
        if (!pool_.clear()) throw;
        a->data = pool_.take(buffer.capacity_bytes());
      }
      a->bytes = {a->data.get(), buffer.capacity_bytes()};
      a->pool = &pool_;
    } catch (const std::bad_alloc&) {
      throw OutOfMemory("CPU: cannot allocate " + std::to_string(buffer.capacity_bytes()) +
                        " bytes for a " + buffer.dtype().name() + " buffer of " +
                        std::to_string(buffer.count()) + " elements");
    }
    return a;
  }
  // Empty tensors have null data pointers, which memcpy must not be given even for 0 bytes.
  void copy_in(Allocation& dst, std::span<const std::byte> src) override {
    auto& h = static_cast<HostAllocation&>(dst);
    if (const size_t n = std::min(src.size(), h.bytes.size()))
      std::memcpy(h.bytes.data(), src.data(), n);
  }
  void copy_out(Allocation& src, std::span<std::byte> dst) override {
    auto& h = static_cast<HostAllocation&>(src);
    if (const size_t n = std::min(dst.size(), h.bytes.size()))
      std::memcpy(dst.data(), h.bytes.data(), n);
  }

  // Copies from and to other devices are one memcpy (core/copy_item.hpp). This device runs each
  // item on the host before run() returns, so the Device defaults for waiting are right.
  std::byte* host_pointer(Allocation& memory) override {
    return static_cast<HostAllocation&>(memory).bytes.data();
  }
  bool maps_memory() const override { return true; }
  bool runs_on_host() const override { return true; }

  // BEAM is a no-op here: the interpreter is the oracle, not a target to tune, and its times say
  // nothing about a GPU's. Kernels get the heuristics' opts (or none under NOOPT).
  void run(const ScheduleItem& item, std::span<Allocation* const> memory,
           const RunOptions& options) override {
    RunOptions heuristics = options;
    heuristics.beam = 0;
    cache_.trim();  // nothing here outlives a run
    const std::shared_ptr<Program> p =
        cache_.get(item, heuristics, [&] { return get_program(item, DeviceTraits{}, heuristics); });
    std::vector<HostBuffer> buffers;
    for (Allocation* a : memory) buffers.emplace_back(static_cast<HostAllocation*>(a)->bytes);
    const auto t0 = std::chrono::steady_clock::now();
    run_program(*p, buffers, var_values(*p, item));
    const double ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    stats_.push_back(RunStat{p->name, int(buffers.size()), p->bytes, p->flops, ns});
  }

  std::vector<RunStat> synchronize() override { return std::exchange(stats_, {}); }

 private:
  std::string name_;
  HostPool pool_;
  KernelCache<Program> cache_;
  std::vector<RunStat> stats_;
};

const bool registered = register_device(
    "CPU", [](const std::string& name) { return std::make_unique<CpuDevice>(name); });

}  // namespace

}  // namespace vkg
