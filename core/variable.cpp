// Variable and SymInt: sizes that carry an expression over variables next to their value.
#include <vkgrad/core/variable.hpp>

#include <algorithm>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/symbolic.hpp>

namespace vkg {

SymInt::SymInt(Plain, int64_t v) : value_(v) {}

SymInt::SymInt(UOpPtr expr, int64_t value, std::vector<Binding> bindings, bool bound)
    : expr_(simplify(expr)), value_(value), bindings_(std::move(bindings)), bound_(bound) {}

void SymInt::require_bound(std::string_view op) const {
  if (bound_) return;
  throw Error(std::string(op) + ": variable '" + render(expr()) +
              "' has no value: give it one with Variable::bind(value) before using it as a size");
}

std::string SymInt::str() const { return is_symbolic() ? render(expr_) : std::to_string(value_); }

namespace {

SymInt combine(Ops op, const SymInt& a, const SymInt& b, int64_t value) {
  std::vector<Binding> all = merge_bindings({a.bindings(), b.bindings()}, "symbolic size");
  return SymInt(binary(op, a.expr(), b.expr()), value, std::move(all),
                a.is_bound() && b.is_bound());
}

}  // namespace

SymInt operator+(const SymInt& a, const SymInt& b) {
  return combine(Ops::ADD, a, b, a.value() + b.value());
}
SymInt operator-(const SymInt& a, const SymInt& b) {
  return combine(Ops::SUB, a, b, a.value() - b.value());
}
SymInt operator*(const SymInt& a, const SymInt& b) {
  return combine(Ops::MUL, a, b, a.value() * b.value());
}

Variable::Variable(std::string name, int64_t min, int64_t max) {
  if (name.empty()) throw Error("Variable: the name must not be empty");
  if (min < 0 || min > max || max > INT32_MAX)
    throw Error("Variable '" + name + "': bounds [" + std::to_string(min) + ", " +
                std::to_string(max) +
                "] must satisfy 0 <= min <= max <= 2^31-1 (a variable is a size)");
  node_ = UOp::var(std::move(name), min, max);
}

const std::string& Variable::name() const { return node_->arg_as<VarArg>().name; }

SymInt Variable::bind(int64_t value) const {
  const VarArg& v = node_->arg_as<VarArg>();
  if (value < v.min || value > v.max)
    throw Error("Variable '" + v.name + "': cannot bind " + std::to_string(value) +
                ", outside its bounds [" + std::to_string(v.min) + ", " + std::to_string(v.max) +
                "]");
  return SymInt(node_, value, {Binding{node_, value}});
}

Variable::operator SymInt() const { return SymInt(node_, 0, {}, false); }

std::vector<Binding> merge_bindings(const std::vector<std::vector<Binding>>& sizes,
                                    std::string_view op) {
  std::vector<Binding> out;
  for (const auto& list : sizes)
    for (const Binding& b : list) {
      auto same = std::find_if(out.begin(), out.end(), [&](const Binding& o) {
        return o.var->arg_as<VarArg>().name == b.var->arg_as<VarArg>().name;
      });
      if (same == out.end()) {
        out.push_back(b);
      } else if (same->value != b.value || same->var != b.var) {
        const VarArg& v = b.var->arg_as<VarArg>();
        throw Error(std::string(op) + ": variable '" + v.name + "' is bound to both " +
                    std::to_string(same->value) + " and " + std::to_string(b.value) +
                    " (or declared twice with different bounds) in one computation");
      }
    }
  std::sort(out.begin(), out.end(), [](const Binding& a, const Binding& b) {
    return a.var->arg_as<VarArg>().name < b.var->arg_as<VarArg>().name;
  });
  return out;
}

}  // namespace vkg
