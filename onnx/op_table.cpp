// The operator table: every family's rows, built once on first use.
#include <vkgrad/onnx/ops.hpp>

namespace vkg::onnx {

const OpTable& op_table() {
  static const OpTable table = [] {
    OpTable t;
    add_elementwise_ops(t);
    add_reduce_ops(t);
    add_shape_ops(t);
    add_generator_ops(t);
    add_nn_ops(t);
    add_resize_ops(t);
    add_quantize_ops(t);
    add_signal_ops(t);
    add_indexing_ops(t);
    add_host_ops(t);
    add_rnn_ops(t);
    add_grid_sample_ops(t);
    add_control_ops(t);
    add_sequence_ops(t);
    add_training_ops(t);
    add_string_ops(t);
    return t;
  }();
  return table;
}

std::string op_key(const ::onnx::NodeProto& node) {
  if (node.domain().empty() || node.domain() == "ai.onnx") return node.op_type();
  return node.domain() + ":" + node.op_type();
}

}  // namespace vkg::onnx
