// Reads chosen by index tensors (gather, embedding, take, index_select, advanced indexing,
// masked_select, nonzero, masked_fill) and writes (setitem, scatter, scatter_add,
// scatter_reduce): values against hand-written loops and torch's documented examples, Vulkan
// against the CPU device, kernel counts, odd, broadcast, 0-size and 0-d shapes, and misuse.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>

#include "support/device_compare.hpp"
#include "support/error_of.hpp"

#include <vkgrad/core/jit.hpp>
#include <vkgrad/core/schedule.hpp>
#include <vkgrad/core/tensor.hpp>

using namespace vkg;
using vkg::test::cpu_vk_agree;
using vkg::test::error_of;

namespace {

// 0, 1, ..., n-1 as int32 in `shape`.
Tensor iota(Shape shape, const std::string& device = "") {
  std::vector<int32_t> v(size_t(prod(shape)));
  std::iota(v.begin(), v.end(), 0);
  return Tensor(v, std::move(shape), device);
}

Tensor ints(std::vector<int32_t> v, Shape shape, const std::string& device = "") {
  return Tensor(v, std::move(shape), device);
}

// A 0-d int32 0 (Tensor(0) would be ambiguous with a null node).
Tensor scalar0() { return Tensor::full({}, 0, dtypes::int32); }

std::vector<int32_t> vals(const Tensor& t) { return t.to_vector<int32_t>(); }
std::vector<float> floats(const Tensor& t) { return t.to_vector<float>(); }

// What the kernels of t's schedule hold: their number, whether any reduces (a one-hot form
// would), and whether one reads through an indexed load (LOAD with index sources).
struct KernelShape {
  size_t kernels = 0;
  bool reduces = false, indexed_load = false;
};
KernelShape kernel_shape(const Tensor& t) {
  KernelShape k;
  const Schedule s = create_schedule({t.node()});
  k.kernels = s.items.size();
  for (const ScheduleItem& item : s.items)
    for (const UOp* u : toposort(item.ast.get())) {
      k.reduces = k.reduces || u->op == Ops::REDUCE_AXIS;
      k.indexed_load = k.indexed_load || (u->op == Ops::LOAD && u->src.size() > 2);
    }
  return k;
}

bool has(const std::string& message, const std::string& part) {
  return message.find(part) != std::string::npos;
}

}  // namespace

TEST(IndexedLoad, GatherIsOneKernelWithNoOneHot) {
  Tensor x = iota({3, 50}).cast(dtypes::float32);
  x.realize();  // a computed source is realized first: a kernel of its own
  const Tensor g = x.gather(1, ints({49, 0, 7, 3, 3, 48}, {3, 2}));
  const KernelShape k = kernel_shape(g);
  EXPECT_EQ(k.kernels, 1u);
  EXPECT_FALSE(k.reduces);
  EXPECT_TRUE(k.indexed_load);
  EXPECT_EQ(floats(g), (std::vector<float>{49, 0, 57, 53, 103, 148}));
  // Fused with what computes the indices and what uses the result: still one kernel.
  const Tensor fused = (x.gather(1, ints({4, 5, 6}, {3, 1}) * 2 - 1) + 1) * 2;
  EXPECT_EQ(kernel_shape(fused).kernels, 1u);
  EXPECT_EQ(floats(fused), (std::vector<float>{16, 120, 224}));
  // A computed source costs one kernel more, not a one-hot reduce.
  const KernelShape computed = kernel_shape((x * 2).gather(0, ints({2}, {1, 1})));
  EXPECT_EQ(computed.kernels, 2u);
  EXPECT_FALSE(computed.reduces);
}

TEST(IndexedLoad, EmbeddingIsOneKernelWithNoOneHot) {
  Tensor w = iota({1000, 7}).cast(dtypes::float32);
  w.realize();
  const Tensor idx = ints({999, 0, 5, 5, 123, 1}, {2, 3});
  const Tensor e = idx.embedding(w);
  EXPECT_EQ(e.shape(), (Shape{2, 3, 7}));
  const KernelShape k = kernel_shape(e);
  EXPECT_EQ(k.kernels, 1u);
  EXPECT_FALSE(k.reduces);
  EXPECT_TRUE(k.indexed_load);
  std::vector<float> want;
  for (int32_t r : {999, 0, 5, 5, 123, 1})
    for (int c = 0; c < 7; ++c) want.push_back(float(r * 7 + c));
  EXPECT_EQ(floats(e), want);
  // Out of the vocabulary: a row of zeros, as documented; negative too.
  EXPECT_EQ(floats(ints({1000, -1, 2}, {3}).embedding(w)).size(), 21u);
  const std::vector<float> oor = floats(ints({1000, -1, 2}, {3}).embedding(w));
  for (int c = 0; c < 14; ++c) EXPECT_EQ(oor[size_t(c)], 0.0f);
  EXPECT_EQ(oor[14], 14.0f);
  // A weight that is a view (transposed) or computed is read as it is, or realized first.
  const Tensor wt = iota({7, 5}).cast(dtypes::float32).transpose(0, 1);  // (5, 7)
  EXPECT_EQ(floats(ints({4}, {1}).embedding(wt)), (std::vector<float>{4, 9, 14, 19, 24, 29, 34}));
  EXPECT_EQ(floats(ints({1}, {1}).embedding(wt * 2 + 1)),
            (std::vector<float>{3, 13, 23, 33, 43, 53, 63}));
  EXPECT_TRUE(cpu_vk_agree([](const std::string& dev) {
    return ints({3, 1, 4, 1, 5, 9, 2, 6}, {2, 2, 2}, dev)
        .embedding(iota({10, 3}, dev).cast(dtypes::float16) * 0.5);
  }));
  // 0-d and empty indices.
  EXPECT_EQ(floats(Tensor(3).embedding(w)), (std::vector<float>{21, 22, 23, 24, 25, 26, 27}));
  EXPECT_EQ(ints({}, {0}).embedding(w).shape(), (Shape{0, 7}));
  EXPECT_TRUE(floats(ints({}, {0}).embedding(w)).empty());
}

TEST(IndexedLoad, GatherValuesShapesAndDevices) {
  // torch.gather(t, 1, [[0, 0], [1, 0]]) == [[1, 1], [4, 3]]
  EXPECT_EQ(vals(iota({2, 2}).gather(1, ints({0, 0, 1, 0}, {2, 2}))),
            (std::vector<int32_t>{0, 0, 3, 2}));
  // Against a loop, on a 3-D odd shape along every axis, with an index smaller than the tensor.
  const Tensor x = iota({3, 5, 7});
  const Tensor idx = ints({2, 0, 1, 4, 6, 3, 0, 1, 2, 2, 1, 0}, {2, 3, 2});
  for (int a = 0; a < 3; ++a) {
    const std::vector<int32_t> got =
        vals(x.gather(a, idx.mod(Tensor(std::vector<int32_t>{3, 5, 7}[size_t(a)]))));
    const std::vector<int32_t> iv = vals(idx);
    const int sizes[] = {3, 5, 7};
    size_t at = 0;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 2; ++k, ++at) {
          int c[] = {i, j, k};
          c[a] = iv[at] % sizes[a];
          EXPECT_EQ(got[at], c[0] * 35 + c[1] * 7 + c[2]) << "axis " << a << " element " << at;
        }
  }
  EXPECT_TRUE(cpu_vk_agree([](const std::string& dev) {
    return iota({4, 3, 5}, dev)
        .cast(dtypes::float32)
        .exp()
        .gather(-1, ints({4, 0, 9, -1, 2, 2}, {1, 2, 3}, dev));
  }));
  // 0-d: the one element; 0-size index: an empty result.
  EXPECT_EQ(vals(Tensor(42).gather(0, scalar0())), (std::vector<int32_t>{42}));
  EXPECT_EQ(Tensor(42).gather(0, scalar0()).shape(), Shape{});
  EXPECT_EQ(x.gather(1, ints({}, {3, 0, 7})).shape(), (Shape{3, 0, 7}));
  // Special values come through bit for bit.
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor sp(std::vector<float>{inf, -0.0f, std::nanf(""), -inf}, {4});
  const std::vector<float> got = floats(sp.gather(0, ints({3, 1, 2, 0}, {4})));
  EXPECT_EQ(got[0], -inf);
  EXPECT_TRUE(std::signbit(got[1]) && got[1] == 0.0f);
  EXPECT_TRUE(std::isnan(got[2]));
  EXPECT_EQ(got[3], inf);
}

TEST(IndexedLoad, TakeAndIndexSelect) {
  const Tensor x = iota({3, 4});
  // torch.take: flat, negative from the end, the index's shape.
  const Tensor t = x.take(ints({0, 11, -1, -12, 5, 6}, {2, 3}));
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(vals(t), (std::vector<int32_t>{0, 11, 11, 0, 5, 6}));
  EXPECT_EQ(vals(x.take(ints({12, -13}, {2}))), (std::vector<int32_t>{0, 0}));  // out of range: 0
  EXPECT_EQ(vals(x.index_select(1, ints({3, 0, 3}, {3}))),
            (std::vector<int32_t>{3, 0, 3, 7, 4, 7, 11, 8, 11}));
  EXPECT_EQ(vals(x.index_select(0, ints({2}, {1}))), (std::vector<int32_t>{8, 9, 10, 11}));
  EXPECT_EQ(x.index_select(-1, Tensor(1)).shape(), (Shape{3, 1}));
  EXPECT_EQ(x.index_select(0, ints({}, {0})).shape(), (Shape{0, 4}));
  EXPECT_EQ(vals(Tensor(7).index_select(0, scalar0())), (std::vector<int32_t>{7}));
  EXPECT_TRUE(cpu_vk_agree([](const std::string& dev) {
    const Tensor y = iota({5, 3, 2}, dev).cast(dtypes::float32).sqrt();
    return y.index_select(1, ints({2, 2, 0, 1}, {4}, dev)).sum(0) +
           y.take(ints({29, 0, -30, 3, 7, 11}, {3, 2}, dev)).sum();
  }));
}

TEST(IndexedLoad, AdvancedIndexingFollowsNumpy) {
  const Tensor x = iota({2, 3, 4});
  // One tensor on axis 0: x[[1, 0, 1]] -> (3, 3, 4).
  const Tensor a = x[{ints({1, 0, 1}, {3})}];
  EXPECT_EQ(a.shape(), (Shape{3, 3, 4}));
  EXPECT_EQ(vals(a)[12], 0);
  EXPECT_EQ(vals(a)[0], 12);
  // On a middle axis with a 2-D index: x[:, [[2, 0]]] -> (2, 1, 2, 4), the index's dims in place.
  const Tensor b = x[{Slice{}, ints({2, 0}, {1, 2})}];
  EXPECT_EQ(b.shape(), (Shape{2, 1, 2, 4}));
  EXPECT_EQ(vals(b),
            (std::vector<int32_t>{8, 9, 10, 11, 0, 1, 2, 3, 20, 21, 22, 23, 12, 13, 14, 15}));
  // Several adjacent axes broadcast together: x[:, [0, 2], [[3], [-1]]] -> (2, 2, 2).
  const Tensor c = x[{Slice{}, ints({0, 2}, {2}), ints({3, -1}, {2, 1})}];
  EXPECT_EQ(c.shape(), (Shape{2, 2, 2}));
  std::vector<int32_t> want;
  for (int i = 0; i < 2; ++i)
    for (int p = 0; p < 2; ++p)
      for (int q = 0; q < 2; ++q) want.push_back(i * 12 + (q ? 2 : 0) * 4 + 3);
  EXPECT_EQ(vals(c), want);
  // Separated by a slice, the broadcast dims go first: x[[1, 0], :, [0, 3]] -> (2, 3).
  const Tensor d = x[{ints({1, 0}, {2}), Slice{}, ints({0, 3}, {2})}];
  EXPECT_EQ(d.shape(), (Shape{2, 3}));
  EXPECT_EQ(vals(d), (std::vector<int32_t>{12, 16, 20, 3, 7, 11}));
  // An integer counts as a 0-d index tensor: x[1, :, [0, 2]] is separated -> (2, 3).
  const Tensor e = x[{1, Slice{}, ints({0, 2}, {2})}];
  EXPECT_EQ(e.shape(), (Shape{2, 3}));
  EXPECT_EQ(vals(e), (std::vector<int32_t>{12, 16, 20, 14, 18, 22}));
  // With slices that step and newaxis: x[::-1, [2], ::2] -> (2, 1, 2).
  const Tensor f = x[{Slice{std::nullopt, std::nullopt, -1}, ints({2}, {1}),
                      Slice{std::nullopt, std::nullopt, 2}}];
  EXPECT_EQ(f.shape(), (Shape{2, 1, 2}));
  EXPECT_EQ(vals(f), (std::vector<int32_t>{20, 22, 8, 10}));
  EXPECT_EQ((x[{newaxis, ellipsis, ints({1}, {1})}].shape()), (Shape{1, 2, 3, 1}));
  // A bool mask over the leading dims: (count, rest).
  const Tensor m(std::vector<bool>{true, false, false, true, true, false}, {2, 3});
  const Tensor g = x[{m}];
  EXPECT_EQ(g.shape(), (Shape{3, 4}));
  EXPECT_EQ(vals(g), (std::vector<int32_t>{0, 1, 2, 3, 12, 13, 14, 15, 16, 17, 18, 19}));
  EXPECT_TRUE(cpu_vk_agree([](const std::string& dev) {
    const Tensor y = iota({4, 5, 6}, dev).cast(dtypes::float32);
    return y[{ints({3, -4}, {2, 1}, dev), Slice{1, 4}, ints({5, 0, 2}, {3}, dev)}];
  }));
  EXPECT_EQ(kernel_shape(x[{Slice{}, ints({2, 0}, {2})}] + 1).kernels, 1u);
}

TEST(IndexedLoad, MaskedOpsAndNonzero) {
  const Tensor x = iota({2, 3});
  const Tensor m(std::vector<bool>{false, true, true, false, false, true}, {2, 3});
  EXPECT_EQ(vals(m.nonzero()), (std::vector<int32_t>{0, 1, 0, 2, 1, 2}));
  EXPECT_EQ(m.nonzero().shape(), (Shape{3, 2}));
  EXPECT_EQ(vals(ints({0, 3, 0, -1}, {4}).nonzero()), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(iota({0, 2}).nonzero().shape(), (Shape{0, 2}));
  EXPECT_EQ(vals(x.masked_select(m)), (std::vector<int32_t>{1, 2, 5}));
  // The mask broadcasts: a row mask picks whole columns.
  const Tensor cols(std::vector<bool>{true, false, true}, {3});
  EXPECT_EQ(vals(x.masked_select(cols)), (std::vector<int32_t>{0, 2, 3, 5}));
  EXPECT_EQ(x.masked_select(Tensor(std::vector<bool>{false, false, false}, {3})).shape(),
            (Shape{0}));
  EXPECT_EQ(vals(x.masked_fill(m, -7)), (std::vector<int32_t>{0, -7, -7, 3, 4, -7}));
  EXPECT_EQ(vals(x.masked_fill(cols, Tensor(9))), (std::vector<int32_t>{9, 1, 9, 9, 4, 9}));
  EXPECT_TRUE(cpu_vk_agree([](const std::string& dev) {
    const Tensor y = iota({3, 4}, dev).cast(dtypes::float32);
    return y.masked_fill(y > 5.0, -std::numeric_limits<float>::infinity());
  }));
}

TEST(IndexedLoad, SetitemWritesInPlace) {
  Tensor x = Tensor::zeros({3, 4}, dtypes::int32);
  x.realize();
  const std::vector<std::byte> before = x.bytes();
  x.setitem({1}, 5);
  EXPECT_EQ(vals(x), (std::vector<int32_t>{0, 0, 0, 0, 5, 5, 5, 5, 0, 0, 0, 0}));
  x.setitem({Slice{}, ints({3, 0}, {2})}, ints({1, 2}, {2}));  // broadcast over the rows
  EXPECT_EQ(vals(x), (std::vector<int32_t>{2, 0, 0, 1, 2, 5, 5, 1, 2, 0, 0, 1}));
  // Repeated positions: the last value wins.
  x.setitem({2, ints({1, 1, 2}, {3})}, ints({7, 8, 9}, {3}));
  EXPECT_EQ(vals(x), (std::vector<int32_t>{2, 0, 0, 1, 2, 5, 5, 1, 2, 8, 9, 1}));
  x.setitem({Slice{std::nullopt, std::nullopt, 2}, Slice{1, 3}}, Tensor(-1));
  EXPECT_EQ(vals(x), (std::vector<int32_t>{2, -1, -1, 1, 2, 5, 5, 1, 2, -1, -1, 1}));
  // A bool mask, and float values cast to the tensor's dtype.
  x.setitem({x.lt(0)}, 3.9);  // a masked_fill: no host sync, no index tensors
  EXPECT_EQ(vals(x), (std::vector<int32_t>{2, 3, 3, 1, 2, 5, 5, 1, 2, 3, 3, 1}));
  const std::string e = error_of([&] { x.setitem({0}, ints({1, 2, 3}, {3})); });
  EXPECT_TRUE(has(e, "setitem: the value (3,) int32 does not broadcast to the indexed shape (4,)"))
      << e;
  EXPECT_EQ(vals(x)[0], 2);  // unchanged by the failed call, and still usable
}

TEST(Scatter, TorchExamples) {
  // torch.scatter docs: src = arange(1, 11).reshape(2, 5); index = [[0, 1, 2, 0]];
  // zeros(3, 5).scatter_(0, index, src) == [[1, 0, 0, 4, 0], [0, 2, 0, 0, 0], [0, 0, 3, 0, 0]]
  const Tensor src = iota({2, 5}) + 1;
  EXPECT_EQ(vals(Tensor::zeros({3, 5}, dtypes::int32).scatter(0, ints({0, 1, 2, 0}, {1, 4}), src)),
            (std::vector<int32_t>{1, 0, 0, 4, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0}));
  // index = [[0, 1, 2], [0, 1, 4]] along 1 == [[1, 2, 3, 0, 0], [6, 7, 0, 0, 8], [0, 0, 0, 0, 0]]
  EXPECT_EQ(
      vals(Tensor::zeros({3, 5}, dtypes::int32).scatter(1, ints({0, 1, 2, 0, 1, 4}, {2, 3}), src)),
      (std::vector<int32_t>{1, 2, 3, 0, 0, 6, 7, 0, 0, 8, 0, 0, 0, 0, 0}));
  // full((2, 4), 2.).scatter_(1, [[2], [3]], 1.23)
  EXPECT_EQ(floats(Tensor::full({2, 4}, 2.0f).scatter(1, ints({2, 3}, {2, 1}), 1.5)),
            (std::vector<float>{2, 2, 1.5, 2, 2, 2, 2, 1.5}));
  // scatter_add docs: ones(2, 5), index [[0, 1, 2, 0, 0]] along 0 into zeros(3, 5), twice the rows.
  EXPECT_EQ(floats(Tensor::zeros({3, 5}).scatter_add(
                0, ints({0, 1, 2, 0, 0, 0, 1, 2, 0, 0}, {2, 5}), Tensor::ones({2, 5}))),
            (std::vector<float>{2, 0, 0, 2, 2, 0, 2, 0, 0, 0, 0, 0, 2, 0, 0}));
  // scatter_reduce docs: src [1..6], index [0, 1, 0, 1, 2, 1], input [1, 2, 3, 4].
  const Tensor s(std::vector<float>{1, 2, 3, 4, 5, 6}, {6});
  const Tensor in(std::vector<float>{1, 2, 3, 4}, {4});
  const Tensor i = ints({0, 1, 0, 1, 2, 1}, {6});
  EXPECT_EQ(floats(in.scatter_reduce(0, i, s, ScatterReduce::Sum)),
            (std::vector<float>{5, 14, 8, 4}));
  EXPECT_EQ(floats(in.scatter_reduce(0, i, s, ScatterReduce::Amax, false)),
            (std::vector<float>{3, 6, 5, 4}));
  EXPECT_EQ(floats(in.scatter_reduce(0, i, s, ScatterReduce::Amax)),
            (std::vector<float>{3, 6, 5, 4}));
  EXPECT_EQ(floats(in.scatter_reduce(0, i, s, ScatterReduce::Amin)),
            (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(floats(in.scatter_reduce(0, i, s, ScatterReduce::Amin, false)),
            (std::vector<float>{1, 2, 5, 4}));
  EXPECT_EQ(floats(in.scatter_reduce(0, i, s, ScatterReduce::Prod)),
            (std::vector<float>{3, 96, 15, 4}));
  EXPECT_EQ(floats(in.scatter_reduce(0, i, s, ScatterReduce::Prod, false)),
            (std::vector<float>{3, 48, 5, 4}));
  EXPECT_EQ(floats(in.scatter_reduce(0, i, s, ScatterReduce::Mean)),
            (std::vector<float>{5.0f / 3, 3.5f, 4, 4}));
  EXPECT_EQ(floats(in.scatter_reduce(0, i, s, ScatterReduce::Mean, false)),
            (std::vector<float>{2, 4, 5, 4}));
  // Integer mean rounds down, as torch's: (1 + 2 + 2) / 3 and (-3 + -4) / 2.
  EXPECT_EQ(vals(ints({1, -3}, {2})
                     .scatter_reduce(0, ints({0, 0, 1}, {3}), ints({2, 2, -4}, {3}),
                                     ScatterReduce::Mean)),
            (std::vector<int32_t>{1, -4}));
}

TEST(Scatter, ShapesDevicesAndOutOfRange) {
  // Index smaller than the tensor on the other axes; an index out of the axis writes nothing.
  const Tensor x = iota({3, 4}) * 10;
  EXPECT_EQ(vals(x.scatter(1, ints({3, 9, -1, 0}, {2, 2}), ints({1, 2, 3, 4}, {2, 2}))),
            (std::vector<int32_t>{0, 10, 20, 1, 4, 50, 60, 70, 80, 90, 100, 110}));
  // 0-d and empty.
  EXPECT_EQ(vals(Tensor(5).scatter(0, scalar0(), Tensor(8))), (std::vector<int32_t>{8}));
  EXPECT_EQ(vals(x.scatter_add(0, ints({}, {0, 4}), ints({}, {0, 4}))), vals(x));
  EXPECT_TRUE(cpu_vk_agree([](const std::string& dev) {
    const Tensor y = iota({3, 5, 2}, dev).cast(dtypes::float32);
    const Tensor idx = ints({4, 0, 4, 1, 2, 2, 0, 3, 3, 1, 1, 0}, {3, 2, 2}, dev);
    const Tensor src = (iota({3, 2, 2}, dev).cast(dtypes::float32) - 5) * 0.25;
    return y.scatter(1, idx, src) + y.scatter_add(1, idx, src) +
           y.scatter_reduce(1, idx, src, ScatterReduce::Prod, false) +
           y.scatter_reduce(1, idx, src, ScatterReduce::Amin) +
           y.scatter_reduce(1, idx, src, ScatterReduce::Mean);
  }));
}

TEST(IndexingErrors, NameTheOpShapesAndDtypes) {
  const Tensor x = iota({3, 4}).cast(dtypes::float32);
  std::string e = error_of([&] { (void)x.gather(0, Tensor({0.5f})); });
  EXPECT_TRUE(has(
      e, "gather: the index must be an integer tensor (tensor (3, 4) float32, index (1,) float32)"))
      << e;
  e = error_of([&] { (void)x.gather(0, iota({3})); });
  EXPECT_TRUE(has(e,
                  "gather: the index needs as many dimensions as the tensor (tensor (3, 4) "
                  "float32, index (3,) int32)"))
      << e;
  e = error_of([&] { (void)x.gather(0, iota({1, 5})); });
  EXPECT_TRUE(has(e, "gather: index dimension 1 is larger than the tensor's")) << e;
  e = error_of([&] { (void)x.gather(2, iota({1, 1})); });
  EXPECT_TRUE(has(e, "gather") && has(e, "axis 2")) << e;
  e = error_of([&] { (void)Tensor({1.0f, 2.0f}).embedding(x); });
  EXPECT_TRUE(has(e,
                  "embedding: needs integer indices and a 2-D weight (V, D), got indices (2,) "
                  "float32 and weight (3, 4) float32"))
      << e;
  e = error_of([&] { (void)iota({2}).embedding(iota({2, 2, 2}).cast(dtypes::float32)); });
  EXPECT_TRUE(has(e, "embedding: needs integer indices and a 2-D weight")) << e;
  e = error_of([&] { (void)x.index_select(0, iota({2, 2})); });
  EXPECT_TRUE(has(
      e, "index_select: the index must be 0-d or 1-d (tensor (3, 4) float32, index (2, 2) int32)"))
      << e;
  e = error_of([&] { (void)x.take(Tensor({1.0f})); });
  EXPECT_TRUE(has(
      e, "take: the index must be an integer tensor (tensor (3, 4) float32, index (1,) float32)"))
      << e;
  e = error_of([&] { (void)x[{Tensor({1.0f})}]; });
  EXPECT_TRUE(has(e,
                  "index: an index tensor must hold integers or bools, got (1,) float32 (tensor "
                  "(3, 4) float32)"))
      << e;
  e = error_of([&] { (void)x[{iota({2}), iota({3})}]; });
  EXPECT_TRUE(has(e,
                  "index: index tensors of shapes (2,), (3,) do not broadcast together (tensor (3, "
                  "4) float32)"))
      << e;
  e = error_of([&] { (void)x[{0, 0, iota({1})}]; });
  EXPECT_TRUE(has(e, "index: too many indices: 3 for 2 dimensions")) << e;
  e = error_of([&] { (void)x.masked_fill(iota({4}), 1.0); });
  EXPECT_TRUE(has(e, "masked_fill: the mask must be bool, got (4,) int32 (tensor (3, 4) float32)"))
      << e;
  e = error_of([&] { (void)x.masked_select(Tensor(std::vector<bool>{true, false}, {2})); });
  EXPECT_TRUE(
      has(e, "masked_select: the mask (2,) bool does not broadcast with the tensor (3, 4) float32"))
      << e;
  e = error_of([&] { (void)x.scatter(0, iota({1, 4}), iota({1, 4})); });
  EXPECT_TRUE(has(e,
                  "scatter: src must have the tensor's dtype (tensor (3, 4) float32, index (1, 4) "
                  "int32, src (1, 4) int32)"))
      << e;
  e = error_of([&] { (void)x.scatter_add(1, iota({1, 5}), x); });
  EXPECT_TRUE(has(e, "scatter_add: index dimension 1 is larger than src's")) << e;
  e = error_of([&] { (void)x.scatter_reduce(0, iota({3}), x, ScatterReduce::Sum); });
  EXPECT_TRUE(has(e,
                  "scatter_reduce: tensor, index and src need the same number of dimensions "
                  "(tensor (3, 4) float32, index (3,) int32, src (3, 4) float32)"))
      << e;
  e = error_of([&] { (void)x.scatter(0, x, x); });
  EXPECT_TRUE(has(e, "scatter: the index must be an integer tensor")) << e;
  // The library stays usable.
  EXPECT_EQ(floats(x.gather(1, ints({1}, {1, 1}))), (std::vector<float>{1}));
}

// An indexed load inside a reduce, and under every opt BEAM tries (upcast, unroll, local,
// group), agrees with the CPU device; so without opts.
TEST(IndexedLoad, AgreesUnderKernelOpts) {
  const auto make = [](const std::string& dev) {
    // Quarters of small integers: every sum is exact, in any order.
    Tensor w =
        iota({16, 12}, dev).mod(Tensor::full({}, 13, dtypes::int32, dev)).cast(dtypes::float32) *
        0.25f;
    w.realize();
    const Tensor idx =
        (iota({8, 12}, dev) * 7 + 3).mod(Tensor::full({}, 19, dtypes::int32, dev)) - 1;
    return w.gather(0, idx).sum(0) + idx.embedding(w).sum({0, 1}) +
           w[{idx.shrink({{0, 4}, {0, 8}})}].max(0).sum(0);
  };
  {
    ScopedSetting beam("BEAM", 2);
    EXPECT_TRUE(cpu_vk_agree(make));
  }
  ScopedSetting noopt("NOOPT", 1);
  EXPECT_TRUE(cpu_vk_agree(make));
}

// Every dtype the devices hold, special values included, comes through gather, embedding, take,
// advanced indexing and scatter bit for bit; indices of every integer dtype select alike.
TEST(IndexedLoad, EveryDtypeAgreesWithTheCpuDevice) {
  for (DType d : vkg::test::vk_dtypes()) {
    SCOPED_TRACE(d.name());
    EXPECT_TRUE(cpu_vk_agree([d](const std::string& dev) {
      Tensor x = vkg::test::random_tensor(d, {5, 7}, dev, 11);
      const Tensor idx = ints({4, 0, 3, 3, 1, 2, 0, 4, 4, 1, 0, 2, 3, 1}, {2, 7}, dev);
      const Tensor g = x.gather(0, idx);
      const Tensor e = ints({6, 0, 2}, {3}, dev).embedding(x.transpose(0, 1));  // (3, 5)
      const Tensor t = x.take(ints({34, -35, 17}, {3}, dev)).reshape({3, 1}).expand({3, 5});
      const Tensor a = x[{ints({1, 4, 0}, {3}, dev), Slice{2, 7}}];
      const Tensor s = x.scatter(0, idx, x.flip({0}));
      return Tensor::cat(std::vector<Tensor>{g.reshape({14}), e.reshape({15}), t.reshape({15}),
                                             a.reshape({15}), s.reshape({35})});
    })) << d.name();
  }
  for (DType i : {dtypes::int8, dtypes::uint8, dtypes::int16, dtypes::uint16, dtypes::uint32,
                  dtypes::int64}) {
    const Tensor idx = ints({2, 0, 1}, {3}).cast(i);
    EXPECT_EQ(vals(iota({3, 2}).index_select(0, idx)), (std::vector<int32_t>{4, 5, 0, 1, 2, 3}))
        << i.name();
  }
}

// A jitted embedding step replays with new indices and a table updated in place.
TEST(IndexedLoad, ReplaysUnderJit) {
  Tensor table = iota({6, 2}).cast(dtypes::float32).contiguous();
  table.realize();
  Jit step([&](const std::vector<Tensor>& in) {
    const Tensor rows = in[0].embedding(table);
    table.assign(table + 1);
    return std::vector<Tensor>{rows * 2};
  });
  for (int call = 0; call < 4; ++call) {
    const Tensor idx = ints({call, 5 - call, 9}, {3});
    const std::vector<float> got = step({idx})[0].to_vector<float>();
    const float a = float(call), b = float(5 - call), k = float(call);
    EXPECT_EQ(got, (std::vector<float>{2 * (2 * a + k), 2 * (2 * a + 1 + k), 2 * (2 * b + k),
                                       2 * (2 * b + 1 + k), 0, 0}))
        << "call " << call;
  }
  EXPECT_TRUE(step.captured());
}

// A source with no elements: every index is out of range, so every element reads 0.
TEST(IndexedLoad, EmptySourceReadsZeros) {
  const Tensor w = Tensor::zeros({0, 3});
  EXPECT_EQ(floats(ints({0, 2}, {2}).embedding(w)), (std::vector<float>(6, 0.0f)));
  EXPECT_EQ(floats(w.gather(0, ints({}, {0, 3}))).size(), 0u);
}

// A basic index (slices of any step, integers, ellipsis, newaxis) writes through one elementwise
// kernel over the tensor plus a tiny one per sliced dimension; against a loop.
TEST(IndexedLoad, SetitemWithSlicesMatchesALoop) {
  Tensor x = iota({4, 6});
  x.realize();
  const Tensor v = ints({-1, -2, -3, -4, -5, -6}, {2, 3});
  x.setitem({Slice{3, 0, -2}, Slice{1, 6, 2}}, v);  // rows 3, 1; columns 1, 3, 5
  std::vector<int32_t> want(24);
  std::iota(want.begin(), want.end(), 0);
  const int rows[] = {3, 1}, cols[] = {1, 3, 5};
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c) want[size_t(rows[r] * 6 + cols[c])] = -(r * 3 + c + 1);
  EXPECT_EQ(vals(x), want);
  x.setitem({ellipsis, newaxis, -1}, ints({7, 8, 9, 10}, {4, 1}));
  for (int r = 0; r < 4; ++r) want[size_t(r * 6 + 5)] = 7 + r;
  EXPECT_EQ(vals(x), want);
  x.setitem({Slice{2, 2}}, 100);  // an empty selection changes nothing
  EXPECT_EQ(vals(x), want);
  Tensor s = Tensor::full({}, 1.5f);
  s.setitem({}, 2.5);
  EXPECT_EQ(floats(s), (std::vector<float>{2.5f}));
  EXPECT_TRUE(cpu_vk_agree([](const std::string& dev) {
    Tensor y = iota({3, 5, 4}, dev).cast(dtypes::float16);
    y.setitem({1, Slice{std::nullopt, std::nullopt, -1}},
              Tensor::full({4}, -0.0, dtypes::float16, dev));
    y.setitem({Slice{}, ints({4, 0}, {2}, dev), 2}, std::numeric_limits<double>::infinity());
    return y;
  }));
  // The write is one elementwise kernel over the tensor (the places are small host tables).
  Tensor big = Tensor::zeros({64, 64});
  big.realize();
  big.setitem({Slice{1, 60, 3}, 5}, 1.0);
  EXPECT_EQ(kernel_shape(big).kernels, 1u);
  EXPECT_EQ(floats(big.sum()), (std::vector<float>{20}));
  Tensor last_rows(std::vector<float>(2 * 64, 2.0f), {2, 64});
  last_rows.realize();
  big.setitem({Slice{62, std::nullopt}}, last_rows);
  const KernelShape k = kernel_shape(big);
  EXPECT_EQ(k.kernels, 1u);
  EXPECT_FALSE(k.reduces);
  EXPECT_EQ(floats(big.sum()), (std::vector<float>{20 + 256}));
}

// A write whose value reads the tensor it writes at other elements computes the value into a
// buffer of its own first: in place, an invocation could read what another already overwrote.
TEST(IndexedLoad, WritesThatReadTheirTargetAreNotRaces) {
  Tensor x = iota({5});
  x.realize();
  x.assign(x.take(ints({4, 3, 2, 1, 0}, {5})));
  EXPECT_EQ(kernel_shape(x).kernels, 2u);  // the value, then the copy into x
  EXPECT_EQ(vals(x), (std::vector<int32_t>{4, 3, 2, 1, 0}));
  x.setitem({Slice{1, std::nullopt}}, x[{Slice{std::nullopt, -1}}]);
  EXPECT_EQ(vals(x), (std::vector<int32_t>{4, 4, 3, 2, 1}));
  x.setitem({ints({0, 1}, {2})}, x[{ints({4, 3}, {2})}]);
  EXPECT_EQ(vals(x), (std::vector<int32_t>{1, 2, 3, 2, 1}));
  Tensor m = iota({2, 3});
  m.realize();
  m.setitem({Tensor(std::vector<bool>{false, true}, {2})}, -1);  // a row mask
  EXPECT_EQ(vals(m), (std::vector<int32_t>{0, 1, 2, -1, -1, -1}));
}

// Sources that are views of a buffer: read through their view where it is one view without a
// mask (flipped, permuted, shrunk, expanded), realized first otherwise (padded), as the CPU
// device does.
TEST(IndexedLoad, SourcesThatAreViews) {
  Tensor x = iota({4, 5});
  x.realize();
  const Tensor idx = ints({3, 0, 2, 1, 1, 0}, {2, 3});
  const Tensor flipped = x.flip({0, 1}).gather(1, idx);
  EXPECT_EQ(kernel_shape(flipped).kernels, 1u);
  EXPECT_EQ(vals(flipped), (std::vector<int32_t>{16, 19, 17, 13, 13, 14}));
  const Tensor permuted = x.permute({1, 0}).gather(0, idx);  // x.T[idx[i][j]][j] = x[j][idx]
  EXPECT_EQ(kernel_shape(permuted).kernels, 1u);
  EXPECT_EQ(vals(permuted), (std::vector<int32_t>{3, 5, 12, 1, 6, 10}));
  const Tensor shrunk = x.shrink({{1, 3}, {1, 5}}).gather(1, idx);
  EXPECT_EQ(vals(shrunk), (std::vector<int32_t>{9, 6, 8, 12, 12, 11}));
  const Tensor expanded = x.shrink({{2, 3}, {0, 5}}).expand({2, 5}).gather(1, idx);
  EXPECT_EQ(kernel_shape(expanded).kernels, 1u);
  EXPECT_EQ(vals(expanded), (std::vector<int32_t>{13, 10, 12, 11, 11, 10}));
  const Tensor padded = x.pad({{0, 0}, {2, 0}}).gather(1, idx);  // columns shift right by 2
  EXPECT_EQ(kernel_shape(padded).kernels, 2u);
  EXPECT_EQ(vals(padded), (std::vector<int32_t>{1, 0, 0, 0, 0, 0}));
  EXPECT_TRUE(cpu_vk_agree([](const std::string& dev) {
    Tensor y = iota({6, 7}, dev);
    y.realize();
    const Tensor i = ints({6, 0, 5, 2, 2, 9, -3, 4}, {2, 4}, dev);
    return y.flip({1}).gather(1, i) + y.permute({1, 0}).shrink({{1, 7}, {0, 4}}).gather(0, i) +
           y[{Slice{std::nullopt, std::nullopt, 2}}].gather(1, i) +
           y.pad({{1, 1}, {0, 0}}).gather(1, i) * 3;
  }));
}

// 0-d tensors and indices, and empty ones, through every read and write.
TEST(IndexedLoad, ZeroDimensionalAndEmpty) {
  const Tensor s = Tensor::full({}, 7, dtypes::int32);
  EXPECT_EQ(vals(s.take(ints({0, -1, 0}, {3}))), (std::vector<int32_t>{7, 7, 7}));
  EXPECT_EQ(s.take(scalar0()).shape(), Shape{});
  EXPECT_EQ(vals(s.masked_fill(Tensor(std::vector<bool>{true}, {1}).reshape({}), 3)),
            (std::vector<int32_t>{3}));
  EXPECT_EQ(
      vals(s.scatter_reduce(0, scalar0(), Tensor::full({}, 5, dtypes::int32), ScatterReduce::Amax)),
      (std::vector<int32_t>{7}));
  const Tensor x = iota({3, 4});
  const Tensor row = x[{Tensor::full({}, 2, dtypes::int32)}];  // a 0-d index removes the axis
  EXPECT_EQ(row.shape(), (Shape{4}));
  EXPECT_EQ(vals(row), (std::vector<int32_t>{8, 9, 10, 11}));
  EXPECT_EQ((x[{ints({}, {0})}].shape()), (Shape{0, 4}));
  EXPECT_EQ((x[{Slice{}, ints({}, {0, 2})}].shape()), (Shape{3, 0, 2}));
  EXPECT_EQ(x.take(ints({}, {2, 0})).shape(), (Shape{2, 0}));
  EXPECT_EQ(vals(x.scatter(1, ints({}, {3, 0}), ints({}, {3, 0}))), vals(x));
  EXPECT_EQ(
      vals(x.scatter_reduce(0, ints({}, {0, 4}), ints({}, {0, 4}), ScatterReduce::Mean, false)),
      vals(x));
  Tensor y = iota({2, 2});
  y.setitem({ints({}, {0})}, 9);  // writes nothing
  EXPECT_EQ(vals(y), (std::vector<int32_t>{0, 1, 2, 3}));
}

// One 1-d index tensor writes as slices do: a small table for its dimension (a scatter of
// positions, the last repeat wins), then one elementwise kernel over the tensor.
TEST(IndexedLoad, SetitemWithOneIndexTensorPerDimension) {
  Tensor x = iota({5, 4});
  x.realize();
  Tensor v = iota({5, 4}) + 100;
  v.realize();
  x.setitem({Slice{}, ints({3, -1, 0, 3}, {4})}, v);  // column 3 is written at j = 0, 1 and 3
  const KernelShape k = kernel_shape(x);
  EXPECT_EQ(k.kernels, 3u);  // the table's -1s, the scatter of positions into it, the write
  std::vector<int32_t> want(20);
  for (int r = 0; r < 5; ++r) {
    want[size_t(r * 4 + 0)] = 100 + r * 4 + 2;
    want[size_t(r * 4 + 1)] = r * 4 + 1;
    want[size_t(r * 4 + 2)] = r * 4 + 2;
    want[size_t(r * 4 + 3)] = 100 + r * 4 + 3;
  }
  EXPECT_EQ(vals(x), want);
  // Against the flat scatter that several index tensors take, on both devices.
  EXPECT_TRUE(cpu_vk_agree([](const std::string& dev) {
    Tensor y = iota({4, 6, 3}, dev).cast(dtypes::float32);
    y.setitem({newaxis, ellipsis, ints({2, 0, -1, 2}, {4}, dev)}, iota({4, 6, 4}, dev) * -1);
    y.setitem({ints({1, 3}, {2}, dev), Slice{}, ints({0, 2}, {2}, dev)}, 0.5);
    return y;
  }));
}

// Wide index values are out of range as they are, not after a wrap to 32 bits: 2^32 + 1 is no
// row 1, and uint32's largest value is no -1.
TEST(IndexedLoad, WideIndicesDoNotWrapIntoRange) {
  const Tensor x = iota({4, 2});
  const Tensor wide =
      Tensor(std::vector<int64_t>{(int64_t(1) << 32) + 1, 2, -(int64_t(1) << 32)}, {3});
  EXPECT_EQ(vals(x.index_select(0, wide)), (std::vector<int32_t>{0, 0, 4, 5, 0, 0}));
  EXPECT_EQ(vals(x.take(wide)), (std::vector<int32_t>{0, 2, 0}));
  EXPECT_EQ(vals(x[{wide}].sum(1)), (std::vector<int32_t>{0, 9, 0}));
  const Tensor big = Tensor(std::vector<uint32_t>{4294967295u, 1}, {2});
  EXPECT_EQ(vals(x.take(big)), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(vals(Tensor::zeros({4}, dtypes::int32)
                     .scatter_add(0, wide.shrink({{0, 2}}), ints({5, 6}, {2}))),
            (std::vector<int32_t>{0, 0, 6, 0}));
  Tensor y = iota({4});
  y.setitem({wide}, -1);
  EXPECT_EQ(vals(y), (std::vector<int32_t>{0, 1, -1, 3}));
}
