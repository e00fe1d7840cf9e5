// Every gradient rule, and ops composed from them, against central finite differences, in float64
// on the CPU reference device (Lavapipe may lack float64 transcendentals). The loss is a weighted
// sum of the op's result with fixed, distinct weights, so every element of the gradient counts.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "support/device_compare.hpp"

using namespace vkg;
using namespace vkg::test;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

struct Input {
  Shape shape;
  double low = -2, high = 2;  // distinct values spread over [low, high] in no order
};

// The golden-ratio sequence: distinct, well spread, never sorted, different per seed.
std::vector<double> input_values(const Input& in, uint32_t seed) {
  const size_t n = size_t(prod(in.shape));
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = in.low + (in.high - in.low) *
                        std::fmod(double(i + 1) * 0.6180339887498949 + double(seed) * 0.1234, 1.0);
  return v;
}

double loss_value(const Fn& f, const std::vector<std::vector<double>>& data,
                  const std::vector<Input>& inputs) {
  std::vector<Tensor> xs;
  for (size_t k = 0; k < inputs.size(); ++k) xs.emplace_back(data[k], inputs[k].shape, "CPU");
  const Tensor out = f(xs);
  std::vector<double> w(size_t(out.numel()));
  for (size_t i = 0; i < w.size(); ++i) w[i] = 1.0 + 0.37 * double(i % 5) - 0.21 * double(i % 3);
  return (out.cast(dtypes::float64) * Tensor(w, out.shape(), "CPU")).sum().item<double>();
}

// Compares the analytic gradient of each input with (L(x + h) - L(x - h)) / 2h per element.
void gradcheck(const char* name, const Fn& f, const std::vector<Input>& inputs, double tol = 1e-6) {
  SCOPED_TRACE(name);
  std::vector<std::vector<double>> data;
  std::vector<Tensor> xs;
  for (size_t k = 0; k < inputs.size(); ++k) {
    data.push_back(input_values(inputs[k], uint32_t(k + 1)));
    xs.push_back(Tensor(data[k], inputs[k].shape, "CPU").requires_grad_());
  }
  const Tensor out = f(xs);
  std::vector<double> w(size_t(out.numel()));
  for (size_t i = 0; i < w.size(); ++i) w[i] = 1.0 + 0.37 * double(i % 5) - 0.21 * double(i % 3);
  (out.cast(dtypes::float64) * Tensor(w, out.shape(), "CPU")).sum().backward();
  const double h = 1e-6;
  for (size_t k = 0; k < inputs.size(); ++k) {
    ASSERT_TRUE(xs[k].grad().has_value()) << "input " << k << " got no gradient";
    const std::vector<double> analytic = values(*xs[k].grad());
    ASSERT_EQ(analytic.size(), data[k].size());
    for (size_t i = 0; i < data[k].size(); ++i) {
      auto shifted = data;
      shifted[k][i] += h;
      const double up = loss_value(f, shifted, inputs);
      shifted[k][i] -= 2 * h;
      const double down = loss_value(f, shifted, inputs);
      const double numeric = (up - down) / (2 * h);
      EXPECT_NEAR(analytic[i], numeric, tol * std::max(1.0, std::abs(numeric)))
          << "input " << k << " element " << i;
    }
  }
}

using V = const std::vector<Tensor>&;
const Input m23{{2, 3}}, m23_pos{{2, 3}, 0.5, 3}, v4{{4}};

}  // namespace

TEST(AutogradGradcheck, ElementwisePrimitives) {
  gradcheck("add", [](V x) { return x[0] + x[1]; }, {m23, m23});
  gradcheck("sub", [](V x) { return x[0] - x[1]; }, {m23, m23});
  gradcheck("mul", [](V x) { return x[0] * x[1]; }, {m23, m23});
  gradcheck("fdiv", [](V x) { return x[0] / x[1]; }, {m23, m23_pos});
  gradcheck("neg", [](V x) { return -x[0]; }, {m23});
  gradcheck("reciprocal", [](V x) { return x[0].reciprocal(); }, {m23_pos});
  gradcheck("sqrt", [](V x) { return x[0].sqrt(); }, {m23_pos});
  gradcheck("exp2", [](V x) { return x[0].exp2(); }, {m23});
  gradcheck("log2", [](V x) { return x[0].log2(); }, {m23_pos});
  gradcheck("sin", [](V x) { return x[0].sin(); }, {m23});
  gradcheck("maximum", [](V x) { return x[0].maximum(x[1]); }, {m23, {{2, 3}, -1.9, 2.1}});
  gradcheck("where", [](V x) { return x[0].lt(x[1]).where(x[0] * 3, x[1] * x[1]); },
            {m23, {{2, 3}, -1.9, 2.1}});
  gradcheck("cast", [](V x) { return x[0].cast(dtypes::float32).cast(dtypes::float64) * 0 + x[0]; },
            {m23});
  gradcheck("contiguous", [](V x) { return (x[0] * 2).contiguous() * x[0]; }, {m23});
}

TEST(AutogradGradcheck, Reductions) {
  gradcheck("sum all", [](V x) { return x[0].sum(); }, {m23});
  gradcheck("sum axis", [](V x) { return (x[0] * x[0]).sum(0); }, {m23});
  gradcheck("max all", [](V x) { return x[0].max(); }, {m23});
  gradcheck("max axis", [](V x) { return x[0].max(1, true) * x[0]; }, {m23});
  gradcheck("prod axis",
            [](V x) {
              return Tensor(UOp::make(Ops::REDUCE_AXIS, x[0].dtype(), {x[0].node()},
                                      ReduceArg{Ops::MUL, {1}}));
            },
            {m23});
}

TEST(AutogradGradcheck, MovementOps) {
  gradcheck("reshape",
            [](V x) {
              return x[0].reshape({3, 2}) * x[0].reshape({3, 2}).flip({0});
            },
            {m23});
  gradcheck("permute", [](V x) { return x[0].reshape({1, 2, 3}).permute({2, 0, 1}); }, {m23});
  gradcheck("expand",
            [](V x) {
              return x[0].reshape({2, 1, 3}).expand({2, 4, 3}) * x[0].reshape({2, 1, 3});
            },
            {m23});
  gradcheck("pad", [](V x) { return x[0].pad({{1, 2}, {0, 1}}); }, {m23});
  gradcheck("pad with value", [](V x) { return x[0].pad({{1, 0}, {2, 1}}, 3.5) * 2; }, {m23});
  gradcheck("shrink", [](V x) { return x[0].shrink({{1, 2}, {0, 2}}); }, {m23});
  gradcheck(
      "permuted reduce",
      [](V x) {
        return (x[0].reshape({2, 1, 3, 1}).permute({3, 2, 1, 0}).expand({4, 3, 5, 2}) * x[1]).sum();
      },
      {m23, {{4, 3, 5, 2}}});
  gradcheck("flip", [](V x) { return x[0].flip({0, 1}); }, {m23});
  gradcheck("chain",
            [](V x) {
              return x[0]
                  .permute({1, 0})
                  .pad({{1, 1}, {0, 2}})
                  .flip({1})
                  .shrink({{0, 4}, {1, 3}})
                  .reshape({2, 4})
                  .expand({3, 2, 4});
            },
            {m23});
}

TEST(AutogradGradcheck, ComposedOps) {
  gradcheck("mean", [](V x) { return x[0].mean(1); }, {m23});
  gradcheck("var", [](V x) { return x[0].var(1); }, {{{3, 4}}});
  gradcheck("var all", [](V x) { return x[0].var(); }, {{{3, 4}}});
  gradcheck("exp log", [](V x) { return x[0].exp() + (x[0] * x[0] + 1).log(); }, {m23});
  gradcheck("relu abs", [](V x) { return x[0].relu() + x[0].abs() * 2; }, {{{2, 3}, -2.1, 1.9}});
  gradcheck("minimum", [](V x) { return x[0].minimum(x[1]); }, {m23, {{2, 3}, -1.9, 2.1}});
  gradcheck("softmax by hand",
            [](V x) {
              const Tensor e = (x[0] - x[0].max(1, true)).exp();
              return e / e.sum(1, true);
            },
            {{{3, 4}}});
  gradcheck("log_softmax by hand",
            [](V x) {
              const Tensor shifted = x[0] - x[0].max(1, true);
              return shifted - shifted.exp().sum(1, true).log();
            },
            {{{3, 4}}});
  gradcheck("matmul", [](V x) { return x[0].matmul(x[1]); }, {{{3, 4}}, {{4, 2}}});
  gradcheck("batched matmul", [](V x) { return x[0].matmul(x[1]); }, {{{2, 3, 4}}, {{4, 2}}});
  gradcheck("vector dot", [](V x) { return x[0].dot(x[1]); }, {v4, v4});
  gradcheck("mlp", [](V x) { return (x[0].matmul(x[1]).relu().matmul(x[2]) + x[3]).sum(1); },
            {{{4, 3}}, {{3, 5}, -1.1, 0.9}, {{5, 2}}, {{2}}});
}

TEST(AutogradGradcheck, ConvolutionsAndPools) {
  // conv2d's input gradient is a transposed convolution written by hand (core/tensor_conv.cpp):
  // check it with stride 1, stride 2 with an odd input, dilation, groups, and stride 3 with two
  // input rows past the last window (its output_padding).
  const Input x155{{1, 2, 5, 5}}, x176{{1, 2, 7, 6}}, w2233{{2, 2, 3, 3}}, w4133{{4, 1, 3, 3}};
  gradcheck("conv2d pad 1", [](V x) { return x[0].conv2d(x[1], std::nullopt, {.padding = 1}); }, {x155, w2233});
  gradcheck("conv2d stride 2", [](V x) { return x[0].conv2d(x[1], x[2], {.stride = 2, .padding = {1, 0}}); },
            {x176, w2233, Input{{2}}});
  gradcheck("conv2d dilation 2", [](V x) { return x[0].conv2d(x[1], std::nullopt, {.padding = 1, .dilation = 2}); },
            {x176, w2233});
  gradcheck("conv2d groups 2", [](V x) { return x[0].conv2d(x[1], std::nullopt, {.groups = 2}); }, {x176, w4133});
  gradcheck("conv2d stride 3", [](V x) { return x[0].conv2d(x[1], std::nullopt, {.stride = 3}); },
            {Input{{1, 2, 8, 8}}, w2233});
  gradcheck("conv_transpose2d", [](V x) { return x[0].conv_transpose2d(x[1], std::nullopt, {.stride = 2, .padding = 1}); },
            {Input{{1, 2, 3, 3}}, Input{{2, 3, 3, 3}}});
  gradcheck("max_pool2d", [](V x) { return x[0].max_pool2d({.kernel = 2}); }, {x176});
  gradcheck("avg_pool2d", [](V x) { return x[0].avg_pool2d({.kernel = 3, .stride = 2, .padding = 1}); }, {x176});
}

TEST(AutogradGradcheck, NormalizationsAndLosses) {
  gradcheck("layernorm", [](V x) { return x[0].layernorm(); }, {Input{{3, 4}}});
  gradcheck("batchnorm", [](V x) {
    const Tensor mean = x[0].mean({0, 2, 3}), invstd = (x[0].var({0, 2, 3}, false, 0) + 1e-5).rsqrt();
    return x[0].batchnorm(x[1], x[2], mean, invstd);
  }, {Input{{2, 3, 2, 2}}, Input{{3}}, Input{{3}}});
  const Tensor labels = Tensor(std::vector<int32_t>{2, 0, 1}, {3}, "CPU");
  gradcheck("sparse_categorical_crossentropy", [&](V x) {
    return x[0].sparse_categorical_crossentropy(labels, -1, 0.1);
  }, {Input{{3, 4}}});
  gradcheck("log_softmax", [](V x) { return x[0].log_softmax(); }, {Input{{2, 5}}});
  gradcheck("sigmoid, tanh, gelu, silu, softplus", [](V x) {
    return x[0].sigmoid() + x[0].tanh() + x[0].gelu() + x[0].silu() + x[0].softplus();
  }, {m23});
}

TEST(AutogradGradcheck, TheRestOfTheOpSurface) {
  const Input pos{{2, 3}, 0.5, 3}, away{{2, 3}, -2.05, 1.95};  // no element at a kink (0)
  gradcheck("pow, sqrt, rsqrt", [](V x) { return x[0].pow(x[1]) + x[0].pow(3) + x[0].sqrt() + x[0].rsqrt(); },
            {pos, m23});
  gradcheck("div, reciprocal, square, exp2, log2", [](V x) {
    return x[0] / x[1] + x[1].reciprocal() + x[0].square() + x[0].exp2() + x[1].log2();
  }, {m23, pos});
  gradcheck("sin, cos, tan", [](V x) { return x[0].sin() + x[0].cos() + (x[0] * 0.5).tan(); }, {m23});
  gradcheck("leaky_relu, elu, hardswish", [](V x) {
    return x[0].leaky_relu(0.1) + x[0].elu(0.7) + x[0].hardswish();
  }, {away});
  gradcheck("clip, maximum, where", [](V x) {
    return x[0].clip(-1.0, 1.0) + x[0].maximum(x[1]) + (x[0] > 0).where(x[0], x[1] * 2);
  }, {away, {{2, 3}, -1.93, 2.07}});
  gradcheck("std, min, prod, logsumexp", [](V x) {
    return x[0].std(1) + x[0].min(1) + x[0].prod(1) + x[0].logsumexp(1);
  }, {{{2, 4}}});
  gradcheck("softmax, cumsum", [](V x) { return x[0].softmax(0) + x[0].cumsum(1); }, {m23});
  gradcheck("cat, stack, split, slicing", [](V x) {
    const Tensor c = Tensor::cat(std::vector<Tensor>{x[0], x[1]}, 1);
    const Tensor s = Tensor::stack(std::vector<Tensor>{x[0], x[1] * 2}, 0).sum(0);
    return c[{Slice{}, Slice{1, std::nullopt, 2}}].sum(1) + s.split(1, 1)[2].reshape({2}) + x[0][{1}].sum();
  }, {m23, m23});
  gradcheck("gather, repeat, reflect pad", [](V x) {
    const Tensor idx = Tensor(std::vector<int32_t>{2, 0, 1, 1, 2, 0}, {2, 3}, "CPU");
    return x[0].gather(1, idx) + x[0].repeat({2, 1}).shrink({{1, 3}, {0, 3}}) +
           x[0].pad({{0, 0}, {2, 1}}, PadMode::Reflect).shrink({{0, 2}, {1, 4}});
  }, {m23});
  gradcheck("embedding, linear", [](V x) {
    const Tensor idx = Tensor(std::vector<int32_t>{1, 0, 1}, {3}, "CPU");
    return idx.embedding(x[0]).linear(x[1], x[2]);
  }, {m23, {{4, 3}}, {{4}}});
  const Tensor probs = Tensor(std::vector<double>{0.2, 0.5, 0.3, 0.1, 0.1, 0.8}, {2, 3}, "CPU");
  const Tensor bits = Tensor(std::vector<double>{1, 0, 1, 0, 1, 1}, {2, 3}, "CPU");
  gradcheck("losses", [&](V x) {
    return x[0].cross_entropy(probs, Reduction::Sum, 0.1) + x[0].binary_crossentropy_logits(bits) +
           x[0].sigmoid().binary_crossentropy(bits) + x[0].mse_loss(probs) + x[0].l1_loss(probs * 3);
  }, {away});
}

// The small-argument series and the large-argument forms alike: inputs across both sides of
// every branch boundary (0.25, 0.5, 1, tan(pi/8), tan(3pi/8)), none on one.
TEST(AutogradGradcheck, TranscendentalFunctions) {
  const Input wide{{3, 4}, -3.7, 3.3}, unit{{3, 4}, -0.93, 0.97}, above1{{3, 4}, 1.05, 6};
  gradcheck("log1p, expm1, log10", [](V x) {
    return x[0].log1p() + x[0].expm1() + (x[0] + 2).log10();
  }, {unit});
  gradcheck("sinh, cosh, tanh, asinh, atan", [](V x) {
    return x[0].sinh() + x[0].cosh() + x[0].tanh() + x[0].asinh() + x[0].atan();
  }, {wide});
  gradcheck("acosh", [](V x) { return x[0].acosh(); }, {above1});
  gradcheck("atanh, asin, acos", [](V x) { return x[0].atanh() + x[0].asin() + x[0].acos(); },
            {unit});
  gradcheck("atan2", [](V x) { return x[0].atan2(x[1]); }, {wide, {{3, 4}, -2.9, 3.1}});
  gradcheck("logaddexp, lerp, copysign", [](V x) {
    return x[0].logaddexp(x[1]) + x[0].lerp(x[1], x[2]) + x[0].copysign(x[1]);
  }, {wide, {{3, 4}, -2.9, 3.1}, unit});
  gradcheck("relu6, hardtanh, hardsigmoid, logsigmoid, softsign, mish, selu, celu", [](V x) {
    return (x[0] * 2).relu6() + x[0].hardtanh(-1.5, 2) + (x[0] * 2).hardsigmoid() +
           x[0].logsigmoid() + x[0].softsign() + x[0].mish() + x[0].selu() + x[0].celu(0.7);
  }, {wide});
}

// Gradients at the corners follow torch: hardtanh, relu6 and hardsigmoid have gradient 0 at
// their corners; the odd functions have gradient 1 at +-0; atan2's partials at (0, x) and (y, 0)
// are 1/x and -1/y; celu'(0) = 1 and selu'(0) = scale * alpha.
// Scans, sorting and the position ops (core/tensor_scan.cpp, core/tensor_sort.cpp,
// core/tensor_layout.cpp). The inputs are distinct, so no max or sort sits on a tie.
TEST(AutogradGradcheck, ScansSortsAndPositionOps) {
  const Input v5{{5}}, m34{{3, 4}};
  gradcheck("cumsum", [](V x) { return x[0].cumsum(1); }, {m34});
  gradcheck("cumprod", [](V x) { return x[0].cumprod(1); }, {m34});
  gradcheck("logcumsumexp", [](V x) { return x[0].logcumsumexp(0); }, {m34});
  gradcheck("cummax", [](V x) { return x[0].cummax(1).first; }, {m34});
  gradcheck("cummin", [](V x) { return x[0].cummin(0).first; }, {m34});
  gradcheck("sort", [](V x) { return x[0].sort(1, true).first * x[0]; }, {m34});
  gradcheck("topk", [](V x) { return x[0].topk(2, 0).first; }, {m34});
  gradcheck("triu", [](V x) { return x[0].triu(1) * x[0]; }, {m34});
  gradcheck("diag", [](V x) { return x[0].diag(-1); }, {v5});
  gradcheck("diagonal", [](V x) { return x[0].diag(1); }, {m34});
  gradcheck("roll", [](V x) { return x[0].roll({1, -2}, {0, 1}) * x[0]; }, {m34});
  gradcheck("unfold", [](V x) { return x[0].unfold(1, 3, 1); }, {m34});
  gradcheck("repeat_interleave", [](V x) { return x[0].repeat_interleave(2, 0); }, {m34});
  gradcheck("pad replicate", [](V x) { return x[0].pad({{1, 2}, {2, 1}}, PadMode::Replicate); }, {m34});
  gradcheck("pad circular", [](V x) { return x[0].pad({{1, 2}, {2, 1}}, PadMode::Circular); }, {m34});
  gradcheck("einsum", [](V x) { return Tensor::einsum("ij,kj->ik", x); }, {m34, m34});
  const Input n4{{2, 4, 3}};
  gradcheck("rms_norm", [](V x) { return x[0].rms_norm({-1}, 1e-6); }, {m34});
  gradcheck("group_norm", [](V x) { return x[0].group_norm(2, x[1].reshape({4, 3}).sum(1), {}, 1e-5); },
            {n4, m34}, 1e-5);
  gradcheck("gelu none", [](V x) { return x[0].gelu("none"); }, {m34});
  gradcheck("erf", [](V x) { return x[0].erf(); }, {m34});
  gradcheck("erfc", [](V x) { return x[0].erfc(); }, {m34});
  const Input divisors{{3, 4}, 0.7, 1.9}, negative_divisors{{3, 4}, -1.9, -0.7};
  gradcheck("fmod", [](V x) { return x[0].fmod(x[1]); }, {m34, divisors});
  gradcheck("fmod negative", [](V x) { return x[0].fmod(x[1]); }, {m34, negative_divisors});
  gradcheck("remainder", [](V x) { return x[0].remainder(x[1]); }, {m34, divisors});
  gradcheck("remainder negative", [](V x) { return x[0].remainder(x[1]); },
            {m34, negative_divisors});
  gradcheck("attention", [](V x) { return x[0].scaled_dot_product_attention(x[1], x[2], {}, 0.0, true); },
            {m34, m34, m34}, 1e-5);
  const Input x1d{{1, 2, 5}}, w1d{{2, 2, 2}}, x3d{{1, 1, 3, 3, 2}}, w3d{{1, 1, 2, 2, 2}};
  ConvOptions strided;
  strided.stride = {2}, strided.padding = {1};
  gradcheck("conv1d", [&](V x) { return x[0].conv1d(x[1], {}, strided); }, {x1d, w1d}, 1e-5);
  gradcheck("conv3d", [](V x) { return x[0].conv3d(x[1]); }, {x3d, w3d}, 1e-5);
  // conv1d and conv3d share conv2d's hand-written input gradient (core/tensor_conv.cpp): groups,
  // dilation and strides that leave positions past the last window (its output_padding) on
  // every axis, and a bias.
  ConvOptions grouped1;
  grouped1.stride = {3}, grouped1.padding = {2}, grouped1.dilation = {2}, grouped1.groups = 2;
  gradcheck("conv1d groups dilation stride 3",
            [&](V x) { return x[0].conv1d(x[1], x[2], grouped1); },
            {Input{{2, 4, 11}}, Input{{4, 2, 3}}, v4}, 1e-5);
  ConvOptions grouped3;
  grouped3.stride = {2, 1, 3}, grouped3.padding = {1, 0, 1}, grouped3.dilation = {1, 2, 1}, grouped3.groups = 2;
  gradcheck("conv3d groups dilation strides",
            [&](V x) { return x[0].conv3d(x[1], {}, grouped3); },
            {Input{{1, 4, 5, 5, 5}}, Input{{2, 2, 2, 2, 2}}}, 1e-5);
  gradcheck("conv_transpose1d", [&](V x) { return x[0].conv_transpose1d(x[1], {}, strided); }, {x1d, w1d}, 1e-5);
  gradcheck("conv_transpose3d", [](V x) { return x[0].conv_transpose3d(x[1]); }, {x3d, w3d}, 1e-5);
  PoolOptions pool3;
  pool3.kernel = {3}, pool3.stride = std::vector<int64_t>{2}, pool3.padding = {1}, pool3.ceil_mode = true;
  gradcheck("max_pool", [&](V x) { return x[0].max_pool(pool3); }, {x1d});
  gradcheck("avg_pool", [&](V x) { return x[0].avg_pool(pool3); }, {x1d});
  gradcheck("adaptive_avg_pool", [](V x) { return x[0].adaptive_avg_pool({3}); }, {x1d});
  gradcheck("interpolate", [](V x) { return x[0].interpolate({3, 4}, "bilinear"); }, {n4});
  gradcheck("nll_loss weighted", [](V x) {
    const Tensor t(std::vector<int32_t>{0, 3, -100}, {3}, "CPU");
    return x[0].log_softmax(1).nll_loss(t, x[1].reshape({4}).abs() + 0.5);
  }, {m34, v4});
}

TEST(AutogradGradcheck, CornersFollowTorch) {
  const auto grad_at = [](std::vector<double> v, const std::function<Tensor(const Tensor&)>& f) {
    const Tensor x = Tensor(v, {int64_t(v.size())}, "CPU").requires_grad_();
    f(x).sum().backward();
    return values(*x.grad());
  };
  EXPECT_EQ(grad_at({-1, 1, 0.5}, [](const Tensor& x) { return x.hardtanh(); }),
            (std::vector<double>{0, 0, 1}));
  EXPECT_EQ(grad_at({0, 6, 3}, [](const Tensor& x) { return x.relu6(); }),
            (std::vector<double>{0, 0, 1}));
  EXPECT_EQ(grad_at({-3, 3, 0}, [](const Tensor& x) { return x.hardsigmoid(); }),
            (std::vector<double>{0, 0, 1.0 / 6}));
  for (auto f : {&Tensor::sinh, &Tensor::tanh, &Tensor::asinh, &Tensor::atanh, &Tensor::atan,
                 &Tensor::asin, &Tensor::log1p, &Tensor::expm1})
    EXPECT_EQ(grad_at({0.0, -0.0}, [&](const Tensor& x) { return (x.*f)(); }),
              (std::vector<double>{1, 1}));
  EXPECT_EQ(grad_at({0.0}, [](const Tensor& x) { return x.cosh(); }), (std::vector<double>{0}));
  EXPECT_EQ(grad_at({0.0}, [](const Tensor& x) { return x.celu(0.5); }), (std::vector<double>{1}));
  EXPECT_NEAR(grad_at({0.0}, [](const Tensor& x) { return x.selu(); })[0],
              1.0507009873554804934193349852946 * 1.6732632423543772848170429916717, 1e-12);
  const Tensor y = Tensor(std::vector<double>{0, 2}, {2}, "CPU").requires_grad_();
  const Tensor x = Tensor(std::vector<double>{4, 0}, {2}, "CPU").requires_grad_();
  y.atan2(x).sum().backward();
  EXPECT_EQ(values(*y.grad()), (std::vector<double>{0.25, 0}));   // x / (x^2 + y^2)
  EXPECT_EQ(values(*x.grad()), (std::vector<double>{0, -0.5}));   // -y / (x^2 + y^2)
}

// Indexed loads (their gradient is the one-hot scatter-add) and the scatter family, whose
// gradients come from the where, the reduces and the gather they are built from. Inputs are
// distinct, so amax and amin have no ties.
TEST(AutogradGradcheck, IndexingAndScatter) {
  const auto ints = [](std::vector<int32_t> v, Shape s) { return Tensor(v, std::move(s), "CPU"); };
  gradcheck("index_select, take, advanced indexing", [&](V x) {
    const Tensor i = ints({2, 0, 2}, {3});
    return x[0].index_select(1, i) + x[0].take(ints({5, -1, 0, 3, 3, 1}, {2, 3})) +
           x[0][{ints({1, 0}, {2, 1}), i}];
  }, {m23});
  gradcheck("advanced indexing in separated axes, masked_fill", [&](V x) {
    return x[0][{ints({1, 0, 1}, {3}), Slice{}, ints({2, 2, 0}, {3})}] +
           x[0].masked_fill(ints({1, 0, 1, 0}, {4}).ne(0), 0.5).sum({0, 2});
  }, {Input{{2, 3, 4}}});
  const Tensor index = ints({1, 0, 1, 2, 0, 0}, {2, 3});
  gradcheck("scatter, scatter_add", [&](V x) {
    return x[0].scatter(1, index, x[1]) + x[0].scatter_add(1, index, x[1] * 3);
  }, {Input{{2, 4}}, Input{{2, 3}}});
  for (const auto& [name, r] : std::vector<std::pair<const char*, ScatterReduce>>{
           {"scatter_reduce sum", ScatterReduce::Sum},
           {"scatter_reduce prod", ScatterReduce::Prod},
           {"scatter_reduce mean", ScatterReduce::Mean},
           {"scatter_reduce amax", ScatterReduce::Amax},
           {"scatter_reduce amin", ScatterReduce::Amin}})
    gradcheck(name, [&, r = r](V x) {
      return x[0].scatter_reduce(1, index, x[1], r) + x[0].scatter_reduce(1, index, x[1], r, false) * 2;
    }, {Input{{2, 4}}, Input{{2, 3}, -2.1, 1.9}});
}

// The real scatter's gradients (core/indexed_load.hpp): prod through exact zeros (one zero and
// two at an element, in the values and in the tensor), as values equal to fixed numbers with x's
// derivative (x - x0 + c, x0 being gradcheck's values of input k); and the scatter-add behind
// repeated indexed reads.
TEST(AutogradGradcheck, ScatterThroughZerosAndRepeatedIndices) {
  const auto ints = [](std::vector<int32_t> v, Shape s) { return Tensor(v, std::move(s), "CPU"); };
  const auto fixed = [](const Tensor& x, uint32_t k, std::vector<double> c) {
    const Tensor x0(input_values(Input{x.shape()}, k + 1), x.shape(), "CPU");
    return x - x0 + Tensor(c, x.shape(), "CPU");
  };
  const Tensor index = ints({0, 1, 1, 2, 2, 3}, {6});
  gradcheck("scatter_reduce prod at zeros",
            [&](V x) {
              const Tensor self = fixed(x[0], 0, {0, 1.5, -2, 0.5});
              const Tensor src = fixed(x[1], 1, {1.5, 0, 2, 0, 0, -1.25});
              return self.scatter_reduce(0, index, src, ScatterReduce::Prod) +
                     self.scatter_reduce(0, index, src, ScatterReduce::Prod, false) * 3;
            },
            {v4, Input{{6}}});
  gradcheck("embedding and gather with repeats",
            [&](V x) {
              return ints({2, 0, 2, 2}, {4}).embedding(x[0]).sum(1) +
                     x[0].gather(0, ints({1, 1, 2, 0, 1, 1, 1, 2, 2}, {3, 3})).sum(0).pad({{0, 1}});
            },
            {Input{{3, 3}}});
}
