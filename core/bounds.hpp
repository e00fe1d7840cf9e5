// Value bounds of a node, computed from its sources' bounds when the node is built: the base of
// symbolic simplification (comparisons decided by bounds, mod and div folds that need ranges).
#pragma once
#include <cstdint>
#include <utility>

#include <vkgrad/core/dtype.hpp>

namespace vkg {

class UOp;

// Inclusive [min, max] of the values `u` can take. Integer and bool dtypes get tight bounds where
// the op allows; other dtypes get their dtype range clamped to int64.
std::pair<int64_t, int64_t> compute_bounds(const UOp& u);

// The values dtype `d` holds, clamped to int64 ([0, 1] for bool).
std::pair<int64_t, int64_t> dtype_range(DType d);

// Whether `u`'s value is the exact result of its op on its sources' values, not wrapped around
// its dtype. Bounds that cover the whole dtype are what a possible wrap leaves behind, so this
// says false for them even where no wrap happened (a variable over the whole int32 range).
bool computes_exactly(const UOp& u);

}  // namespace vkg
