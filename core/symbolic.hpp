// Symbolic integer algebra over UOps: variables with inclusive bounds (UOp::var), expressions
// built with the UOp operators, simplified by rewrite rules, evaluated and rendered. Division and
// modulo truncate toward zero, as C does (and as the GLSL we emit must).
#pragma once
#include <map>
#include <string>

#include <vkgrad/core/rewrite.hpp>
#include <vkgrad/core/uop.hpp>

namespace vkg {

// The rule set that simplifies integer and bool expressions: constant folding, identities,
// collecting like terms, div and mod folds that the bounds allow, comparisons decided by bounds.
const PatternMatcher& symbolic_rules();

// graph_rewrite(u, symbolic_rules()).
UOpPtr simplify(const UOpPtr& u);

// The value of an integer or bool expression with every DEFINE_VAR (by name) and SPECIAL/RANGE
// (by their name or arg) given a value in `vars`. Throws vkg::Error for a missing variable, a
// division by zero, or a node that is not integer arithmetic.
int64_t eval_int(const UOpPtr& u, const std::map<std::string, int64_t>& vars);

// A C-like rendering: ((a*2)+(b//20)), using // for IDIV and % for MOD as tinygrad prints them;
// variables by name, constants as numbers, comparisons as < and !=, where as (c?a:b).
std::string render(const UOpPtr& u);

}  // namespace vkg
