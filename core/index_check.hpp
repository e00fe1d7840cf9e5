// Opt-in validation of index values (CHECK_INDICES=1). The indexed loads (gather, embedding,
// take, index_select, x[int_tensor]) mask an index out of range to 0, and the one-hot forms
// (one_hot, sparse_categorical_crossentropy, the scatter ops) match nothing with it: either way it
// silently selects zeros or writes nothing. With the setting on, each op first computes on the
// device whether any index is out of range and throws vkg::Error naming the op, the value and
// the range. Off by default: the check waits for the device where everything else stays lazy.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

#include <vkgrad/core/tensor.hpp>

namespace vkg {

// Throws when CHECK_INDICES is set and an element of `index` lies outside [0, n), other than
// `except` (a loss's ignore_index). `what` says what n counts ("dimension 1 of size 5").
void check_index_values(const Tensor& index, int64_t n, std::string_view op, std::string_view what,
                        std::optional<int64_t> except = std::nullopt);

}  // namespace vkg
