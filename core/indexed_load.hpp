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
// index with an arange over the axis and sum) is O(axis size).
#pragma once
#include <cstdint>
#include <span>

#include <vkgrad/core/tensor.hpp>

namespace vkg {

// INDEX(src, indices...) as above; differentiable in src (one_hot_scatter_sum). The front ends
// check shapes and dtypes and name themselves in errors; this only asserts them.
Tensor indexed_load(const Tensor& src, std::span<const Tensor> indices,
                    std::span<const int64_t> axes);

// `index` (any integer dtype) as int32: exact where it lies in [lo, hi), `hi` elsewhere, which
// stays out of range for an axis of size hi after negatives are counted from the end. A cast
// alone would wrap a large int64 or uint32 index into range: a silently wrong element.
Tensor index_as_int32(const Tensor& index, int64_t lo, int64_t hi);

// The transpose of indexed_load: out[s] = the sum of values[o] over every o with o[a_j]
// replaced by idx_j[o] equal to s, a tensor of `shape` (values' shape on the axes not indexed).
// Built as a one-hot compare against an arange per indexed axis and a sum over the output's
// indexed axes: O(prod(values.shape) * prod of the indexed sizes) work, one fused reduce kernel.
// Indices out of range land nowhere. Bool values are summed as int32 and compared back to bool.
Tensor one_hot_scatter_sum(const Tensor& values, std::span<const Tensor> indices,
                           std::span<const int64_t> axes, const Shape& shape);

// The same one-hot form combining with `reduce` (Sum, Prod, Amax or Amin; not Mean): an element
// nothing lands on holds the reduce's identity (0, 1, the lowest value, the highest value).
Tensor one_hot_scatter(const Tensor& values, std::span<const Tensor> indices,
                       std::span<const int64_t> axes, const Shape& shape, ScatterReduce reduce);

}  // namespace vkg
