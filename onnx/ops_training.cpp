// The optimizers of the ai.onnx.preview.training domain: Adagrad, Adam and Momentum (standard and
// Nesterov), each updating n tensors at once, as ONNX's reference formulas. The step count T is
// read on the host; everything else stays lazy.
#include <cmath>

#include <vkgrad/onnx/ops.hpp>

namespace vkg::onnx {
namespace {

// The n tensors of each of `groups` groups after R and T: X1..Xn, G1..Gn, ...
std::vector<std::vector<Tensor>> groups_of(OpContext& c, size_t groups) {
  const size_t n = (c.num_inputs() - 2) / groups;
  if (n * groups + 2 != c.num_inputs())
    c.fail("takes R, T and " + std::to_string(groups) + " groups of equal size");
  std::vector<std::vector<Tensor>> out(groups);
  for (size_t g = 0; g < groups; ++g)
    for (size_t i = 0; i < n; ++i) out[g].push_back(c.in(2 + g * n + i));
  return out;
}

std::vector<Value> adagrad(OpContext& c) {
  const Tensor r = c.in(0);
  const double t = double(c.int_in(1));
  const double decay = c.attr_f("decay_factor", 0.0f), eps = c.attr_f("epsilon", 0.0f);
  const double norm = c.attr_f("norm_coefficient", 0.0f);
  auto g = groups_of(c, 3);
  std::vector<Value> xs, hs;
  for (size_t i = 0; i < g[0].size(); ++i) {
    const Tensor& x = g[0][i];
    const Tensor reg = x * norm + g[1][i];
    const Tensor h = g[2][i] + reg * reg;
    xs.emplace_back(x - (r / (1 + t * decay)) * reg / (h.sqrt() + eps));
    hs.emplace_back(h);
  }
  xs.insert(xs.end(), hs.begin(), hs.end());
  return xs;
}

std::vector<Value> adam(OpContext& c) {
  const Tensor r = c.in(0);
  const double t = double(c.int_in(1));
  const double alpha = c.attr_f("alpha", 0.9f), beta = c.attr_f("beta", 0.999f),
               eps = c.attr_f("epsilon", 0.0f);
  const double norm = c.attr_f("norm_coefficient", 0.0f),
               post = c.attr_f("norm_coefficient_post", 0.0f);
  auto g = groups_of(c, 4);
  const Tensor rate = t > 0 ? r * (std::sqrt(1 - std::pow(beta, t)) / (1 - std::pow(alpha, t))) : r;
  std::vector<Value> xs, vs, hs;
  for (size_t i = 0; i < g[0].size(); ++i) {
    const Tensor& x = g[0][i];
    const Tensor reg = x * norm + g[1][i];
    const Tensor v = g[2][i] * alpha + reg * (1 - alpha);
    const Tensor h = g[3][i] * beta + reg * reg * (1 - beta);
    xs.emplace_back((x - rate * (v / (h.sqrt() + eps))) * (1 - post));
    vs.emplace_back(v);
    hs.emplace_back(h);
  }
  xs.insert(xs.end(), vs.begin(), vs.end());
  xs.insert(xs.end(), hs.begin(), hs.end());
  return xs;
}

std::vector<Value> momentum(OpContext& c) {
  const Tensor r = c.in(0);
  const int64_t t = c.int_in(1);
  const double alpha = c.attr_f("alpha", 0.0f), beta = c.attr_f("beta", 0.0f);
  const double norm = c.attr_f("norm_coefficient", 0.0f);
  const std::string mode = c.attr_s("mode", "standard");
  if (mode != "standard" && mode != "nesterov")
    c.fail("mode must be standard or nesterov, not '" + mode + "'");
  auto g = groups_of(c, 3);
  std::vector<Value> xs, vs;
  for (size_t i = 0; i < g[0].size(); ++i) {
    const Tensor& x = g[0][i];
    const Tensor reg = x * norm + g[1][i];
    const Tensor v = g[2][i] * alpha + reg * (t > 0 ? beta : 1.0);
    xs.emplace_back(mode == "standard" ? x - r * v : x - r * (reg + v * alpha));
    vs.emplace_back(v);
  }
  xs.insert(xs.end(), vs.begin(), vs.end());
  return xs;
}

// Gradient is run by the graph executor (onnx/model.cpp), which can replay the graph before it;
// its row here makes the model check accept it.
std::vector<Value> gradient_row(OpContext& c) {
  c.fail("Gradient runs only at a graph's top level");
}

}  // namespace

void add_training_ops(OpTable& t) {
  t["ai.onnx.preview.training:Gradient"] = gradient_row;
  t["ai.onnx.preview.training:Adagrad"] = adagrad;
  t["ai.onnx.preview.training:Adam"] = adam;
  t["ai.onnx.preview.training:Momentum"] = momentum;
}

}  // namespace vkg::onnx
