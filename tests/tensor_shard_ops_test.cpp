// Sharded tensors across their sharded axis (core/multi.cpp): pad, shrink and flip move the
// shards' rows between devices (the result stays sharded where its length splits evenly, else
// it is replicated); operands sharded on different axes are resharded; indexed loads (gather,
// embedding, index_select, x[int_tensor]) of a sharded source or with sharded indices. Each
// against the unsharded value on the CPU device.
#include <gtest/gtest.h>

#include <cmath>

#include <vkgrad/core/multi.hpp>
#include <vkgrad/vkgrad.hpp>

namespace vkg {
namespace {

const std::vector<std::string> two = {"VK", "VK:1"};
const std::vector<std::string> three = {"VK", "VK:1", "CPU"};

std::vector<float> iota(size_t n, float scale = 1, float shift = 0) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(i) * scale + shift;
  return v;
}

// The axis a sharded result is split on (-1: replicated).
int64_t axis_of(Tensor t) { return lower_multi(t.realize().node()).axis; }

std::vector<float> on_cpu(const Tensor& t) { return t.to("CPU").to_vector<float>(); }

TEST(TensorShardOps, ShrinkAcrossTheShardedAxis) {
  const std::vector<float> xs = iota(24, 1, -7);
  const Tensor x = Tensor(xs, {8, 3}).shard(two, 0), xc(xs, {8, 3}, "CPU");
  // [1, 5): 4 rows split 2 and 2; the second part takes one row from each device.
  EXPECT_EQ(on_cpu(x.shrink({{1, 5}, {0, 3}})), xc.shrink({{1, 5}, {0, 3}}).to_vector<float>());
  EXPECT_EQ(axis_of(x.shrink({{1, 5}, {0, 3}})), 0);
  // 3 rows do not split over two: every device holds them all.
  EXPECT_EQ(on_cpu(x.shrink({{2, 5}, {1, 3}})), xc.shrink({{2, 5}, {1, 3}}).to_vector<float>());
  EXPECT_EQ(axis_of(x.shrink({{2, 5}, {1, 3}})), -1);
  // Slicing is a shrink (with a stride, also a reshape); so are split and chunk.
  const std::vector<Index> rows{Slice{5, 7}}, odd{Slice{1, std::nullopt, 2}};
  EXPECT_EQ(on_cpu(x[rows]), xc[rows].to_vector<float>());
  EXPECT_EQ(on_cpu(x[odd] * 2), (xc[odd] * 2).to_vector<float>());
  EXPECT_EQ(on_cpu(x.split(3)[1]), xc.split(3)[1].to_vector<float>());
  // Over three devices (one of them the CPU device): each result row comes from another one.
  const Tensor y = Tensor(iota(12, 0.5f), {6, 2}).shard(three, 0);
  const Tensor yc(iota(12, 0.5f), {6, 2}, "CPU");
  EXPECT_EQ(on_cpu(y.shrink({{1, 4}, {0, 2}}) + 1),
            (yc.shrink({{1, 4}, {0, 2}}) + 1).to_vector<float>());
  EXPECT_EQ(axis_of(y.shrink({{1, 4}, {0, 2}})), 0);
}

TEST(TensorShardOps, PadAcrossTheShardedAxis) {
  const std::vector<float> xs = iota(12, 1, 1);
  const Tensor x = Tensor(xs, {4, 3}).shard(two, 0), xc(xs, {4, 3}, "CPU");
  // 4 + 1 + 3 = 8 rows, split 4 and 4.
  EXPECT_EQ(on_cpu(x.pad({{1, 3}, {0, 1}})), xc.pad({{1, 3}, {0, 1}}).to_vector<float>());
  EXPECT_EQ(axis_of(x.pad({{1, 3}, {0, 1}})), 0);
  // A part that is all padding: rows [0, 4) of 8 are the 4 rows before the data.
  EXPECT_EQ(on_cpu(x.pad({{4, 0}, {0, 0}})), xc.pad({{4, 0}, {0, 0}}).to_vector<float>());
  // 7 rows: replicated. A fill value, and -0.0, and a reflect pad (built of shrinks and flips).
  EXPECT_EQ(on_cpu(x.pad({{2, 1}, {0, 0}}, 2.5)), xc.pad({{2, 1}, {0, 0}}, 2.5).to_vector<float>());
  EXPECT_EQ(axis_of(x.pad({{2, 1}, {0, 0}})), -1);
  const std::vector<float> neg = on_cpu(x.pad({{1, 1}, {0, 0}}, -0.0));
  EXPECT_TRUE(std::signbit(neg[0]) && neg[0] == 0.0f);
  EXPECT_EQ(neg, xc.pad({{1, 1}, {0, 0}}, -0.0).to_vector<float>());
  EXPECT_EQ(on_cpu(x.pad({{2, 2}, {1, 1}}, PadMode::Reflect)),
            xc.pad({{2, 2}, {1, 1}}, PadMode::Reflect).to_vector<float>());
  // A negative pad trims.
  EXPECT_EQ(on_cpu(x.pad({{-1, 1}, {0, 0}})), xc.pad({{-1, 1}, {0, 0}}).to_vector<float>());
}

TEST(TensorShardOps, FlipAcrossTheShardedAxis) {
  const std::vector<float> xs = iota(24, 0.25f, -2);
  const Tensor x = Tensor(xs, {8, 3}).shard(two, 0), xc(xs, {8, 3}, "CPU");
  EXPECT_EQ(on_cpu(x.flip({0})), xc.flip({0}).to_vector<float>());
  EXPECT_EQ(axis_of(x.flip({0})), 0);
  EXPECT_EQ(on_cpu(x.flip({0, 1}) - x), (xc.flip({0, 1}) - xc).to_vector<float>());
  const Tensor y = Tensor(xs, {6, 4}).shard(three, 0);
  EXPECT_EQ(on_cpu(y.flip({0}) * 3), (Tensor(xs, {6, 4}, "CPU").flip({0}) * 3).to_vector<float>());
  EXPECT_EQ(on_cpu(x.roll(3, 0)), xc.roll(3, 0).to_vector<float>());
}

// A sharded axis of length 0: each shard is empty, and flipping, reshaping or padding it across
// that axis gives the empty (or padded) value the CPU device gives.
TEST(TensorShardOps, AnEmptyShardedAxis) {
  const Tensor x = Tensor::zeros({0, 3}).shard(two, 0);
  Tensor flipped = x.flip({0});
  flipped.realize();
  EXPECT_EQ(flipped.shape(), (Shape{0, 3}));
  EXPECT_EQ(flipped.device(), "VK,VK:1");
  EXPECT_TRUE(on_cpu(flipped).empty());
  Tensor reshaped = Tensor::zeros({0, 4}).shard(two, 0).reshape({4, 0});
  reshaped.realize();
  EXPECT_EQ(reshaped.shape(), (Shape{4, 0}));
  EXPECT_TRUE(on_cpu(reshaped).empty());
  // Padded across it: rows of the pad value only.
  EXPECT_EQ(on_cpu(x.pad({{1, 1}, {0, 0}}, 2.0)), std::vector<float>(6, 2.0f));
}

// Reshaped where an axis before the sharded one has length 0 (a sum's keepdim axis dropped): the
// shape is the unsharded one. It was {0, 0, 0} for {0, 0, 4} (differential fuzzer, seed 10126).
TEST(TensorShardOps, AnEmptyTensorReshapedBeforeItsShardedAxisKeepsItsShape) {
  const Tensor x = Tensor::zeros({0, 2, 0, 4}, dtypes::int32);
  for (int64_t axis : {2, 3}) {
    Tensor summed = x.shard(two, axis).sum(1);
    summed.realize();
    EXPECT_EQ(summed.shape(), (Shape{0, 0, 4})) << axis;
    EXPECT_EQ(summed.to("CPU").shape(), (Shape{0, 0, 4})) << axis;
    EXPECT_EQ(x.shard(two, axis).reshape({0, 8}).to("CPU").shape(), (Shape{0, 8})) << axis;
  }
}

TEST(TensorShardOps, OperandsShardedOnDifferentAxesAreResharded) {
  const std::vector<float> as = iota(24, 1, -5), bs = iota(24, -0.5f, 3);
  const Tensor a = Tensor(as, {4, 6}).shard(two, 0), b = Tensor(bs, {4, 6}).shard(two, 1);
  const Tensor ac(as, {4, 6}, "CPU"), bc(bs, {4, 6}, "CPU");
  EXPECT_EQ(on_cpu(a * b + a), (ac * bc + ac).to_vector<float>());
  EXPECT_EQ(axis_of(a * b), 0);  // the first sharded operand's split
  // A reshape that mixes the sharded axis with others: every device holds the whole result.
  EXPECT_EQ(on_cpu(b.reshape({3, 8}) * 2), (bc.reshape({3, 8}) * 2).to_vector<float>());
  EXPECT_EQ(axis_of(b.reshape({3, 8})), -1);
  EXPECT_EQ(on_cpu(a.reshape({3, 8}).sum(0)), ac.reshape({3, 8}).sum(0).to_vector<float>());
  EXPECT_EQ(on_cpu((b - a).sum(1)), (bc - ac).sum(1).to_vector<float>());
}

TEST(TensorShardOps, IndexedLoadsWithShardedIndices) {
  const std::vector<float> ws = iota(18, 0.5f, -4);
  const std::vector<int> ids = {5, 0, 2, 2, 4, 1, 3, 5};
  const Tensor w = Tensor(ws, {6, 3}).shard(two), wc(ws, {6, 3}, "CPU");
  const Tensor idx = Tensor(ids, {8}).shard(two, 0), ic(ids, {8}, "CPU");
  EXPECT_EQ(on_cpu(idx.embedding(w)), ic.embedding(wc).to_vector<float>());
  EXPECT_EQ(axis_of(idx.embedding(w)), 0);  // each device reads its own indices' rows
  EXPECT_EQ(on_cpu(w.index_select(0, idx)), wc.index_select(0, ic).to_vector<float>());
  EXPECT_EQ(on_cpu(w[std::vector<Index>{idx}]), wc[std::vector<Index>{ic}].to_vector<float>());
  // gather along axis 1 with an index split on axis 0.
  const std::vector<int> g = {2, 0, 1, 1, 0, 2, 2, 2, 0, 1, 0, 0};
  const Tensor gi = Tensor(g, {6, 2}).shard(two, 0), gc(g, {6, 2}, "CPU");
  EXPECT_EQ(on_cpu(w.gather(1, gi)), wc.gather(1, gc).to_vector<float>());
  // An index out of range reads 0 on every device, as on one.
  const Tensor bad = Tensor(std::vector<int>{1, 7}, {2}).shard(two, 0);
  EXPECT_EQ(on_cpu(bad.embedding(w)),
            Tensor(std::vector<int>{1, 7}, {2}, "CPU").embedding(wc).to_vector<float>());
}

TEST(TensorShardOps, IndexedLoadsOfAShardedSource) {
  const std::vector<float> ws = iota(24, 0.5f, -4);
  const std::vector<int> ids = {5, 0, 7, 2, 4, 1};
  const Tensor wc(ws, {8, 3}, "CPU"), ic(ids, {6}, "CPU");
  // Sharded on the indexed axis (a table split by rows): gathered to every device first.
  const Tensor by_rows = Tensor(ws, {8, 3}).shard(two, 0);
  const Tensor idx = Tensor(ids, {6}).shard(two);
  EXPECT_EQ(on_cpu(idx.embedding(by_rows)), ic.embedding(wc).to_vector<float>());
  EXPECT_EQ(on_cpu(by_rows.index_select(0, Tensor(ids, {6}).shard(two, 0))),
            wc.index_select(0, ic).to_vector<float>());
  const std::vector<Index> at{Tensor(ids, {6}).shard(two, 0)};
  EXPECT_EQ(on_cpu(by_rows[at]), wc[std::vector<Index>{ic}].to_vector<float>());
  // Sharded on an axis not indexed: each device reads its own columns.
  const Tensor by_cols = Tensor(iota(24, 0.5f, -4), {4, 6}).shard(two, 1);
  const Tensor cc(iota(24, 0.5f, -4), {4, 6}, "CPU");
  const std::vector<int> rows = {3, 3, 0, 1, 2};
  const Tensor r = Tensor(rows, {5}).shard(two), rc(rows, {5}, "CPU");
  EXPECT_EQ(on_cpu(by_cols.index_select(0, r)), cc.index_select(0, rc).to_vector<float>());
  EXPECT_EQ(axis_of(by_cols.index_select(0, r)), 1);
  const std::vector<int> g = {0, 3, 1, 2, 2, 2, 0, 1, 3, 0, 0, 0,
                              1, 1, 1, 2, 3, 3, 0, 2, 1, 3, 2, 0};
  EXPECT_EQ(on_cpu(by_cols.gather(0, Tensor(g, {4, 6}).shard(two, 1))),
            cc.gather(0, Tensor(g, {4, 6}, "CPU")).to_vector<float>());
  EXPECT_EQ(on_cpu(by_cols.take(Tensor(std::vector<int>{23, 0, 7}, {3}).shard(two))),
            cc.take(Tensor(std::vector<int>{23, 0, 7}, {3}, "CPU")).to_vector<float>());
}

}  // namespace
}  // namespace vkg
