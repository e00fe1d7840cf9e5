// Matmuls shaped like an MLP's forward and weight gradient, on the Vulkan device (where Lavapipe's
// heuristics give them shuffle tiles that read 2 or 4 rows per lane as one vector) against the
// CPU device: equal to the bit on small integers (every order of summation is exact), on shapes
// the tiles divide and shapes they do not, with an empty batch, and with inf and nan inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <vkgrad/core/tensor.hpp>

#include "support/exact_ints.hpp"

namespace vkg::test {
namespace {

// dy^T x (a Linear layer's weight gradient) on `device`.
std::vector<float> weight_gradient(const std::vector<float>& dy, const std::vector<float>& x,
                                   int64_t batch, int64_t outs, int64_t ins,
                                   const std::string& device) {
  return Tensor(dy, {batch, outs}, device)
      .transpose()
      .matmul(Tensor(x, {batch, ins}, device))
      .to_vector<float>();
}

// The same element by element, nan where the other is nan.
void expect_same(const std::vector<float>& vk, const std::vector<float>& cpu) {
  ASSERT_EQ(vk.size(), cpu.size());
  int wrong = 0;
  for (size_t i = 0; i < vk.size() && wrong < 10; ++i)
    if (!(vk[i] == cpu[i] || (std::isnan(vk[i]) && std::isnan(cpu[i])))) {
      ADD_FAILURE() << "[" << i << "] VK " << vk[i] << " CPU " << cpu[i];
      ++wrong;
    }
}

TEST(MatmulTiles, WeightGradientsAgreeWithTheCpuDevice) {
  for (const auto& [batch, outs, ins] :
       {std::tuple{16, 128, 784}, {13, 40, 112}, {7, 64, 48}, {9, 24, 40}, {5, 33, 64}}) {
    SCOPED_TRACE(std::to_string(batch) + "x" + std::to_string(outs) + "x" + std::to_string(ins));
    const std::vector<float> dy = ints(batch * outs, 7, 11, 5), x = ints(batch * ins, 5, 13, 6);
    expect_same(weight_gradient(dy, x, batch, outs, ins, "VK"),
                weight_gradient(dy, x, batch, outs, ins, "CPU"));
  }
}

TEST(MatmulTiles, TheMlpForwardAgreesWithTheCpuDevice) {
  const int64_t batch = 128, ins = 784, outs = 128;
  const std::vector<float> x = ints(batch * ins, 5, 13, 6), w = ints(outs * ins, 7, 11, 5);
  auto forward = [&](const std::string& device) {
    return Tensor(x, {batch, ins}, device)
        .matmul(Tensor(w, {outs, ins}, device).transpose())
        .to_vector<float>();
  };
  expect_same(forward("VK"), forward("CPU"));
}

TEST(MatmulTiles, AnEmptyBatchGivesZeros) {
  const std::vector<float> vk = weight_gradient({}, {}, 0, 32, 112, "VK");
  EXPECT_EQ(vk, std::vector<float>(32 * 112, 0.0f));
  EXPECT_EQ(vk, weight_gradient({}, {}, 0, 32, 112, "CPU"));
}

TEST(MatmulTiles, InfAndNanPropagateAsOnTheCpuDevice) {
  const int64_t batch = 16, outs = 32, ins = 112;
  std::vector<float> dy = ints(batch * outs, 7, 11, 5), x = ints(batch * ins, 5, 13, 6);
  x[3] = std::numeric_limits<float>::infinity();
  x[size_t(2 * ins + 50)] = -std::numeric_limits<float>::infinity();
  x[size_t(7 * ins + 101)] = std::numeric_limits<float>::quiet_NaN();
  dy[size_t(5 * outs + 9)] = std::numeric_limits<float>::infinity();
  const std::vector<float> vk = weight_gradient(dy, x, batch, outs, ins, "VK");
  expect_same(vk, weight_gradient(dy, x, batch, outs, ins, "CPU"));
  int nans = 0, infs = 0;
  for (float v : vk) nans += std::isnan(v), infs += std::isinf(v);
  EXPECT_GT(nans, 0);  // the nan's column, and inf * 0
  EXPECT_GT(infs, 0);
}

// dy[B + 1, O]^T x[B, I] padded by a row of zeros, dy's last row inf: every output is inf * 0 =
// nan, also where Lavapipe unrolls the short batch and its mask becomes a constant.
TEST(MatmulTiles, APaddedRowTimesInfIsNanAsOnTheCpuDevice) {
  for (const auto& [batch, outs, ins] : {std::tuple{3, 32, 64}, {7, 32, 112}, {7, 64, 128}}) {
    SCOPED_TRACE(std::to_string(batch) + "x" + std::to_string(outs) + "x" + std::to_string(ins));
    std::vector<float> dy = ints((batch + 1) * outs, 7, 11, 5);
    for (int64_t o = 0; o < outs; ++o)
      dy[size_t(batch * outs + o)] = std::numeric_limits<float>::infinity();
    const std::vector<float> x = ints(batch * ins, 5, 13, 6);
    auto product = [&](const std::string& device) {
      return Tensor(dy, {batch + 1, outs}, device)
          .transpose()
          .matmul(Tensor(x, {batch, ins}, device).pad({{0, 1}, {0, 0}}))
          .to_vector<float>();
    };
    const std::vector<float> vk = product("VK");
    expect_same(vk, product("CPU"));
    int not_nan = 0;
    for (float v : vk) not_nan += !std::isnan(v);
    EXPECT_EQ(not_nan, 0);
  }
}

// dy^T x where x is made by `make_x` from (device-independent) values: the Vulkan device's tiles
// (with the vector loads of the heuristics) against the CPU device.
template <class MakeX>
void expect_weight_gradient_agrees(const std::vector<float>& dy, int64_t batch, int64_t outs,
                                   MakeX make_x) {
  auto run = [&](const std::string& device) {
    return Tensor(dy, {batch, outs}, device)
        .transpose()
        .matmul(make_x(device))
        .template to_vector<float>();
  };
  const std::vector<float> vk = run("VK");
  expect_same(vk, run("CPU"));
  // Not all zeros: the inputs reached the outputs.
  EXPECT_NE(vk, std::vector<float>(vk.size(), 0.0f));
}

// x as views the vector loads must not read as aligned vectors: a shrink starting one element
// in (rows of 65 or 49: no row starts on a vector), a pad whose edge falls inside a vector, a
// row broadcast along the batch (stride 0 along the reduce), and a permute then reshape (its
// index has a division and a modulo along i). Shapes where the lanes run along x's inputs (64)
// and where the shuffled rows do (48, 112: vec2s of x along i).
TEST(MatmulTiles, WeightGradientsOfXViewsAgreeWithTheCpuDevice) {
  for (const auto& [batch, outs, ins] : {std::tuple{6, 32, 64}, {6, 32, 48}, {5, 64, 112}}) {
    SCOPED_TRACE(std::to_string(batch) + "x" + std::to_string(outs) + "x" + std::to_string(ins));
    const std::vector<float> dy = ints(batch * outs, 7, 11, 5);
    const std::vector<float> big = ints(batch * (ins + 1), 5, 13, 6);
    {
      SCOPED_TRACE("shrink");
      expect_weight_gradient_agrees(dy, batch, outs, [&](const std::string& d) {
        return Tensor(big, {batch, ins + 1}, d).shrink({{0, batch}, {1, ins + 1}});
      });
    }
    {
      SCOPED_TRACE("pad");
      const std::vector<float> x = ints(batch * (ins - 1), 5, 13, 6);
      expect_weight_gradient_agrees(dy, batch, outs, [&](const std::string& d) {
        return Tensor(x, {batch, ins - 1}, d).pad({{0, 0}, {0, 1}});
      });
    }
    {
      SCOPED_TRACE("broadcast");
      const std::vector<float> row = ints(ins, 5, 13, 6);
      expect_weight_gradient_agrees(dy, batch, outs, [&](const std::string& d) {
        return Tensor(row, {1, ins}, d).expand({batch, ins});
      });
    }
    {
      SCOPED_TRACE("permute and reshape");
      const std::vector<float> x = ints(batch * ins, 5, 13, 6);
      expect_weight_gradient_agrees(dy, batch, outs, [&](const std::string& d) {
        return Tensor(x, {4, batch, ins / 4}, d).permute({1, 0, 2}).reshape({batch, ins});
      });
    }
  }
}

// Half and int32 operands: half's loads are no 32-bit values (the lanes load them alone, and no
// shuffle takes them), int32's are.
TEST(MatmulTiles, HalfAndInt32WeightGradientsAgreeWithTheCpuDevice) {
  for (const auto& [batch, outs, ins] : {std::tuple{6, 32, 64}, {6, 32, 48}, {5, 64, 112}}) {
    SCOPED_TRACE(std::to_string(batch) + "x" + std::to_string(outs) + "x" + std::to_string(ins));
    const std::vector<float> dy = ints(batch * outs, 7, 11, 5), x = ints(batch * ins, 5, 13, 6);
    for (const DType t : {dtypes::float16, dtypes::int32}) {
      SCOPED_TRACE(t == dtypes::int32 ? "int32" : "float16");
      auto run = [&](const std::string& device) {
        Tensor a = Tensor(dy, {batch, outs}, device).cast(t).contiguous().realize();
        Tensor b = Tensor(x, {batch, ins}, device).cast(t).contiguous().realize();
        return a.transpose().matmul(b).cast(dtypes::float32).to_vector<float>();
      };
      const std::vector<float> vk = run("VK");
      expect_same(vk, run("CPU"));
      EXPECT_NE(vk, std::vector<float>(vk.size(), 0.0f));
    }
  }
}

}  // namespace
}  // namespace vkg::test
