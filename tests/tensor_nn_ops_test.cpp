// RMSNorm, GroupNorm, InstanceNorm, exact gelu, scaled_dot_product_attention, nll_loss and
// weighted cross-entropy, randperm and multinomial: against closed forms computed on the host
// from torch's definitions, on Vulkan and the CPU device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "support/device_compare.hpp"
#include "support/error_of.hpp"

#include <vkgrad/core/schedule.hpp>

using namespace vkg;
using namespace vkg::test;

namespace {

std::vector<float> wave(size_t n, float scale = 1) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * std::sin(float(i) * 1.7f + 0.3f);
  return v;
}

class NnOps : public testing::TestWithParam<std::string> {};

TEST_P(NnOps, NormalizationsMatchTheirDefinitions) {
  const std::string dev = GetParam();
  const std::vector<float> v = wave(2 * 4 * 3);
  const Tensor x(v, {2, 4, 3}, dev);
  // rms_norm over the last axis, eps 1e-6.
  const auto rms = x.rms_norm({-1}, 1e-6).to_vector<float>();
  for (size_t r = 0; r < 8; ++r) {
    double ms = 0;
    for (size_t j = 0; j < 3; ++j) ms += double(v[r * 3 + j]) * v[r * 3 + j] / 3;
    for (size_t j = 0; j < 3; ++j) EXPECT_NEAR(rms[r * 3 + j], v[r * 3 + j] / std::sqrt(ms + 1e-6), 1e-5);
  }
  // group_norm with 2 groups of 2 channels, weight and bias per channel.
  const Tensor w(std::vector<float>{1, 2, 3, 4}, {4}, dev), b(std::vector<float>{0, 1, 0, -1}, {4}, dev);
  const auto gn = x.group_norm(2, w, b, 1e-5).to_vector<float>();
  for (size_t n = 0; n < 2; ++n)
    for (size_t g = 0; g < 2; ++g) {
      const size_t first = n * 12 + g * 6;
      double mean = 0, var = 0;
      for (size_t i = 0; i < 6; ++i) mean += v[first + i] / 6.0;
      for (size_t i = 0; i < 6; ++i) var += (v[first + i] - mean) * (v[first + i] - mean) / 6.0;
      for (size_t i = 0; i < 6; ++i) {
        const size_t c = g * 2 + i / 3;
        const double want = (v[first + i] - mean) / std::sqrt(var + 1e-5) * double(c + 1) + (c == 1 ? 1 : c == 3 ? -1 : 0);
        EXPECT_NEAR(gn[first + i], want, 1e-4) << dev << " n " << n << " g " << g << " i " << i;
      }
    }
  // instance_norm: each (n, c) row of 3 has mean 0 and biased variance 1 (up to eps).
  const auto in = x.instance_norm().to_vector<float>();
  for (size_t r = 0; r < 8; ++r) {
    double mean = 0, sq = 0;
    for (size_t j = 0; j < 3; ++j) mean += in[r * 3 + j] / 3.0, sq += double(in[r * 3 + j]) * in[r * 3 + j] / 3.0;
    EXPECT_NEAR(mean, 0, 1e-5);
    EXPECT_NEAR(sq, 1, 1e-3);
  }
  EXPECT_NE(error_of([&] { x.group_norm(3); }).find("group_norm: 4 channels do not split into 3 groups"),
            std::string::npos);
}

TEST_P(NnOps, ExactGeluIsTorchsDefault) {
  const std::vector<float> v{-10, -3, -1, -0.5f, 0, 0.5f, 1, 3, 10};
  const auto got = Tensor(v, {9}, GetParam()).gelu("none").to_vector<float>();
  for (size_t i = 0; i < v.size(); ++i)
    EXPECT_NEAR(got[i], 0.5 * v[i] * (1 + std::erf(v[i] / std::sqrt(2.0))), 2e-6 * std::max(1.0f, std::abs(v[i])));
  EXPECT_NE(error_of([&] { Tensor(v, {9}).gelu("fast"); }).find("gelu: approximate"), std::string::npos);
}

TEST_P(NnOps, AttentionMatchesItsMatmulSoftmaxFormAndMasks) {
  const std::string dev = GetParam();
  const Tensor q(wave(2 * 3 * 4), {2, 3, 4}, dev), k(wave(2 * 5 * 4, 0.7f), {2, 5, 4}, dev),
      v(wave(2 * 5 * 2, 1.3f), {2, 5, 2}, dev);
  const Tensor manual = (q.matmul(k.transpose()) / 2.0).softmax(-1).matmul(v);
  // Three kernels (the scores, their max, the matmul with softmax's sum as a second accumulator
  // and the division after it) where softmax then matmul takes four.
  EXPECT_EQ(create_schedule({q.scaled_dot_product_attention(k, v).node()}).items.size(), 3u);
  EXPECT_EQ(create_schedule({manual.node()}).items.size(), 4u);
  // sdpa divides by softmax's sum after the matmul, not before: the same within the rounding of
  // the terms (|v| < 1.3), not within ulps of a result that cancels to near 0.
  const auto near = [](const Tensor& a, const Tensor& b) {
    const std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 2e-7) << i;
  };
  near(manual, q.scaled_dot_product_attention(k, v));
  // Causal: query i sees keys 0..i (top-left aligned); the same as a bool lower-triangle mask.
  const Tensor tri = Tensor::ones({3, 5}, dtypes::bool_, dev).tril();
  const Tensor causal = q.scaled_dot_product_attention(k, v, {}, 0.0, true);
  EXPECT_TRUE(same_elements(dtypes::float32, causal.bytes(), q.scaled_dot_product_attention(k, v, tri).bytes()));
  // Query 0 sees only key 0: its output is v's row 0.
  const auto c = causal.to_vector<float>(), vv = v.to_vector<float>();
  EXPECT_NEAR(c[0], vv[0], 1e-6);
  EXPECT_NEAR(c[1], vv[1], 1e-6);
  // A float mask adds to the scores; a scale replaces 1/sqrt(E).
  const Tensor bias(wave(3 * 5, 2), {3, 5}, dev);
  const Tensor added = (q.matmul(k.transpose()) * 0.3 + bias).softmax(-1).matmul(v);
  near(added, q.scaled_dot_product_attention(k, v, bias, 0.0, false, 0.3));
  EXPECT_NE(error_of([&] { q.scaled_dot_product_attention(v, v); }).find("scaled_dot_product_attention: needs"),
            std::string::npos);
}

TEST_P(NnOps, NllLossAndCrossEntropyWithWeightsAndIgnoredTargets) {
  const std::string dev = GetParam();
  // log-probabilities of 3 samples over 3 classes, targets 0, 2 and an ignored -100.
  const std::vector<float> lp{-0.5f, -1.5f, -2.0f, -1.0f, -0.7f, -3.0f, -0.1f, -4.0f, -2.5f};
  const Tensor logp(lp, {3, 3}, dev);
  const Tensor target(std::vector<int32_t>{0, 2, -100}, {3}, dev);
  const Tensor w(std::vector<float>{2, 1, 0.5f}, {3}, dev);
  EXPECT_NEAR(logp.nll_loss(target).item<float>(), (0.5 + 3.0) / 2, 1e-6);
  EXPECT_NEAR(logp.nll_loss(target, w).item<float>(), (2 * 0.5 + 0.5 * 3.0) / (2 + 0.5), 1e-6);
  EXPECT_NEAR(logp.nll_loss(target, w, -100, Reduction::Sum).item<float>(), 2 * 0.5 + 0.5 * 3.0, 1e-6);
  EXPECT_EQ(logp.nll_loss(target, {}, -100, Reduction::None).to_vector<float>(), (std::vector<float>{0.5f, 3.0f, 0}));
  // cross_entropy is nll_loss of log_softmax, with the same weights and ignore_index.
  const Tensor logits(wave(9, 2), {3, 3}, dev);
  EXPECT_NEAR(logits.cross_entropy(target, Reduction::Mean, 0.0, w).item<float>(),
              logits.log_softmax(1).nll_loss(target, w).item<float>(), 1e-6);
  // Smoothing with weights, torch's formula: (1 - e) * nll + e / C * sum_c w_c (-logp_c), both
  // over the counted weights.
  const auto ls = logits.log_softmax(1).to_vector<float>();
  const float wt[] = {2, 1, 0.5f};
  double nll = 0, smooth = 0;
  for (int n : {0, 1}) {
    const int t = n == 0 ? 0 : 2;
    nll += -wt[t] * ls[size_t(n * 3 + t)];
    for (int cl = 0; cl < 3; ++cl) smooth += -wt[cl] * ls[size_t(n * 3 + cl)] / 3;
  }
  EXPECT_NEAR(logits.cross_entropy(target, Reduction::Mean, 0.2, w).item<float>(), (0.8 * nll + 0.2 * smooth) / 2.5,
              1e-5);
  EXPECT_NE(error_of([&] { logp.nll_loss(target, Tensor::ones({4}, dtypes::float32, dev)); })
                .find("nll_loss: weight needs shape (3)"),
            std::string::npos);
}

TEST_P(NnOps, RandpermAndMultinomial) {
  const std::string dev = GetParam();
  Tensor::manual_seed(11);
  auto p = Tensor::randperm(1000, dtypes::int32, dev).to_vector<int32_t>();
  std::vector<int32_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int32_t> want(1000);
  std::iota(want.begin(), want.end(), 0);
  EXPECT_EQ(sorted, want);
  EXPECT_NE(p, want);
  // With replacement: 20000 draws from weights 1:2:0:5 land within a few sigma of 1/8, 2/8, 0, 5/8.
  const Tensor weights(std::vector<float>{1, 2, 0, 5}, {4}, dev);
  const auto draws = weights.multinomial(20000, true).to_vector<int32_t>();
  std::vector<int> count(4);
  for (int32_t d : draws) ++count.at(size_t(d));
  EXPECT_EQ(count[2], 0);
  EXPECT_NEAR(count[0] / 20000.0, 1 / 8.0, 0.015);
  EXPECT_NEAR(count[1] / 20000.0, 2 / 8.0, 0.015);
  EXPECT_NEAR(count[3] / 20000.0, 5 / 8.0, 0.015);
  // Without replacement: 3 distinct classes per row, never the zero-weight one.
  const auto rows = Tensor(std::vector<float>{1, 2, 0, 5, 3, 3, 3, 0}, {2, 4}, dev).multinomial(3).to_vector<int32_t>();
  for (size_t r = 0; r < 2; ++r) {
    std::vector<int32_t> row(rows.begin() + ptrdiff_t(r * 3), rows.begin() + ptrdiff_t(r * 3 + 3));
    std::sort(row.begin(), row.end());
    EXPECT_TRUE(std::adjacent_find(row.begin(), row.end()) == row.end());
    EXPECT_EQ(std::count(row.begin(), row.end(), r == 0 ? 2 : 3), 0);
  }
  EXPECT_NE(error_of([&] { weights.multinomial(5); }).find("multinomial: cannot draw 5 samples from 4 classes"),
            std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Devices, NnOps, testing::Values("CPU", "VK"));

}  // namespace
