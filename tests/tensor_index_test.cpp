// Movement and indexing composed from the primitive movement ops: squeeze and friends, repeat,
// cat/stack/split/chunk, reflect padding, Python slicing, gather, one_hot, and numpy matmul
// shapes. Values are checked against hand-written loops; a few run on both devices.
#include <gtest/gtest.h>

#include <numeric>
#include <optional>

#include "support/device_compare.hpp"
#include "support/error_of.hpp"

#include <vkgrad/core/schedule.hpp>
#include <vkgrad/core/tensor.hpp>

using namespace vkg;
using vkg::test::cpu_vk_agree;
using vkg::test::error_of;

namespace {

size_t kernels(const Tensor& t) { return create_schedule({t.node()}).items.size(); }

// 0, 1, ..., n-1 as int32 in `shape`.
Tensor iota(Shape shape, const std::string& device = "") {
  std::vector<int32_t> v(size_t(prod(shape)));
  std::iota(v.begin(), v.end(), 0);
  return Tensor(v, std::move(shape), device);
}

std::vector<int32_t> ints(const Tensor& t) { return t.to_vector<int32_t>(); }

// Python's list(range(n))[start:stop:step], written from the language reference.
std::vector<int32_t> python_slice(int64_t n, std::optional<int64_t> start,
                                  std::optional<int64_t> stop, int64_t step) {
  auto fix = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) x += n;
    if (step > 0) return std::min(std::max<int64_t>(x, 0), n);
    return std::min(std::max<int64_t>(x, -1), n - 1);
  };
  const int64_t b = fix(start, step > 0 ? 0 : n - 1), e = fix(stop, step > 0 ? n : -1);
  std::vector<int32_t> out;
  for (int64_t i = b; step > 0 ? i < e : i > e; i += step) out.push_back(int32_t(i));
  return out;
}

}  // namespace

TEST(TensorReshapes, SqueezeUnsqueezeFlattenUnflatten) {
  const Tensor t = iota({2, 1, 3, 1});
  EXPECT_EQ(t.squeeze().shape(), (Shape{2, 3}));
  EXPECT_EQ(t.squeeze(1).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(t.squeeze(0).shape(), (Shape{2, 1, 3, 1}));  // not 1: unchanged, as torch
  EXPECT_EQ(t.squeeze(-1).shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(t.unsqueeze(0).shape(), (Shape{1, 2, 1, 3, 1}));
  EXPECT_EQ(t.unsqueeze(-1).shape(), (Shape{2, 1, 3, 1, 1}));
  EXPECT_EQ(t.unsqueeze(4).shape(), (Shape{2, 1, 3, 1, 1}));
  EXPECT_EQ(t.flatten().shape(), (Shape{6}));
  EXPECT_EQ(t.flatten(1).shape(), (Shape{2, 3}));
  EXPECT_EQ(t.flatten(0, 2).shape(), (Shape{6, 1}));
  EXPECT_EQ(Tensor(3).flatten().shape(), (Shape{1}));
  EXPECT_EQ(iota({2, 12}).unflatten(1, {3, -1}).shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(iota({2, 12}).unflatten(-1, {2, 2, 3}).shape(), (Shape{2, 2, 2, 3}));

  EXPECT_NE(error_of([&] { (void)t.unsqueeze(5); }).find("unsqueeze: axis 5 is out of range"),
            std::string::npos);
  EXPECT_NE(
      error_of([&] { (void)t.flatten(2, 1); }).find("flatten: start axis 2 comes after end axis 1"),
      std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)iota({2, 12}).unflatten(1, {5, -1});
            }).find("unflatten: sizes (5, -1)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)iota({2, 12}).unflatten(1, {3, 3});
            }).find("(2, 12)"),
            std::string::npos);
}

TEST(TensorReshapes, RepeatTilesWholeCopies) {
  const Tensor t = iota({2, 3});
  const Tensor r = t.repeat({2, 2});
  EXPECT_EQ(r.shape(), (Shape{4, 6}));
  std::vector<int32_t> want;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) want.push_back((i % 2) * 3 + j % 3);
  EXPECT_EQ(ints(r), want);
  const Tensor lead = Tensor({7, 8}).repeat({3, 1, 2});  // new leading dimensions, as torch
  EXPECT_EQ(lead.shape(), (Shape{3, 1, 4}));
  EXPECT_EQ(ints(lead), (std::vector<int32_t>{7, 8, 7, 8, 7, 8, 7, 8, 7, 8, 7, 8}));
  EXPECT_EQ(t.repeat({0, 1}).shape(), (Shape{0, 3}));
  EXPECT_NE(error_of([&] {
              (void)t.repeat({2});
            }).find("repeat: needs at least one repeat per dimension"),
            std::string::npos);
}

TEST(TensorJoin, CatStackSplitChunk) {
  const Tensor a = iota({2, 2}), b = iota({2, 3}) + 10;
  const Tensor ab = Tensor::cat(std::vector<Tensor>{a, b}, 1);
  EXPECT_EQ(kernels(ab), 1u);
  EXPECT_EQ(ints(ab), (std::vector<int32_t>{0, 1, 10, 11, 12, 2, 3, 13, 14, 15}));
  const Tensor rows = Tensor::cat(std::vector<Tensor>{a, a * 2, a}, -2);
  EXPECT_EQ(ints(rows), (std::vector<int32_t>{0, 1, 2, 3, 0, 2, 4, 6, 0, 1, 2, 3}));
  // Mixed dtypes promote; bools concatenate as bools.
  const Tensor mixed = Tensor::cat(std::vector<Tensor>{Tensor({1, 2}), Tensor({0.5f})});
  EXPECT_EQ(mixed.dtype(), dtypes::float32);
  EXPECT_EQ(mixed.to_vector<float>(), (std::vector<float>{1, 2, 0.5f}));
  const Tensor flags = Tensor::cat(std::vector<Tensor>{Tensor({true, false}), Tensor({true})});
  EXPECT_EQ(flags.dtype(), dtypes::bool_);
  EXPECT_EQ(flags.to_vector<bool>(), (std::vector<bool>{true, false, true}));

  const Tensor s =
      Tensor::stack(std::vector<Tensor>{Tensor({1, 2}), Tensor({3, 4}), Tensor({5, 6})}, 1);
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  EXPECT_EQ(ints(s), (std::vector<int32_t>{1, 3, 5, 2, 4, 6}));
  EXPECT_EQ(Tensor::stack(std::vector<Tensor>{a, a}, -1).shape(), (Shape{2, 2, 2}));

  const Tensor x = iota({7, 2});
  const auto pieces = x.split(3);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[2].shape(), (Shape{1, 2}));
  // The first piece is a prefix of the buffer: it must not read back as the whole buffer.
  EXPECT_EQ(ints(pieces[0]), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(ints(pieces[1]), (std::vector<int32_t>{6, 7, 8, 9, 10, 11}));
  const auto sized = x.split(std::vector<int64_t>{1, 1}, 1);
  EXPECT_EQ(ints(sized[1]), (std::vector<int32_t>{1, 3, 5, 7, 9, 11, 13}));
  const auto chunks = x.chunk(3);  // pieces of ceil(7/3) = 3
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(chunks[2].shape(), (Shape{1, 2}));
  EXPECT_EQ(iota({6}).chunk(4).size(), 3u);  // torch: pieces of 2

  const std::string ranks = error_of([&] {
    (void)Tensor::cat(std::vector<Tensor>{iota({2, 2}), iota({2})});
  });
  EXPECT_NE(ranks.find("cat: shapes must match except along axis 0"), std::string::npos) << ranks;
  EXPECT_NE(ranks.find("(2, 2) int32, (2,) int32"), std::string::npos) << ranks;
  EXPECT_NE(
      error_of([&] { (void)Tensor::cat(std::vector<Tensor>{}); }).find("cat: needs at least one"),
      std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)Tensor::stack(std::vector<Tensor>{iota({2}), iota({3})});
            }).find("stack: every tensor needs the same shape, got (2,) and (3,)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)x.split(std::vector<int64_t>{3, 3});
            }).find("add up to 6, not dimension 0 of size 7"),
            std::string::npos);
  EXPECT_NE(error_of([&] { (void)x.split(0); }).find("split: piece size must be positive"),
            std::string::npos);
}

TEST(TensorPad, ReflectMirrorsWithoutTheEdge) {
  const Tensor t = Tensor({1, 2, 3, 4});
  EXPECT_EQ(ints(t.pad({{2, 3}}, PadMode::Reflect)),
            (std::vector<int32_t>{3, 2, 1, 2, 3, 4, 3, 2, 1}));
  EXPECT_EQ(ints(t.pad({{1, 0}}, PadMode::Constant, 9)), (std::vector<int32_t>{9, 1, 2, 3, 4}));
  // 2-D: torch.nn.functional.pad(arange(6).reshape(2, 3), (2, 1, 1, 1), mode='reflect').
  const Tensor m = iota({2, 3}).pad({{1, 1}, {2, 1}}, PadMode::Reflect);
  EXPECT_EQ(m.shape(), (Shape{4, 6}));
  EXPECT_EQ(kernels(m), 1u);
  EXPECT_EQ(ints(m), (std::vector<int32_t>{5, 4, 3, 4, 5, 4, 2, 1, 0, 1, 2, 1,
                                           5, 4, 3, 4, 5, 4, 2, 1, 0, 1, 2, 1}));
  const std::string e = error_of([&] { (void)t.pad({{4, 0}}, PadMode::Reflect); });
  EXPECT_NE(e.find("pad: reflect padding (4, 0) must be smaller than dimension 0 of size 4"),
            std::string::npos)
      << e;
}

// Every slice of a 7-element range against Python's rules, on the CPU interpreter (many tiny
// kernels); the VK device runs a few below.
TEST(TensorSlice, OneDimensionMatchesPython) {
  const Tensor t = iota({7}, "CPU");
  const std::optional<int64_t> bounds[] = {std::nullopt, -9, -7, -3, -1, 0, 2, 6, 7, 9};
  for (auto start : bounds)
    for (auto stop : bounds)
      for (int64_t step : {1, 2, 3, 8, -1, -2, -3, -8}) {
        const Tensor s = t[{Slice{start, stop, step}}];
        const std::vector<int32_t> want = python_slice(7, start, stop, step);
        ASSERT_EQ(s.shape(), (Shape{int64_t(want.size())}))
            << "start " << start.value_or(99) << " stop " << stop.value_or(99) << " step " << step;
        if (!want.empty()) {
          ASSERT_EQ(ints(s), want) << "start " << start.value_or(99) << " stop "
                                   << stop.value_or(99) << " step " << step;
        }
      }
}

TEST(TensorSlice, IntsEllipsisNewAxisAndSteps) {
  const Tensor t = iota({3, 4, 5});
  const Tensor a = t[{1, Slice{std::nullopt, std::nullopt, -2}, ellipsis, newaxis}];
  EXPECT_EQ(a.shape(), (Shape{2, 5, 1}));
  std::vector<int32_t> want;
  for (int j : {3, 1})
    for (int k = 0; k < 5; ++k) want.push_back(20 + j * 5 + k);
  EXPECT_EQ(ints(a), want);

  const Tensor b = t[{ellipsis, Slice{1, -1, 2}}];  // last axis: 1, 3
  EXPECT_EQ(b.shape(), (Shape{3, 4, 2}));
  EXPECT_EQ(ints((b[{-1, -1}])), (std::vector<int32_t>{56, 58}));
  EXPECT_EQ(ints((t[2][{newaxis, 3, Slice{4, 0, -3}}])), (std::vector<int32_t>{59, 56}));
  EXPECT_EQ((t[{newaxis, ellipsis, newaxis}].shape()), (Shape{1, 3, 4, 5, 1}));
  EXPECT_EQ((t[{0, 0, 0}].shape()), Shape{});
  EXPECT_EQ((t[{0, 0, 0}].item<int32_t>()), 0);
  EXPECT_EQ((t[{Slice{5, 9}}].shape()), (Shape{0, 4, 5}));  // clamps, as Python

  EXPECT_TRUE(cpu_vk_agree([](const std::string& dev) {
    return iota({5, 6}, dev)[{Slice{4, std::nullopt, -2}, Slice{1, 6, 2}}] * 3;
  }));

  EXPECT_NE(error_of([&] {
              (void)t[3];
            }).find("index: index 3 is out of bounds for dimension 0 of size 3"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)t[{0, -5}];
            }).find("index -5 is out of bounds for dimension 1 of size 4"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)t[{Slice{0, 2, 0}}];
            }).find("index: slice step cannot be zero"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)t[{0, 0, 0, 0}];
            }).find("index: too many indices: 4 for 3 dimensions"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)t[{ellipsis, 0, ellipsis}];
            }).find("at most one ellipsis"),
            std::string::npos);
}

TEST(TensorGather, PicksAlongAnAxisInOneKernel) {
  // torch.gather(torch.tensor([[1, 2], [3, 4]]), 1, torch.tensor([[0, 0], [1, 0]])) == [[1, 1], [4,
  // 3]]
  const Tensor t = Tensor({1, 2, 3, 4}).reshape({2, 2});
  const Tensor g = t.gather(1, Tensor({0, 0, 1, 0}).reshape({2, 2}));
  EXPECT_EQ(kernels(g), 1u);
  EXPECT_EQ(ints(g), (std::vector<int32_t>{1, 1, 4, 3}));
  // Axis 0 with a smaller index: out[i][j] = t[index[i][j]][j].
  const Tensor x = iota({3, 4}).cast(dtypes::float32);
  const Tensor idx = Tensor({2, 0, 1}).reshape({1, 3});
  EXPECT_EQ(x.gather(0, idx).to_vector<float>(), (std::vector<float>{8, 1, 6}));
  // Out of range matches no row: 0, as documented (not checked on the host).
  EXPECT_EQ(x.gather(0, Tensor({5, -1, 1}).reshape({1, 3})).to_vector<float>(),
            (std::vector<float>{0, 0, 6}));
  EXPECT_EQ(x.gather(-1, Tensor({3, 3, 0, 1, 2, 2}).reshape({3, 2})).to_vector<float>(),
            (std::vector<float>{3, 3, 4, 5, 10, 10}));
  EXPECT_TRUE(cpu_vk_agree([](const std::string& dev) {
    return iota({4, 3, 5}, dev)
        .gather(1, Tensor(std::vector<int32_t>{2, 1, 0, 0, 1, 2, 1, 1}, {2, 2, 2}, dev));
  }));

  const std::string e = error_of([&] { (void)x.gather(0, Tensor({0.5f})); });
  EXPECT_NE(e.find("gather: the index must be an integer tensor (tensor (3, 4) float32, index (1,) "
                   "float32)"),
            std::string::npos)
      << e;
  EXPECT_NE(error_of([&] {
              (void)x.gather(0, iota({1, 5}));
            }).find("index dimension 1 is larger"),
            std::string::npos);
  EXPECT_NE(error_of([&] { (void)x.gather(0, iota({3})); }).find("as many dimensions"),
            std::string::npos);
}

TEST(TensorGather, OneHot) {
  const Tensor h = Tensor({0, 2, 1, 2}).one_hot(3);
  EXPECT_EQ(h.shape(), (Shape{4, 3}));
  EXPECT_EQ(h.dtype(), dtypes::float32);
  EXPECT_EQ(h.to_vector<float>(), (std::vector<float>{1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(Tensor({1, 0}).reshape({2, 1}).one_hot(2, dtypes::int32).shape(), (Shape{2, 1, 2}));
  EXPECT_NE(
      error_of([&] { (void)Tensor({1.0f}).one_hot(3); }).find("one_hot: needs an integer tensor"),
      std::string::npos);
  EXPECT_NE(error_of([&] { (void)Tensor({1}).one_hot(0); }).find("num_classes must be positive"),
            std::string::npos);
}

TEST(TensorMatmul, NumpyShapesAndBroadcasting) {
  // (2, 1, 3, 4) @ (5, 4, 6) -> (2, 5, 3, 6), against loops.
  const Tensor a = iota({2, 1, 3, 4}).mod(Tensor(5)) - 2, b = iota({5, 4, 6}).mod(Tensor(7)) - 3;
  const Tensor c = a.matmul(b);
  EXPECT_EQ(c.shape(), (Shape{2, 5, 3, 6}));
  EXPECT_EQ(kernels(c), 1u);
  const std::vector<int32_t> av = ints(a), bv = ints(b), cv = ints(c);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 5; ++j)
      for (int m = 0; m < 3; ++m)
        for (int n = 0; n < 6; ++n) {
          int32_t s = 0;
          for (int k = 0; k < 4; ++k)
            s += av[size_t((i * 3 + m) * 4 + k)] * bv[size_t((j * 4 + k) * 6 + n)];
          ASSERT_EQ(cv[size_t(((i * 5 + j) * 3 + m) * 6 + n)], s)
              << i << " " << j << " " << m << " " << n;
        }
  const Tensor v = Tensor({1, 2, 3}), m = iota({3, 2});
  EXPECT_EQ(v.dot(v).shape(), Shape{});
  EXPECT_EQ(v.dot(v).item<int32_t>(), 14);
  EXPECT_EQ(ints(v.matmul(m)), (std::vector<int32_t>{16, 22}));  // (3,) @ (3, 2) -> (2,)
  EXPECT_EQ(ints(m.transpose().matmul(v)),
            (std::vector<int32_t>{16, 22}));  // (2, 3) @ (3,) -> (2,)
  EXPECT_EQ(v.matmul(iota({4, 3, 2})).shape(), (Shape{4, 2}));
  EXPECT_EQ(iota({4, 2, 3}).matmul(v).shape(), (Shape{4, 2}));
  EXPECT_EQ(Tensor({1, 2}).matmul(Tensor({0.5f, 0.25f})).dtype(), dtypes::float32);

  const std::string inner = error_of([&] { (void)iota({2, 3}).matmul(iota({2, 3})); });
  EXPECT_NE(inner.find("dot: inner dimensions differ: (2, 3) int32 and (2, 3) int32 (3 != 2)"),
            std::string::npos)
      << inner;
  const std::string batch = error_of([&] { (void)iota({2, 3, 4}).matmul(iota({3, 4, 5})); });
  EXPECT_NE(batch.find("dot: batch dimensions (2,) and (3,) do not broadcast"), std::string::npos)
      << batch;
  EXPECT_NE(error_of([&] {
              (void)Tensor(2).dot(v);
            }).find("dot: both tensors need at least one dimension"),
            std::string::npos);
}
