// Symbolic integer algebra over UOps: variables with inclusive bounds (UOp::var), expressions
// built with the UOp operators, simplified by rewrite rules, evaluated and rendered. Division and
// modulo truncate toward zero, as C does (and as the GLSL we emit must).
//
//   UOpPtr a = UOp::var("a", 0, 10), b = UOp::var("b", 0, 10);
//   render(simplify((a + b * 10) % 10));     // "(a%10)"
//   render(simplify((a * 40 + b) / 20));     // "(a*2)", bounds [0, 20]
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <vkgrad/core/rewrite.hpp>
#include <vkgrad/core/uop.hpp>

namespace vkg {

// The rule set that simplifies integer and bool expressions: constant folding, identities,
// collecting like terms, div and mod folds that the bounds allow, comparisons decided by bounds.
// It leaves float arithmetic and non-ALU nodes alone, so it composes with other passes' rules.
const PatternMatcher& symbolic_rules();

// graph_rewrite(u, symbolic_rules()), or `u` itself should the rewrite have more nodes than `u`
// (rules shrink the tree they rewrite, but a rewrite can unshare a subgraph used twice).
UOpPtr simplify(const UOpPtr& u);

// `u` simplified where `valid` holds: each conjunct of `valid` (after simplify) of the form x<c or
// c<x, with x a variable, narrows x's bounds while `u` is simplified. The result equals `u`
// wherever `valid` is true, and may differ elsewhere: for the index of a masked load, say, which
// is read only where its mask holds (tinygrad's uop_given_valid).
UOpPtr simplify_given(const UOpPtr& u, const UOpPtr& valid);

// The value of an integer or bool expression with every DEFINE_VAR (by name) and SPECIAL/RANGE
// (by their name or arg) given a value in `vars`. Throws vkg::Error for a missing variable, a
// division by zero, or a node that is not integer arithmetic.
int64_t eval_int(const UOpPtr& u, const std::map<std::string, int64_t>& vars);

// A C-like rendering: ((a*2)+(b//20)), using // for IDIV and % for MOD as tinygrad prints them;
// variables by name, constants as numbers, comparisons as < and !=, where as (c?a:b).
std::string render(const UOpPtr& u);

// ---- building blocks, for passes that reason about index arithmetic ----

// `u` with each node in `with` replaced, and everything above rebuilt (unsimplified).
UOpPtr substitute(const UOpPtr& u, const std::unordered_map<const UOp*, UOpPtr>& with);

// One integer or bool ALU op evaluated as the device does it: the arguments and the result are
// values of their dtypes held in int64 (a uint64 as its bit pattern), arithmetic wraps at the
// dtype's width, IDIV and MOD truncate toward zero, a bool is 0 or 1. `operand` is the dtype of
// the operands (of the two values for WHERE, of the source for CAST), `result` the node's dtype.
// nullopt where C leaves the result undefined: division or modulo by zero, a shift by a negative
// amount or by the width or more. Throws vkg::Error for an op that is not integer arithmetic.
std::optional<int64_t> exec_alu(Ops op, DType result, DType operand, std::span<const int64_t> args);

// The name eval_int and render know a variable by: a DEFINE_VAR's name, a SPECIAL's or RANGE's
// string arg, or "ridx<n>" for a RANGE numbered n. Throws vkg::Error for any other node.
std::string variable_name(const UOp& u);

// An integer expression compiled for evaluation at many points (tests, bounds checks): a flat
// program over the expression's nodes in toposort order.
class IntExpr {
 public:
  // Throws vkg::Error if a node is not integer or bool arithmetic over variables and constants.
  explicit IntExpr(const UOpPtr& root);
  // The variables the expression reads, in first-use order: the order values are given in.
  const std::vector<std::string>& var_names() const { return names_; }
  // The value with var_names()[i] set to values[i]; nullopt if some node is undefined there
  // (exec_alu's nullopt). `node_values`, if given, receives every node's value, in nodes() order.
  std::optional<int64_t> operator()(std::span<const int64_t> values,
                                    std::vector<int64_t>* node_values = nullptr) const;
  const std::vector<const UOp*>& nodes() const { return nodes_; }

 private:
  struct Step {
    Ops op;
    DType result, operand;
    uint32_t src[3];
    uint32_t nsrc;
    int64_t value;  // a CONST's value, or a variable's index into the values
  };
  UOpPtr root_;
  std::vector<const UOp*> nodes_;
  std::vector<Step> steps_;
  std::vector<std::string> names_;
};

// An integer expression read as sum(coeff * base) + constant, looking through ADD, SUB, NEG and
// MUL by a constant (distributing it over a sum). Each base appears once, with a nonzero
// coefficient, in first-seen order. Passes that need an index's terms (strides, vectorization)
// read them here rather than walking ADD nodes: the canonical sums use SUB and NEG, (a-(b*3))+5.
// A sum of more than 1024 ADD/SUB nodes is read that deep; the rest is one term.
struct LinearTerm {
  UOpPtr base;
  int64_t coeff;
};
struct LinearForm {
  std::vector<LinearTerm> terms;
  int64_t constant = 0;
  // True when no node read wraps around its dtype (computes_exactly), so the form's value is the
  // node's value. Otherwise the two agree only modulo 2^width, and the coefficients and constant
  // are kept modulo 2^64.
  bool exact = true;
};
// nullopt unless `u` is a signed integer scalar.
std::optional<LinearForm> linear_form(const UOpPtr& u);

}  // namespace vkg
