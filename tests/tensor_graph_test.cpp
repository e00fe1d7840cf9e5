// The Tensor front end: the lazy graph it builds, shapes, dtypes, and errors in the user's terms.
// Nothing here runs a kernel.
#include <gtest/gtest.h>

#include "support/error_of.hpp"

#include <vkgrad/core/buffer.hpp>
#include <vkgrad/core/tensor.hpp>

using namespace vkg;

namespace {
using vkg::test::error_of;

int count_ops(const Tensor& t, Ops op) {
  int n = 0;
  for (const UOp* u : toposort(t.node().get())) n += u->op == op;
  return n;
}
}  // namespace

TEST(TensorCreate, FromLiteralsAndData) {
  Tensor a = Tensor({1, 2});
  EXPECT_EQ(a.shape(), Shape{2});
  EXPECT_EQ(a.dtype(), dtypes::int32);
  EXPECT_EQ(Tensor({1.5, 2.5}).dtype(), dtypes::float32);
  EXPECT_EQ(Tensor({true, false}).dtype(), dtypes::bool_);
  Tensor m(std::vector<float>(6, 1.5f), {2, 3});
  EXPECT_EQ(m.shape(), (Shape{2, 3}));
  EXPECT_EQ(m.numel(), 6);
  Tensor h(std::vector<float16_t>(4, float16_t(1.0f)), {4});
  EXPECT_EQ(h.dtype(), dtypes::float16);
  const std::string msg = error_of([] { Tensor(std::vector<float>(5, 1.0f), {2, 3}); });
  EXPECT_NE(msg.find("5 elements"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(2, 3)"), std::string::npos) << msg;
}

TEST(TensorCreate, DataIsKeptForUpload) {
  Tensor a = Tensor({7, 8, 9});
  const UOp* buffer = nullptr;
  for (const UOp* u : toposort(a.node().get()))
    if (u->op == Ops::BUFFER) buffer = u;
  ASSERT_NE(buffer, nullptr);
  const Buffer& b = buffer_of(*buffer);
  EXPECT_EQ(b.count(), 3);
  ASSERT_TRUE(b.initial_data);
  const int32_t* v = reinterpret_cast<const int32_t*>(b.initial_data->data());
  EXPECT_EQ(v[0], 7);
  EXPECT_EQ(v[2], 9);
  EXPECT_NE(Tensor({7, 8, 9}).node(), a.node()) << "two tensors of equal data are distinct buffers";
}

TEST(TensorCreate, FullZerosOnesArange) {
  EXPECT_EQ(Tensor::full({2, 3}, 7).dtype(), dtypes::int32);
  EXPECT_EQ(Tensor::full({2, 3}, 7.5).dtype(), dtypes::float32);
  EXPECT_EQ(Tensor::full({2, 3}, 7, dtypes::uint8).dtype(), dtypes::uint8);
  EXPECT_EQ(Tensor::zeros({4}).shape(), Shape{4});
  EXPECT_EQ(Tensor::ones({}).shape(), Shape{});
  EXPECT_EQ(Tensor::arange(10).shape(), Shape{10});
  EXPECT_EQ(Tensor::arange(10).dtype(), dtypes::int32);
  EXPECT_EQ(Tensor::arange(0, 1, 0.25).shape(), Shape{4});
  EXPECT_EQ(Tensor::arange(0, 1, 0.25).dtype(), dtypes::float32);
  EXPECT_EQ(Tensor::arange(5, 0, -2).shape(), Shape{3});  // 5, 3, 1
  EXPECT_THROW(Tensor::arange(0, 5, 0), Error);
  EXPECT_THROW(Tensor::zeros({2, -1}), Error);
  EXPECT_EQ(Tensor::empty({3, 0}).numel(), 0);
}

TEST(TensorElementwise, BroadcastsAndPromotes) {
  Tensor a = Tensor::ones({3, 1}, dtypes::int8), b = Tensor::ones({1, 4}, dtypes::uint8);
  Tensor c = a + b;
  EXPECT_EQ(c.shape(), (Shape{3, 4}));
  EXPECT_EQ(c.dtype(), dtypes::int16);
  EXPECT_EQ((Tensor::ones({5}) + Tensor::ones({2, 5})).shape(), (Shape{2, 5}));
  EXPECT_EQ((Tensor::ones({2}, dtypes::int32) + Tensor::ones({2}, dtypes::float16)).dtype(), dtypes::float16);
}

TEST(TensorElementwise, ScalarsDoNotUpcast) {
  Tensor i8 = Tensor::ones({2}, dtypes::int8);
  EXPECT_EQ((i8 + 3).dtype(), dtypes::int8);
  EXPECT_EQ((i8 * 2.5).dtype(), dtypes::float32);
  EXPECT_EQ((Tensor::ones({2}, dtypes::float16) * 2.5).dtype(), dtypes::float16);
  EXPECT_EQ((3 - i8).dtype(), dtypes::int8);
}

TEST(TensorElementwise, ComparisonsDivisionAndWhere) {
  Tensor a = Tensor({1, 2, 3}), b = Tensor({3, 2, 1});
  EXPECT_EQ(a.lt(b).dtype(), dtypes::bool_);
  EXPECT_EQ(a.eq(b).dtype(), dtypes::bool_);
  EXPECT_EQ(a.ge(b).dtype(), dtypes::bool_);
  EXPECT_EQ((a / b).dtype(), dtypes::float32);  // true division
  EXPECT_EQ(a.idiv(b).dtype(), dtypes::int32);
  EXPECT_EQ(a.sqrt().dtype(), dtypes::float32);
  Tensor w = a.lt(b).where(a, Tensor::full({3}, 0.5));
  EXPECT_EQ(w.dtype(), dtypes::float32);
  EXPECT_EQ(w.shape(), Shape{3});
  EXPECT_THROW(Tensor::ones({2}).idiv(Tensor::ones({2})), Error);
  EXPECT_THROW(Tensor({true}).operator-(), Error);
}

TEST(TensorElementwise, ShapeMismatchNamesTheOpAndShapes) {
  const std::string msg = error_of([] { Tensor::ones({2, 3}) + Tensor::ones({4}); });
  EXPECT_NE(msg.find("add"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(2, 3)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(4,)"), std::string::npos) << msg;
}

TEST(TensorElementwise, CastAndBitcast) {
  Tensor f = Tensor::ones({2});
  EXPECT_EQ(f.cast(dtypes::float32).node(), f.node()) << "a cast to its own dtype is no node";
  EXPECT_EQ(f.cast(dtypes::int64).dtype(), dtypes::int64);
  EXPECT_EQ(f.bitcast(dtypes::uint32).dtype(), dtypes::uint32);
  // Between sizes the last axis must divide (tensor_bitcast_test.cpp): 3 floats are no doubles.
  const std::string msg = error_of([&] { Tensor::ones({3}).bitcast(dtypes::float64); });
  EXPECT_NE(msg.find("float32"), std::string::npos) << msg;
  EXPECT_NE(msg.find("float64"), std::string::npos) << msg;
}

TEST(TensorReduce, ShapesAndDtypes) {
  Tensor x = Tensor::ones({2, 3, 4});
  EXPECT_EQ(x.sum().shape(), Shape{});
  EXPECT_EQ(x.sum(1).shape(), (Shape{2, 4}));
  EXPECT_EQ(x.sum(-1, true).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(x.max({0, 2}).shape(), Shape{3});
  EXPECT_EQ(Tensor::ones({4}, dtypes::int8).sum().dtype(), dtypes::int32);
  EXPECT_EQ(Tensor::ones({4}, dtypes::uint8).sum().dtype(), dtypes::uint32);
  EXPECT_EQ(Tensor::ones({4}, dtypes::float16).sum().dtype(), dtypes::float16);
  EXPECT_EQ(Tensor::ones({4}, dtypes::int32).mean().dtype(), dtypes::float32);
  EXPECT_EQ(x.var(1).shape(), (Shape{2, 4}));
  const std::string msg = error_of([&] { x.sum(3); });
  EXPECT_NE(msg.find("sum"), std::string::npos) << msg;
  EXPECT_NE(msg.find("axis 3"), std::string::npos) << msg;
  EXPECT_THROW(x.sum({1, -2}), Error);  // the same axis twice
  EXPECT_THROW(Tensor::ones({0}).max(), Error);
}

TEST(TensorReduce, DotAndMatmulShapes) {
  EXPECT_EQ(Tensor({1, 2}).dot(Tensor({3, 4})).shape(), Shape{});
  EXPECT_EQ(Tensor({1, 2}).dot(Tensor({3, 4})).dtype(), dtypes::int32);
  EXPECT_EQ(Tensor::ones({2, 3}).matmul(Tensor::ones({3, 4})).shape(), (Shape{2, 4}));
  EXPECT_EQ(Tensor::ones({5, 2, 3}).matmul(Tensor::ones({3, 4})).shape(), (Shape{5, 2, 4}));
  EXPECT_EQ(Tensor::ones({3}).matmul(Tensor::ones({3, 4})).shape(), Shape{4});
  EXPECT_EQ(Tensor::ones({2, 3}).matmul(Tensor::ones({3})).shape(), Shape{2});
  const std::string msg = error_of([] { Tensor::ones({2, 3}).matmul(Tensor::ones({4, 5})); });
  EXPECT_NE(msg.find("(2, 3)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(4, 5)"), std::string::npos) << msg;
  EXPECT_EQ(count_ops(Tensor({1, 2}).dot(Tensor({3, 4})), Ops::REDUCE_AXIS), 1);
}

TEST(TensorMovement, ReshapeInfersAndChecks) {
  Tensor x = Tensor::ones({2, 3, 4});
  EXPECT_EQ(x.reshape({6, -1}).shape(), (Shape{6, 4}));
  EXPECT_EQ(x.reshape({2, 3, 4}).node(), x.node());
  const std::string msg = error_of([&] { x.reshape({5, 5}); });
  EXPECT_NE(msg.find("reshape"), std::string::npos) << msg;
  EXPECT_NE(msg.find("24 elements"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(5, 5)"), std::string::npos) << msg;
  EXPECT_THROW(x.reshape({-1, -1}), Error);
  EXPECT_THROW(x.reshape({7, -1}), Error);
}

TEST(TensorMovement, PermuteExpandPadShrinkFlip) {
  Tensor x = Tensor::ones({2, 3, 1});
  EXPECT_EQ(x.permute({2, 0, 1}).shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(x.permute({0, 1, 2}).node(), x.node());
  EXPECT_THROW(x.permute({0, 0, 1}), Error);
  EXPECT_THROW(x.permute({0, 1}), Error);
  EXPECT_EQ(x.expand({2, 3, 5}).shape(), (Shape{2, 3, 5}));
  EXPECT_EQ(x.expand({4, 2, 3, 5}).shape(), (Shape{4, 2, 3, 5}));
  EXPECT_EQ(x.expand({-1, -1, 5}).shape(), (Shape{2, 3, 5}));
  const std::string msg = error_of([&] { x.expand({4, 3, 1}); });
  EXPECT_NE(msg.find("expand"), std::string::npos) << msg;
  EXPECT_EQ(x.pad({{1, 1}, {0, 2}, {0, 0}}).shape(), (Shape{4, 5, 1}));
  EXPECT_EQ(x.pad({{1, 1}, {0, 2}, {0, 0}}, 3.0).shape(), (Shape{4, 5, 1}));
  EXPECT_EQ(x.pad({{-1, 0}, {0, 0}, {0, 0}}).shape(), (Shape{1, 3, 1}));  // negative pads trim, as F.pad
  EXPECT_THROW(x.pad({{-3, 0}, {0, 0}, {0, 0}}), Error);
  EXPECT_EQ(x.shrink({{0, 1}, {1, 3}, {0, 1}}).shape(), (Shape{1, 2, 1}));
  EXPECT_THROW(x.shrink({{0, 3}, {0, 3}, {0, 1}}), Error);
  EXPECT_THROW(x.shrink({{2, 1}, {0, 3}, {0, 1}}), Error);
  EXPECT_EQ(x.flip({0, -2}).shape(), x.shape());
  EXPECT_THROW(x.flip({0, 0}), Error);
  EXPECT_EQ(Tensor::ones({2, 5}).transpose().shape(), (Shape{5, 2}));
}

TEST(TensorGraph, IsLazyAndPrintsWhatItIs) {
  Tensor a = Tensor({1, 2}), b = Tensor({3, 4});
  Tensor c = a + b;
  EXPECT_EQ(c.node()->op, Ops::ADD);
  EXPECT_EQ(c.node()->src[0], a.node());
  EXPECT_EQ(c.repr(), "<Tensor shape=(2,) dtype=int32 device=" + default_device() + " op=ADD>");
  EXPECT_EQ(Tensor::ones({2}, dtypes::float32, "CPU").device(), "CPU");
  EXPECT_THROW(Tensor::ones({2}, dtypes::float32, "CPU") + Tensor::ones({2}, dtypes::float32, "VK"), Error);
}
