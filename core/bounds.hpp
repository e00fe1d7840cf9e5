// Value bounds of a node, computed from its sources' bounds when the node is built: the base of
// symbolic simplification (comparisons decided by bounds, mod and div folds that need ranges).
#pragma once
#include <cstdint>
#include <utility>

namespace vkg {

class UOp;

// Inclusive [min, max] of the values `u` can take. Integer and bool dtypes get tight bounds where
// the op allows; other dtypes get their dtype range clamped to int64.
std::pair<int64_t, int64_t> compute_bounds(const UOp& u);

}  // namespace vkg
