// What a vkg::Jit replay at another binding of its variables must check again (core/jit.hpp).
// An op on tensors of symbolic size checks its arguments with the bound values (core/variable.hpp)
// and builds kernels over the expressions: the kernels then assume what the check found, that a
// size is not 0 (max), that a plain 3 and n are the same size (a broadcast), that a shrink stays
// inside its axis. An eager call checks again at each binding; a replay runs no op, so each such
// op leaves a guard in the capture that records it, and a replay whose binding breaks one is the
// vkg::Error the op would give (or says the capture cannot follow it) instead of a silent wrong
// answer.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <vkgrad/core/uop.hpp>

namespace vkg {

// `expr` (over DEFINE_VARs) must lie in [lo, hi] at a replay's binding; `what` says which op
// assumed it and what eager does where it does not.
struct BindingGuard {
  UOpPtr expr;
  int64_t lo = 0, hi = 0;
  std::string what;
};

// Records a guard into the capture this thread records (core/jit_capture.hpp), if any, when
// `expr` has variables: its value at the capture must lie in [lo, hi].
void guard_binding(const UOpPtr& expr, int64_t lo, int64_t hi, std::string what);
// guard_binding for `expr` keeping the value it has now.
void guard_same_value(const UOpPtr& expr, int64_t value, std::string what);

// The first guard that `vars` breaks, as a sentence naming it, or "" when all hold. A guard over
// a variable missing from `vars` (one the function binds itself, frozen at the capture) holds.
std::string broken_guard(const std::vector<BindingGuard>& guards,
                         const std::map<std::string, int64_t>& vars);

}  // namespace vkg
