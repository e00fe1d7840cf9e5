// Control flow: If, Loop and Scan run their subgraphs (graph attributes) through the OpContext,
// in a scope that sees the enclosing graph. If's condition and Loop's trip count and condition are
// read on the host each step (a sync unless they are known there); the steps' tensors stay lazy,
// so an unrolled loop fuses as straight-line code would.
#include <limits>

#include <vkgrad/onnx/ops.hpp>

namespace vkg::onnx {
namespace {

std::vector<Value> if_op(OpContext& c) {
  const bool cond = c.int_in(0) != 0;
  const auto& then_g = c.graph_attr("then_branch");
  const auto& else_g = c.graph_attr("else_branch");
  return c.run_subgraph(cond ? then_g : else_g, {});
}

Value scalar(int64_t v, DType d, const std::string& device) {
  return host_value({v}, {}, d, device);
}

// Loop: body(iteration, cond, carried...) -> (cond, carried..., scan outputs...). Scan outputs are
// stacked along a new first axis.
std::vector<Value> loop(OpContext& c) {
  const auto& body = c.graph_attr("body");
  const int64_t trip = c.has(0) ? c.int_in(0) : std::numeric_limits<int64_t>::max();
  bool cond = c.has(1) ? c.int_in(1) != 0 : true;
  std::vector<Value> carried;
  for (size_t i = 2; i < c.num_inputs(); ++i) carried.push_back(c.value(i));
  const size_t n = carried.size();
  if (size_t(body.output_size()) < 1 + n)
    c.fail("body has " + std::to_string(body.output_size()) + " outputs for " + std::to_string(n) +
           " carried values (it needs the condition and each of them)");
  const size_t scans = size_t(body.output_size()) - 1 - n;
  std::vector<std::vector<Tensor>> scanned(scans);
  for (int64_t it = 0; it < trip && cond; ++it) {
    std::vector<Value> in{scalar(it, dtypes::int64, c.device()),
                          scalar(cond, dtypes::bool_, c.device())};
    in.insert(in.end(), carried.begin(), carried.end());
    std::vector<Value> out = c.run_subgraph(body, in);
    if (out.size() != 1 + n + scans)
      c.fail("body returns " + std::to_string(out.size()) + " values");
    const std::vector<double> cv =
        out[0].host ? std::vector<double>(out[0].host->begin(), out[0].host->end())
                    : host_doubles(out[0].tensor());
    if (cv.empty()) c.fail("body's condition output is empty");
    cond = cv[0] != 0;
    for (size_t k = 0; k < n; ++k) carried[k] = out[1 + k];
    for (size_t k = 0; k < scans; ++k) scanned[k].push_back(out[1 + n + k].tensor());
  }
  std::vector<Value> result = carried;
  for (auto& s : scanned) {
    if (s.empty()) c.unsupported("a scan output of a loop that ran no iteration");
    result.emplace_back(Tensor::stack(s, 0));
  }
  return result;
}

// One Scan (opset 9 form) over `states` and `inputs` sliced along their scan axes.
std::vector<Value> scan_once(OpContext& c, const ::onnx::GraphProto& body,
                             std::vector<Value> states, const std::vector<Tensor>& inputs,
                             const std::vector<int64_t>& in_axes,
                             const std::vector<int64_t>& in_dirs,
                             const std::vector<int64_t>& out_axes,
                             const std::vector<int64_t>& out_dirs) {
  const size_t n = states.size(), m = inputs.size();
  if (m == 0) c.fail("has no scan inputs");
  const int64_t steps = inputs[0].shape()[size_t(in_axes[0])];
  for (size_t j = 1; j < m; ++j)
    if (inputs[j].shape()[size_t(in_axes[j])] != steps)
      c.fail("scan inputs have " + std::to_string(steps) + " and " +
             std::to_string(inputs[j].shape()[size_t(in_axes[j])]) + " steps");
  const size_t k_out = size_t(body.output_size()) - n;
  std::vector<std::vector<Tensor>> outs(k_out);
  for (int64_t s = 0; s < steps; ++s) {
    std::vector<Value> in = states;
    for (size_t j = 0; j < m; ++j) {
      const int64_t t = in_dirs[j] ? steps - 1 - s : s;
      std::vector<Index> index(size_t(inputs[j].ndim()), Slice{});
      index[size_t(in_axes[j])] = t;
      in.emplace_back(inputs[j][index]);
    }
    std::vector<Value> out = c.run_subgraph(body, in);
    if (out.size() != n + k_out) c.fail("body returns " + std::to_string(out.size()) + " values");
    for (size_t k = 0; k < n; ++k) states[k] = out[k];
    for (size_t k = 0; k < k_out; ++k) outs[k].push_back(out[n + k].tensor());
  }
  std::vector<Value> result = states;
  for (size_t k = 0; k < k_out; ++k) {
    if (outs[k].empty()) c.unsupported("a scan output of a scan that ran no step");
    if (out_dirs[k]) std::reverse(outs[k].begin(), outs[k].end());
    const int64_t axis = axis_of(c, out_axes[k], outs[k][0].ndim() + 1);
    result.emplace_back(Tensor::stack(outs[k], axis));
  }
  return result;
}

std::vector<Value> scan(OpContext& c) {
  const auto& body = c.graph_attr("body");
  const int64_t m = c.attr_i("num_scan_inputs", 0);
  const bool v8 = c.opset() < 9;
  const size_t first = v8 ? 1 : 0;  // opset 8: sequence_lens first, and a batch axis
  if (v8 && c.has(0)) c.unsupported("sequence_lens");
  if (m < 1 || c.num_inputs() < first + size_t(m))
    c.fail("num_scan_inputs " + std::to_string(m) + " does not fit its " +
           std::to_string(c.num_inputs()) + " inputs");
  const size_t total = c.num_inputs() - first;
  const size_t n = total - size_t(m);
  if (size_t(body.output_size()) < n)
    c.fail("body has " + std::to_string(body.output_size()) + " outputs for " + std::to_string(n) +
           " states");
  const size_t k_out = size_t(body.output_size()) - n;
  auto list = [&](const char* name, size_t count) {
    auto v = c.attr_ints(name, std::vector<int64_t>(count, 0));
    if (v.size() != count)
      c.fail(std::string(name) + " holds " + std::to_string(v.size()) + " values");
    return v;
  };
  const auto in_dirs = list(v8 ? "directions" : "scan_input_directions", size_t(m));
  std::vector<int64_t> in_axes(size_t(m), 0), out_axes(k_out, 0), out_dirs(k_out, 0);
  if (!v8) {
    in_axes = list("scan_input_axes", size_t(m));
    out_axes = list("scan_output_axes", k_out);
    out_dirs = list("scan_output_directions", k_out);
  }
  std::vector<Value> states;
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < n; ++i) states.push_back(c.value(first + i));
  for (size_t j = 0; j < size_t(m); ++j) {
    const Tensor t = c.in(first + n + j);
    in_axes[j] = axis_of(c, in_axes[j], t.ndim() - (v8 ? 1 : 0));
    inputs.push_back(t);
  }
  if (!v8) {
    // An output axis counts against the rank of the stacked output: one step's rank + 1. Each
    // step's output rank is known only once the body ran, so scan_once normalizes them.
    return scan_once(c, body, states, inputs, in_axes, in_dirs, out_axes, out_dirs);
  }
  // Opset 8: every input has a batch axis first; scan each batch entry and stack the results.
  const int64_t batch = inputs[0].shape()[0];
  std::vector<std::vector<Tensor>> per(n + k_out);
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Value> st;
    for (auto& s : states) st.emplace_back(s.tensor()[b]);
    std::vector<Tensor> in;
    for (auto& t : inputs) in.push_back(t[b]);
    auto r = scan_once(c, body, st, in, in_axes, in_dirs, out_axes, out_dirs);
    for (size_t k = 0; k < r.size(); ++k) per[k].push_back(r[k].tensor());
  }
  std::vector<Value> result;
  for (auto& p : per) result.emplace_back(Tensor::stack(p, 0));
  return result;
}

}  // namespace

void add_control_ops(OpTable& t) {
  t["If"] = if_op;
  t["Loop"] = loop;
  t["Scan"] = scan;
}

}  // namespace vkg::onnx
