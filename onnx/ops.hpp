// The operator families: each file onnx/ops_<family>.cpp adds its rows to the table.
#pragma once
#include <vkgrad/onnx/op_context.hpp>

namespace vkg::onnx {

void add_elementwise_ops(OpTable& t);  // math, activations, comparisons, logic, Cast, Where
void add_reduce_ops(OpTable& t);       // Reduce*, ArgMax/ArgMin, Softmax family, CumSum, TopK
void add_shape_ops(OpTable& t);        // Reshape, Transpose, Concat, Slice, Gather, Pad, ...
void add_generator_ops(OpTable& t);    // Constant, ConstantOfShape, Shape, Size, Range, EyeLike
void add_nn_ops(OpTable& t);           // Conv, pools, normalizations, MatMul, Gemm, Einsum
void add_resize_ops(OpTable& t);       // Resize, Upsample, RoiAlign
void add_quantize_ops(OpTable& t);     // QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear
void add_signal_ops(OpTable& t);       // window functions
void add_indexing_ops(OpTable& t);     // ScatterND, GatherND, ReverseSequence, MaxUnpool
void add_host_ops(OpTable& t);         // ops whose result's shape needs values: Unique, NMS, Det
void add_rnn_ops(OpTable& t);          // RNN, GRU, LSTM
void add_grid_sample_ops(OpTable& t);  // GridSample
void add_control_ops(OpTable& t);      // If, Loop, Scan
void add_sequence_ops(OpTable& t);     // sequences and optionals
void add_training_ops(OpTable& t);     // ai.onnx.preview.training: Adagrad, Adam, Momentum
void add_string_ops(OpTable& t);       // StringNormalizer

// Conv of x by w (and bias b) with the node's Conv attributes: Conv, ConvInteger and QLinearConv.
std::vector<Value> conv_of(OpContext& c, const Tensor& x, const Tensor& w,
                           const std::optional<Tensor>& b);

// Cast between string tensors and numbers: to strings (to = nullopt) as numpy prints them
// (shortest round-trip digits), or from strings parsed as C's strtod does ("NaN", "INF" too).
Value cast_strings(OpContext& c, const Value& v, std::optional<DType> to);

}  // namespace vkg::onnx
