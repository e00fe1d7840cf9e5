// conv1d, conv3d and their transposes, the N-d pools (ceil_mode, count_include_pad, indices),
// adaptive average pooling and interpolate, against direct loops on the host in double and values
// from torch's documentation, on Vulkan and the CPU device.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "support/device_compare.hpp"
#include "support/error_of.hpp"

#include <vkgrad/core/schedule.hpp>

using namespace vkg;
using namespace vkg::test;

namespace {

std::vector<float> wave(size_t n, float phase) {
  std::vector<float> v(n);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(float(i) * 0.9f + phase);
  return v;
}

using A3 = std::array<int64_t, 3>;

// Direct convolution over up to 3 spatial axes (1-D cases use sizes 1 for the first two), plain
// or transposed, in double: x (N, C, *in), w (Cout, C/g, *k) or, transposed, (C, Cout/g, *k).
std::vector<double> conv_reference(const std::vector<float>& x, int64_t n, int64_t c, A3 in,
                                   const std::vector<float>& w, int64_t wo, A3 k, A3 s, A3 p, A3 d,
                                   int64_t g, bool transposed, A3 op, A3& out) {
  for (int a = 0; a < 3; ++a)
    out[size_t(a)] =
        transposed ? (in[size_t(a)] - 1) * s[size_t(a)] - 2 * p[size_t(a)] +
                         d[size_t(a)] * (k[size_t(a)] - 1) + op[size_t(a)] + 1
                   : (in[size_t(a)] + 2 * p[size_t(a)] - d[size_t(a)] * (k[size_t(a)] - 1) - 1) /
                             s[size_t(a)] +
                         1;
  const int64_t cout = transposed ? wo * g : wo, cin_g = c / g, cout_g = cout / g;
  std::vector<double> y(size_t(n * cout * out[0] * out[1] * out[2]), 0.0);
  auto xi = [&](int64_t b, int64_t ch, int64_t i0, int64_t i1, int64_t i2) {
    return size_t((((b * c + ch) * in[0] + i0) * in[1] + i1) * in[2] + i2);
  };
  auto yi = [&](int64_t b, int64_t ch, int64_t o0, int64_t o1, int64_t o2) {
    return size_t((((b * cout + ch) * out[0] + o0) * out[1] + o1) * out[2] + o2);
  };
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t co_g = 0; co_g < cout_g; ++co_g)
        for (int64_t i0 = 0; i0 < (transposed ? in[0] : out[0]); ++i0)
          for (int64_t i1 = 0; i1 < (transposed ? in[1] : out[1]); ++i1)
            for (int64_t i2 = 0; i2 < (transposed ? in[2] : out[2]); ++i2)
              for (int64_t k0 = 0; k0 < k[0]; ++k0)
                for (int64_t k1 = 0; k1 < k[1]; ++k1)
                  for (int64_t k2 = 0; k2 < k[2]; ++k2) {
                    const int64_t grp = ci / cin_g, co = grp * cout_g + co_g;
                    const int64_t j0 =
                        transposed ? i0 * s[0] - p[0] + k0 * d[0] : i0 * s[0] - p[0] + k0 * d[0];
                    const int64_t j1 =
                        transposed ? i1 * s[1] - p[1] + k1 * d[1] : i1 * s[1] - p[1] + k1 * d[1];
                    const int64_t j2 =
                        transposed ? i2 * s[2] - p[2] + k2 * d[2] : i2 * s[2] - p[2] + k2 * d[2];
                    const A3 lim = transposed ? out : in;
                    if (j0 < 0 || j1 < 0 || j2 < 0 || j0 >= lim[0] || j1 >= lim[1] || j2 >= lim[2])
                      continue;
                    const size_t wi =
                        transposed
                            ? size_t((((ci * cout_g + co_g) * k[0] + k0) * k[1] + k1) * k[2] + k2)
                            : size_t((((co * cin_g + ci % cin_g) * k[0] + k0) * k[1] + k1) * k[2] +
                                     k2);
                    if (transposed)
                      y[yi(b, co, j0, j1, j2)] += double(x[xi(b, ci, i0, i1, i2)]) * w[wi];
                    else
                      y[yi(b, co, i0, i1, i2)] += double(x[xi(b, ci, j0, j1, j2)]) * w[wi];
                  }
  return y;
}

// The weight gradient of conv_reference's plain convolution for the output gradient gy:
// dw[co, ci, *k] = sum over batch and outputs of gy[b, co, *o] * x[b, group's ci, *o * s - p + *k *
// d].
std::vector<double> conv_weight_gradient(const std::vector<float>& x, int64_t n, int64_t c, A3 in,
                                         const std::vector<float>& gy, int64_t cout, A3 out, A3 k,
                                         A3 s, A3 p, A3 d, int64_t g) {
  const int64_t cin_g = c / g, cout_g = cout / g;
  std::vector<double> dw(size_t(cout * cin_g * k[0] * k[1] * k[2]), 0.0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t co = 0; co < cout; ++co)
      for (int64_t ci = 0; ci < cin_g; ++ci)
        for (int64_t o0 = 0; o0 < out[0]; ++o0)
          for (int64_t o1 = 0; o1 < out[1]; ++o1)
            for (int64_t o2 = 0; o2 < out[2]; ++o2)
              for (int64_t k0 = 0; k0 < k[0]; ++k0)
                for (int64_t k1 = 0; k1 < k[1]; ++k1)
                  for (int64_t k2 = 0; k2 < k[2]; ++k2) {
                    const int64_t j0 = o0 * s[0] - p[0] + k0 * d[0],
                                  j1 = o1 * s[1] - p[1] + k1 * d[1],
                                  j2 = o2 * s[2] - p[2] + k2 * d[2];
                    if (j0 < 0 || j1 < 0 || j2 < 0 || j0 >= in[0] || j1 >= in[1] || j2 >= in[2])
                      continue;
                    const int64_t xc = co / cout_g * cin_g + ci;
                    dw[size_t((((co * cin_g + ci) * k[0] + k0) * k[1] + k1) * k[2] + k2)] +=
                        double(gy[size_t((((b * cout + co) * out[0] + o0) * out[1] + o1) * out[2] +
                                         o2)]) *
                        x[size_t((((b * c + xc) * in[0] + j0) * in[1] + j1) * in[2] + j2)];
                  }
  return dw;
}

void expect_near(const Tensor& got, const std::vector<double>& want, double tol,
                 const std::string& what) {
  const auto g = got.to_vector<float>();
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], want[i], tol) << what << " [" << i << "]";
}

class ConvPoolNd : public testing::TestWithParam<std::string> {};

TEST_P(ConvPoolNd, Conv1dAnd3dMatchDirectLoops) {
  const std::string dev = GetParam();
  // conv1d: (2, 4, 9) by (6, 2, 3), stride 2, padding 1, dilation 2, groups 2.
  const auto x1 = wave(2 * 4 * 9, 0.1f), w1 = wave(6 * 2 * 3, 0.7f);
  A3 out{};
  auto want = conv_reference(x1, 2, 4, {1, 1, 9}, w1, 6, {1, 1, 3}, {1, 1, 2}, {0, 0, 1}, {1, 1, 2},
                             2, false, {}, out);
  ConvOptions o1;
  o1.stride = {2}, o1.padding = {1}, o1.dilation = {2}, o1.groups = 2;
  const Tensor y1 = Tensor(x1, {2, 4, 9}, dev).conv1d(Tensor(w1, {6, 2, 3}, dev), {}, o1);
  EXPECT_EQ(y1.shape(), (Shape{2, 6, out[2]}));
  expect_near(y1, want, 1e-5, "conv1d");
  // conv3d: (1, 2, 4, 5, 3) by (3, 2, 2, 3, 2), stride (1, 2, 1), padding (1, 0, 1).
  const auto x3 = wave(2 * 4 * 5 * 3, 0.2f), w3 = wave(3 * 2 * 2 * 3 * 2, 1.1f);
  want = conv_reference(x3, 1, 2, {4, 5, 3}, w3, 3, {2, 3, 2}, {1, 2, 1}, {1, 0, 1}, {1, 1, 1}, 1,
                        false, {}, out);
  ConvOptions o3;
  o3.stride = {1, 2, 1}, o3.padding = {1, 0, 1};
  const Tensor bias(std::vector<float>{0.5f, -1, 2}, {3}, dev);
  const Tensor y3 =
      Tensor(x3, {1, 2, 4, 5, 3}, dev).conv3d(Tensor(w3, {3, 2, 2, 3, 2}, dev), bias, o3);
  EXPECT_EQ(y3.shape(), (Shape{1, 3, out[0], out[1], out[2]}));
  const int64_t per = out[0] * out[1] * out[2];
  for (size_t i = 0; i < want.size(); ++i)
    want[i] += i / size_t(per) == 0 ? 0.5 : i / size_t(per) == 1 ? -1 : 2;
  expect_near(y3, want, 1e-5, "conv3d");
}

// conv3d with groups, dilation, stride and padding on different axes at once.
TEST_P(ConvPoolNd, Conv3dWithGroupsAndDilationMatchesTheDirectLoop) {
  const std::string dev = GetParam();
  const auto x = wave(2 * 6 * 7 * 6 * 8, 0.3f), w = wave(4 * 3 * 2 * 3 * 2, 0.8f);
  A3 out{};
  const auto want = conv_reference(x, 2, 6, {7, 6, 8}, w, 4, {2, 3, 2}, {1, 2, 3}, {2, 1, 0},
                                   {2, 1, 3}, 2, false, {}, out);
  ConvOptions o;
  o.stride = {1, 2, 3}, o.padding = {2, 1, 0}, o.dilation = {2, 1, 3}, o.groups = 2;
  const Tensor y = Tensor(x, {2, 6, 7, 6, 8}, dev).conv3d(Tensor(w, {4, 3, 2, 3, 2}, dev), {}, o);
  EXPECT_EQ(y.shape(), (Shape{2, 4, out[0], out[1], out[2]}));
  expect_near(y, want, 1e-5, "conv3d groups dilation");
}

// conv1d and conv3d with channels in fours and enough work take conv2d's channels-last path
// (core/tensor_conv.cpp): the forward, and the input gradient as a transposed convolution of a
// channels-last copy of the output gradient. Both gradients against host loops (the input
// gradient is conv_reference's transposed convolution of the output gradient), and conv1d has
// conv2d's kernel counts on the same data viewed (N, C, 1, L).
TEST_P(ConvPoolNd, ChannelsLastConv1dAnd3dMatchHostLoopsWithTheirGradients) {
  const std::string dev = GetParam();
  struct Case {
    Shape x, w;
    A3 in, k, p;
  };
  const Case cases[] = {{{8, 8, 1024}, {16, 8, 5}, {1, 1, 1024}, {1, 1, 5}, {0, 0, 2}},
                        {{3, 8, 10, 10, 10}, {8, 8, 3, 3, 3}, {10, 10, 10}, {3, 3, 3}, {1, 1, 1}}};
  for (const Case& c : cases) {
    const size_t dims = c.x.size() - 2;
    const std::string what = dims == 1 ? "conv1d" : "conv3d";
    const int64_t n = c.x[0], cin = c.x[1], cout = c.w[0];
    const auto x = wave(size_t(prod(c.x)), 0.1f), w = wave(size_t(prod(c.w)), 0.6f);
    A3 out{};
    const auto want =
        conv_reference(x, n, cin, c.in, w, cout, c.k, {1, 1, 1}, c.p, {1, 1, 1}, 1, false, {}, out);
    Shape out_shape{n, cout};
    for (size_t a = 3 - dims; a < 3; ++a) out_shape.push_back(out[a]);
    const auto gy = wave(size_t(prod(out_shape)), 1.7f);
    ConvOptions o;
    o.padding = {c.p[2]};
    Tensor xt = Tensor(x, c.x, dev).requires_grad_(), wt = Tensor(w, c.w, dev).requires_grad_();
    const Tensor y = dims == 1 ? xt.conv1d(wt, {}, o) : xt.conv3d(wt, {}, o);
    ASSERT_EQ(y.shape(), out_shape) << what;
    EXPECT_EQ(create_schedule({y.node()}).items.size(), 3u)
        << what;  // the input's copy, the weight's, the convolution
    expect_near(y, want, 1e-4, what);
    y.backward(Tensor(gy, out_shape, dev));
    A3 back{};
    const auto dx =
        conv_reference(gy, n, cout, out, w, cin, c.k, {1, 1, 1}, c.p, {1, 1, 1}, 1, true, {}, back);
    ASSERT_EQ(back, c.in) << what;
    expect_near(*xt.grad(), dx, 1e-3, what + " input gradient");
    // Each weight gradient sums batch x positions products (up to ~1e3): float32's relative error.
    const auto dw =
        conv_weight_gradient(x, n, cin, c.in, gy, cout, out, c.k, {1, 1, 1}, c.p, {1, 1, 1}, 1);
    double largest = 0;
    for (double v : dw) largest = std::max(largest, std::abs(v));
    expect_near(*wt.grad(), dw, 1e-5 * largest, what + " weight gradient");
    if (dims != 1) continue;
    // The same data through conv2d on (N, C, 1, L) and conv3d on (N, C, 1, 1, L): the same
    // kernels, forward and backward (one path, one input gradient, for every N).
    auto counts = [&](size_t as_dims) {
      Tensor a = Tensor(x, c.x, dev).requires_grad_(), b = Tensor(w, c.w, dev).requires_grad_();
      ConvOptions o3 = o;
      o3.padding = {0, 0, c.p[2]};
      const Tensor z =
          as_dims == 1 ? a.conv1d(b, {}, o)
          : as_dims == 2
              ? a.unsqueeze(2).conv2d(b.unsqueeze(2), {}, {.padding = Size2(0, c.p[2])}).squeeze(2)
              : a.unsqueeze(2)
                    .unsqueeze(2)
                    .conv3d(b.unsqueeze(2).unsqueeze(2), {}, o3)
                    .squeeze(2)
                    .squeeze(2);
      const size_t forward = create_schedule({z.node()}).items.size();
      z.backward(Tensor(gy, out_shape, dev));
      return std::pair{forward, create_schedule({a.grad()->node(), b.grad()->node()}).items.size()};
    };
    EXPECT_EQ(counts(1), counts(2));
    EXPECT_EQ(counts(3), counts(2));
  }
}

TEST_P(ConvPoolNd, TransposedConvolutionsMatchDirectScatters) {
  const std::string dev = GetParam();
  const auto x1 = wave(2 * 4 * 5, 0.3f), w1 = wave(4 * 3 * 3, 0.9f);
  A3 out{};
  auto want = conv_reference(x1, 2, 4, {1, 1, 5}, w1, 3, {1, 1, 3}, {1, 1, 2}, {0, 0, 1}, {1, 1, 1},
                             2, true, {0, 0, 1}, out);
  ConvOptions o;
  o.stride = {2}, o.padding = {1}, o.output_padding = {1}, o.groups = 2;
  const Tensor y1 = Tensor(x1, {2, 4, 5}, dev).conv_transpose1d(Tensor(w1, {4, 3, 3}, dev), {}, o);
  EXPECT_EQ(y1.shape(), (Shape{2, 6, out[2]}));
  expect_near(y1, want, 1e-5, "conv_transpose1d");
  const auto x3 = wave(2 * 3 * 2 * 3, 0.4f), w3 = wave(2 * 2 * 2 * 2 * 3, 1.3f);
  want = conv_reference(x3, 1, 2, {3, 2, 3}, w3, 2, {2, 2, 3}, {2, 1, 2}, {0, 1, 1}, {1, 2, 1}, 1,
                        true, {1, 0, 0}, out);
  ConvOptions o3;
  o3.stride = {2, 1, 2}, o3.padding = {0, 1, 1}, o3.dilation = {1, 2, 1},
  o3.output_padding = {1, 0, 0};
  const Tensor y3 =
      Tensor(x3, {1, 2, 3, 2, 3}, dev).conv_transpose3d(Tensor(w3, {2, 2, 2, 2, 3}, dev), {}, o3);
  EXPECT_EQ(y3.shape(), (Shape{1, 2, out[0], out[1], out[2]}));
  expect_near(y3, want, 1e-5, "conv_transpose3d");
  EXPECT_NE(error_of([&] {
              Tensor(x1, {2, 4, 5}, dev).conv3d(Tensor(w1, {4, 3, 3}, dev));
            }).find("conv3d: needs a 5-D input"),
            std::string::npos);
}

TEST_P(ConvPoolNd, PoolsWithCeilModePaddingAndIndices) {
  const std::string dev = GetParam();
  // torch: max_pool1d([1, 5, 2, 8, 3, 7, 4, 6], kernel 3, stride 2, padding 1, ceil_mode) has five
  // windows, the last over input 7, the padding and ceil_mode's overhang: [5, 8, 8, 7, 6] at
  // [1, 3, 3, 5, 7].
  const Tensor x(std::vector<float>{1, 5, 2, 8, 3, 7, 4, 6}, {1, 1, 8}, dev);
  PoolOptions o;
  o.kernel = {3}, o.stride = std::vector<int64_t>{2}, o.padding = {1}, o.ceil_mode = true;
  auto [values, indices] = x.max_pool_with_indices(o);
  EXPECT_EQ(values.to_vector<float>(), (std::vector<float>{5, 8, 8, 7, 6}));
  EXPECT_EQ(indices.to_vector<int32_t>(), (std::vector<int32_t>{1, 3, 3, 5, 7}));
  // avg_pool1d on those windows: count_include_pad counts the padding but not the overhang
  // (divisors 3, 3, 3, 3, 2); without it only the input (2, 3, 3, 3, 1).
  const auto with_pad = x.avg_pool(o).to_vector<float>();
  const std::vector<double> want_with{6 / 3.0, 15 / 3.0, 18 / 3.0, 17 / 3.0, 6 / 2.0};
  for (size_t i = 0; i < 5; ++i) EXPECT_NEAR(with_pad[i], want_with[i], 1e-6) << i;
  o.count_include_pad = false;
  const auto without = x.avg_pool(o).to_vector<float>();
  const std::vector<double> want_without{6 / 2.0, 15 / 3.0, 18 / 3.0, 17 / 3.0, 6.0};
  for (size_t i = 0; i < 5; ++i) EXPECT_NEAR(without[i], want_without[i], 1e-6) << i;
  o.ceil_mode = false;
  EXPECT_EQ(x.max_pool(o).shape(), (Shape{1, 1, 4}));
  // 2-D agrees with max_pool2d; indices flatten (h, w).
  const Tensor img(wave(2 * 6 * 6, 0.5f), {1, 2, 6, 6}, dev);
  PoolOptions two;
  two.kernel = {2, 2};
  EXPECT_EQ(img.max_pool(two).to_vector<float>(), img.max_pool2d().to_vector<float>());
  const auto at = img.max_pool_with_indices(two).second.to_vector<int32_t>();
  const auto v = img.to_vector<float>(), m = img.max_pool(two).to_vector<float>();
  for (size_t i = 0; i < at.size(); ++i) EXPECT_EQ(v[(i / 9) * 36 + size_t(at[i])], m[i]);
  // 3-D: a (1, 1, 2, 2, 2) cube pooled whole is its max and its mean.
  const Tensor cube(std::vector<float>{1, 9, 3, 4, 5, 6, 7, 8}, {1, 1, 2, 2, 2}, dev);
  PoolOptions three;
  three.kernel = {2, 2, 2};
  EXPECT_EQ(cube.max_pool(three).to_vector<float>(), (std::vector<float>{9}));
  EXPECT_EQ(cube.max_pool_with_indices(three).second.to_vector<int32_t>(),
            (std::vector<int32_t>{1}));
  EXPECT_NEAR(cube.avg_pool(three).item<float>(), 43.0 / 8, 1e-6);
}

TEST_P(ConvPoolNd, AdaptivePoolingAndInterpolation) {
  const std::string dev = GetParam();
  // 5 -> 3: windows [0, 2), [1, 4), [3, 5).
  const Tensor x(std::vector<float>{1, 2, 3, 4, 5}, {1, 1, 5}, dev);
  const auto a = x.adaptive_avg_pool({3}).to_vector<float>();
  EXPECT_NEAR(a[0], 1.5, 1e-6);
  EXPECT_NEAR(a[1], 3, 1e-6);
  EXPECT_NEAR(a[2], 4.5, 1e-6);
  const Tensor img(wave(2 * 4 * 6, 0.2f), {1, 2, 4, 6}, dev);
  EXPECT_TRUE(same_elements(dtypes::float32, img.adaptive_avg_pool({2, 3}).bytes(),
                            img.avg_pool2d().bytes(), 2));
  // torch: interpolate([1, 2, 3, 4], 8, linear) = [1, 1.25, 1.75, 2.25, 2.75, 3.25, 3.75, 4].
  const Tensor r(std::vector<float>{1, 2, 3, 4}, {1, 1, 4}, dev);
  EXPECT_EQ(r.interpolate({8}, "linear").to_vector<float>(),
            (std::vector<float>{1, 1.25f, 1.75f, 2.25f, 2.75f, 3.25f, 3.75f, 4}));
  EXPECT_EQ(r.interpolate({7}, "linear", true).to_vector<float>(),
            (std::vector<float>{1, 1.5f, 2, 2.5f, 3, 3.5f, 4}));
  EXPECT_EQ(r.interpolate({6}).to_vector<float>(), (std::vector<float>{1, 1, 2, 3, 3, 4}));
  // bilinear is linear along each axis: a (2, 2) ramp to (3, 3) with align_corners.
  const Tensor sq(std::vector<float>{0, 2, 4, 6}, {1, 1, 2, 2}, dev);
  EXPECT_EQ(sq.interpolate({3, 3}, "bilinear", true).to_vector<float>(),
            (std::vector<float>{0, 1, 2, 2, 3, 4, 4, 5, 6}));
  EXPECT_NE(error_of([&] {
              r.interpolate({3, 3}, "linear");
            }).find("interpolate: mode \"linear\""),
            std::string::npos);
}

// At tied maxima both max pools give a window's gradient to its first maximum, as torch (not
// split as max's would be): 1-D, 2-D against max_pool2d. A window of nans gives it to its last
// nan, as torch's kernels (`val > max || isnan(val)` moves on to each later nan); the index too.
TEST_P(ConvPoolNd, MaxPoolGradientGoesToTheFirstTiedMaximumOrTheLastNan) {
  const std::string dev = GetParam();
  Tensor x =
      Tensor(std::vector<float>{2, 2, 1, 3, 3, 3, NAN, NAN}, {1, 1, 8}, dev).requires_grad_();
  PoolOptions o;
  o.kernel = {2};
  (x.max_pool(o) * Tensor(std::vector<float>{1, 2, 3, 4}, {1, 1, 4}, dev)).sum().backward();
  // torch: x.grad = [1, 0, 0, 2, 3, 0, 0, 4], indices [0, 3, 4, 7].
  EXPECT_EQ(x.grad()->to_vector<float>(), (std::vector<float>{1, 0, 0, 2, 3, 0, 0, 4}));
  EXPECT_EQ(x.max_pool_with_indices(o).second.to_vector<int32_t>(),
            (std::vector<int32_t>{0, 3, 4, 7}));
  // A nan before a larger value and one after it: either way the nan is the max.
  const Tensor mixed(std::vector<float>{NAN, 5, 1, 7, 5, NAN}, {1, 1, 6}, dev);
  o.kernel = {3};
  const auto [mv, mi] = mixed.max_pool_with_indices(o);
  EXPECT_TRUE(std::isnan(mv.to_vector<float>()[0]) && std::isnan(mv.to_vector<float>()[1]));
  EXPECT_EQ(mi.to_vector<int32_t>(), (std::vector<int32_t>{0, 5}));
  // Windows longer than a scan block (256) count their hits another way: ties at 5 and 200 in the
  // first window of 300, nans at 310 and 550 in the second.
  std::vector<float> wide(600, 0.0f);
  wide[5] = wide[200] = 9, wide[310] = wide[550] = NAN, wide[400] = 9;
  Tensor big = Tensor(wide, {1, 1, 600}, dev).requires_grad_();
  o.kernel = {300};
  EXPECT_EQ(big.max_pool_with_indices(o).second.to_vector<int32_t>(),
            (std::vector<int32_t>{5, 550}));
  (big.max_pool(o) * Tensor(std::vector<float>{1, 2}, {1, 1, 2}, dev)).sum().backward();
  std::vector<float> want_big(600, 0.0f);
  want_big[5] = 1, want_big[550] = 2;
  EXPECT_EQ(big.grad()->to_vector<float>(), want_big);
  const std::vector<float> img{5, 5, 1, 2,  //
                               5, 0, 2, 2,  //
                               0, 0, 7, 1,  //
                               0, 0, 1, 7};
  Tensor a = Tensor(img, {1, 1, 4, 4}, dev).requires_grad_();
  Tensor b = Tensor(img, {1, 1, 4, 4}, dev).requires_grad_();
  PoolOptions two;
  two.kernel = {2, 2};
  const Tensor weights(std::vector<float>{1, 2, 3, 4}, {1, 1, 2, 2}, dev);
  (a.max_pool(two) * weights).sum().backward();
  (b.max_pool2d() * weights).sum().backward();
  const std::vector<float> want{1, 0, 0, 2, 0, 0, 0, 0, 3, 0, 4, 0, 0, 0, 0, 0};
  EXPECT_EQ(a.grad()->to_vector<float>(), want);
  EXPECT_EQ(b.grad()->to_vector<float>(), want);
}

// The padding is never a window's maximum, even where the max equals its fill (-inf, the
// integers' lowest): torch's index and gradient go to the input element. Windows of x = [-inf,
// -inf, 1] with kernel 2, stride 1, padding 1: [pad, -inf], [-inf, -inf], [-inf, 1], [1, pad].
TEST_P(ConvPoolNd, MaxPoolPaddingIsNeverTheMaximum) {
  const std::string dev = GetParam();
  const float inf = std::numeric_limits<float>::infinity();
  PoolOptions o;
  o.kernel = {2}, o.stride = std::vector<int64_t>{1}, o.padding = {1};
  Tensor x = Tensor(std::vector<float>{-inf, -inf, 1}, {1, 1, 3}, dev).requires_grad_();
  const auto [values, indices] = x.max_pool_with_indices(o);
  EXPECT_EQ(values.to_vector<float>(), (std::vector<float>{-inf, -inf, 1, 1}));
  EXPECT_EQ(indices.to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 2, 2}));
  (x.max_pool(o) * Tensor(std::vector<float>{1, 2, 3, 4}, {1, 1, 4}, dev)).sum().backward();
  EXPECT_EQ(x.grad()->to_vector<float>(), (std::vector<float>{3, 0, 7}));
  const int32_t lowest = std::numeric_limits<int32_t>::min();
  const Tensor ints(std::vector<int32_t>{lowest, lowest, 1}, {1, 1, 3}, dev);
  EXPECT_EQ(ints.max_pool_with_indices(o).second.to_vector<int32_t>(),
            (std::vector<int32_t>{0, 0, 2, 2}));
  const Tensor bytes = Tensor(std::vector<int32_t>{0, 0, 1}, {1, 1, 3}, dev).cast(dtypes::uint8);
  EXPECT_EQ(bytes.max_pool_with_indices(o).second.to_vector<int32_t>(),
            (std::vector<int32_t>{0, 0, 2, 2}));
  // ceil_mode's overhang neither: [-inf, -inf], [-inf, overhang] -> indices 0 and 2.
  PoolOptions c;
  c.kernel = {2}, c.ceil_mode = true;
  const Tensor low(std::vector<float>{-inf, -inf, -inf}, {1, 1, 3}, dev);
  EXPECT_EQ(low.max_pool_with_indices(c).second.to_vector<int32_t>(), (std::vector<int32_t>{0, 2}));
}

// A bool max pool with padding (fuzzer seed 41617): its windows read four bytes at offsets the
// renderer cannot prove aligned, and built a u8vec4 from four scalars, which GLSL allows only
// with 8-bit arithmetic (Lavapipe in CI has 8-bit storage only): the kernel failed to compile.
TEST_P(ConvPoolNd, MaxPoolOfABoolTensorWithPaddingCompiles) {
  const std::string dev = GetParam();
  PoolOptions o;
  o.kernel = {2, 3}, o.stride = std::vector<int64_t>{1, 1}, o.padding = {1, 0};
  std::vector<bool> bits(24);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = (i * 7 + 3) % 5 < 2;
  const Tensor x(bits, {2, 2, 6}, dev);
  // Each window's first true (or its first element when it has none), host-computed.
  std::vector<int32_t> want;
  for (int64_t p = 0; p < 2; ++p)
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t c = 0; c < 4; ++c) {
        int32_t at = -1;
        for (int64_t i = r - 1; i < r + 1; ++i)
          for (int64_t j = c; j < c + 3; ++j)
            if (i >= 0 && i < 2 &&
                (at < 0 || (bits[size_t(p * 12 + i * 6 + j)] && !bits[size_t(p * 12 + at)])))
              at = int32_t(i * 6 + j);
        want.push_back(at);
      }
  EXPECT_EQ(x.max_pool_with_indices(o).second.to_vector<int32_t>(), want);
}

// Errors name the op, the input's shape and dtype: an empty pooled axis (torch: "Expected
// input's non-batch dimensions to have positive length"), a transposed convolution over an empty
// axis, and options with the wrong number of values.
TEST_P(ConvPoolNd, EmptyAxesAndOptionCountsAreErrorsNamingTheInput) {
  const std::string dev = GetParam();
  const Tensor empty = Tensor::zeros({1, 1, 0}, dtypes::float32, dev);
  PoolOptions o;
  o.kernel = {2}, o.padding = {1};
  EXPECT_EQ(error_of([&] { empty.max_pool(o); }),
            "max_pool: the pooled axes of input (1, 1, 0) float32 must not be empty");
  EXPECT_EQ(error_of([&] { empty.avg_pool(o); }),
            "avg_pool: the pooled axes of input (1, 1, 0) float32 must not be empty");
  const Tensor w = Tensor::ones({1, 1, 3}, dtypes::float32, dev);
  ConvOptions strided;
  strided.stride = {2};
  const std::string transposed =
      error_of([&] { empty.conv_transpose1d(w, std::nullopt, strided); });
  EXPECT_EQ(transposed,
            "conv_transpose1d: input (1, 1, 0) float32 has a spatial axis of length 0 "
            "(weight (1, 1, 3) float32)");
  const Tensor x = Tensor::ones({1, 1, 5}, dtypes::float32, dev);
  ConvOptions two;
  two.stride = {1, 2};
  EXPECT_EQ(error_of([&] { x.conv1d(w, std::nullopt, two); }),
            "conv1d: stride needs 1 or 1 values, got 2 (input (1, 1, 5) float32)");
  PoolOptions pool;
  pool.kernel = {2}, pool.dilation = {1, 1, 1};
  EXPECT_EQ(error_of([&] { x.max_pool(pool); }),
            "max_pool: dilation needs 1 or 1 values, got 3 (input (1, 1, 5) float32)");
}

INSTANTIATE_TEST_SUITE_P(Devices, ConvPoolNd, testing::Values("CPU", "VK"));

}  // namespace
