// RMSNorm, GroupNorm and InstanceNorm layers: torch's parameters and state_dict names, and the
// functional ops they call (checked against closed forms in tests/tensor_nn_ops_test.cpp).
#include <gtest/gtest.h>

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
