// Symbolic sizes: a Variable is a named integer in [min, max]; bound to a value it is a SymInt, a
// size that Tensor::reshape, expand, pad and shrink accept in place of a number.
//
//   Variable n("n", 1, 512);
//   Tensor x = data.reshape({3, n.bind(7)});   // shape (3, n), n = 7 for this realize
//   (x + 1).realize();                          // compiles E_3_n once; n = 8 reuses it
//
// A tensor keeps both faces of each size: its value (what shape() returns, what every check and
// buffer size uses) and its expression over unbound variables (what kernels are compiled for).
// Kernels read the values of the variables at run time (push constants), so every binding of a
// symbolic shape runs the same compiled kernel.
#pragma once
#include <concepts>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <vkgrad/core/uop.hpp>

namespace vkg {

// A variable with the value it has in one computation.
struct Binding {
  UOpPtr var;  // DEFINE_VAR
  int64_t value = 0;
  bool operator==(const Binding&) const = default;
};

// A size: a plain number, or an integer expression over variables together with its value under
// their bindings. `expr` is a CONST for a plain number.
class SymInt {
 public:
  SymInt() : SymInt(int64_t(0)) {}
  template <std::integral T>
  SymInt(T v) : SymInt(Plain{}, int64_t(v)) {}  // NOLINT: a plain number is a size
  // An expression and its value; `bindings` give every variable in `expr` its value (a variable
  // without one makes the SymInt unbound: usable in expressions, not as a size).
  SymInt(UOpPtr expr, int64_t value, std::vector<Binding> bindings, bool bound = true);

  int64_t value() const { return value_; }
  // The expression: a CONST for a plain number (made on demand: braced lists of plain sizes
  // pass through here on every reshape, and need no node).
  UOpPtr expr() const { return expr_ ? expr_ : UOp::const_(dtypes::int32, value_); }
  const std::vector<Binding>& bindings() const { return bindings_; }
  bool is_symbolic() const { return expr_ && !expr_->is_const(); }
  bool is_bound() const { return bound_; }
  // Throws vkg::Error naming `op` when this is an unbound variable.
  void require_bound(std::string_view op) const;
  std::string str() const;  // "n" or "7"

 private:
  struct Plain {};
  SymInt(Plain, int64_t v);
  UOpPtr expr_;  // null for a plain number
  int64_t value_ = 0;
  std::vector<Binding> bindings_;
  bool bound_ = true;
};

SymInt operator+(const SymInt& a, const SymInt& b);
SymInt operator-(const SymInt& a, const SymInt& b);
SymInt operator*(const SymInt& a, const SymInt& b);

class Variable {
 public:
  // Throws vkg::Error if the name is empty or min > max or min < 0 (sizes are never negative).
  Variable(std::string name, int64_t min, int64_t max);
  // This variable at `value`. Throws vkg::Error when value is outside [min, max].
  SymInt bind(int64_t value) const;
  // The variable without a value: an error wherever a size is needed.
  operator SymInt() const;  // NOLINT
  const UOpPtr& node() const { return node_; }
  const std::string& name() const;

 private:
  UOpPtr node_;
};

using SymShape = std::vector<SymInt>;

// The bindings of all `sizes`, each variable once. Throws vkg::Error when one variable has two
// different values, or when one of them is unbound (naming `op`).
std::vector<Binding> merge_bindings(const std::vector<std::vector<Binding>>& sizes,
                                    std::string_view op);

}  // namespace vkg
