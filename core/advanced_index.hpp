// Advanced indexing (an index list with tensors), which Tensor::operator[] hands over to:
// core/tensor_advanced_index.cpp.
#pragma once
#include <vector>

#include <vkgrad/core/tensor.hpp>

namespace vkg {

bool has_index_tensor(const std::vector<Index>& index);
// x[index] where some entry of index is a Tensor (numpy's and torch's rules; see operator[]).
Tensor index_with_tensors(const Tensor& x, std::vector<Index> index);

}  // namespace vkg
