// RMSNorm, GroupNorm, InstanceNorm, and the 1-D and 3-D convolution layers: torch's parameters,
// shapes and state_dict names, and the functional ops they call (checked against closed forms and
// direct loops in tests/tensor_nn_ops_test.cpp and tests/tensor_conv_pool_nd_test.cpp).
#include <gtest/gtest.h>

#include <cmath>

#include <vkgrad/vkgrad.hpp>

#include "support/error_of.hpp"

using namespace vkg;
using namespace vkg::test;

TEST(NormLayers, ParametersStateDictsAndForward) {
  const Tensor x = Tensor::randn({2, 4, 3});
  nn::RMSNorm rms({3}, 1e-6);
  ASSERT_EQ(rms.state_dict().size(), 1u);
  EXPECT_EQ(rms.state_dict()[0].first, "weight");
  EXPECT_EQ(rms(x).to_vector<float>(), x.rms_norm({-1}, 1e-6).to_vector<float>());

  nn::GroupNorm gn(2, 4);
  ASSERT_EQ(gn.state_dict().size(), 2u);
  EXPECT_EQ(gn.state_dict()[1].first, "bias");
  EXPECT_EQ(gn.weight->shape(), (Shape{4}));
  EXPECT_EQ(gn(x).to_vector<float>(), x.group_norm(2).to_vector<float>());

  nn::InstanceNorm2d in(4);
  EXPECT_TRUE(in.state_dict().empty());  // torch's default: affine=False
  EXPECT_EQ(in(x).to_vector<float>(), x.instance_norm().to_vector<float>());

  EXPECT_NE(error_of([&] { nn::GroupNorm(3, 4); }).find("GroupNorm: num_channels 4 must split into num_groups 3"),
            std::string::npos);
  EXPECT_NE(error_of([&] { gn(Tensor::zeros({2, 5, 3})); }).find("GroupNorm: expects an input (N, 4, *)"),
            std::string::npos);
}

TEST(ConvLayers, ShapesInitializationAndForward) {
  nn::Conv1d c1(4, 6, 3, {.stride = {2}, .padding = {1}, .groups = 2});
  EXPECT_EQ(c1.weight.shape(), (Shape{6, 2, 3}));
  ASSERT_TRUE(c1.bias.has_value());
  // kaiming_uniform(a = sqrt 5) is uniform(+-1/sqrt(fan_in)), fan_in = 2 * 3.
  const auto w = c1.weight.to_vector<float>();
  for (float v : w) EXPECT_LE(std::abs(v), 1 / std::sqrt(6.0f) + 1e-6f);
  const Tensor x = Tensor::randn({2, 4, 9});
  EXPECT_EQ(c1(x).shape(), (Shape{2, 6, 5}));
  EXPECT_EQ(c1(x).to_vector<float>(), x.conv1d(c1.weight, c1.bias, c1.options).to_vector<float>());

  nn::Conv3d c3(2, 3, {2, 3, 2}, {}, false);
  EXPECT_EQ(c3.weight.shape(), (Shape{3, 2, 2, 3, 2}));
  EXPECT_EQ(c3.state_dict().size(), 1u);
  EXPECT_EQ(c3(Tensor::randn({1, 2, 4, 5, 3})).shape(), (Shape{1, 3, 3, 3, 2}));

  nn::ConvTranspose1d t1(4, 6, 3, {.stride = {2}, .groups = 2});
  EXPECT_EQ(t1.weight.shape(), (Shape{4, 3, 3}));
  EXPECT_EQ(t1(x).shape(), (Shape{2, 6, 19}));
  nn::ConvTranspose3d t3(2, 2, {2});
  EXPECT_EQ(t3.weight.shape(), (Shape{2, 2, 2, 2, 2}));
  EXPECT_EQ(t3(Tensor::randn({1, 2, 3, 3, 3})).shape(), (Shape{1, 2, 4, 4, 4}));
  EXPECT_NE(error_of([] { nn::Conv3d(3, 4, {2}, {.groups = 2}); }).find("Conv3d: in_channels 3"), std::string::npos);
}
