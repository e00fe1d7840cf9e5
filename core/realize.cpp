// The realize engine: schedules tensors, allocates and uploads what their kernels need, runs the
// kernels on their devices, and points the tensors at the buffers that now hold them. Also the
// device registry and the DEBUG=1/2 output.
#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#if defined(__linux__) || defined(__APPLE__)
#include <pthread.h>
#include <unistd.h>
#endif

#include <vkgrad/core/context.hpp>
#include <vkgrad/core/copy_item.hpp>
#include <vkgrad/core/counters.hpp>
#include <vkgrad/core/device.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/jit_capture.hpp>
#include <vkgrad/core/memory_planner.hpp>
#include <vkgrad/core/multi.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

namespace {

std::string upper(std::string s) {
  for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

struct Registry {
  std::recursive_mutex mu;  // opening a device may open nothing else, but allocation re-enters
  std::map<std::string, DeviceFactory> factories;
  std::map<std::string, std::unique_ptr<Device>> open;

  static Registry& get() {
    static Registry* r = new Registry;  // immortal: buffers may free device memory at exit
    return *r;
  }
};

// One realize (or read) at a time, process-wide: allocation state lives in shared Buffers, the
// devices' queues and the DEBUG totals are shared too (README, Threads).
std::mutex engine_mu;

// How long the exit wait waits for a realize that another thread is recording: the devices'
// queues are not for two threads at once, and a thread that holds the engine at exit (or one
// stuck in a realize) must not hang the exit forever.
// VKG_EXIT_LOCK_WAIT_MS sets it (tests, which must not race a worker on a loaded machine).
std::chrono::milliseconds exit_lock_wait() {
  const char* ms = std::getenv("VKG_EXIT_LOCK_WAIT_MS");
  return std::chrono::milliseconds(ms ? std::atoll(ms) : 2000);
}

// The thread that runs exit(), once the exit wait has begun (no thread before). The devices take
// no new work then from other threads: a realize or read that another thread begins later (a
// detached thread still running when main returned) waits for the process to end (lock_engine),
// so that nothing new reaches the drivers while their statics are destroyed. The exiting thread
// itself goes on: an atexit handler of the program's may still read a tensor.
std::atomic<std::thread::id> exiting_thread{};
// When the exit wait began (steady_clock ticks; 0 before): every wait of another thread ends at
// one deadline measured from it, not one per realize (a pool thread that catches each task's error
// and goes on would hold a joining exit for as many waits as it has tasks).
std::atomic<std::chrono::steady_clock::rep> exit_began_at{0};

// Whether exit has begun on this thread: its realizes and replays then wait for their work before
// they return (wait_if_exiting), since nothing waits for it later. An atexit handler or a static
// destructor that realizes (saving a model) would otherwise leave kernels and compiles running
// while LLVM's and the drivers' statics are destroyed: the exit wait has run already.
bool exit_began_on_this_thread() { return exiting_thread.load() == std::this_thread::get_id(); }

// How long after exit began such a thread gives up with an Error: the process normally ends
// first, and a detached thread never wakes. A thread that exit joins (one of a static thread
// pool, whose destructor joins it) must not hang the exit: it gets the error and can end.
// VKG_EXIT_THREAD_WAIT_MS sets it (tests).
std::chrono::milliseconds exit_thread_wait() {
  const char* ms = std::getenv("VKG_EXIT_THREAD_WAIT_MS");
  return std::chrono::milliseconds(ms ? std::atoll(ms) : 10000);
}

// Waits for the process to end, then throws. Says so once under DEBUG>=1 (from the environment:
// settings may be gone by now).
[[noreturn]] void wait_for_the_process_to_end() {
  static std::atomic<bool> said = false;
  const char* debug = std::getenv("DEBUG");
  if (debug && std::atoi(debug) >= 1 && !said.exchange(true)) {
    std::printf("exit: a realize or read begun on another thread during exit waits for the end\n");
    std::fflush(stdout);
  }
  // One deadline from the exit's beginning: past it, every later call throws at once.
  const auto wait = exit_thread_wait();
  const std::chrono::steady_clock::time_point began{
      std::chrono::steady_clock::duration(exit_began_at.load())};
  std::this_thread::sleep_until(began + wait);
  const auto ago = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - began);
  throw Error("realize or read on a thread other than the one running exit(): exit began " +
              std::to_string(ago.count()) +
              " ms ago and the devices take no new work (join the threads that use vkgrad "
              "before main returns, or catch vkg::Error in them)");
}

// A realize returns once its work is submitted (Device::flush), so work may still run when the
// program ends: exit waits for it first, before the drivers' own statics are torn down under it
// (registered at the first device's opening, and again after a driver built new statics, so it
// runs before the destructors of statics constructed earlier: keep_exit_wait_after_driver_statics).
// Errors are dropped: nothing is left to report them to. DEBUG>=1 says what it waited for (from the
// environment: settings may be gone by now).
void wait_for_devices_at_exit() {
  // The engine before the registry, the order realize takes them in (it opens devices).
  // Registered more than once (keep_exit_wait_after_driver_statics), so it runs once per
  // registration, latest first: only that first run waits. The earlier registrations run after
  // the destructors of statics built since (a driver's), and a device touched then crashed
  // (Lavapipe's timeline, at the end of test_tensor); nor does the exit take the limit below
  // once per registration. Work the exiting thread starts later (its atexit handlers, static
  // destructors) is waited for by the realize or replay that starts it (wait_if_exiting).
  static bool ran = false;
  if (std::exchange(ran, true)) return;
  exit_began_at = std::chrono::steady_clock::now().time_since_epoch().count();
  exiting_thread = std::this_thread::get_id();  // first: realizes begun from now on wait
  std::unique_lock engine(engine_mu, std::defer_lock);
  const auto give_up = std::chrono::steady_clock::now() + exit_lock_wait();
  while (!engine.try_lock()) {
    if (std::chrono::steady_clock::now() >= give_up) {
      // Still recording: leave its queues alone rather than race it (nothing waits here then).
      const char* debug = std::getenv("DEBUG");
      if (debug && std::atoi(debug) >= 1)
        std::printf("exit: a realize still holds the engine: not waiting for the devices\n");
      std::fflush(stdout);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  Registry& r = Registry::get();
  std::lock_guard lock(r.mu);
  const char* debug = std::getenv("DEBUG");
  for (auto& [name, dev] : r.open) {
    try {
      const Device::QueueCounts q = dev->queue_counts();
      if (debug && std::atoi(debug) >= 1 && q.completed < q.submitted)
        std::printf("exit: waiting for %s: %llu submissions in flight\n", name.c_str(),
                    (unsigned long long)(q.submitted - q.completed));
      dev->synchronize();
    } catch (...) {
    }
  }
  std::fflush(stdout);
}

// Whether this is the thread whose return from main() runs exit().
bool on_main_thread() {
#if defined(__linux__)
  return ::gettid() == ::getpid();
#elif defined(__APPLE__)
  return pthread_main_np() != 0;
#else
  return false;
#endif
}

// The exit wait as a thread_local of the main thread: exit() destroys the calling thread's
// thread_locals before it runs any atexit handler or static destructor (glibc's
// __run_exit_handlers), so this wait comes before every one of them, also those a driver
// registers after our last atexit registration. Lavapipe compiles a kernel's code when it first
// runs, on its queue thread, and LLVM's function-local statics built then were destroyed at exit
// while the queue thread still compiled: a segfault in LLVM (or a hang) in about 1 of 4 runs of a
// program that returned with copies and kernels in flight (the copy pool's destructor, which runs
// first, was joining its threads).
struct MainThreadExitWait {
  ~MainThreadExitWait() { wait_for_devices_at_exit(); }
};
// Where this library was loaded by another thread (dlopen), the main thread's wait cannot be made:
// a thread that opens devices registers the atexit wait again as it ends. That is a fallback
// with a race: a static that a driver builds after the last registration is destroyed before the
// wait (below).
struct ThreadExitWait {
  ~ThreadExitWait() { std::atexit(wait_for_devices_at_exit); }
};
void wait_first_at_exit() {
  thread_local bool asked = false;
  if (std::exchange(asked, true)) return;
  if (!on_main_thread()) {
    thread_local ThreadExitWait later;
    (void)later;
    return;
  }
  thread_local MainThreadExitWait wait;
  (void)wait;
}

// The main thread's wait is made as the library loads (on the main thread, for a program linked
// with it), not when the main thread first opens a device: a program whose devices only other
// threads open must wait first too. Its atexit waits ran after the destructor of the GDB JIT
// listener that LLVM builds (a function-local static) at Lavapipe's first kernel compile, on its
// queue thread, often after the thread that realized had ended: that compile, still running
// through exit, then spun in the destroyed listener's map and the exit wait never returned
// (AsyncCopy.ExitWaitsForCopiesInFlightFromAnotherThread: a hang in 8 of 60 runs on 2 busy cores;
// gdb showed the listener's destructor among the exit handlers already run).
[[maybe_unused]] const bool main_thread_waits_first = (wait_first_at_exit(), true);

}  // namespace

// A fallback: the main thread's wait, made as the library loads, runs before every atexit
// handler; these registrations count where the library was loaded or exit() runs on another thread.
void keep_exit_wait_after_driver_statics() { std::atexit(wait_for_devices_at_exit); }

namespace {

// Totals for the DEBUG=2 summary printed at exit.
struct Totals {
  int64_t kernels = 0, flops = 0, bytes = 0;
  double ns = 0;
  ~Totals() {
    if (kernels && setting("DEBUG") >= 2)
      std::printf(
          "avg: %9.2f GFLOPS %8.2f GB/s           total: %5lld kernels %8.2f GOPS %8.2f GB %8.2f "
          "ms\n",
          ns > 0 ? double(flops) / ns : 0.0, ns > 0 ? double(bytes) / ns : 0.0, (long long)kernels,
          double(flops) * 1e-9, double(bytes) * 1e-9, ns * 1e-6);
  }
};
Totals totals;
int64_t run_index = 0;

// `debug`: the DEBUG level of the realize (or read) the stats belong to.
void print_stats(const std::string& device, const std::vector<RunStat>& stats, int debug) {
  for (const RunStat& s : stats) {
    ++run_index;
    totals.kernels += s.kernels;
    totals.flops += s.flops;
    totals.bytes += s.bytes;
    totals.ns += s.ns;
    if (debug < 2) continue;
    const double gflops = s.ns > 0 ? double(s.flops) / s.ns : 0.0;
    const double gbs = s.ns > 0 ? double(s.bytes) / s.ns : 0.0;
    std::printf(
        "*** %-6s %5lld %-34s arg %2d mem %6.2f GB tm %10.2fus/%10.2fms (%9.2f GFLOPS %7.1f "
        "GB/s)\n",
        device.c_str(), (long long)run_index, s.name.c_str(), s.buffers, double(s.bytes) * 1e-9,
        s.ns * 1e-3, totals.ns * 1e-6, gflops, gbs);
  }
}

// Atomic: uploads also happen outside realize (reading a tensor's bytes allocates it).
struct {
  std::atomic<int64_t> schedules{0}, kernels{0}, uploads{0}, mem_used{0}, replays{0}, dispatches{0};
} counters;

// A copy between devices that a realize started (core/copy_item.hpp): the device it writes, what
// it copies ("copy N, VK:1 <- VK") and the number of the realize that started it, for its error.
struct CopyInFlight {
  Device* to;
  std::shared_future<RunStat> stat;
  std::string what;
  int64_t realize_number;
};

// The copies that realizes started and did not wait for; under engine_mu. Their DEBUG lines and
// errors are taken once they are done: at the next read (or a later realize, once done).
std::vector<CopyInFlight> copies_in_flight;
int64_t realizes_begun = 0;  // numbers the realizes, under engine_mu

// Rethrows the error a copy met with the copy and its realize named, as the same kind of error:
// a later realize or read surfaces it, and must not be taken for the one that failed.
[[noreturn]] void rethrow_copy_error(const CopyInFlight& c) {
  const std::string prefix = c.what + " (started by realize #" + std::to_string(c.realize_number) +
                             ", now #" + std::to_string(realizes_begun) + ") failed: ";
  try {
    throw;
  } catch (const DeviceLost& e) {
    throw DeviceLost(prefix + e.what());
  } catch (const OutOfMemory& e) {
    throw OutOfMemory(prefix + e.what());
  } catch (const std::exception& e) {
    throw Error(prefix + e.what());
  }
}

// Takes the copies in flight that are done (all of them with `wait`), oldest first; a copy that
// failed throws its error here, once. A copy still running does not hold up later ones that have
// ended: a read takes the copies it waited for, whichever started first.
void settle_copies(bool wait, int debug) {
  for (size_t i = 0; i < copies_in_flight.size();) {
    const CopyInFlight c = copies_in_flight[i];
    if (!wait && c.stat.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      ++i;
      continue;
    }
    copies_in_flight.erase(copies_in_flight.begin() + std::ptrdiff_t(i));
    RunStat stat;
    try {
      stat = c.stat.get();
    } catch (...) {
      rethrow_copy_error(c);
    }
    print_stats(c.to->name(), {stat}, debug);
  }
}

// Compiles every kernel of the schedule before the first is recorded (Device::prepare), each
// device with the items that run on it.
void prepare_kernels(const std::vector<ScheduleItem>& items, const RunOptions& options) {
  std::map<std::string, std::vector<ScheduleItem>> by_device;
  for (const ScheduleItem& item : items)
    if (!is_copy(item)) by_device[upper(item.buffers[0]->device())].push_back(item);
  for (const auto& [name, list] : by_device) device(name).prepare(list, options);
}

// Runs a copy item in schedule order (core/copy_item.hpp). Both devices take part in the
// realize's final wait; the copy's DEBUG=2 line is printed once it is done.
void run_copy_between(const ScheduleItem& item, std::vector<Device*>& used,
                      std::vector<CopyInFlight>& copies, int debug) {
  ensure_allocated(*item.buffers[0], debug);
  ensure_allocated(*item.buffers[1], debug);
  if (item.buffers[0]->count() == 0) return;
  std::shared_ptr<Allocation> dst = item.buffers[0]->allocation, src = item.buffers[1]->allocation;
  auto settle = [&](Device& dev) {
    if (auto it = std::find(used.begin(), used.end(), &dev); it != used.end())
      print_stats(dev.name(), dev.synchronize(), debug);
  };
  const std::string what = "copy " + std::to_string(item.buffers[0]->nbytes()) + ", " +
                           device(item.buffers[0]->device()).name() + " <- " +
                           device(item.buffers[1]->device()).name();
  copies.push_back(
      {&device(item.buffers[0]->device()), run_copy(item, dst, src, settle), what, realizes_begun});
  for (const auto& b : item.buffers) {
    Device& dev = device(b->device());
    if (std::find(used.begin(), used.end(), &dev) == used.end()) used.push_back(&dev);
  }
}

}  // namespace

bool register_device(const std::string& prefix, DeviceFactory factory) {
  Registry& r = Registry::get();
  std::lock_guard lock(r.mu);
  r.factories[upper(prefix)] = std::move(factory);
  return true;
}

std::string canonical_device(const std::string& name) {
  std::string n = upper(name);
  if (n.size() > 2 && n.ends_with(":0")) n.resize(n.size() - 2);
  return n;
}

Device& device(const std::string& requested) {
  wait_first_at_exit();  // asked of every thread once: the main thread may open no device itself
  Registry& r = Registry::get();
  std::lock_guard lock(r.mu);
  const std::string name = canonical_device(requested);
  if (auto it = r.open.find(name); it != r.open.end()) return *it->second;
  const std::string prefix = name.substr(0, name.find(':'));
  auto f = r.factories.find(prefix);
  if (f == r.factories.end()) {
    std::string known;
    for (const auto& [k, _] : r.factories) known += (known.empty() ? "" : ", ") + k;
    throw Error("no device named '" + requested + "' (known: " + known + ")");
  }
  std::unique_ptr<Device> dev = f->second(name);
  static const bool waits_at_exit = std::atexit(wait_for_devices_at_exit) == 0;
  (void)waits_at_exit;
  if (setting("DEBUG") >= 1) std::printf("opened device %s\n", name.c_str());
  std::fflush(stdout);
  return *r.open.emplace(name, std::move(dev)).first->second;
}

Allocation& ensure_allocated(const Buffer& buffer, int debug) {
  if (!buffer.allocation && &buffer.storage() != &buffer) {
    ensure_allocated(buffer.storage(), debug);  // versions share their storage's memory
    buffer.allocation = buffer.storage().allocation;
  }
  if (!buffer.allocation) {
    Device& dev = device(buffer.device());
    buffer.allocation = dev.allocate(buffer);
    buffer.allocation->counted_bytes_ = int64_t(buffer.capacity_bytes());
    counters.mem_used += buffer.allocation->counted_bytes_;
    if (buffer.initial_data) {
      dev.copy_in(*buffer.allocation, *buffer.initial_data);
      buffer.initial_data.reset();  // the upload is synchronous: nothing reads the host copy now
      ++counters.uploads;
      print_stats(
          dev.name(),
          {RunStat{"copy " + std::to_string(buffer.nbytes()) + ", " + dev.name() + " <- HOST", 1,
                   int64_t(buffer.nbytes()), 0, 0}},
          debug);
    }
  }
  return *buffer.allocation;
}

Allocation& ensure_allocated(const Buffer& buffer) {
  return ensure_allocated(buffer, int(setting("DEBUG")));
}

Allocation::~Allocation() { counters.mem_used -= counted_bytes_; }

namespace {
struct ListedRecording final : Recording {
  std::vector<ScheduleItem> items;
  std::vector<std::vector<Allocation*>> memory;
  RunOptions options;
};
}  // namespace

std::unique_ptr<Recording> Device::record(std::span<const ScheduleItem> items,
                                          std::vector<std::vector<Allocation*>> memory,
                                          const RunOptions& options) {
  auto r = std::make_unique<ListedRecording>();
  r->items.assign(items.begin(), items.end());
  r->memory = std::move(memory);
  r->options = options;
  return r;
}

std::vector<RunStat> Device::replay(Recording& recording, const VarVals& var_vals) {
  auto& r = static_cast<ListedRecording&>(recording);
  for (size_t i = 0; i < r.items.size(); ++i) {
    const ScheduleItem& item = r.items[i];
    bool rebound = false;
    for (const auto& [name, value] : item.var_vals)
      if (auto it = var_vals.find(name); it != var_vals.end() && it->second != value)
        rebound = true;
    if (!rebound) {
      run(item, r.memory[i], r.options);
      continue;
    }
    ScheduleItem with = item;
    for (auto& [name, value] : with.var_vals)
      if (auto it = var_vals.find(name); it != var_vals.end()) value = it->second;
    run(with, r.memory[i], r.options);
  }
  return synchronize();
}

void Device::copy(Allocation& src, Allocation& dst, size_t bytes) {
  std::vector<std::byte> host(bytes);
  copy_out(src, host);
  copy_in(dst, host);
}

GlobalCounters global_counters() {
  return GlobalCounters{counters.schedules.load(), counters.kernels.load(),
                        counters.uploads.load(),   counters.mem_used.load(),
                        counters.replays.load(),   counters.dispatches.load()};
}

Capture*& active_capture() {
  thread_local Capture* capture = nullptr;
  return capture;
}

std::vector<std::weak_ptr<TensorState>>*& active_assign_log() {
  thread_local std::vector<std::weak_ptr<TensorState>>* log = nullptr;
  return log;
}

std::vector<std::weak_ptr<TensorState>>& pending_assigns() {
  thread_local std::vector<std::weak_ptr<TensorState>> pending;
  return pending;
}

bool& reserve_symbolic_max() {
  thread_local bool reserve = false;
  return reserve;
}

std::mutex& engine_mutex() { return engine_mu; }

std::unique_lock<std::mutex> lock_engine() {
  std::unique_lock lock(engine_mu);
  const std::thread::id exiting = exiting_thread.load();
  if (exiting != std::thread::id() && exiting != std::this_thread::get_id()) {
    lock.unlock();
    wait_for_the_process_to_end();
  }
  return lock;
}

void settle_ended_copies() { settle_copies(false, int(setting("DEBUG"))); }

void wait_if_exiting() {
  if (!exit_began_on_this_thread()) return;
  const int debug = int(setting("DEBUG"));
  settle_copies(true, debug);
  Registry& r = Registry::get();
  std::lock_guard lock(r.mu);
  for (auto& [name, dev] : r.open) print_stats(dev->name(), dev->synchronize(), debug);
}

void replay_copy(const ScheduleItem& item) {
  // Both devices count as used: a copy through the host (unmapped memory) synchronizes both.
  std::vector<Device*> used = {&device(item.buffers[0]->device()),
                               &device(item.buffers[1]->device())};
  run_copy_between(item, used, copies_in_flight, int(setting("DEBUG")));
}

void report_replay(const Device& device, std::vector<RunStat> stats, bool first_step) {
  if (first_step) ++counters.replays;
  for (RunStat& s : stats) {
    counters.kernels += s.kernels;
    s.name += " (jit)";
  }
  counters.dispatches += int64_t(stats.size());
  print_stats(device.name(), stats, int(setting("DEBUG")));
}

void count_replay() { ++counters.replays; }

namespace {

// The caller's lazy assigns (Capture::callers_assigns) that the graphs of `tensors` read, taken off
// the capture's list.
std::vector<Capture::CallerAssign> callers_assigns_read(Capture& capture,
                                                        std::span<Tensor* const> tensors) {
  std::vector<Capture::CallerAssign> found;
  std::unordered_set<const UOp*> seen;
  std::vector<const UOp*> stack;
  for (Tensor* t : tensors) stack.push_back(t->node().get());
  while (!stack.empty()) {
    const UOp* u = stack.back();
    stack.pop_back();
    if (!seen.insert(u).second) continue;
    if (u->op == Ops::ASSIGN)
      if (auto it = capture.callers_assigns.find(u); it != capture.callers_assigns.end()) {
        found.push_back(std::move(it->second));
        capture.callers_assigns.erase(it);
      }
    for (const UOpPtr& src : u->src) stack.push_back(src.get());
  }
  return found;
}

}  // namespace

void realize(std::span<Tensor* const> tensors) {
  // Sharded tensors (core/multi.hpp) realize as their shards, each on its device, in one schedule
  // with the others; the tensor then views the realized shards.
  if (std::any_of(tensors.begin(), tensors.end(),
                  [](Tensor* t) { return is_multi_device(t->device()); })) {
    std::vector<Tensor> plain;
    std::vector<std::optional<Sharded>> lowered;
    for (Tensor* t : tensors) {
      lowered.push_back(is_multi_device(t->device()) ? std::optional(lower_multi(t->node()))
                                                     : std::nullopt);
      if (!lowered.back())
        plain.push_back(*t);  // an alias: realizing it realizes t
      else
        for (const UOpPtr& s : lowered.back()->shards) plain.emplace_back(s);
    }
    std::vector<Tensor*> all;
    for (Tensor& t : plain) all.push_back(&t);
    realize(all);
    size_t next = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (!lowered[i]) {
        ++next;
        continue;
      }
      for (UOpPtr& s : lowered[i]->shards) s = plain[next++].node();
      tensors[i]->set_realized(make_multi(*lowered[i]));
    }
    return;
  }
  // Lazy assigns the Jit's caller made, read by the function under capture, run now, outside
  // the capture and in one realize (as the function's eager call would have run them, reads of
  // old values first), once; captured, every replay would run them again (core/jit.hpp). The
  // capture's schedule then finds them realized (their nodes' recorded values).
  if (Capture* capture = active_capture(); capture && !capture->callers_assigns.empty()) {
    std::vector<Tensor> handles;
    for (const Capture::CallerAssign& a : callers_assigns_read(*capture, tensors)) {
      handles.emplace_back(a.node);
      // The caller's tensor itself where this is still its node, so the realize points it at
      // its buffer; else the function assigned it again, or this is an older assign under the
      // current one: the node alone.
      if (const std::shared_ptr<TensorState> s = a.tensor.lock(); s && s->node == a.node)
        handles.back().state_ = s;
    }
    if (!handles.empty()) {
      std::vector<Tensor*> all;
      for (Tensor& h : handles) all.push_back(&h);
      Capture* const paused = std::exchange(active_capture(), nullptr);
      try {
        realize(all);
      } catch (...) {
        active_capture() = paused;
        throw;
      }
      active_capture() = paused;
    }
  }
  const auto lock = lock_engine();
  ++realizes_begun;
  // An earlier realize's copy that failed says so before this one does anything: re-running this
  // realize then runs it whole.
  settle_copies(false, int(setting("DEBUG")));
  std::vector<UOpPtr> nodes;
  for (Tensor* t : tensors) nodes.push_back(t->node());
  const Schedule sched = create_schedule(nodes);
  if (!sched.items.empty()) ++counters.schedules;  // reading a realized tensor is not one
  if (reserve_symbolic_max())  // before the planner, which fits buffers into blocks by capacity
    for (const ScheduleItem& item : sched.items)
      for (const auto& b : item.buffers) b->reserve_max();
  std::unordered_set<int64_t> lent;
  if (!setting("NO_MEMORY_PLANNER") && !sched.items.empty()) {
    // Non-leaf outputs that can carry a gradient keep their graph for a later backward
    // (Tensor::set_realized): the planner leaves that graph's realized values where they are.
    std::vector<UOpPtr> kept_graphs;
    if (!NoGrad::active())
      for (size_t i = 0; i < tensors.size(); ++i)
        if (!tensors[i]->state_->requires_grad && tensors[i]->requires_grad())
          kept_graphs.push_back(nodes[i]);
    lent = plan_memory(sched, nodes, kept_graphs);
  }
  const RunOptions options = RunOptions::from_settings();
  if (Capture* capture = active_capture())
    for (const auto& b : sched.uploads)
      if (b->initial_data && !b->regenerate) capture->uploaded.emplace_back(b, b->initial_data);
  for (const auto& b : sched.uploads) ensure_allocated(*b, options.debug);
  std::vector<Device*> used;
  std::vector<CopyInFlight> copies;
  try {
    prepare_kernels(sched.items, options);
    for (const ScheduleItem& item : sched.items) {
      if (is_copy(item)) {
        run_copy_between(item, used, copies, options.debug);
        continue;
      }
      const std::string& dev_name = item.buffers[0]->device();
      std::vector<Allocation*> memory;
      for (const auto& b : item.buffers) {
        if (upper(b->device()) != upper(dev_name))
          throw Error("a kernel reads " + b->device() + " and " + dev_name +
                      " buffers: copy tensors to one device first");
        memory.push_back(&ensure_allocated(*b, options.debug));
      }
      if (item.buffers[0]->count() == 0) continue;  // nothing to compute into
      Device& dev = device(dev_name);
      dev.run(item, memory, options);
      ++counters.kernels;
      ++counters.dispatches;
      if (std::find(used.begin(), used.end(), &dev) == used.end()) used.push_back(&dev);
    }
  } catch (...) {
    // Kernels queued before the one that failed (a dtype the device cannot do, say) write this
    // schedule's buffers, which die with it: let them finish first, or they write into memory
    // the allocator hands out next (a later upload read back the stale kernel's result).
    for (Device* dev : used) {
      try {
        dev->synchronize();
      } catch (...) {
      }
    }
    for (const auto& c : copies) c.stat.wait();  // they read and write this schedule's memory
    throw;
  }
  // The host waits here only for DEBUG=2, which prints each kernel's time; otherwise the work is
  // submitted and runs on while the program goes on (Device::flush). On the thread running exit,
  // past the exit wait, nothing else would wait for it.
  const bool wait =
      options.debug >= 2 || setting("VKG_SYNC_REALIZE") > 0 || exit_began_on_this_thread();
  // Every device is flushed (submitted) even when one fails (a lost device throws from its
  // throttle wait): an unsubmitted batch would still hold kernels writing this schedule's
  // buffers, which the allocator hands out again as the error leaves (Allocator::release counts
  // only what was submitted). Then the rest are waited for, as the catch above does.
  std::exception_ptr flush_error;
  for (Device* dev : used) {
    try {
      print_stats(dev->name(), wait ? dev->synchronize() : dev->flush(), options.debug);
    } catch (...) {
      if (!flush_error) flush_error = std::current_exception();
    }
  }
  if (flush_error) {
    for (Device* dev : used) {
      try {
        dev->synchronize();
      } catch (...) {
      }
    }
    for (const auto& c : copies) c.stat.wait();
    std::rethrow_exception(flush_error);
  }
  copies_in_flight.insert(copies_in_flight.end(), copies.begin(), copies.end());
  commit_realized(sched, lent);
  if (Capture* capture = active_capture()) {
    for (const ScheduleItem& item : sched.items) {
      if (item.buffers[0]->count() > 0)
        capture->items.push_back(item);
      else if (item.buffers[0]->max_count() > 0)
        capture->skipped_symbolic = true;
    }
    for (const auto& b : sched.uploads)
      if (b->regenerate) capture->regenerated.push_back(b);
    for (Tensor* t : tensors) capture->realized.push_back(t->state_);
  }
  // By the nodes taken before any changes: two of the tensors may be aliases of one state.
  for (size_t i = 0; i < tensors.size(); ++i)
    tensors[i]->set_realized(sched.realized.at(nodes[i].get()));
  // After the tensors are realized: an error here is a copy's (this realize's under a waiting
  // DEBUG, or an earlier one's that ended meanwhile), named by rethrow_copy_error, and leaves
  // this realize's tensors pointing at the buffers its submitted work writes.
  settle_copies(wait, options.debug);
}

Tensor& Tensor::realize() {
  Tensor* self = this;
  vkg::realize(std::span<Tensor* const>(&self, 1));
  return *this;
}

void Tensor::check_host_type(DType wanted, std::string_view op) const {
  if (wanted != dtype())
    throw Error(std::string(op) + ": the tensor holds " + dtype().name() + ", not " +
                wanted.name());
}

std::vector<std::byte> Tensor::bytes() const {
  if (active_capture())
    throw Error(
        "Jit: reading a tensor's value (item, to_vector, bytes) while the JIT captures its "
        "function: a replay runs the captured kernels without the function, so the value would "
        "not be read again. Return the tensor from the function and read it after the call");
  if (is_multi_device(device())) return to(split_devices(device())[0]).bytes();  // gathered
  Tensor t = *this;
  t.realize();
  const UOp* n = t.node().get();
  while (n->op != Ops::BUFFER) n = n->src[0].get();  // a realized tensor views its whole buffer
  const Buffer& b = buffer_of(*n);
  // A host that cannot hold the bytes is the user's error, said in their terms (the vector
  // throws std::bad_alloc or std::length_error).
  std::vector<std::byte> out;
  try {
    out.resize(b.nbytes());
  } catch (const std::exception&) {
    throw OutOfMemory("bytes: the host cannot hold the " + std::to_string(b.nbytes()) +
                      " bytes of a tensor of shape " + shape_str(shape()) + " " + dtype().name());
  }
  // Under the engine's lock: a Buffer's allocation is set once, and another thread may be
  // reading (or realizing from) the same buffer now.
  const auto lock = lock_engine();
  // The read waits only for the copies between devices that its buffer depends on: copy_out waits
  // for a copy that writes the buffer (Device::host_uses) and for the kernels that write it, which
  // waited on their queue for the copies they read. Copies of other buffers go on; those that
  // ended report here (their DEBUG=2 lines, a failure's error), before and after the read.
  const int debug = int(setting("DEBUG"));
  settle_copies(false, debug);
  Allocation& memory = ensure_allocated(b);
  vkg::device(b.device()).copy_out(memory, out);
  settle_copies(false, debug);  // a copy that fed it and failed: its error, not the stale bytes
  return out;
}

}  // namespace vkg
