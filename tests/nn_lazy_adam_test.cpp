// Adam on layers whose weights were never realized (lazy initialization: the first step's kernels
// compute the random init, Adam's moments and the new weight together), against Adam computed
// on the host, with multi-output kernels on and off, eager and under a Jit. The weights have
// over 4,096 elements, so their moments and update are one multi-output kernel whose random
// init part is computed lane by lane beside vector stores (codegen/linearizer.cpp's ordering).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include <vkgrad/core/context.hpp>
#include <vkgrad/vkgrad.hpp>

using namespace vkg;

namespace {

using Params = std::vector<std::vector<float>>;

constexpr double kLr = 0.01, kB1 = 0.9, kB2 = 0.999, kEps = 1e-8;
constexpr int kSteps = 4;  // a Jit replays from its third call

struct Net {
  nn::Linear l1{80, 64}, l2{64, 70};  // weights of 5,120 and 4,480 elements
  std::vector<Tensor> params() { return nn::parameters(l1, l2); }
};

struct Data {
  Tensor x, y;
};

Data data() {
  Tensor::manual_seed(21);
  return {Tensor::randn({8, 80}).realize(), Tensor::randint(0, 70, {8}).realize()};
}

// The parameters after each of kSteps steps, Adam done on the host from the device's gradients
// (the gradients and the parameters are read before every step, so nothing stays lazy there).
std::vector<Params> host_adam() {
  ScopedSetting setting("MULTI_OUTPUT", 0);
  const Data d = data();
  Tensor::manual_seed(3);
  Net net;
  std::vector<Tensor> ps = net.params();
  Params p, m, v;
  for (Tensor& t : ps) {
    p.push_back(t.to_vector<float>());
    m.emplace_back(p.back().size(), 0.0f);
    v.emplace_back(p.back().size(), 0.0f);
  }
  nn::SGD zeroing(ps, 0.0);  // only for zero_grad
  std::vector<Params> out;
  for (int t = 1; t <= kSteps; ++t) {
    zeroing.zero_grad();
    Tensor loss = net.l2(net.l1(d.x).relu()).sparse_categorical_crossentropy(d.y);
    loss.backward();
    const double bc1 = 1 - std::pow(kB1, t), bc2 = 1 - std::pow(kB2, t);
    Params grads;  // all read before any parameter changes (they are computed from them)
    for (const Tensor& w : ps) grads.push_back(w.grad()->to_vector<float>());
    for (size_t i = 0; i < ps.size(); ++i) {
      const std::vector<float>& g = grads[i];
      for (size_t e = 0; e < g.size(); ++e) {
        m[i][e] = float(kB1 * m[i][e] + (1 - kB1) * g[e]);
        v[i][e] = float(kB2 * v[i][e] + (1 - kB2) * double(g[e]) * g[e]);
        p[i][e] = float(p[i][e] - kLr / bc1 * m[i][e] / (std::sqrt(v[i][e] / bc2) + kEps));
      }
      ps[i].assign(Tensor(p[i], ps[i].shape()));
      ps[i].realize();
    }
    out.push_back(p);
  }
  return out;
}

// The parameters after each step of nn::Adam on fresh (lazy) layers.
std::vector<Params> device_adam(bool merged, bool jit) {
  ScopedSetting setting("MULTI_OUTPUT", merged ? 1 : 0);
  const Data d = data();
  Tensor::manual_seed(3);
  Net net;
  nn::Adam adam(net.params(), kLr, kB1, kB2, kEps);
  auto step = [&](const std::vector<Tensor>& in) {
    adam.zero_grad();
    Tensor loss = net.l2(net.l1(in[0]).relu()).sparse_categorical_crossentropy(in[1]);
    loss.backward();
    adam.step({loss});
    return std::vector<Tensor>{loss};
  };
  Jit compiled(step);
  std::vector<Params> out;
  for (int t = 1; t <= kSteps; ++t) {
    if (jit)
      compiled({d.x, d.y});
    else
      step({d.x, d.y});
    Params p;
    for (Tensor& w : net.params()) p.push_back(w.to_vector<float>());
    out.push_back(p);
  }
  return out;
}

}  // namespace

TEST(LazyAdam, FirstStepsOfLazyLinearLayersMatchHostAdam) {
  const std::vector<Params> want = host_adam();
  for (const bool merged : {true, false})
    for (const bool jit : {false, true}) {
      SCOPED_TRACE(std::string(merged ? "merged" : "MULTI_OUTPUT=0") + (jit ? ", Jit" : ", eager"));
      const std::vector<Params> got = device_adam(merged, jit);
      for (int t = 0; t < kSteps; ++t)
        for (size_t i = 0; i < want[size_t(t)].size(); ++i) {
          double worst = 0;
          size_t at = 0;
          for (size_t e = 0; e < want[size_t(t)][i].size(); ++e) {
            const double diff = std::abs(double(got[size_t(t)][i][e]) - want[size_t(t)][i][e]);
            if (diff > worst) worst = diff, at = e;
          }
          // A step moves a weight by about lr = 0.01; the same step applied to a moment twice
          // moved weights by 3e-3 to 5e-2.
          EXPECT_LT(worst, 2e-5) << "step " << t + 1 << " parameter " << i << " element " << at;
        }
    }
}
