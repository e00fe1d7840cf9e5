// vkg::Jit, tinygrad's TinyJit for C++: wraps a function of tensors. The first call runs it as
// usual; the second runs it while capturing every kernel it realizes, and records them once as
// the device's command buffer; every later call replays that command buffer with the new inputs
// copied into the buffers the capture read them from. Nothing is traced, scheduled, lowered,
// compiled or recorded on a replay.
//
//   nn::Adam opt(model.parameters(), 1e-3);
//   Jit step([&](const std::vector<Tensor>& in) {
//     opt.zero_grad();
//     Tensor loss = model(in[0]).sparse_categorical_crossentropy(in[1]);
//     loss.backward();
//     opt.step({loss});
//     return std::vector<Tensor>{loss};
//   });
//   for (...) float l = step({x, y})[0].item<float>();
//
// What the function may do, and what a replay does (tinygrad's test_jit_footguns.py):
//  - The inputs are realized before each call. The function sees them by value: the capture
//    reads copies in buffers of the Jit's own, and a replay copies the new inputs into those (or
//    uploads host data straight there), so assigning to an input inside the function does not
//    reach the caller's tensor. A replay needs the captured call's shapes, dtypes and devices:
//    another is a vkg::Error (use a Jit per shape, or reset()). Symbolic sizes
//    (core/variable.hpp) are the exception: an input shaped (3, n) may come with n bound to
//    another value on each call. The capture gives buffers of symbolic size room for the
//    variables' maxima; a replay writes the new values (and the workgroup counts they need)
//    into the recorded kernels' argument buffers, and its outputs have the call's binding's
//    shape. A capture whose kernels use a symbolic size as plain numbers (a reshape of it to
//    numbers) replays its own binding only; another is a vkg::Error saying so. A binding where an
//    op of the function would not accept its arguments (max over a size of 0, a plain 3 taken as
//    n by a broadcast) is the vkg::Error an eager call gives there (core/binding_guard.hpp).
//  - Reading a value (item, to_vector, bytes) while the function is captured is a vkg::Error: a
//    replay would not read it again. Return the tensor and read it after the call.
//  - The outputs live in buffers that every replay writes again: a tensor one call returned holds
//    the next call's value after it. Keep one with clone() (a copy in a buffer of its own).
//  - C++ values the function reads (a double, a step count, a Tensor made from host data inside
//    it) are frozen at the capture. Keep what changes in tensors made outside the function and
//    update them in place: call Optimizer::set_lr (and lr schedules) outside the function, which
//    then reads the new rate; the optimizers' beta^t are such tensors. The optimizer's C++ step
//    count does not advance on a replay.
//  - Random numbers advance on every replay: a replay draws from the global generator as an
//    eager call would, so the same seed gives a replayed run and an eager one the same numbers.
//  - Tensors the function realizes (parameters, optimizer states, running statistics) are
//    written in place by each replay; a lazy graph over one, built before a replay and realized
//    after it, reads the new contents. An assign the function leaves lazy (nothing it returns
//    reads the tensor) is realized at the end of the call, the first and the captured one, so
//    every call and replay assigns once, as an eager call does. An in-place assign the CALLER
//    left lazy (on the calling thread) to a tensor the function reads runs once, before the
//    function reads it, as in an eager call: the capture runs those its function's graphs read
//    outside the capture (captured, each replay would run them again), and a replay first runs
//    those to tensors whose buffers its kernels use (left lazy, they would run after the replay
//    read the old values). Assigns to other tensors stay lazy. Limits: a replay goes by buffer,
//    so an old view of the tensor (taken before the assign) reads the new value where an eager
//    call would read the old; an assign to a sharded tensor is not in place, so replays keep
//    reading its old buffers (reset() the Jit); a function reading both an old view and the
//    new value of a tensor assigned lazily gets the new value in both where an eager call
//    refuses ("read at its old value by a computation that also needs its new value"); one made
//    on another thread must be realized before the call.
//  - Several devices: a function that copies between devices (Tensor::to) or runs on sharded
//    tensors (core/multi.hpp) replays its kernels as one recording per run of kernels of one
//    device, and its copies between them in between, in the captured order. No step waits for
//    another on the host: each device waits on its queue for the copies it reads (as an eager
//    realize's do), so the devices overlap, and the host waits where it reads a result. Sharded
//    inputs replay with the captured call's split.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_set>
#include <vector>

#include <vkgrad/core/tensor.hpp>

namespace vkg {

class Device;
class Recording;

class Jit {
 public:
  using Function = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

  explicit Jit(Function function);
  ~Jit();
  Jit(const Jit&) = delete;
  Jit& operator=(const Jit&) = delete;

  // Calls the function (calls 1 and 2) or replays its capture (3 and later); returns its
  // outputs, realized.
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);

  int64_t calls() const { return calls_; }
  bool captured() const { return plan_ != nullptr; }
  // Kernels a replay runs (0 before the capture).
  size_t kernels() const;
  // Conditions on the variables' values a replay at another binding checks (0 before the
  // capture): what the function's ops checked with the captured binding, each once
  // (core/binding_guard.hpp).
  size_t guards() const;
  // Forgets the capture: the next call runs the function as a first call would.
  void reset();

  // The device's recording of the capture and its device (nullptr before it, when the function
  // ran no kernel, or, for the recording, when it ran on several devices): for benchmarks that
  // time its bare submission against a replay.
  Recording* recording() const;
  Device* device() const;

 private:
  struct Plan;
  std::vector<Tensor> capture(std::vector<Tensor> inputs);
  // Realizes the assigns (Tensor::assign) the function made and left lazy, noted in `assigned`.
  // Left lazy, the capture's would run at the caller's next read of the tensor, outside the
  // capture, so no replay would run it again, where eager calls assign on every call; the
  // first call's would run inside the capture (a read of the tensor there), so every replay
  // would run it once more. Realized at the end of both calls (after the outputs, where an eager
  // caller's later read would realize them), each call assigns once, as an eager one.
  static void realize_left_assigns(const std::vector<std::weak_ptr<TensorState>>& assigned);
  // Before a replay: realizes, in one realize, the lazy assigns this thread's caller left to
  // tensors whose buffers' storage is in `storage` (those the capture's kernels use); the others
  // stay lazy and listed (core/jit_capture.hpp's pending_assigns).
  static void realize_callers_assigns(const std::unordered_set<int64_t>& storage);
  std::vector<Tensor> replay(const std::vector<Tensor>& inputs);

  Function function_;
  int64_t calls_ = 0;
  std::unique_ptr<Plan> plan_;
};

}  // namespace vkg
