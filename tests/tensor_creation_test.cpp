// Creation beyond the constructors: linspace's exact ends, eye of every shape and dtype (movement
// ops over one constant, no upload), and the *_like family copying shape, dtype and device.
#include <gtest/gtest.h>

#include <vkgrad/core/schedule.hpp>

#include "support/device_compare.hpp"
#include "support/error_of.hpp"

using namespace vkg;
using namespace vkg::test;

TEST(TensorCreation, LinspaceHitsBothEnds) {
  for (const std::string dev : {"CPU", "VK"}) {
    EXPECT_EQ(Tensor::linspace(0, 1, 5, dtypes::float32, dev).to_vector<float>(),
              (std::vector<float>{0, 0.25f, 0.5f, 0.75f, 1}));
    // 0.1 steps do not add up to 0.7 exactly; the last point is still the stop.
    const std::vector<float> v =
        Tensor::linspace(0.0, 0.7, 8, dtypes::float32, dev).to_vector<float>();
    EXPECT_EQ(v.front(), 0.0f);
    EXPECT_EQ(v.back(), 0.7f);
    EXPECT_FLOAT_EQ(v[3], 0.3f);
    EXPECT_EQ(Tensor::linspace(3, -3, 4, dtypes::int32, dev).to_vector<int32_t>(),
              (std::vector<int32_t>{3, 1, -1, -3}));
    EXPECT_EQ(Tensor::linspace(2, 9, 1, dtypes::float32, dev).to_vector<float>(),
              (std::vector<float>{2}));
    EXPECT_EQ(Tensor::linspace(2, 9, 0, dtypes::float16, dev).shape(), (Shape{0}));
    EXPECT_EQ(Tensor::linspace(1, 2, 3, dtypes::float64, dev).to_vector<double>(),
              (std::vector<double>{1, 1.5, 2}));
  }
  EXPECT_NE(error_of([] { (void)Tensor::linspace(0, 1, -1); }).find("linspace"), std::string::npos);
}

TEST(TensorCreation, EyeOfEveryShape) {
  for (const std::string dev : {"CPU", "VK"}) {
    EXPECT_EQ(Tensor::eye(3, -1, dtypes::float32, dev).to_vector<float>(),
              (std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1}));
    EXPECT_EQ(Tensor::eye(2, 4, dtypes::int32, dev).to_vector<int32_t>(),
              (std::vector<int32_t>{1, 0, 0, 0, 0, 1, 0, 0}));
    EXPECT_EQ(Tensor::eye(3, 2, dtypes::bool_, dev).to_vector<bool>(),
              (std::vector<bool>{true, false, false, true, false, false}));
    EXPECT_EQ(Tensor::eye(1, -1, dtypes::uint8, dev).to_vector<uint8_t>(),
              (std::vector<uint8_t>{1}));
    EXPECT_EQ(Tensor::eye(0, 3, dtypes::float32, dev).shape(), (Shape{0, 3}));
    // Fused into its consumer: no buffer of its own.
    const Tensor x(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3}, dev);
    EXPECT_EQ((x * Tensor::eye(3, -1, dtypes::float32, dev)).sum(1).to_vector<float>(),
              (std::vector<float>{1, 5, 9}));
  }
  const Tensor x(std::vector<float>(49, 2.0f), {7, 7});
  EXPECT_EQ(create_schedule({(x + Tensor::eye(7)).node()}).items.size(), 1u);
  EXPECT_NE(error_of([] { (void)Tensor::eye(-2); }).find("eye"), std::string::npos);
}

TEST(TensorCreation, LikeCopiesShapeDtypeAndDevice) {
  const Tensor t = Tensor::zeros({2, 3}, dtypes::int16, "CPU");
  for (const Tensor& l : {Tensor::zeros_like(t), Tensor::ones_like(t), Tensor::full_like(t, 7),
                          Tensor::empty_like(t)}) {
    EXPECT_EQ(l.shape(), (Shape{2, 3}));
    EXPECT_EQ(l.dtype(), dtypes::int16);
    EXPECT_EQ(l.device(), "CPU");
  }
  EXPECT_EQ(Tensor::full_like(t, 7).to_vector<int16_t>(), std::vector<int16_t>(6, 7));
  EXPECT_EQ(Tensor::ones_like(Tensor(2.5f)).item<float>(), 1.0f);
  EXPECT_EQ(Tensor::full_like(Tensor::zeros({2}), 0.5).to_vector<float>(),
            (std::vector<float>{0.5f, 0.5f}));
}
