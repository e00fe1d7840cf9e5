// triu/tril, diag/diagonal, roll, meshgrid, repeat_interleave, unfold and the pad modes
// (replicate, circular, negative pads) against hand-computed values from torch's documentation
// and definitions, on Vulkan and the CPU device.
#include <gtest/gtest.h>

#include <cmath>

#include "support/device_compare.hpp"
#include "support/error_of.hpp"

using namespace vkg;
using namespace vkg::test;

namespace {

// 0, 1, ..., n-1 as float in `shape`.
Tensor iota(Shape shape, const std::string& dev) {
  std::vector<float> v(size_t(prod(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i);
  return Tensor(v, shape, dev);
}

std::vector<float> floats(const Tensor& t) { return t.to_vector<float>(); }

class LayoutOps : public testing::TestWithParam<std::string> {};

TEST_P(LayoutOps, TriangularMasks) {
  const Tensor x = iota({3, 4}, GetParam());
  EXPECT_EQ(floats(x.triu()), (std::vector<float>{0, 1, 2, 3, 0, 5, 6, 7, 0, 0, 10, 11}));
  EXPECT_EQ(floats(x.triu(1)), (std::vector<float>{0, 1, 2, 3, 0, 0, 6, 7, 0, 0, 0, 11}));
  EXPECT_EQ(floats(x.tril()), (std::vector<float>{0, 0, 0, 0, 4, 5, 0, 0, 8, 9, 10, 0}));
  EXPECT_EQ(floats(x.tril(-1)), (std::vector<float>{0, 0, 0, 0, 4, 0, 0, 0, 8, 9, 0, 0}));
  // Batched, and bools keep their dtype.
  const Tensor b = Tensor::ones({2, 2, 2}, dtypes::bool_, GetParam()).tril();
  EXPECT_EQ(b.dtype(), dtypes::bool_);
  EXPECT_EQ(b.cast(dtypes::int32).to_vector<int32_t>(), (std::vector<int32_t>{1, 0, 1, 1, 1, 0, 1, 1}));
  EXPECT_NE(error_of([&] { iota({3}, GetParam()).triu(); }).find("triu: needs at least 2"), std::string::npos);
}

TEST_P(LayoutOps, DiagonalsBothWays) {
  const Tensor m = iota({3, 4}, GetParam());
  EXPECT_EQ(floats(m.diag()), (std::vector<float>{0, 5, 10}));
  EXPECT_EQ(floats(m.diag(1)), (std::vector<float>{1, 6, 11}));
  EXPECT_EQ(floats(m.diag(-2)), (std::vector<float>{8}));
  EXPECT_EQ(m.diag(5).shape(), (Shape{0}));
  const Tensor v = Tensor(std::vector<float>{1, 2, 3}, {3}, GetParam());
  EXPECT_EQ(floats(v.diag()), (std::vector<float>{1, 0, 0, 0, 2, 0, 0, 0, 3}));
  const Tensor up = v.diag(1);
  EXPECT_EQ(up.shape(), (Shape{4, 4}));
  EXPECT_EQ(floats(up), (std::vector<float>{0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 3, 0, 0, 0, 0}));
  EXPECT_EQ(floats(v.diag(-1)), (std::vector<float>{0, 0, 0, 0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 3, 0}));
  // diagonal over other axes: (2, 3, 3) with dims (1, 2) gives (2, 3).
  const Tensor t = iota({2, 3, 3}, GetParam());
  EXPECT_EQ(floats(t.diagonal(0, 1, 2)), (std::vector<float>{0, 4, 8, 9, 13, 17}));
  EXPECT_EQ(floats(t.diagonal(0, 0, 2)), (std::vector<float>{0, 10, 3, 13, 6, 16}));
}

TEST_P(LayoutOps, RollWrapsAroundAlongAxesOrTheFlattenedTensor) {
  const Tensor x = iota({2, 3}, GetParam());
  EXPECT_EQ(floats(x.roll(1)), (std::vector<float>{5, 0, 1, 2, 3, 4}));
  EXPECT_EQ(floats(x.roll(-1, 1)), (std::vector<float>{1, 2, 0, 4, 5, 3}));
  EXPECT_EQ(floats(x.roll({1, 4}, {0, 1})), (std::vector<float>{5, 3, 4, 2, 0, 1}));
  EXPECT_EQ(floats(x.roll(7, 1)), floats(x.roll(1, 1)));
}

TEST_P(LayoutOps, MeshgridInBothIndexings) {
  const Tensor a = Tensor(std::vector<float>{1, 2, 3}, {3}, GetParam());
  const Tensor b = Tensor(std::vector<float>{4, 5}, {2}, GetParam());
  const Tensor both[] = {a, b};
  const auto ij = Tensor::meshgrid(both);
  EXPECT_EQ(ij[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(floats(ij[0]), (std::vector<float>{1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(floats(ij[1]), (std::vector<float>{4, 5, 4, 5, 4, 5}));
  const auto xy = Tensor::meshgrid(both, "xy");
  EXPECT_EQ(xy[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(floats(xy[0]), (std::vector<float>{1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(floats(xy[1]), (std::vector<float>{4, 4, 4, 5, 5, 5}));
  EXPECT_NE(error_of([&] { Tensor::meshgrid(both, "ji"); }).find("meshgrid: indexing"), std::string::npos);
}

TEST_P(LayoutOps, RepeatInterleave) {
  const Tensor x = iota({2, 2}, GetParam());
  EXPECT_EQ(floats(x.repeat_interleave(2)), (std::vector<float>{0, 0, 1, 1, 2, 2, 3, 3}));
  const Tensor rows = x.repeat_interleave(3, 0);
  EXPECT_EQ(rows.shape(), (Shape{6, 2}));
  EXPECT_EQ(floats(rows), (std::vector<float>{0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3}));
  EXPECT_EQ(floats(x.repeat_interleave(2, -1)), (std::vector<float>{0, 0, 1, 1, 2, 2, 3, 3}));
}

TEST_P(LayoutOps, UnfoldIsTorchsWindowView) {
  // torch.arange(7.).unfold(0, 2, 2) = [[0, 1], [2, 3], [4, 5]].
  const Tensor x = iota({7}, GetParam());
  EXPECT_EQ(x.unfold(0, 2, 2).shape(), (Shape{3, 2}));
  EXPECT_EQ(floats(x.unfold(0, 2, 2)), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(floats(x.unfold(0, 3, 1)), (std::vector<float>{0, 1, 2, 1, 2, 3, 2, 3, 4, 3, 4, 5, 4, 5, 6}));
  // (2, 5, 3) unfolded along axis 1 by 2 every 2: (2, 2, 3, 2), out[a][w][c][k] = in[a][2w + k][c].
  const Tensor t = iota({2, 5, 3}, GetParam());
  const Tensor u = t.unfold(1, 2, 2);
  ASSERT_EQ(u.shape(), (Shape{2, 2, 3, 2}));
  const auto got = floats(u);
  for (int a = 0; a < 2; ++a)
    for (int w = 0; w < 2; ++w)
      for (int c = 0; c < 3; ++c)
        for (int k = 0; k < 2; ++k)
          EXPECT_EQ(got[size_t(((a * 2 + w) * 3 + c) * 2 + k)], float(a * 15 + (2 * w + k) * 3 + c));
  EXPECT_NE(error_of([&] { x.unfold(0, 8, 1); }).find("unfold: window size 8"), std::string::npos);
}

TEST_P(LayoutOps, PadModesAndNegativePads) {
  const Tensor x = iota({2, 3}, GetParam());
  const Tensor r = x.pad({{1, 0}, {2, 1}}, PadMode::Replicate);
  ASSERT_EQ(r.shape(), (Shape{3, 6}));
  EXPECT_EQ(floats(r), (std::vector<float>{0, 0, 0, 1, 2, 2, 0, 0, 0, 1, 2, 2, 3, 3, 3, 4, 5, 5}));
  const Tensor c = x.pad({{0, 0}, {2, 1}}, PadMode::Circular);
  EXPECT_EQ(floats(c), (std::vector<float>{1, 2, 0, 1, 2, 0, 4, 5, 3, 4, 5, 3}));
  // Negative constant pads trim, as F.pad.
  const Tensor t = x.pad({{0, 0}, {-1, 2}}, 9);
  EXPECT_EQ(t.shape(), (Shape{2, 4}));
  EXPECT_EQ(floats(t), (std::vector<float>{1, 2, 9, 9, 4, 5, 9, 9}));
  EXPECT_EQ(floats(x.pad({{0, -1}, {0, 0}})), (std::vector<float>{0, 1, 2}));
  EXPECT_NE(error_of([&] { x.pad({{0, 0}, {4, 0}}, PadMode::Circular); }).find("pad (circular)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { x.pad({{0, 0}, {-4, 0}}); }).find("trim more than dimension 1"), std::string::npos);
}


// cat adds zero-padded pieces; a +0.0 pad turned -0.0 into +0.0 (found by sort, which joins
// halves with cat). The pad is -0.0 now, the identity of addition.
TEST_P(LayoutOps, CatAndRollKeepNegativeZero) {
  const Tensor a = Tensor(std::vector<float>{-0.0f, 1}, {2}, GetParam());
  const Tensor b = Tensor(std::vector<float>{2, -0.0f}, {2}, GetParam());
  const Tensor both[] = {a, b};
  const auto joined = floats(Tensor::cat(both));
  EXPECT_TRUE(std::signbit(joined[0]) && joined[0] == 0);
  EXPECT_TRUE(std::signbit(joined[3]) && joined[3] == 0);
  EXPECT_TRUE(std::signbit(floats(Tensor::stack(both, 1))[0]));
  EXPECT_TRUE(std::signbit(floats(a.roll(1))[1]));
}

INSTANTIATE_TEST_SUITE_P(Devices, LayoutOps, testing::Values("CPU", "VK"));

}  // namespace

namespace {

// einsum against the ops it names, on both devices.
class Einsum : public testing::TestWithParam<std::string> {};

TEST_P(Einsum, MatchesTheOpsItSpells) {
  const std::string dev = GetParam();
  const Tensor a = iota({2, 3}, dev), b = iota({3, 4}, dev) - 5, c = iota({3, 3}, dev);
  const Tensor ab[] = {a, b};
  EXPECT_EQ(floats(Tensor::einsum("ij,jk->ik", ab)), floats(a.matmul(b)));
  EXPECT_EQ(floats(Tensor::einsum("ij,jk", ab)), floats(a.matmul(b)));  // implicit output: ik
  const Tensor just_c[] = {c};
  EXPECT_EQ(floats(Tensor::einsum("ii->i", just_c)), (std::vector<float>{0, 4, 8}));
  EXPECT_EQ(floats(Tensor::einsum("ii", just_c)), (std::vector<float>{12}));  // trace
  EXPECT_EQ(floats(Tensor::einsum("ij->ji", just_c)), floats(c.transpose()));
  EXPECT_EQ(floats(Tensor::einsum("ij->", just_c)), (std::vector<float>{36}));
  // Batched matmul with an ellipsis, and an outer product.
  const Tensor x = iota({2, 2, 3}, dev), y = iota({2, 3, 2}, dev);
  const Tensor xy[] = {x, y};
  EXPECT_EQ(floats(Tensor::einsum("...ij,...jk->...ik", xy)), floats(x.matmul(y)));
  EXPECT_EQ(floats(Tensor::einsum("bij,bjk->bik", xy)), floats(x.matmul(y)));
  const Tensor u = Tensor(std::vector<float>{1, 2}, {2}, dev), v = Tensor(std::vector<float>{3, 4, 5}, {3}, dev);
  const Tensor uv[] = {u, v};
  EXPECT_EQ(floats(Tensor::einsum("i,j->ij", uv)), (std::vector<float>{3, 4, 5, 6, 8, 10}));
  // Three operands: (a b) summed against a vector.
  const Tensor w = Tensor(std::vector<float>{1, -1, 2, 0}, {4}, dev);
  const Tensor abw[] = {a, b, w};
  EXPECT_EQ(floats(Tensor::einsum("ij,jk,k->i", abw)), floats(a.matmul(b).matmul(w)));
}

TEST_P(Einsum, MisuseNamesTheFormula) {
  const Tensor a = iota({2, 3}, GetParam());
  const Tensor one[] = {a}, two[] = {a, a};
  EXPECT_NE(error_of([&] { Tensor::einsum("ij,jk->ik", one); }).find("einsum(\"ij,jk->ik\"): 2 operand terms for 1"),
            std::string::npos);
  EXPECT_NE(error_of([&] { Tensor::einsum("ijk->i", one); }).find("operand 0 has 2 dimensions for 3 labels"),
            std::string::npos);
  EXPECT_NE(error_of([&] { Tensor::einsum("ij,ij->iz", two); }).find("output label 'z' is in no operand"),
            std::string::npos);
  EXPECT_NE(error_of([&] { Tensor::einsum("ij,jk->ik", two); }).find("label 'j' has sizes 3 and 2"),
            std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Devices, Einsum, testing::Values("CPU", "VK"));

}  // namespace
