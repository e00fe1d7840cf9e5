// The real scatter (core/indexed_load.hpp's SCATTER): a copy of the target and one kernel of
// combining stores, O(1) per value, behind scatter, scatter_add, scatter_reduce and the backward
// of gather, embedding, take, index_select and advanced indexing. Kernel counts and ASTs (no
// one-hot reduce), many values landing on one element against host loops on both devices, every
// dtype alike on both devices, IEEE maximum/minimum at nan and -0.0, ties and zeros in gradients,
// 0-size and 0-d shapes. Torch's documented examples are in tensor_gather_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "support/device_compare.hpp"

#include <vkgrad/codegen/kernel.hpp>
#include <vkgrad/core/context.hpp>
#include <vkgrad/core/schedule.hpp>
#include <vkgrad/core/tensor.hpp>

using namespace vkg;
using vkg::test::cpu_vk_agree;

namespace {

// The kernels of t's schedule: how many, how many combine through scatter stores, and whether
// any reduces (a one-hot form would).
struct Kernels {
  size_t count = 0, scatters = 0;
  bool reduces = false;
};
Kernels kernels_of(const Tensor& t) {
  Kernels k;
  const Schedule s = create_schedule({t.node()});
  k.count = s.items.size();
  for (const ScheduleItem& item : s.items) {
    bool scatter = false;
    for (const UOp* u : toposort(item.ast.get())) {
      k.reduces = k.reduces || u->op == Ops::REDUCE_AXIS;
      scatter = scatter || is_scatter_store(u);
    }
    k.scatters += scatter;
  }
  return k;
}

Tensor realized(Tensor t) {
  t.realize();
  return t;
}

std::vector<int32_t> random_indices(size_t n, int32_t below, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(n);
  for (int32_t& i : v) i = int32_t(std::uniform_int_distribution<int32_t>(0, below - 1)(rng));
  return v;
}

}  // namespace

// Each op is the copy of its target (fused with whatever computes it) and one scatter kernel;
// nothing reduces over the axis.
TEST(ScatterKernel, IsACopyAndOneKernelOfCombiningStores) {
  const Tensor x = realized(Tensor::randn({50, 8}));
  const Tensor idx = realized(Tensor(random_indices(64 * 8, 50, 1), {64, 8}));
  const Tensor src = realized(Tensor::randn({64, 8}));
  for (ScatterReduce r :
       {ScatterReduce::Sum, ScatterReduce::Prod, ScatterReduce::Amax, ScatterReduce::Amin}) {
    const Kernels k = kernels_of(x.scatter_reduce(0, idx, src, r));
    EXPECT_EQ(k.count, 2u);
    EXPECT_EQ(k.scatters, 1u);
    EXPECT_FALSE(k.reduces);
  }
  // The copy is fused with what computes the target, the values with the scatter.
  const Kernels add = kernels_of((x * 2).scatter_add(0, idx, src.exp()));
  EXPECT_EQ(add.count, 2u);
  EXPECT_FALSE(add.reduces);
  // Mean and include_self = false also count the values landing on each element: a second scatter.
  const Kernels mean = kernels_of(x.scatter_reduce(0, idx, src, ScatterReduce::Mean, false));
  EXPECT_EQ(mean.scatters, 2u);
  EXPECT_FALSE(mean.reduces);
  // scatter: an integer max of positions, then one indexed load.
  const Kernels plain = kernels_of(x.scatter(0, idx, src));
  EXPECT_EQ(plain.scatters, 1u);
  EXPECT_FALSE(plain.reduces);
}

// The backward of every indexed read is a scatter-add of the gradient into zeros: two kernels
// (the zeros, the scatter), O(1) per gradient element, no one-hot intermediate.
TEST(ScatterKernel, IndexedReadsBackwardIsAScatterAdd) {
  Tensor w = realized(Tensor::randn({1000, 16})).requires_grad_();
  const Tensor idx = realized(Tensor(random_indices(300, 1000, 2), {300}));
  (idx.embedding(w) * 3).sum().backward();
  const Kernels e = kernels_of(*w.grad());
  EXPECT_EQ(e.count, 2u);
  EXPECT_EQ(e.scatters, 1u);
  EXPECT_FALSE(e.reduces);
  // embedding's gradient: 3 for every time a row was looked up.
  std::vector<float> want(1000 * 16, 0.0f);
  for (int32_t i : random_indices(300, 1000, 2))
    for (int j = 0; j < 16; ++j) want[size_t(i) * 16 + size_t(j)] += 3;
  EXPECT_EQ(w.grad()->to_vector<float>(), want);

  Tensor x = realized(Tensor::randn({40, 30})).requires_grad_();
  const Tensor gi = realized(Tensor(random_indices(40 * 30, 30, 3), {40, 30}));
  (x.gather(1, gi).sum() + x.index_select(0, Tensor(std::vector<int32_t>{3, 3, 7}, {3})).sum())
      .backward();
  EXPECT_FALSE(kernels_of(*x.grad()).reduces);
  std::vector<float> hand(40 * 30, 0.0f);
  const std::vector<int32_t> at = random_indices(40 * 30, 30, 3);
  for (size_t i = 0; i < at.size(); ++i) hand[i / 30 * 30 + size_t(at[i])] += 1;
  for (int r : {3, 3, 7})
    for (size_t j = 0; j < 30; ++j) hand[size_t(r) * 30 + j] += 1;
  EXPECT_EQ(x.grad()->to_vector<float>(), hand);
}

// Many values land on each element: against host loops, on both devices. Float sums round in
// arrival order on Vulkan (documented), so they are compared with a tolerance; integer sums and
// products (wrapping), max and min exactly.
TEST(ScatterKernel, ManyCollisionsMatchHostLoops) {
  constexpr int64_t rows = 37, cols = 8, n = 4096;
  const std::vector<int32_t> idx = random_indices(size_t(n * cols), int32_t(rows), 4);
  std::vector<float> vf(size_t(n * cols));
  std::vector<int32_t> vi(size_t(n * cols));
  std::mt19937 rng(5);
  for (size_t i = 0; i < vf.size(); ++i) {
    vf[i] = std::uniform_real_distribution<float>(-1, 1)(rng);
    vi[i] =
        int32_t(std::uniform_int_distribution<int>(-3, 3)(rng)) | 1;  // odd: products stay nonzero
  }
  std::vector<double> sum(rows * cols, 0.5);
  std::vector<float> mx(rows * cols, 0.5f), mn(rows * cols, 0.5f);
  std::vector<int32_t> isum(rows * cols, 2), iprod(rows * cols, 2);
  for (size_t i = 0; i < idx.size(); ++i) {
    const size_t at = size_t(idx[i]) * cols + i % cols;
    sum[at] += vf[i];
    mx[at] = std::max(mx[at], vf[i]);
    mn[at] = std::min(mn[at], vf[i]);
    isum[at] += vi[i];
    iprod[at] = int32_t(uint32_t(iprod[at]) * uint32_t(vi[i]));  // wraps, as the device's
  }
  for (const std::string dev : {"CPU", "VK"}) {
    SCOPED_TRACE(dev);
    const Tensor index(idx, {n, cols}, dev);
    const Tensor f(vf, {n, cols}, dev), i(vi, {n, cols}, dev);
    const Tensor half = Tensor::full({rows, cols}, 0.5f, dtypes::float32, dev);
    const Tensor two = Tensor::full({rows, cols}, 2, dtypes::int32, dev);
    const std::vector<float> got = half.scatter_add(0, index, f).to_vector<float>();
    for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], sum[k], 1e-4) << k;
    EXPECT_EQ(half.scatter_reduce(0, index, f, ScatterReduce::Amax).to_vector<float>(), mx);
    EXPECT_EQ(half.scatter_reduce(0, index, f, ScatterReduce::Amin).to_vector<float>(), mn);
    EXPECT_EQ(two.scatter_add(0, index, i).to_vector<int32_t>(), isum);
    EXPECT_EQ(two.scatter_reduce(0, index, i, ScatterReduce::Prod).to_vector<int32_t>(), iprod);
  }
}

// Max and min are IEEE 754-2019 maximum and minimum, which no arrival order changes: nan wins,
// +0.0 is above -0.0, on both devices, whichever zero comes first.
TEST(ScatterKernel, MaxAndMinAreIeeeAtNanAndSignedZero) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = INFINITY;
  const std::vector<float> values{-0.0f, 0.0f, -0.0f, 0.0f, -0.0f, 1.0f, nan, 2.0f, -inf, 3.0f};
  const std::vector<int32_t> to{0, 0, 0, 1, 1, 2, 2, 2, 3, 3};
  for (const std::string dev : {"CPU", "VK"}) {
    SCOPED_TRACE(dev);
    const Tensor v(values, {10}, dev), i(to, {10}, dev);
    const Tensor dest = Tensor::full({5}, 7.0f, dtypes::float32, dev);
    const auto mx = dest.scatter_reduce(0, i, v, ScatterReduce::Amax, false).to_vector<float>();
    const auto mn = dest.scatter_reduce(0, i, v, ScatterReduce::Amin, false).to_vector<float>();
    EXPECT_EQ(mx[0], 0.0f);
    EXPECT_FALSE(std::signbit(mx[0]));
    EXPECT_FALSE(std::signbit(mx[1]));
    EXPECT_TRUE(std::signbit(mn[0]) && mn[0] == 0.0f);
    EXPECT_TRUE(std::signbit(mn[1]) && mn[1] == 0.0f);
    EXPECT_TRUE(std::isnan(mx[2]));
    EXPECT_TRUE(std::isnan(mn[2]));
    EXPECT_EQ(mx[3], 3.0f);
    EXPECT_EQ(mn[3], -inf);
    EXPECT_EQ(mx[4], 7.0f);  // nothing lands: the tensor's own value
    // A nan already there stays (include_self).
    const Tensor nans = Tensor::full({5}, nan, dtypes::float32, dev);
    for (float x : nans.scatter_reduce(0, i, v, ScatterReduce::Amax).to_vector<float>())
      EXPECT_TRUE(std::isnan(x));
    // Sum and prod of inf and nan as IEEE arithmetic: inf + -inf is nan, 0 * inf is nan.
    const Tensor specials(std::vector<float>{inf, -inf, 0.0f, inf, 1.0f}, {5}, dev);
    const Tensor into(std::vector<int32_t>{0, 0, 1, 1, 2}, {5}, dev);
    const auto s = Tensor::zeros({3}, dtypes::float32, dev).scatter_add(0, into, specials);
    EXPECT_TRUE(std::isnan(s.to_vector<float>()[0]));
    const auto p = Tensor::ones({3}, dtypes::float32, dev)
                       .scatter_reduce(0, into, specials, ScatterReduce::Prod)
                       .to_vector<float>();
    EXPECT_TRUE(std::isnan(p[0]) == false && p[0] == -inf);
    EXPECT_TRUE(std::isnan(p[1]));
  }
}

// Every dtype the devices hold combines alike on both: 32- and 64-bit in place, narrower ones in
// their widening, bool as or/and. Float sums and products take indices without repeats here (the
// order of a float sum is the device's); max and min any indices, nan, inf and -0.0 included.
TEST(ScatterKernel, EveryDtypeAgreesWithTheCpuDevice) {
  const std::vector<int32_t> repeats = random_indices(6 * 7, 5, 6);
  std::vector<int32_t> once(6 * 7);
  for (size_t i = 0; i < once.size(); ++i) once[i] = int32_t((i / 7 + i % 7) % 6);
  for (DType d : vkg::test::vk_dtypes()) {
    SCOPED_TRACE(d.name());
    for (ScatterReduce r : {ScatterReduce::Sum, ScatterReduce::Prod, ScatterReduce::Amax,
                            ScatterReduce::Amin, ScatterReduce::Mean}) {
      if (d.is_bool() && r != ScatterReduce::Sum) continue;  // scatter_reduce needs numbers
      const bool exact = !d.is_float() || r == ScatterReduce::Amax || r == ScatterReduce::Amin;
      EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) {
        const Tensor x = vkg::test::random_tensor(d, {6, 7}, dev, 11);
        const Tensor src = vkg::test::random_tensor(d, {6, 7}, dev, 12);
        const Tensor idx(exact ? repeats : once, {6, 7}, dev);
        if (d.is_bool()) return x.scatter_add(0, idx, src);
        return Tensor::cat(std::vector<Tensor>{x.scatter_reduce(0, idx, src, r),
                                               x.scatter_reduce(0, idx, src, r, false)});
      })) << int(r);
    }
  }
}

// Nothing to scatter, nothing to scatter into, and 0-d tensors.
TEST(ScatterKernel, EmptyAndZeroDimensional) {
  for (const std::string dev : {"CPU", "VK"}) {
    SCOPED_TRACE(dev);
    const Tensor x = Tensor::arange(0, 6, 1, dev).cast(dtypes::float32).reshape({2, 3});
    const Tensor none(std::vector<int32_t>{}, {0, 3}, dev);
    EXPECT_EQ(
        x.scatter_add(0, none, Tensor::zeros({0, 3}, dtypes::float32, dev)).to_vector<float>(),
        x.to_vector<float>());
    const Tensor empty = Tensor::zeros({0, 3}, dtypes::float32, dev);
    EXPECT_EQ(empty.scatter_reduce(1, none, empty, ScatterReduce::Amax).shape(), (Shape{0, 3}));
    const Tensor s = Tensor::full({}, 2.0f, dtypes::float32, dev);
    const Tensor at = Tensor::full({}, 0, dtypes::int32, dev);
    EXPECT_EQ(s.scatter_add(0, at, Tensor::full({}, 5.0f, dtypes::float32, dev)).to_vector<float>(),
              std::vector<float>{7.0f});
    EXPECT_EQ(
        s.scatter_reduce(0, at, Tensor::full({}, 5.0f, dtypes::float32, dev), ScatterReduce::Prod)
            .shape(),
        Shape{});
    // Out of range writes nothing (unchecked: CHECK_INDICES makes it an error).
    EXPECT_EQ(s.scatter_add(0, Tensor::full({}, 3, dtypes::int32, dev), s).to_vector<float>(),
              std::vector<float>{2.0f});
  }
}

// Gradients at ties and zeros, by hand: max and min split among everything equal to the result
// (the tensor's own value included); prod gives a lone zero the product of the others and
// everything else at that element 0, as torch.
TEST(ScatterKernel, GradientsAtTiesAndZeros) {
  for (const std::string dev : {"CPU", "VK"}) {
    SCOPED_TRACE(dev);
    Tensor self = Tensor(std::vector<float>{3, 1, 5}, {3}, dev).requires_grad_();
    Tensor v = Tensor(std::vector<float>{3, 2, 2, 0, 4}, {5}, dev).requires_grad_();
    const Tensor i(std::vector<int32_t>{0, 1, 1, 2, 2}, {5}, dev);
    self.scatter_reduce(0, i, v, ScatterReduce::Amax).sum().backward();
    EXPECT_EQ(self.grad()->to_vector<float>(), (std::vector<float>{0.5f, 0, 1}));
    EXPECT_EQ(v.grad()->to_vector<float>(), (std::vector<float>{0.5f, 0.5f, 0.5f, 0, 0}));
    self.set_grad({});
    v.set_grad({});
    self.scatter_reduce(0, i, v, ScatterReduce::Prod).sum().backward();
    // out = {9, 4, 0}: d/dself = {3, 4, 0}; d/dv = {3, 2, 2, 5 * 4 = 20, 0}.
    EXPECT_EQ(self.grad()->to_vector<float>(), (std::vector<float>{3, 4, 0}));
    EXPECT_EQ(v.grad()->to_vector<float>(), (std::vector<float>{3, 2, 2, 20, 0}));
  }
}

// Without self, the start at an element values land on is the identity (-inf for amax); it takes
// no part in the gradient even when the values' extremum is that identity: two -inf values split
// g in halves (torch's 0.5 each), not thirds with a phantom self. An excluded self equal to the
// result does not share either (torch's own formula gives it a share and then drops it, so its
// values get too little; here the lone maximum gets all of g). A nan result equals nothing:
// everything landing there gets nan, as torch's g / 0 * 0; an excluded self still gets 0.
TEST(ScatterKernel, GradientsWithoutSelfAtTheIdentity) {
  const float inf = INFINITY, nan = std::numeric_limits<float>::quiet_NaN();
  for (const std::string dev : {"CPU", "VK"}) {
    SCOPED_TRACE(dev);
    struct Case {
      ScatterReduce r;
      std::vector<float> self, v;
      std::vector<float> want_self, want_v;
    };
    const std::vector<int32_t> to{0, 0, 1, 1};
    const Case cases[] = {
        // element 0: two -inf (or +inf for amin) values; element 1: a lone extremum equal to self.
        {ScatterReduce::Amax, {5, 3}, {-inf, -inf, 3, 1}, {0, 0}, {0.5f, 0.5f, 1, 0}},
        {ScatterReduce::Amin, {5, 1}, {inf, inf, 1, 3}, {0, 0}, {0.5f, 0.5f, 1, 0}},
        {ScatterReduce::Amax, {5, 3}, {nan, 1, -inf, -inf}, {0, 0}, {nan, nan, 0.5f, 0.5f}},
    };
    for (const Case& c : cases) {
      Tensor self = Tensor(c.self, {2}, dev).requires_grad_();
      Tensor v = Tensor(c.v, {4}, dev).requires_grad_();
      const Tensor i(to, {4}, dev);
      (self.scatter_reduce(0, i, v, c.r, false) * Tensor(std::vector<float>{2, 4}, {2}, dev))
          .sum()
          .backward();
      const auto gs = self.grad()->to_vector<float>(), gv = v.grad()->to_vector<float>();
      for (size_t k = 0; k < 2; ++k) EXPECT_EQ(gs[k], c.want_self[k]) << k;
      for (size_t k = 0; k < 4; ++k) {
        const float want = c.want_v[k] * (k < 2 ? 2.0f : 4.0f);
        if (std::isnan(want))
          EXPECT_TRUE(std::isnan(gv[k])) << k << " " << gv[k];
        else
          EXPECT_EQ(gv[k], want) << k;
      }
    }
    // With self, a -inf self ties with -inf values: thirds.
    Tensor self = Tensor(std::vector<float>{-inf}, {1}, dev).requires_grad_();
    Tensor v = Tensor(std::vector<float>{-inf, -inf}, {2}, dev).requires_grad_();
    self.scatter_reduce(0, Tensor(std::vector<int32_t>{0, 0}, {2}, dev), v, ScatterReduce::Amax)
        .sum()
        .backward();
    EXPECT_EQ(self.grad()->to_vector<float>(), std::vector<float>{1.0f / 3});
    EXPECT_EQ(v.grad()->to_vector<float>(), (std::vector<float>{1.0f / 3, 1.0f / 3}));
  }
}

// Max and min of subnormals compare their bits as integers, so a device that flushes subnormals
// in float compares still orders them: 0x3 < 0x5 and -0x5 < -0x3, and both above -0.0 / below it.
TEST(ScatterKernel, MaxAndMinOrderSubnormals) {
  auto f = [](uint32_t bits) {
    float x;
    std::memcpy(&x, &bits, 4);
    return x;
  };
  auto d = [](uint64_t bits) {
    double x;
    std::memcpy(&x, &bits, 8);
    return x;
  };
  for (const std::string dev : {"CPU", "VK"}) {
    SCOPED_TRACE(dev);
    const Tensor i(std::vector<int32_t>{0, 0, 1, 1, 2, 2}, {6}, dev);
    const std::vector<float> v{f(0x3), f(0x5), f(0x80000005), f(0x80000003), f(0x80000001), 0.0f};
    const Tensor t(v, {6}, dev);
    const Tensor z = Tensor::full({3}, -INFINITY, dtypes::float32, dev);
    const Tensor top = Tensor::full({3}, INFINITY, dtypes::float32, dev);
    const auto mx = z.scatter_reduce(0, i, t, ScatterReduce::Amax).to_vector<float>();
    const auto mn = top.scatter_reduce(0, i, t, ScatterReduce::Amin).to_vector<float>();
    auto bits = [](float x) {
      uint32_t b;
      std::memcpy(&b, &x, 4);
      return b;
    };
    EXPECT_EQ(bits(mx[0]), 0x5u);
    EXPECT_EQ(bits(mx[1]), 0x80000003u);
    EXPECT_EQ(bits(mx[2]), 0x0u);
    EXPECT_EQ(bits(mn[0]), 0x3u);
    EXPECT_EQ(bits(mn[1]), 0x80000005u);
    EXPECT_EQ(bits(mn[2]), 0x80000001u);
    // float16 combines in its float32 widening, where its subnormals are normal numbers.
    const Tensor halves = Tensor(std::vector<float>{f(0x33800000), f(0x34000000), -1, -2, 0, -0.0f},
                                 {6}, dev)  // 2^-24 and 2^-23: float16's subnormals
                              .cast(dtypes::float16);
    const auto h = z.cast(dtypes::float16)
                       .scatter_reduce(0, i, halves, ScatterReduce::Amax)
                       .cast(dtypes::float32)
                       .to_vector<float>();
    EXPECT_EQ(h, (std::vector<float>{f(0x34000000), -1, 0}));
    const std::vector<double> w{
        d(0x3), d(0x5), d(0x8000000000000005), d(0x8000000000000003), d(0x8000000000000001), 0.0};
    const Tensor tw(w, {6}, dev);
    const auto wx = z.cast(dtypes::float64).scatter_reduce(0, i, tw, ScatterReduce::Amax);
    const auto wn = top.cast(dtypes::float64).scatter_reduce(0, i, tw, ScatterReduce::Amin);
    const std::vector<double> got_x = wx.to_vector<double>(), got_n = wn.to_vector<double>();
    auto bits64 = [](double x) {
      uint64_t b;
      std::memcpy(&b, &x, 8);
      return b;
    };
    EXPECT_EQ(bits64(got_x[0]), 0x5u);
    EXPECT_EQ(bits64(got_x[1]), 0x8000000000000003u);
    EXPECT_EQ(bits64(got_x[2]), 0x0u);
    EXPECT_EQ(bits64(got_n[0]), 0x3u);
    EXPECT_EQ(bits64(got_n[1]), 0x8000000000000005u);
    EXPECT_EQ(bits64(got_n[2]), 0x8000000000000001u);
  }
}

// Without the device's 64-bit atomics (VKG_NO_INT64_ATOMICS forces that on Lavapipe), a 64-bit
// scatter sum takes the one-hot form: a reduce, no scatter store, the same numbers. Covers the
// float64 backward of an indexed read and an int64 scatter_add whose index is narrower than the
// tensor off the axis and holds an index past the axis (it adds nothing).
TEST(ScatterKernel, SixtyFourBitSumsWithoutInt64AtomicsAreOneHot) {
  for (const std::string dev : {"CPU", "VK"}) {
    SCOPED_TRACE(dev);
    ScopedSetting off("VKG_NO_INT64_ATOMICS", 1);
    std::vector<double> rows(10 * 3);
    for (size_t k = 0; k < rows.size(); ++k) rows[k] = double(k);
    Tensor w = Tensor(rows, {10, 3}, dev).requires_grad_();
    const Tensor idx(std::vector<int32_t>{1, 3, 1, 9}, {4}, dev);
    (idx.embedding(w) * 3.0).sum().backward();
    const Kernels k = kernels_of(*w.grad());
    EXPECT_EQ(k.scatters, dev == "VK" ? 0u : 1u);
    EXPECT_EQ(k.reduces, dev == "VK");
    std::vector<double> want(30, 0.0);
    for (int c = 0; c < 3; ++c) want[3 + c] = 6, want[9 + c] = 3, want[27 + c] = 3;
    EXPECT_EQ(w.grad()->to_vector<double>(), want);
    const Tensor self = Tensor::zeros({3, 4}, dtypes::int64, dev);
    const Tensor at(std::vector<int64_t>{0, 3, 3, 7}, {2, 2}, dev);
    const Tensor src(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {2, 3}, dev);
    EXPECT_EQ(self.scatter_add(1, at, src).to_vector<int64_t>(),
              (std::vector<int64_t>{1, 0, 0, 2, 0, 0, 0, 4, 0, 0, 0, 0}));
  }
}

// A tensor past the 128 MiB a storage buffer descriptor may span is bound by address: the float
// compare-and-swap goes through a uint pointer to the same memory (codegen's combining_store).
TEST(ScatterKernel, BuffersPastTheDescriptorRangeCombineByAddress) {
  const int64_t n = 34'000'000;  // 136 MB of float32
  const std::vector<int32_t> at{0, 33997, 33997, int32_t(n - 1), int32_t(n - 1)};
  const Tensor index(at, {5}), values(std::vector<float>{1, 2, 0.5f, 5, -7.5f}, {5});
  const Tensor twos = Tensor::full({n}, 2.0f);
  auto pick = [&](const Tensor& t) {
    const std::vector<float> h = t.to_vector<float>();
    return std::vector<float>{h[0], h[1], h[33997], h[size_t(n - 1)]};
  };
  EXPECT_EQ(pick(twos.scatter_add(0, index, values)), (std::vector<float>{3, 2, 4.5f, -0.5f}));
  EXPECT_EQ(pick(twos.scatter_reduce(0, index, values, ScatterReduce::Amax)),
            (std::vector<float>{2, 2, 2, 5}));
  EXPECT_EQ(pick(twos.scatter_reduce(0, index, values, ScatterReduce::Prod)),
            (std::vector<float>{2, 2, 2, -75}));
}

// Without self, an element values land on starts from the reduce's identity: for int64's min
// that is 2^63 - 1, which a double (max_value) cannot hold: it must not round to 2^63 and wrap.
TEST(ScatterKernel, Int64MinAndMaxWithoutSelfStartAtTheDtypesExtremes) {
  for (const std::string dev : {"CPU", "VK"}) {
    SCOPED_TRACE(dev);
    const Tensor idx(std::vector<int32_t>{0, 0, 1}, {3}, dev);
    const Tensor self = Tensor::full({3}, 7, dtypes::int64, dev);
    const Tensor big =
        Tensor(std::vector<int64_t>{INT64_MAX - 2, INT64_MAX - 1, INT64_MIN + 1}, {3}, dev);
    EXPECT_EQ(self.scatter_reduce(0, idx, big, ScatterReduce::Amin, false).to_vector<int64_t>(),
              (std::vector<int64_t>{INT64_MAX - 2, INT64_MIN + 1, 7}));
    EXPECT_EQ(self.scatter_reduce(0, idx, big, ScatterReduce::Amax, false).to_vector<int64_t>(),
              (std::vector<int64_t>{INT64_MAX - 1, INT64_MIN + 1, 7}));
    const Tensor u = self.cast(dtypes::uint64);
    const Tensor ubig = Tensor(std::vector<int64_t>{-3, -2, INT64_MIN + 1}, {3}, dev)
                            .cast(dtypes::uint64);  // 2^64 - 3, 2^64 - 2, 2^63 + 1
    EXPECT_EQ(u.scatter_reduce(0, idx, ubig, ScatterReduce::Amin, false).to_vector<uint64_t>(),
              (std::vector<uint64_t>{UINT64_MAX - 2, (uint64_t(1) << 63) + 1, 7}));
  }
}
