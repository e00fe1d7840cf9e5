// onnx.TensorProto <-> vkgrad tensors: initializers, Constant values and the .pb files of ONNX's
// test data. Elements come from raw_data (little-endian, as the device stores them) or from the
// typed fields, or from an external file next to the model.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include <vkgrad/core/tensor.hpp>

namespace vkg::onnx {

// The tensor `tp` holds, on `device`. `where` names the initializer or node in errors; external
// data is read relative to `base_dir`. With `release`, tp's element storage is freed once the
// tensor holds its bytes (a model's initializers are not kept twice on the host).
Tensor tensor_from_proto(::onnx::TensorProto& tp, const std::string& device,
                         const std::string& where, const std::string& base_dir = "",
                         bool release = false);
// The elements of an integer (or bool) TensorProto as int64, when it has at most `limit` of them.
std::optional<std::vector<int64_t>> host_ints_of(const ::onnx::TensorProto& tp,
                                                 const std::string& base_dir, size_t limit);

}  // namespace vkg::onnx
