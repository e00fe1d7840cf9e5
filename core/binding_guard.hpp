// What a vkg::Jit replay at another binding of its variables must check again (core/jit.hpp).
// An op on tensors of symbolic size checks its arguments with the bound values (core/variable.hpp)
// and builds kernels over the expressions: the kernels then assume what the check found, that a
// size is not 0 (max), that a plain 3 and n are the same size (a broadcast), that a shrink stays
// inside its axis. An eager call checks again at each binding; a replay runs no op, so each such
// op leaves a guard in the capture that records it, and a replay whose binding breaks one is the
// vkg::Error the op would give (or says the capture cannot follow it) instead of a silent wrong
// answer.
//
// Outside a capture (every eager call) a guard costs a thread-local read: its message is built
// only when the guard is recorded, and an op that works out a guard's expression just for it asks
// recording_guards() first.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <vkgrad/core/symbolic.hpp>
#include <vkgrad/core/uop.hpp>
#include <vkgrad/core/variable.hpp>

namespace vkg {

// `expr` (over DEFINE_VARs) must lie in [lo, hi] at a replay's binding; `what` says which op
// assumed it and what eager does where it does not.
struct BindingGuard {
  UOpPtr expr;
  IntExpr eval;  // expr, compiled once at the capture for every replay's check
  int64_t lo = 0, hi = 0;
  std::string what;
};

// The guards of one capture, in the order its ops recorded them, each condition once.
class BindingGuards {
 public:
  // Adds the guard `expr` (simplified) in [lo, hi] and returns where its message goes; nullptr,
  // adding nothing, where it holds at every binding (a constant, or the variables' ranges keep it
  // inside) or where a guard already added on the same expression implies it (a range inside
  // this one's). A deep model checks the same sizes layer after layer: each is evaluated once per
  // replay, and its message built once. broken() answers as it did without the skipped ones: the
  // guard that implies one comes first and breaks wherever it does.
  std::string* add(const UOpPtr& expr, int64_t lo, int64_t hi);

  // The first guard that `vars` breaks, as a sentence naming it, or "" when all hold. A guard
  // over a variable missing from `vars` (one the function binds itself, frozen at the capture)
  // holds.
  std::string broken(const std::map<std::string, int64_t>& vars) const;

  size_t size() const { return guards_.size(); }

 private:
  std::vector<BindingGuard> guards_;
  std::unordered_map<const UOp*, std::vector<size_t>> by_expr_;  // guards_' indices
};

// Whether this thread records guards now (a vkg::Jit captures, core/jit_capture.hpp).
bool recording_guards();

// While one lives, this thread records no guards: for an op that runs another's checks with the
// bound values (a symbolic shrink its plain one) and records guards of its own, over the symbols.
class GuardsPaused {
 public:
  GuardsPaused();
  ~GuardsPaused();
  GuardsPaused(const GuardsPaused&) = delete;
  GuardsPaused& operator=(const GuardsPaused&) = delete;
};

// The capture's guards' message slot for a new guard (BindingGuards::add), or nullptr when none
// is to be recorded: no capture is active, or the capture needs no such guard.
std::string* record_binding_guard(const UOpPtr& expr, int64_t lo, int64_t hi);

// Records into the capture this thread records, if any, that `expr`'s value must lie in
// [lo, hi] at a replay. `what()` (returning a std::string) is called only for a guard recorded.
template <class Message>
void guard_binding(const UOpPtr& expr, int64_t lo, int64_t hi, Message&& what) {
  if (std::string* message = record_binding_guard(expr, lo, hi))
    *message = std::forward<Message>(what)();
}
// guard_binding for `expr` keeping the value it has now.
template <class Message>
void guard_same_value(const UOpPtr& expr, int64_t value, Message&& what) {
  guard_binding(expr, value, value, std::forward<Message>(what));
}

// Random numbers of a symbolic shape are drawn at its bound sizes (a generator of symbolic size
// is not built), so a replay at another binding would give the captured draw: this records that
// the sizes must stay as bound, and a replay at another binding is the error naming `op` (the
// random op: rand_like, dropout, attention's dropout).
void guard_drawn_shape(const SymShape& shape, std::string_view op);

}  // namespace vkg
