// Sliding windows as a view (tinygrad's _pool), shared by the convolutions and pools
// (core/tensor_conv.cpp, core/tensor_pool_nd.cpp) and Tensor::unfold (core/tensor_layout.cpp);
// defined in core/tensor_pool.cpp.
#pragma once
#include <cstdint>
#include <vector>

#include <vkgrad/core/tensor.hpp>

namespace vkg {

// Windows over the last k.size() dimensions: (..., i0, i1) becomes (..., o0, o1, k0, k1) where
// out[..., y, x, ky, kx] = in[..., y*s0 + ky*d0, x*s1 + kx*d1] and o = (i - d*(k-1) - 1) / s + 1.
// Movement ops only: no copy, and the gradient is theirs.
Tensor pool(const Tensor& x, const std::vector<int64_t>& k, const std::vector<int64_t>& s,
            const std::vector<int64_t>& dil);

}  // namespace vkg
