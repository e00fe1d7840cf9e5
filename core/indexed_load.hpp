// The indexed load: the one primitive behind gather, embedding, take, index_select and advanced
// indexing. INDEX(src, idx_1, ..., idx_k), with the indexed axes a_1..a_k of src as argument, is
//
//   out[o] = src[o with o[a_j] replaced by idx_j[o]]
//
// where every idx_j is an int32 tensor of the output's shape O, which has src's rank and src's
// sizes on every axis that is not indexed (front ends expand src there first). An index outside
// [0, src.shape[a_j]) reads 0. It fuses like an elementwise op of its indices: one kernel reads
// each output element's indices, then the source at the address they give (the scheduler lowers
// it to codegen's is_indexed_load), O(1) work per element, where the one-hot form (compare each
// index with an arange over the axis and sum) is O(axis size). Its transpose, SCATTER, is below.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include <vkgrad/core/scatter_combine.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

// INDEX(src, indices...) as above; differentiable in src (indexed_scatter, a sum). The front ends
// check shapes and dtypes and name themselves in errors; this only asserts them.
Tensor indexed_load(const Tensor& src, std::span<const Tensor> indices,
                    std::span<const int64_t> axes);

// `index` (any integer dtype) as int32: exact where it lies in [lo, hi), `hi` elsewhere, which
// stays out of range for an axis of size hi after negatives are counted from the end. A cast
// alone would wrap a large int64 or uint32 index into range: a silently wrong element.
Tensor index_as_int32(const Tensor& index, int64_t lo, int64_t hi);

// SCATTER(dest, values, idx_1, ..., idx_k) with arg {combine, a_1, ..., a_k}, the transpose of
// INDEX:
//
//   out = dest;  for every element o of O:  out[o with o[a_j] = idx_j[o]] (+ * max min)= values[o]
//
// where values and every idx_j (int32) have one shape O of dest's rank, with O[d] <= dest's size
// on the axes not indexed. An index outside [0, dest.shape[a_j]) writes nothing. Scheduled as a
// copy of dest into a buffer of its own (a kernel, or part of the kernel that computes dest) and
// one kernel with one invocation per element of O that combines into that buffer atomically:
// O(1) work per value, where the one-hot form was O(axis size) per element of out.
//
// Order: sum and prod of floats round in the order the values arrive, which on a GPU is not fixed
// (as torch's CUDA scatter_add); integers, max and min do not depend on it. The CPU device runs
// invocations one after another, so its order is fixed (index order, as torch's CPU kernels,
// unless an opt reorders the values' axes) and its sums repeat exactly. Max and min follow IEEE
// 754-2019 maximum/minimum, which no order changes: nan wins (propagates, as torch), and +0.0 is
// the larger zero (max(-0.0, 0.0) is 0.0 and min is -0.0 whatever arrives first).
//
// dtypes: 32- and 64-bit ones combine in place (64-bit needs the device's int64 atomics; without
// them a sum is a one-hot reduce, Device::atomics_64bit); bool and
// 8- and 16-bit ones combine in their 32-bit widening and are cast back (a float16 sum so rounds
// once, not once per value). Differentiable in dest and values (gradient.cpp: max and min split
// among ties, prod handles zeros as torch does).
Tensor indexed_scatter(const Tensor& dest, const Tensor& values, std::span<const Tensor> indices,
                       std::span<const int64_t> axes, ScatterReduce combine);

// The value a SCATTER's combine leaves every element as it is: -0.0 (0 for integers) for Sum, 1
// for Prod, -inf or the dtype's lowest for Max, +inf or its highest for Min. What a device that
// holds none of dest scatters its values into, before the partial results combine.
Scalarish scatter_identity(ScatterCombine combine, DType dtype);
// a and b (one shape and dtype) combined elementwise as a SCATTER combines a value into an
// element (scatter_combine.hpp): for floats, max and min are IEEE 754-2019's (nan wins, +0.0 is
// the larger zero), so partial results combine to what one scatter of all the values gives.
Tensor scatter_combined(const Tensor& a, const Tensor& b, ScatterCombine combine);

// The gradient of a max or min scatter `out` of values into dest for each of (dest, values):
// split evenly among the inputs equal to the result. dest_left_out (bool, dest's shape) marks the
// elements where dest takes no part (scatter_reduce's include_self=false): it neither counts in
// the ties nor gets a gradient there, even when its value (the combine's identity) equals out.
std::vector<std::optional<Tensor>> extremum_gradient(const Tensor& dest, const Tensor& values,
                                                     const Tensor& out,
                                                     std::span<const Tensor> indices,
                                                     std::span<const int64_t> axes, const Tensor& g,
                                                     const std::optional<Tensor>& dest_left_out);

// The gradient of a SCATTER node for each of (dest, values), given the gradient g of its result.
std::vector<std::optional<Tensor>> scatter_gradient(const UOp& scatter, const Tensor& g);

}  // namespace vkg
