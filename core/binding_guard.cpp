// Guards of a Jit's capture (core/binding_guard.hpp).
#include <vkgrad/core/binding_guard.hpp>

#include <limits>

#include <vkgrad/core/jit_capture.hpp>

namespace vkg {

std::string* BindingGuards::add(const UOpPtr& expr, int64_t lo, int64_t hi) {
  const UOpPtr e = simplify(expr);
  if (e->is_const()) return nullptr;  // the same at every binding
  // Bounds that every binding meets need no check (vmin/vmax are the variables' ranges').
  if (e->vmin() >= lo && e->vmax() <= hi) return nullptr;
  std::vector<size_t>& same = by_expr_[e.get()];
  for (size_t i : same)
    if (guards_[i].lo >= lo && guards_[i].hi <= hi) return nullptr;
  same.push_back(guards_.size());
  guards_.push_back({e, IntExpr(e), lo, hi, ""});
  return &guards_.back().what;
}

std::string BindingGuards::broken(const std::map<std::string, int64_t>& vars) const {
  std::vector<int64_t> values;
  for (const BindingGuard& g : guards_) {
    values.clear();
    for (const std::string& name : g.eval.var_names()) {
      const auto it = vars.find(name);
      if (it == vars.end()) break;  // a variable the function binds itself: frozen at the capture
      values.push_back(it->second);
    }
    if (values.size() != g.eval.var_names().size()) continue;
    const std::optional<int64_t> v = g.eval(values);
    if (v && *v >= g.lo && *v <= g.hi) continue;
    const std::string range =
        g.lo == g.hi ? "= " + std::to_string(g.lo)
        : g.hi == std::numeric_limits<int64_t>::max()
            ? ">= " + std::to_string(g.lo)
            : "in [" + std::to_string(g.lo) + ", " + std::to_string(g.hi) + "]";
    return g.what + " (it needs " + render(g.expr) + " " + range + ", here it is " +
           (v ? std::to_string(*v) : "undefined") + ")";
  }
  return "";
}

namespace {
thread_local int guards_paused = 0;
}  // namespace

GuardsPaused::GuardsPaused() { ++guards_paused; }
GuardsPaused::~GuardsPaused() { --guards_paused; }

bool recording_guards() { return guards_paused == 0 && active_capture() != nullptr; }

std::string* record_binding_guard(const UOpPtr& expr, int64_t lo, int64_t hi) {
  Capture* capture = guards_paused == 0 ? active_capture() : nullptr;
  return capture ? capture->guards.add(expr, lo, hi) : nullptr;
}

}  // namespace vkg
