// nn functional ops against their direct definitions: convolutions and pools as nested loops over
// small odd-sized inputs (integer-valued floats, so every sum is exact), normalizations, embedding
// and the softmax family in closed form, kernel counts of the fused forms, and misuse errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "support/device_compare.hpp"
#include "support/error_of.hpp"

#include <vkgrad/core/context.hpp>
#include <vkgrad/core/schedule.hpp>
#include <vkgrad/core/tensor.hpp>

using namespace vkg;
using vkg::test::cpu_vk_agree;
using vkg::test::error_of;

namespace {

size_t kernels(const Tensor& t) { return create_schedule({t.node()}).items.size(); }

// Small integers in [-2, 2] as floats: products and their sums are exact in float32.
std::vector<float> small_ints(int64_t n, int seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float((i * 7 + seed * 3 + (i / 5)) % 5 - 2);
  return v;
}

struct Array4 {
  Shape shape;
  std::vector<float> v;
  float at(int64_t a, int64_t b, int64_t c, int64_t d) const {
    return v[size_t(((a * shape[1] + b) * shape[2] + c) * shape[3] + d)];
  }
  Tensor tensor(const std::string& device = "") const { return Tensor(v, shape, device); }
};

Array4 data(Shape shape, int seed) { return {shape, small_ints(prod(shape), seed)}; }

struct ConvCase {
  Shape x, w;
  Conv2dOptions o;
};

// out[n, co, oy, ox] = sum over the group's input channels and the kernel of
// x[n, ci, oy*s - p + ky*d, ox*s - p + kx*d] * w[co, ci - group start, ky, kx] (zero outside).
std::vector<float> direct_conv2d(const Array4& x, const Array4& w, const std::vector<float>& bias,
                                 Conv2dOptions o, Shape& out_shape) {
  const int64_t n = x.shape[0], cin = x.shape[1], h = x.shape[2], wd = x.shape[3];
  const int64_t cout = w.shape[0], cg = w.shape[1], kh = w.shape[2], kw = w.shape[3];
  const int64_t oh = (h + 2 * o.padding.h - o.dilation.h * (kh - 1) - 1) / o.stride.h + 1;
  const int64_t ow = (wd + 2 * o.padding.w - o.dilation.w * (kw - 1) - 1) / o.stride.w + 1;
  out_shape = {n, cout, oh, ow};
  std::vector<float> out;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t co = 0; co < cout; ++co)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xx = 0; xx < ow; ++xx) {
          double s = bias.empty() ? 0 : bias[size_t(co)];
          const int64_t g = co / (cout / o.groups);
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t iy = y * o.stride.h - o.padding.h + ky * o.dilation.h;
                const int64_t ix = xx * o.stride.w - o.padding.w + kx * o.dilation.w;
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                s += double(x.at(b, g * cg + ci, iy, ix)) * double(w.at(co, ci, ky, kx));
              }
          out.push_back(float(s));
        }
  (void)cin;
  return out;
}

// The transpose's definition: every input element scatters x * w[ci, co] to
// out[iy*s - p + ky*d, ix*s - p + kx*d].
std::vector<float> direct_conv_transpose2d(const Array4& x, const Array4& w,
                                           ConvTranspose2dOptions o, Shape& out_shape) {
  const int64_t n = x.shape[0], cin = x.shape[1], h = x.shape[2], wd = x.shape[3];
  const int64_t rcout = w.shape[1], kh = w.shape[2], kw = w.shape[3], cout = rcout * o.groups;
  const int64_t oh =
      (h - 1) * o.stride.h - 2 * o.padding.h + o.dilation.h * (kh - 1) + o.output_padding.h + 1;
  const int64_t ow =
      (wd - 1) * o.stride.w - 2 * o.padding.w + o.dilation.w * (kw - 1) + o.output_padding.w + 1;
  out_shape = {n, cout, oh, ow};
  std::vector<double> out(size_t(n * cout * oh * ow), 0.0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ci = 0; ci < cin; ++ci)
      for (int64_t iy = 0; iy < h; ++iy)
        for (int64_t ix = 0; ix < wd; ++ix)
          for (int64_t co = 0; co < rcout; ++co)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t y = iy * o.stride.h - o.padding.h + ky * o.dilation.h;
                const int64_t xx = ix * o.stride.w - o.padding.w + kx * o.dilation.w;
                if (y < 0 || y >= oh || xx < 0 || xx >= ow) continue;
                const int64_t oc = (ci / (cin / o.groups)) * rcout + co;
                out[size_t(((b * cout + oc) * oh + y) * ow + xx)] +=
                    double(x.at(b, ci, iy, ix)) * double(w.at(ci, co, ky, kx));
              }
  return std::vector<float>(out.begin(), out.end());
}

// Max or mean over each window; padding is -inf for max and zeros (counted) for the mean.
std::vector<float> direct_pool2d(const Array4& x, Pool2dOptions o, bool is_max, Shape& out_shape) {
  const Size2 s = o.stride.value_or(o.kernel);
  const int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], wd = x.shape[3];
  const int64_t oh = (h + 2 * o.padding.h - o.dilation.h * (o.kernel.h - 1) - 1) / s.h + 1;
  const int64_t ow = (wd + 2 * o.padding.w - o.dilation.w * (o.kernel.w - 1) - 1) / s.w + 1;
  out_shape = {n, c, oh, ow};
  std::vector<float> out;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xx = 0; xx < ow; ++xx) {
          double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
          for (int64_t ky = 0; ky < o.kernel.h; ++ky)
            for (int64_t kx = 0; kx < o.kernel.w; ++kx) {
              const int64_t iy = y * s.h - o.padding.h + ky * o.dilation.h;
              const int64_t ix = xx * s.w - o.padding.w + kx * o.dilation.w;
              const bool inside = iy >= 0 && iy < h && ix >= 0 && ix < wd;
              const double v = inside ? x.at(b, ch, iy, ix) : 0.0;
              if (is_max && inside) acc = std::max(acc, v);
              if (!is_max) acc += v;
            }
          out.push_back(float(is_max ? acc : acc / double(o.kernel.h * o.kernel.w)));
        }
  return out;
}

std::string case_name(const Shape& x, const Shape& w) {
  return "x " + shape_str(x) + " w " + shape_str(w);
}

}  // namespace

TEST(TensorConv2d, MatchesTheDirectLoopForStridesPaddingDilationGroups) {
  const ConvCase cases[] = {
      {{2, 3, 7, 6}, {4, 3, 3, 3}, {.stride = 1, .padding = 1}},
      {{1, 4, 9, 8}, {6, 2, 3, 2}, {.stride = 2, .padding = {1, 0}, .groups = 2}},
      {{1, 3, 10, 9}, {3, 1, 3, 3}, {.stride = {1, 2}, .padding = 2, .dilation = 2, .groups = 3}},
      {{2, 2, 5, 5}, {2, 2, 5, 5}, {.stride = 1, .padding = 2}},
      {{1, 2, 6, 7}, {4, 2, 1, 1}, {.stride = 3}},                // windows that do not overlap
      {{1, 3, 5, 7}, {2, 3, 2, 2}, {.stride = 2, .padding = 1}},  // k == s: the reshape path
      {{1, 2, 8, 5}, {3, 2, 3, 1}, {.stride = {3, 1}, .dilation = {2, 1}}},
  };
  int seed = 0;
  for (const ConvCase& c : cases) {
    const Array4 x = data(c.x, ++seed), w = data(c.w, ++seed);
    const std::vector<float> bias = small_ints(c.w[0], ++seed);
    Shape want_shape;
    const std::vector<float> want = direct_conv2d(x, w, bias, c.o, want_shape);
    const Tensor y = x.tensor().conv2d(w.tensor(), Tensor(bias), c.o);
    ASSERT_EQ(y.shape(), want_shape) << case_name(c.x, c.w);
    EXPECT_EQ(kernels(y), 1u) << case_name(c.x, c.w);
    EXPECT_EQ(y.to_vector<float>(), want) << case_name(c.x, c.w);
  }
}

// Convolutions with channels in fours and enough work run channels-last (core/tensor_conv.cpp's
// convolve): the input and the weight are copied NHWC first, and padded windows read four
// channels per masked vec4 load; the input gradient convolves a channels-last copy of the output
// gradient with a flipped channels-last weight. Forward against the direct loop, both gradients
// against the CPU device (small integers: exact in any order of summation).
TEST(TensorConv2d, ChannelsLastPathMatchesTheDirectLoopAndTheCpuGradients) {
  const ConvCase c{{6, 8, 12, 12}, {16, 8, 5, 5}, {.stride = 1, .padding = 2}};
  const Array4 x = data(c.x, 11), w = data(c.w, 12), g = data({6, 16, 12, 12}, 13);
  const std::vector<float> bias = small_ints(16, 14);
  Shape want_shape;
  const std::vector<float> want = direct_conv2d(x, w, bias, c.o, want_shape);
  const Tensor y = x.tensor().conv2d(w.tensor(), Tensor(bias), c.o);
  ASSERT_EQ(y.shape(), want_shape);
  EXPECT_EQ(kernels(y), 3u);  // the input's copy, the weight's, the convolution
  EXPECT_EQ(y.to_vector<float>(), want);
  for (const bool input_grad : {true, false})
    EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) {
      Tensor xt = x.tensor(dev).requires_grad_(), wt = w.tensor(dev).requires_grad_();
      xt.conv2d(wt, {}, c.o).backward(g.tensor(dev));
      return input_grad ? *xt.grad() : *wt.grad();
    })) << (input_grad ? "input gradient" : "weight gradient");
}

TEST(TensorConv2d, WithBiasAndReluIsOneKernelAndAgreesAcrossDevices) {
  const Array4 x = data({2, 3, 9, 7}, 1), w = data({5, 3, 3, 3}, 2);
  const std::vector<float> b = small_ints(5, 3);
  auto make = [&](const std::string& dev) {
    return x.tensor(dev).conv2d(w.tensor(dev), Tensor(b, {5}, dev), {.padding = 1}).relu();
  };
  EXPECT_EQ(kernels(make("VK")), 1u);
  EXPECT_TRUE(cpu_vk_agree(make));
}

// The forward conv is a reduce over (cin, ky, kx) whose output width (14) is no multiple of 4: its
// tile goes along the output channels (the input is reused there) and the batch (the weight is),
// not along the last axis. On a device with subgroup shuffles (Lavapipe) that is a shuffle tile,
// else a register tile. Without either Lavapipe ran this shape 4x slower.
TEST(TensorConv2d, ForwardKernelIsTiled) {
  const Tensor x = data({32, 4, 14, 14}, 1).tensor(), w = data({16, 4, 3, 3}, 2).tensor();
  ScopedSetting debug("DEBUG", 3);
  testing::internal::CaptureStdout();
  x.conv2d(w, {}, {.padding = 1}).realize();
  const std::string log = testing::internal::GetCapturedStdout();
  const bool shuffle_tile =
      log.find("LOCAL(axis=0, amount=8), SHUFFLE(axis=1, amount=8)") != std::string::npos;
  const bool register_tile =
      log.find("opts=[UPCAST(axis=1, amount=4), UPCAST(axis=0, amount=") != std::string::npos;
  EXPECT_TRUE(shuffle_tile || register_tile) << log;
}

TEST(TensorConv2d, TransposeAndPoolsAgreeAcrossDevices) {
  const Array4 x = data({2, 4, 5, 6}, 7), w = data({4, 3, 3, 2}, 8);
  EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) {
    return x.tensor(dev).conv_transpose2d(w.tensor(dev), {},
                                          {.stride = 2, .padding = 1, .groups = 2});
  }));
  EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) {
    return x.tensor(dev).max_pool2d({.kernel = 3, .stride = Size2(2), .padding = 1});
  }));
  EXPECT_TRUE(cpu_vk_agree(
      [&](const std::string& dev) { return x.tensor(dev).avg_pool2d({.kernel = 2}); }));
}

TEST(TensorConv2d, MisuseNamesTheShapes) {
  const Tensor x = Tensor::zeros({1, 3, 5, 5}), w = Tensor::zeros({4, 2, 3, 3});
  const std::string channels = error_of([&] { (void)x.conv2d(w); });
  EXPECT_NE(
      channels.find(
          "conv2d: input channels 3 and weight (4, 2, 3, 3) float32 do not match for 1 group(s)"),
      std::string::npos)
      << channels;
  EXPECT_NE(channels.find("input (1, 3, 5, 5) float32"), std::string::npos) << channels;
  EXPECT_NE(error_of([&] {
              (void)x.conv2d(Tensor::zeros({4, 3, 3}));
            }).find("conv2d: needs a 4-D input"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)x.conv2d(Tensor::zeros({4, 3, 7, 3}));
            }).find("conv2d: the padded input (5, 5) is smaller than the dilated kernel"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)x.conv2d(Tensor::zeros({4, 3, 3, 3}), Tensor::zeros({3}));
            }).find("conv2d: bias (3,) float32 must have shape (4,)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)x.conv2d(Tensor::zeros({4, 3, 3, 3}), {}, {.stride = 0});
            }).find("conv2d: stride (0, 0) must be positive"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)x.conv2d(Tensor::zeros({4, 1, 3, 3}), {}, {.groups = 2});
            }).find("for 2 group(s)"),
            std::string::npos);
}

TEST(TensorConvTranspose2d, MatchesItsDefinition) {
  struct Case {
    Shape x, w;
    ConvTranspose2dOptions o;
  };
  const Case cases[] = {
      {{1, 2, 3, 4}, {2, 3, 3, 3}, {.stride = 2, .padding = 1, .output_padding = 1}},
      {{2, 4, 4, 3},
       {4, 1, 2, 3},
       {.stride = {1, 2}, .padding = {0, 1}, .dilation = {2, 1}, .groups = 2}},
      {{1, 1, 4, 4}, {1, 2, 2, 2}, {.stride = 3, .padding = 2}},  // (k-1)*d - p < 0: a trim
  };
  int seed = 10;
  for (const Case& c : cases) {
    const Array4 x = data(c.x, ++seed), w = data(c.w, ++seed);
    Shape want_shape;
    const std::vector<float> want = direct_conv_transpose2d(x, w, c.o, want_shape);
    const Tensor y = x.tensor().conv_transpose2d(w.tensor(), {}, c.o);
    ASSERT_EQ(y.shape(), want_shape) << case_name(c.x, c.w);
    EXPECT_EQ(y.to_vector<float>(), want) << case_name(c.x, c.w);
  }
  const Tensor x = Tensor::zeros({1, 2, 3, 3});
  EXPECT_NE(
      error_of([&] {
        (void)x.conv_transpose2d(Tensor::zeros({3, 2, 3, 3}));
      }).find("conv_transpose2d: input channels 2 and weight (3, 2, 3, 3) float32 do not match"),
      std::string::npos);
  EXPECT_NE(
      error_of([&] {
        (void)x.conv_transpose2d(Tensor::zeros({2, 2, 3, 3}), {},
                                 {.stride = 2, .output_padding = 2});
      }).find("conv_transpose2d: output_padding (2, 2) must be smaller than the stride (2, 2)"),
      std::string::npos);
}

TEST(TensorPool2d, MaxAndAverageMatchTheDirectLoop) {
  struct Case {
    Shape x;
    Pool2dOptions o;
  };
  const Case cases[] = {
      {{1, 2, 5, 7}, {.kernel = 2}},
      {{2, 1, 7, 6}, {.kernel = 3, .stride = Size2(2), .padding = 1}},
      {{1, 2, 7, 8}, {.kernel = {2, 3}, .stride = Size2(1), .padding = 1, .dilation = 2}},
  };
  int seed = 20;
  for (const Case& c : cases) {
    // Negative values everywhere make a padded -inf and a padded 0 differ in max pooling.
    Array4 x = data(c.x, ++seed);
    for (float& v : x.v) v -= 3;
    for (bool is_max : {true, false}) {
      Shape want_shape;
      const std::vector<float> want = direct_pool2d(x, c.o, is_max, want_shape);
      const Tensor y = is_max ? x.tensor().max_pool2d(c.o) : x.tensor().avg_pool2d(c.o);
      ASSERT_EQ(y.shape(), want_shape) << shape_str(c.x);
      EXPECT_EQ(kernels(y), 1u) << shape_str(c.x);
      const std::vector<float> got = y.to_vector<float>();
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(got[i], want[i], 1e-6)
            << (is_max ? "max " : "avg ") << shape_str(c.x) << " [" << i << "]";
    }
  }
  // Integers pool too; a 3-D (C, H, W) input is accepted as torch does.
  const Tensor t = Tensor({1, 5, 2, 0, 3, 4, 9, 8, 7}).reshape({1, 3, 3});
  EXPECT_EQ(t.max_pool2d({.kernel = 2, .stride = Size2(1)}).to_vector<int32_t>(),
            (std::vector<int32_t>{5, 5, 9, 8}));

  const Tensor x = Tensor::zeros({1, 1, 4, 4});
  EXPECT_NE(error_of([&] {
              (void)x.max_pool2d({.kernel = 2, .padding = 2});
            }).find("max_pool2d: padding (2, 2) must be at most half the kernel (2, 2)"),
            std::string::npos);
  EXPECT_NE(
      error_of([&] { (void)x.avg_pool2d({.kernel = 5}); }).find("avg_pool2d: the kernel (5, 5)"),
      std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)Tensor::zeros({4, 4}).max_pool2d();
            }).find("needs a 3-D (C, H, W) or 4-D"),
            std::string::npos);
}

TEST(TensorNn, LinearLayernormBatchnormEmbedding) {
  const Tensor x = Tensor({1.0f, 2.0f, 3.0f, -1.0f, 0.0f, 2.0f}).reshape({2, 3});
  const Tensor w = Tensor({1.0f, 0.0f, -1.0f, 2.0f, 1.0f, 0.5f}).reshape({2, 3});
  EXPECT_EQ(x.linear(w, Tensor({10.0f, 20.0f})).to_vector<float>(),
            (std::vector<float>{8, 25.5f, 7, 19}));
  EXPECT_NE(error_of([&] {
              (void)x.linear(w.transpose());
            }).find("linear: weight (3, 2) float32 must be (out, in)"),
            std::string::npos);

  // layernorm([1, 2, 3, 4]): mean 2.5, biased variance 1.25.
  const std::vector<float> ln = Tensor({1.0f, 2.0f, 3.0f, 4.0f}).layernorm().to_vector<float>();
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(ln[size_t(i)], (i + 1 - 2.5) / std::sqrt(1.25 + 1e-5), 1e-6);
  const Tensor rows = Tensor({1.0f, 3.0f, 10.0f, 30.0f}).reshape({2, 2}).layernorm({0, 1}, 0.0);
  EXPECT_NEAR(rows.sum().item<float>(), 0.0f, 1e-5);
  EXPECT_NEAR((rows * rows).mean().item<float>(), 1.0f, 1e-5);

  // batchnorm along axis 1 of (2, 2, 1): (x - mean) * invstd * weight + bias per channel.
  const Tensor b = Tensor({1.0f, 2.0f, 3.0f, 4.0f}).reshape({2, 2, 1});
  const Tensor bn = b.batchnorm(Tensor({2.0f, 3.0f}), Tensor({0.5f, -1.0f}), Tensor({1.0f, 2.0f}),
                                Tensor({0.5f, 0.25f}));
  EXPECT_EQ(bn.to_vector<float>(), (std::vector<float>{0.5f, -1.0f, 2.5f, 0.5f}));
  EXPECT_EQ(b.batchnorm({}, {}, Tensor({1.0f, 2.0f}), Tensor({0.5f, 0.25f})).to_vector<float>(),
            (std::vector<float>{0, 0, 1, 0.5f}));
  EXPECT_NE(error_of([&] {
              (void)b.batchnorm({}, {}, Tensor({1.0f}), Tensor({1.0f, 1.0f}));
            }).find("batchnorm: mean (1,) float32 must have shape (2,)"),
            std::string::npos);

  const Tensor table =
      Tensor({0.0f, 1.0f, 10.0f, 11.0f, 20.0f, 21.0f, 30.0f, 31.0f}).reshape({4, 2});
  const Tensor e = Tensor({3, 0, 1, 1}).reshape({2, 2}).embedding(table);
  EXPECT_EQ(e.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(kernels(e), 1u);
  EXPECT_EQ(e.to_vector<float>(), (std::vector<float>{30, 31, 0, 1, 10, 11, 10, 11}));
  EXPECT_NE(error_of([&] {
              (void)Tensor({0.5f}).embedding(table);
            }).find("embedding: needs integer indices"),
            std::string::npos);
}

TEST(TensorSoftmax, StableClosedForms) {
  const std::vector<float> s = Tensor({1.0f, 2.0f, 3.0f}).softmax().to_vector<float>();
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(s[size_t(i)], std::exp(i + 1.0) / z, 1e-6);
  // Large logits: exp would overflow without the max shift.
  const std::vector<float> ls = Tensor({1000.0f, 1001.0f}).log_softmax().to_vector<float>();
  const double l1 = std::log1p(std::exp(-1.0));
  EXPECT_NEAR(ls[0], -1.0 - l1, 1e-5);
  EXPECT_NEAR(ls[1], -l1, 1e-5);
  const Tensor cols = Tensor({0.0f, 10.0f, 0.0f, 10.0f}).reshape({2, 2}).softmax(0);
  EXPECT_EQ(cols.to_vector<float>(), (std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f}));

  EXPECT_NEAR(Tensor({1000.0f, 1000.0f}).logsumexp().item<float>(), 1000.0 + std::log(2.0), 1e-3);
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor edges = Tensor({-inf, -inf, inf, 1.0f, 2.0f, 2.0f}).reshape({3, 2});
  const std::vector<float> lse = edges.logsumexp(1).to_vector<float>();
  EXPECT_EQ(lse[0], -inf);
  EXPECT_EQ(lse[1], inf);
  EXPECT_NEAR(lse[2], 2.0 + std::log(2.0), 1e-6);
  EXPECT_EQ(edges.logsumexp(1, true).shape(), (Shape{3, 1}));
  EXPECT_EQ(edges.logsumexp().shape(), Shape{});
  EXPECT_EQ(Tensor({1, 2}).softmax().dtype(), dtypes::float32);
  EXPECT_TRUE(cpu_vk_agree(
      [](const std::string& dev) {
        return Tensor(small_ints(24, 5), {2, 3, 4}, dev).log_softmax(1);
      },
      2));
}
