// Guards of a Jit's capture (core/binding_guard.hpp).
#include <vkgrad/core/binding_guard.hpp>

#include <limits>

#include <vkgrad/core/jit_capture.hpp>
#include <vkgrad/core/symbolic.hpp>

namespace vkg {

void guard_binding(const UOpPtr& expr, int64_t lo, int64_t hi, std::string what) {
  Capture* capture = active_capture();
  if (!capture) return;
  const UOpPtr e = simplify(expr);
  if (e->is_const()) return;  // the same at every binding
  // Bounds that every binding meets need no check (vmin/vmax are the variables' ranges').
  if (e->vmin() >= lo && e->vmax() <= hi) return;
  capture->guards.push_back({e, lo, hi, std::move(what)});
}

void guard_same_value(const UOpPtr& expr, int64_t value, std::string what) {
  guard_binding(expr, value, value, std::move(what));
}

std::string broken_guard(const std::vector<BindingGuard>& guards,
                         const std::map<std::string, int64_t>& vars) {
  for (const BindingGuard& g : guards) {
    bool bound = true;
    const IntExpr e(g.expr);
    for (const std::string& name : e.var_names()) bound = bound && vars.count(name);
    if (!bound) continue;  // a variable the function binds itself: frozen at the capture's value
    const int64_t v = eval_int(g.expr, vars);
    if (v >= g.lo && v <= g.hi) continue;
    const std::string range =
        g.lo == g.hi ? "= " + std::to_string(g.lo)
        : g.hi == std::numeric_limits<int64_t>::max()
            ? ">= " + std::to_string(g.lo)
            : "in [" + std::to_string(g.lo) + ", " + std::to_string(g.hi) + "]";
    return g.what + " (it needs " + render(g.expr) + " " + range + ", here it is " +
           std::to_string(v) + ")";
  }
  return "";
}

}  // namespace vkg
