// Losses against hand computation (log-sum-exp written out in doubles), the three reductions,
// label smoothing, ignored targets, the stable logits forms at extreme values, and misuse errors.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "support/device_compare.hpp"
#include "support/error_of.hpp"

#include <vkgrad/core/tensor.hpp>

using namespace vkg;
using vkg::test::cpu_vk_agree;
using vkg::test::error_of;

namespace {

// -log softmax(row)[k], in doubles.
double nll(std::vector<double> row, size_t k) {
  double m = row[0];
  for (double v : row) m = std::max(m, v);
  double s = 0;
  for (double v : row) s += std::exp(v - m);
  return m + std::log(s) - row[k];
}

// The mean over classes of -log softmax(row), the label-smoothing term.
double mean_nll(const std::vector<double>& row) {
  double s = 0;
  for (size_t k = 0; k < row.size(); ++k) s += nll(row, k);
  return s / double(row.size());
}

const std::vector<double> kRow0 = {1, 2, 3}, kRow1 = {1, 1, 1}, kRow2 = {-2, 4, 0.5};

Tensor logits() {
  return Tensor({1.0f, 2.0f, 3.0f, 1.0f, 1.0f, 1.0f, -2.0f, 4.0f, 0.5f}).reshape({3, 3});
}

}  // namespace

TEST(TensorLoss, CrossEntropyWithClassIndices) {
  const Tensor target = Tensor({2, 0, 1});
  const double l0 = nll(kRow0, 2), l1 = nll(kRow1, 0), l2 = nll(kRow2, 1);
  EXPECT_NEAR(logits().cross_entropy(target).item<float>(), (l0 + l1 + l2) / 3, 1e-6);
  EXPECT_NEAR(logits().cross_entropy(target, Reduction::Sum).item<float>(), l0 + l1 + l2, 1e-5);
  const std::vector<float> none =
      logits().cross_entropy(target, Reduction::None).to_vector<float>();
  ASSERT_EQ(none.size(), 3u);
  EXPECT_NEAR(none[0], l0, 1e-6);
  EXPECT_NEAR(none[1], l1, 1e-6);
  EXPECT_NEAR(none[2], l2, 1e-6);
  // torch: (1 - eps) * nll + eps * mean over classes of -log p.
  const double eps = 0.2;
  const double smooth = ((1 - eps) * l0 + eps * mean_nll(kRow0) + (1 - eps) * l1 +
                         eps * mean_nll(kRow1) + (1 - eps) * l2 + eps * mean_nll(kRow2)) /
                        3;
  EXPECT_NEAR(logits().cross_entropy(target, Reduction::Mean, eps).item<float>(), smooth, 1e-6);
  // Classes on axis 1 of (N, C, d): input (1, 3, 3) holds rows 0..2 as its columns.
  const Tensor spatial = logits().transpose().reshape({1, 3, 3});
  const std::vector<float> sp =
      spatial.cross_entropy(Tensor({2, 0, 1}).reshape({1, 3}), Reduction::None).to_vector<float>();
  EXPECT_NEAR(sp[0], l0, 1e-6);
  EXPECT_NEAR(sp[2], l2, 1e-6);
  // A 1-D input is one sample; its target is 0-d.
  EXPECT_NEAR(Tensor({1.0f, 2.0f, 3.0f}).cross_entropy(Tensor(2)).item<float>(), l0, 1e-6);
}

TEST(TensorLoss, CrossEntropyWithProbabilities) {
  const Tensor probs =
      Tensor({0.0f, 0.5f, 0.5f, 1.0f, 0.0f, 0.0f, 0.25f, 0.25f, 0.5f}).reshape({3, 3});
  const double l0 = 0.5 * nll(kRow0, 1) + 0.5 * nll(kRow0, 2);
  const double l1 = nll(kRow1, 0);
  const double l2 = 0.25 * nll(kRow2, 0) + 0.25 * nll(kRow2, 1) + 0.5 * nll(kRow2, 2);
  EXPECT_NEAR(logits().cross_entropy(probs).item<float>(), (l0 + l1 + l2) / 3, 1e-6);
  // Smoothing mixes the target with 1/C: (1 - eps) * p + eps / 3.
  const double eps = 0.3;
  const double s1 = (1 - eps) * l1 + eps * mean_nll(kRow1);
  EXPECT_NEAR(logits().cross_entropy(probs, Reduction::None, eps).to_vector<float>()[1], s1, 1e-6);

  const std::string shape = error_of([&] { (void)logits().cross_entropy(Tensor({0.5f, 0.5f})); });
  EXPECT_NE(
      shape.find(
          "cross_entropy: class probabilities need the input's shape, got input (3, 3) float32 and "
          "target (2,) float32"),
      std::string::npos)
      << shape;
  EXPECT_NE(error_of([&] {
              (void)logits().cross_entropy(Tensor({1, 2}));
            })
                .find("cross_entropy: integer class indices need shape (3,) for input (3, 3) "
                      "float32, got target (2,) int32"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)logits().cross_entropy(Tensor({1, 2, 0}), Reduction::Mean, 1.5);
            }).find("label_smoothing must be in [0, 1]"),
            std::string::npos);
}

TEST(TensorLoss, SparseCategoricalCrossentropyIgnoresTargets) {
  const double l0 = nll(kRow0, 2), l2 = nll(kRow2, 1);
  // The default ignore_index -1: the second row counts for nothing, the mean is over two rows.
  EXPECT_NEAR(logits().sparse_categorical_crossentropy(Tensor({2, -1, 1})).item<float>(),
              (l0 + l2) / 2, 1e-6);
  EXPECT_NEAR(logits().sparse_categorical_crossentropy(Tensor({2, 0, 1}), 0).item<float>(),
              (l0 + l2) / 2, 1e-6);
  const std::vector<float> none =
      logits()
          .sparse_categorical_crossentropy(Tensor({2, 0, 1}), 0, 0.0, Reduction::None)
          .to_vector<float>();
  EXPECT_NEAR(none[0], l0, 1e-6);
  EXPECT_EQ(none[1], 0.0f);
  EXPECT_NEAR(logits()
                  .sparse_categorical_crossentropy(Tensor({2, 0, 1}), -1, 0.0, Reduction::Sum)
                  .item<float>(),
              l0 + nll(kRow1, 0) + l2, 1e-5);
  const double eps = 0.1;
  EXPECT_NEAR(logits().sparse_categorical_crossentropy(Tensor({2, -1, 1}), -1, eps).item<float>(),
              ((1 - eps) * l0 + eps * mean_nll(kRow0) + (1 - eps) * l2 + eps * mean_nll(kRow2)) / 2,
              1e-6);
  EXPECT_TRUE(cpu_vk_agree(
      [](const std::string& dev) {
        return Tensor(std::vector<float>{1, 2, 3, 1, 1, 1, -2, 4, 0.5f}, {3, 3}, dev)
            .sparse_categorical_crossentropy(Tensor(std::vector<int32_t>{2, 0, 1}, {3}, dev));
      },
      2));
  EXPECT_NE(error_of([&] {
              (void)logits().sparse_categorical_crossentropy(Tensor({0.5f, 1.0f, 2.0f}));
            })
                .find("sparse_categorical_crossentropy: needs logits (..., C) and integer class "
                      "indices of shape (3,), "
                      "got logits (3, 3) float32 and target (3,) float32"),
            std::string::npos);
}

namespace {

// sparse_categorical_crossentropy composed of its parts, as it was before its logits' gradient
// was written out: autograd derives that gradient through log_softmax, the one-hot where and the
// sums (ignore_index -1).
Tensor composed_sparse_loss(const Tensor& x, const Tensor& t, double eps, Reduction r) {
  const int64_t classes = x.shape().back();
  const Tensor logp = x.log_softmax(-1);
  const Tensor zero = Tensor::full({}, 0, x.dtype(), x.device());
  const Tensor counted = t.ne(Tensor::full({}, -1, t.dtype(), t.device()));
  const Tensor mask =
      t.unsqueeze(-1).eq(Tensor::arange(0, classes, 1, t.device()).reshape({1, classes}));
  if (r == Reduction::None)
    return -counted.where(mask.where(logp, zero).sum(-1) * (1 - eps) + logp.mean(-1) * eps, zero);
  const Tensor term = mask.where(logp, zero) * (1 - eps) + logp * (eps / double(classes));
  const Tensor total = -counted.unsqueeze(-1).where(term, zero).sum();
  return r == Reduction::Sum ? total : total / counted.sum().cast(total.dtype());
}

// The logits' gradient of `loss(x)` times an upstream gradient that is not all ones.
std::vector<float> logits_gradient(const std::string& dev,
                                   const std::function<Tensor(const Tensor&)>& loss) {
  const float inf = std::numeric_limits<float>::infinity();
  // Rows: a -inf logit, an ignored target, a target out of range (CHECK_INDICES is off), logits
  // far apart.
  Tensor x =
      Tensor(std::vector<float>{1, 2, 3, -inf, 0.5f, 1, 1, 1, 1, -2, 4, 0.5f, 80, -80, 0, 0.25f},
             {4, 4}, dev)
          .requires_grad_();
  const Tensor l = loss(x);
  const Tensor upstream = l.ndim() == 0 ? Tensor::full({}, 1.5, l.dtype(), dev)
                                        : Tensor(std::vector<float>{0.5f, 2, -1, 3}, {4}, dev);
  (l * upstream).sum().backward();
  return x.grad()->to_vector<float>();
}

}  // namespace

// The written-out gradient (core/tensor_loss.cpp) equals the derived one for each reduction and
// smoothing, and Vulkan agrees with the CPU device.
TEST(TensorLoss, SparseCategoricalCrossentropyGradientEqualsTheDerivedOne) {
  for (const Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None})
    for (const double eps : {0.0, 0.2}) {
      SCOPED_TRACE("reduction " + std::to_string(int(r)) + ", label smoothing " +
                   std::to_string(eps));
      for (const std::string dev : {"CPU", "VK"}) {
        SCOPED_TRACE(dev);
        const auto target = [&] { return Tensor(std::vector<int32_t>{2, -1, 7, 0}, {4}, dev); };
        const std::vector<float> got = logits_gradient(dev, [&](const Tensor& x) {
          return x.sparse_categorical_crossentropy(target(), -1, eps, r);
        });
        const std::vector<float> want = logits_gradient(
            dev, [&](const Tensor& x) { return composed_sparse_loss(x, target(), eps, r); });
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) {
          EXPECT_NEAR(got[i], want[i], 1e-6 * std::max(1.0f, std::abs(want[i]))) << i;
          if (i >= 4 && i < 8) EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), 0u) << i;  // ignored: +0
        }
      }
      EXPECT_TRUE(cpu_vk_agree(
          [&](const std::string& dev) {
            return Tensor(logits_gradient(dev,
                                          [&](const Tensor& x) {
                                            return x.sparse_categorical_crossentropy(
                                                Tensor(std::vector<int32_t>{2, -1, 7, 0}, {4}, dev),
                                                -1, eps, r);
                                          }),
                          {16});
          },
          2));
    }
}

// With every target ignored the mean divides by a count of 0, and the gradient is still zeros (as
// torch's and the derived one's), not 0 * inf = nan; so for sum and none. With reduction none, an
// upstream gradient of nan or inf at an ignored row leaves that row's gradient zero.
TEST(TensorLoss, SparseCategoricalCrossentropyIgnoredRowsGetZeroGradient) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const std::string dev : {"CPU", "VK"}) {
    SCOPED_TRACE(dev);
    for (const Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None})
      for (const double eps : {0.0, 0.2}) {
        SCOPED_TRACE("reduction " + std::to_string(int(r)) + ", label smoothing " +
                     std::to_string(eps));
        Tensor x = Tensor(std::vector<float>{1, 2, 3, 0.5f, -1, 4}, {2, 3}, dev).requires_grad_();
        x.sparse_categorical_crossentropy(Tensor(std::vector<int32_t>{-1, -1}, {2}, dev), -1, eps,
                                          r)
            .sum()
            .backward();
        for (const float v : x.grad()->to_vector<float>())
          EXPECT_EQ(std::bit_cast<uint32_t>(v), 0u);
      }
    for (const float bad : {nan, inf}) {
      SCOPED_TRACE(bad);
      Tensor x = Tensor(std::vector<float>{1, 2, 3, 0.5f, -1, 4}, {2, 3}, dev).requires_grad_();
      const Tensor l = x.sparse_categorical_crossentropy(
          Tensor(std::vector<int32_t>{-1, 2}, {2}, dev), -1, 0.0, Reduction::None);
      (l * Tensor(std::vector<float>{bad, 2}, {2}, dev)).sum().backward();
      const std::vector<float> got = x.grad()->to_vector<float>();
      for (size_t i = 0; i < 3; ++i) EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), 0u) << i;
      // The counted row: 2 (softmax - onehot) of (0.5, -1, 4).
      const double e0 = std::exp(0.5), e1 = std::exp(-1.0), e2 = std::exp(4.0);
      const double sum = e0 + e1 + e2;
      EXPECT_NEAR(got[3], 2 * e0 / sum, 1e-6);
      EXPECT_NEAR(got[4], 2 * e1 / sum, 1e-6);
      EXPECT_NEAR(got[5], 2 * (e2 / sum - 1), 1e-6);
    }
  }
}

// float64 logits with label smoothing: the written-out gradient's constants (1 - eps + eps / C
// and eps / C) are float64, so the gradient is float64-accurate (float32 constants were off by
// ~1e-10). CPU only: Lavapipe may lack float64 transcendentals.
TEST(TensorLoss, SparseCategoricalCrossentropyFloat64GradientIsFloat64Accurate) {
  const int64_t rows = 2, classes = 10;
  const double eps = 0.1;
  const std::vector<int32_t> target = {3, 7};
  std::vector<double> x(size_t(rows * classes));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(double(i) * 1.3) * 3.0;
  Tensor logits = Tensor(x, {rows, classes}, "CPU").requires_grad_();
  logits.sparse_categorical_crossentropy(Tensor(target, {rows}, "CPU"), -1, eps, Reduction::Mean)
      .backward();
  ASSERT_EQ(logits.grad()->dtype(), dtypes::float64);
  const std::vector<double> got = logits.grad()->to_vector<double>();
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -INFINITY, sum = 0;
    for (int64_t c = 0; c < classes; ++c) mx = std::max(mx, x[size_t(r * classes + c)]);
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(x[size_t(r * classes + c)] - mx);
    for (int64_t c = 0; c < classes; ++c) {
      const double softmax = std::exp(x[size_t(r * classes + c)] - mx) / sum;
      const double w = (c == target[size_t(r)] ? 1 - eps : 0.0) + eps / double(classes);
      EXPECT_NEAR(got[size_t(r * classes + c)], (softmax - w) / double(rows), 1e-14)
          << "row " << r << " class " << c;
    }
  }
}

// The gradient is that of the logits the loss was built from, even when the logits tensor is
// assigned a new value before backward (the gradient captures the node, not the handle, which
// assign repoints). The logits are computed from a leaf: a leaf's assign makes a new leaf,
// which the old graph does not reach.
TEST(TensorLoss, SparseCategoricalCrossentropyGradientUsesTheLogitsItWasBuiltFrom) {
  for (const std::string dev : {"CPU", "VK"}) {
    SCOPED_TRACE(dev);
    Tensor w = Tensor(std::vector<float>{0.5f, 1, 1.5f}, {1, 3}, dev).requires_grad_();
    Tensor x = w * 2;
    const Tensor loss = x.sparse_categorical_crossentropy(Tensor(std::vector<int32_t>{0}, {1}, dev),
                                                          -1, 0.0, Reduction::Sum);
    x.assign(Tensor(std::vector<float>{5, -4, 0}, {1, 3}, dev));
    loss.backward();
    // d loss / d w = 2 (softmax(1, 2, 3) - onehot(0)).
    const double e1 = std::exp(1.0), e2 = std::exp(2.0), e3 = std::exp(3.0), s = e1 + e2 + e3;
    const std::vector<float> got = w.grad()->to_vector<float>();
    EXPECT_NEAR(got[0], 2 * (e1 / s - 1), 1e-6);
    EXPECT_NEAR(got[1], 2 * e2 / s, 1e-6);
    EXPECT_NEAR(got[2], 2 * e3 / s, 1e-6);
  }
}

TEST(TensorLoss, BinaryCrossentropyAndItsLogitsForm) {
  const Tensor p = Tensor({0.2f, 0.9f, 0.0f, 1.0f, 0.0f}),
               y = Tensor({0.0f, 1.0f, 0.0f, 1.0f, 1.0f});
  const std::vector<float> bce = p.binary_crossentropy(y, Reduction::None).to_vector<float>();
  EXPECT_NEAR(bce[0], -std::log(0.8), 1e-6);
  EXPECT_NEAR(bce[1], -std::log(0.9), 1e-6);
  EXPECT_EQ(bce[2], 0.0f);
  EXPECT_EQ(bce[3], 0.0f);
  EXPECT_EQ(bce[4], 100.0f);  // log(0) clamps to -100, as torch
  EXPECT_NEAR(p.binary_crossentropy(y).item<float>(), (-std::log(0.8) - std::log(0.9) + 100) / 5,
              1e-5);

  const Tensor x = Tensor({-2.0f, 0.0f, 3.0f, 100.0f, -100.0f}),
               t = Tensor({0.0f, 1.0f, 1.0f, 0.0f, 0.0f});
  const std::vector<float> bl = x.binary_crossentropy_logits(t, Reduction::None).to_vector<float>();
  EXPECT_NEAR(bl[0], std::log1p(std::exp(-2.0)), 1e-6);
  EXPECT_NEAR(bl[1], std::log(2.0), 1e-6);
  EXPECT_NEAR(bl[2], std::log1p(std::exp(-3.0)), 1e-6);
  EXPECT_NEAR(bl[3], 100.0, 1e-4);  // exp(100) would overflow the naive form
  EXPECT_NEAR(bl[4], 0.0, 1e-6);
  EXPECT_NE(error_of([&] { (void)p.binary_crossentropy(Tensor({1.0f})); })
                .find("binary_crossentropy: input (5,) float32 and target (1,) float32 must have "
                      "the same shape"),
            std::string::npos);
}

TEST(TensorLoss, MseAndL1WithEachReduction) {
  const Tensor a = Tensor({1.0f, -2.0f, 3.5f, 0.0f}).reshape({2, 2}),
               b = Tensor({0.0f, 1.0f, 3.0f, -4.0f}).reshape({2, 2});
  // differences 1, -3, 0.5, 4
  EXPECT_EQ(a.mse_loss(b).item<float>(), (1 + 9 + 0.25f + 16) / 4);
  EXPECT_EQ(a.mse_loss(b, Reduction::Sum).item<float>(), 26.25f);
  EXPECT_EQ(a.mse_loss(b, Reduction::None).to_vector<float>(),
            (std::vector<float>{1, 9, 0.25f, 16}));
  EXPECT_EQ(a.l1_loss(b).item<float>(), 8.5f / 4);
  EXPECT_EQ(a.l1_loss(b, Reduction::Sum).item<float>(), 8.5f);
  EXPECT_EQ(a.l1_loss(b, Reduction::None).shape(), (Shape{2, 2}));
  EXPECT_EQ(Tensor({1, 2}).mse_loss(Tensor({0, 0})).item<float>(),
            2.5f);  // integers compute in floats
  EXPECT_NE(
      error_of([&] {
        (void)a.l1_loss(Tensor({1.0f, 2.0f}));
      }).find("l1_loss: input (2, 2) float32 and target (2,) float32 must have the same shape"),
      std::string::npos);
}
