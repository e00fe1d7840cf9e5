// Internal to the symbolic rules (symbolic_rules.cpp): the folds too long to write inline in the
// rule table, and the linear-form machinery they share. Each fold takes the matched node and
// returns its replacement, or nullptr to decline; none returns a node larger than the one it
// replaces (counted as nodes of the rewritten expression down to its linear terms' bases).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include <vkgrad/core/int_math.hpp>  // floor_div, ceil_div
#include <vkgrad/core/symbolic.hpp>

namespace vkg::symbolic_detail {

// Scalars (not vectors, not pointers) of the integer families the rules reason about.
// The binary ALU ops integer arithmetic defines (eval_int and the folds compute them).
bool is_binary_int_op(Ops op);

bool is_int_scalar(DType d);
bool is_signed_scalar(DType d);
bool is_intlike_scalar(DType d);  // an integer or bool
// Bounds are trustworthy: an integer or bool whose values int64 holds (all but uint64).
bool has_bounds(DType d);

bool fits(int64_t v, DType d);

// linear_form without the dtype check: `u` must be a signed integer scalar. After `max_sums`
// ADD/SUB nodes the rest of a sum is read as one opaque term, which also bounds the reading of
// a graph whose sums share subsums (a tree walk of it could be exponential).
LinearForm read_linear(const UOp& u, size_t max_sums);
// How deep into a sum fold_linear looks for like terms. A sum is built bottom-up, so its deeper
// part was folded when it was the top; the window only misses like terms that far apart, and
// keeps a wide sum built one term at a time linear in its width rather than quadratic.
inline constexpr size_t kSumWindow = 32;
// How much of a dividend (or compared sum) the div, mod and comparison folds read: they run once
// per division, so they can afford to see a whole realistic index.
inline constexpr size_t kDividendWindow = 1024;
// The canonical node of a linear form of dtype d (coefficients and constant wrap to d):
//   terms in order, the first positive one leading: (a+(b*3))-c, then the constant: (...)+-5;
//   with no positive term, a constant leads: 5-a; with neither, the first term does: (-a)-b.
UOpPtr build_linear(const LinearForm& f, DType d);
// Nodes under `root`, not counting the bases of `terms` or anything below them: how big the
// part of an expression a fold rewrites is.
size_t spine_size(const UOp& root, const std::vector<LinearTerm>& terms);
// Bounds of sum(coeff * base) + constant from each base's bounds; nullopt if they overflow int64.
std::optional<std::pair<int64_t, int64_t>> linear_bounds(const std::vector<LinearTerm>& terms,
                                                         int64_t constant);

// ADD, SUB, NEG, or MUL by a constant: collect like terms and constants into the canonical sum.
UOpPtr fold_linear(const UOp& n);
// IDIV and MOD by a constant: split off what divides, use bounds to drop the remainder.
UOpPtr fold_idiv(const UOp& n);
UOpPtr fold_mod(const UOp& n);
// CMPLT and CMPNE against a constant: divide through by the terms' gcd, move the constant over.
UOpPtr fold_cmplt(const UOp& n);
UOpPtr fold_cmpne(const UOp& n);

}  // namespace vkg::symbolic_detail
