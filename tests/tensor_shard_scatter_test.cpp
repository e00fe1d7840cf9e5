// Scatters of values sharded along the axis they scatter on (core/multi.cpp): each device
// scatters its values into the combine's identity (the first into the target), and the partial
// results combine with the reduce itself. Every reduce mode, with and without self, in every dtype
// the one-device op takes, against that op on one Vulkan device and on the CPU device, bit for bit
// (nan equal to nan; float sums of values that collide within rounding), also along an inner axis
// and with only the indices sharded; IEEE max and min at nan and signed zeros across devices;
// indices spread unevenly (a device whose values all land on one element, elements no device
// reaches); and gradients against the one-device ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include <vkgrad/core/indexed_load.hpp>
#include <vkgrad/core/multi.hpp>
#include <vkgrad/vkgrad.hpp>

#include "support/device_compare.hpp"

namespace vkg {
namespace {

const std::vector<std::string> two = {"VK", "VK:1"};
const std::vector<std::string> three = {"VK", "VK:1", "CPU"};
constexpr ScatterReduce kReduces[] = {ScatterReduce::Sum, ScatterReduce::Prod, ScatterReduce::Mean,
                                      ScatterReduce::Amax, ScatterReduce::Amin};

std::string name_of(ScatterReduce r) {
  const char* names[] = {"sum", "prod", "mean", "amax", "amin"};
  return names[int(r)];
}

// Bit for bit, where a nan equals any nan: the sign of a zero counts.
testing::AssertionResult same_bits(const Tensor& want, const Tensor& got) {
  if (want.dtype() != got.dtype() || want.shape() != got.shape())
    return testing::AssertionFailure() << "want " << want << ", got " << got;
  const DType d = want.dtype();
  const std::vector<std::byte> a = want.bytes(), b = got.to(want.device()).bytes();
  const size_t size = size_t(d.itemsize());
  size_t bad = 0;
  std::string first;
  for (size_t i = 0; i < a.size() / size; ++i) {
    const std::byte *x = a.data() + i * size, *y = b.data() + i * size;
    if (std::memcmp(x, y, size) == 0 || (test::is_nan_bits(d, x) && test::is_nan_bits(d, y)))
      continue;
    if (bad++ < 6)
      first += "\n  [" + std::to_string(i) + "] " + test::element_str(d, x) + " vs " +
               test::element_str(d, y) + (std::signbit(test::element(d, y)) ? " (-)" : "");
  }
  if (!bad) return testing::AssertionSuccess();
  return testing::AssertionFailure() << bad << " " << d.name() << " elements differ:" << first;
}

// What a case computes: scatter_reduce of `src` by `idx` into `dest`, all of shape {6, 7} on
// axis 0. `shard(t, along)` places each input (the identity for one device).
using Place = std::function<Tensor(const Tensor& t, bool along_axis)>;
Tensor scatter_case(DType d, ScatterReduce r, bool self, const std::vector<int32_t>& idx,
                    const std::string& dev, const Place& place, bool dest_sharded,
                    bool finite = false) {
  const Tensor dest = test::random_tensor(d, {6, 7}, dev, 11, finite);
  const Tensor src = test::random_tensor(d, {6, 7}, dev, 12, finite);
  const Tensor index(idx, {6, 7}, dev);
  return place(dest, dest_sharded).scatter_reduce(0, place(index, true), place(src, true), r, self);
}

// Indices for {6, 7} values on axis 0. repeats: into 5 rows, so that elements get values from
// several devices. once: row r, column c goes to row (r + c) % 6, a permutation of the rows in
// every column, so each element gets exactly one value (a float sum or product then does not
// depend on the order the devices' values arrive in).
std::vector<int32_t> repeats() {
  std::vector<int32_t> v(6 * 7);
  for (size_t i = 0; i < v.size(); ++i) v[i] = int32_t((i * 7 + i / 5) % 5);
  return v;
}
std::vector<int32_t> once() {
  std::vector<int32_t> v(6 * 7);
  for (size_t i = 0; i < v.size(); ++i) v[i] = int32_t((i / 7 + i % 7) % 6);
  return v;
}

TEST(TensorShardScatter, OnceSendsOneValueToEachElement) {
  std::vector<int> landed(6 * 7, 0);
  const std::vector<int32_t> idx = once();
  for (size_t i = 0; i < idx.size(); ++i) ++landed[size_t(idx[i]) * 7 + i % 7];
  EXPECT_EQ(landed, std::vector<int>(6 * 7, 1));
}

TEST(TensorShardScatter, EveryReduceAndDtypeMatchesOneDeviceAndTheCpuDevice) {
  for (DType d : test::vk_dtypes()) {
    if (d.is_bool()) continue;  // scatter_reduce needs numbers
    for (ScatterReduce r : kReduces) {
      // A float sum or product rounds in the order values arrive: one value per element there.
      const bool ordered = d.is_float() && (r == ScatterReduce::Sum || r == ScatterReduce::Prod ||
                                            r == ScatterReduce::Mean);
      const std::vector<int32_t> idx = ordered ? once() : repeats();
      for (bool self : {true, false}) {
        SCOPED_TRACE(d.name() + " " + name_of(r) + (self ? " with self" : " without self"));
        auto one = [](const Tensor& t, bool) { return t; };
        const Tensor cpu = scatter_case(d, r, self, idx, "CPU", one, false);
        EXPECT_TRUE(same_bits(cpu, scatter_case(d, r, self, idx, "VK", one, false)));
        for (const auto& devices : {two, three}) {
          SCOPED_TRACE(join_devices(devices));
          auto sharded = [&](const Tensor& t, bool along) {
            return along ? t.shard(devices, 0) : t.shard(devices);
          };
          const Tensor got = scatter_case(d, r, self, idx, "VK", sharded, r == ScatterReduce::Prod);
          EXPECT_EQ(got.device(), join_devices(devices));
          EXPECT_TRUE(same_bits(cpu, got.to("CPU")));
        }
      }
    }
  }
}

// A float sum, product or mean of values that collide (repeats: up to 3 on one element, from
// different devices) rounds in the order they arrive, which sharding changes: within 8 ulps of
// the terms' magnitude (the sum of their absolute values; for a product, that of the larger of
// 1 and each) of the CPU device's result, finite values in [-8, 8].
TEST(TensorShardScatter, FloatSumsOfCollidingValuesAgreeUpToRounding) {
  const std::vector<int32_t> idx = repeats();
  std::vector<int> landed(5 * 7, 0);
  for (size_t i = 0; i < idx.size(); ++i) ++landed[size_t(idx[i]) * 7 + i % 7];
  ASSERT_EQ(*std::max_element(landed.begin(), landed.end()), 3);
  for (DType d : test::vk_dtypes()) {
    if (!d.is_float()) continue;
    const double eps = d == dtypes::float64   ? 0x1p-52
                       : d == dtypes::float32 ? 0x1p-23
                       : d == dtypes::float16 ? 0x1p-10
                                              : 0x1p-7;
    const std::vector<double> dest = test::values(test::random_tensor(d, {6, 7}, "CPU", 11, true));
    const std::vector<double> src = test::values(test::random_tensor(d, {6, 7}, "CPU", 12, true));
    for (ScatterReduce r : {ScatterReduce::Sum, ScatterReduce::Prod, ScatterReduce::Mean}) {
      std::vector<double> size(dest.size());
      for (size_t e = 0; e < dest.size(); ++e)
        size[e] = r == ScatterReduce::Prod ? std::max(1.0, std::abs(dest[e])) : std::abs(dest[e]);
      for (size_t i = 0; i < idx.size(); ++i) {
        double& m = size[size_t(idx[i]) * 7 + i % 7];
        m = r == ScatterReduce::Prod ? m * std::max(1.0, std::abs(src[i])) : m + std::abs(src[i]);
      }
      for (bool self : {true, false}) {
        SCOPED_TRACE(d.name() + " " + name_of(r) + (self ? " with self" : " without self"));
        auto one = [](const Tensor& t, bool) { return t; };
        const std::vector<double> cpu =
            test::values(scatter_case(d, r, self, idx, "CPU", one, false, true));
        for (const auto& devices : {two, three}) {
          SCOPED_TRACE(join_devices(devices));
          auto sharded = [&](const Tensor& t, bool along) {
            return along ? t.shard(devices, 0) : t.shard(devices);
          };
          const std::vector<double> got = test::values(
              scatter_case(d, r, self, idx, "VK", sharded, r == ScatterReduce::Prod, true)
                  .to("CPU"));
          ASSERT_EQ(got.size(), cpu.size());
          for (size_t e = 0; e < cpu.size(); ++e)
            EXPECT_LE(std::abs(got[e] - cpu[e]), 8 * eps * size[e])
                << "[" << e << "] " << got[e] << " vs " << cpu[e];
        }
      }
    }
  }
}

// Along an inner axis (1 of {4, 6}): values and indices sharded there, or only the indices
// sharded (the values are cut to match), against the CPU device.
TEST(TensorShardScatter, AlongAnInnerAxisOrWithOnlyTheIndicesSharded) {
  std::vector<int32_t> idx(4 * 6);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = int32_t((i * 5 + i / 6) % 4);
  for (DType d : {dtypes::float32, dtypes::int32}) {
    for (ScatterReduce r : kReduces) {
      if (d.is_float() &&
          (r == ScatterReduce::Sum || r == ScatterReduce::Prod || r == ScatterReduce::Mean))
        continue;  // repeats: the order would round differently (the first test has these)
      for (bool self : {true, false}) {
        for (bool values_sharded : {true, false}) {
          SCOPED_TRACE(d.name() + " " + name_of(r) + (self ? " with self" : " without self") +
                       (values_sharded ? "" : ", values replicated"));
          auto make = [&](const std::string& dev, bool sharded) {
            Tensor dest = test::random_tensor(d, {4, 4}, dev, 21);
            Tensor src = test::random_tensor(d, {4, 6}, dev, 22);
            Tensor index(idx, {4, 6}, dev);
            if (sharded) {
              dest = dest.shard(three);
              src = values_sharded ? src.shard(three, 1) : src.shard(three);
              index = index.shard(three, 1);
            }
            return dest.scatter_reduce(1, index, src, r, self);
          };
          EXPECT_TRUE(same_bits(make("CPU", false), make("VK", true).to("CPU")));
        }
      }
    }
  }
}

std::vector<float> on_cpu(const Tensor& t) { return t.to("CPU").to_vector<float>(); }

// Where the shards' partial results meet: nan from any device wins, and +0.0 is the larger zero
// whichever device holds it (a plain MAX of the partials would keep the first device's -0.0).
TEST(TensorShardScatter, MaxAndMinAreIeeeAcrossDevices) {
  const float nan = std::nanf(""), inf = INFINITY;
  // Two values per device; device 0 holds the first two.
  const std::vector<int32_t> to = {0, 1, 0, 1};
  struct Case {
    std::vector<float> dest, values;
    ScatterReduce r;
    bool self;
    std::vector<float> want;
  };
  const std::vector<Case> cases = {
      {{-inf, -inf}, {-0.0f, 0.0f, 0.0f, -0.0f}, ScatterReduce::Amax, true, {0.0f, 0.0f}},
      {{inf, inf}, {-0.0f, 0.0f, 0.0f, -0.0f}, ScatterReduce::Amin, true, {-0.0f, -0.0f}},
      {{-0.0f, 0.0f}, {-0.0f, -0.0f, 0.0f, -0.0f}, ScatterReduce::Amax, true, {0.0f, 0.0f}},
      {{-0.0f, 0.0f}, {-0.0f, 0.0f, 0.0f, -0.0f}, ScatterReduce::Amin, true, {-0.0f, -0.0f}},
      {{0.0f, 0.0f}, {-0.0f, -0.0f, -0.0f, -0.0f}, ScatterReduce::Amax, false, {-0.0f, -0.0f}},
      {{-0.0f, -0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}, ScatterReduce::Amin, false, {0.0f, 0.0f}},
      {{1, 1}, {2, -5, nan, 3}, ScatterReduce::Amax, true, {nan, 3}},
      {{1, nan}, {2, -5, 0, 3}, ScatterReduce::Amin, true, {0, nan}},
      {{1, 1}, {nan, 4, -1, nan}, ScatterReduce::Amin, false, {nan, nan}},
      {{7, 7}, {-inf, 2, inf, 3}, ScatterReduce::Amax, false, {inf, 3}},
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    const Case& k = cases[c];
    for (const std::string dev : {"CPU", "VK"}) {
      SCOPED_TRACE("case " + std::to_string(c) + " on " + dev);
      const Tensor dest(k.dest, {2}, dev), values(k.values, {4}, dev), idx(to, {4}, dev);
      const Tensor one = dest.scatter_reduce(0, idx, values, k.r, k.self);
      const Tensor sharded =
          dest.shard(two).scatter_reduce(0, idx.shard(two, 0), values.shard(two, 0), k.r, k.self);
      const std::vector<float> a = on_cpu(one), b = on_cpu(sharded);
      for (size_t i = 0; i < 2; ++i) {
        if (std::isnan(k.want[i])) {
          EXPECT_TRUE(std::isnan(a[i]) && std::isnan(b[i])) << i << ": " << a[i] << " " << b[i];
          continue;
        }
        EXPECT_EQ(a[i], k.want[i]) << i;
        EXPECT_EQ(b[i], k.want[i]) << i;
        EXPECT_EQ(std::signbit(a[i]), std::signbit(k.want[i])) << i;
        EXPECT_EQ(std::signbit(b[i]), std::signbit(k.want[i])) << i;
      }
    }
  }
}

// Indices spread unevenly over three devices (two values each): every value of devices 0 and 1
// lands on element 0, device 2's on element 3; elements 1, 2 and 4 get nothing and keep the
// target's value, with self or without. By hand.
TEST(TensorShardScatter, UnevenIndicesAndElementsNoDeviceReaches) {
  const std::vector<int32_t> to = {0, 0, 0, 0, 3, 3};
  const std::vector<float> values = {3, -2, 5, 0.5f, 4, -1}, dest = {2, 9, -7, 1, 6};
  const Tensor v = Tensor(values, {6}).shard(three, 0), i = Tensor(to, {6}).shard(three, 0);
  const Tensor t = Tensor(dest, {5}).shard(three);
  using R = ScatterReduce;
  EXPECT_EQ(on_cpu(t.scatter_reduce(0, i, v, R::Sum)), (std::vector<float>{8.5f, 9, -7, 4, 6}));
  EXPECT_EQ(on_cpu(t.scatter_reduce(0, i, v, R::Prod)), (std::vector<float>{-30, 9, -7, -4, 6}));
  EXPECT_EQ(on_cpu(t.scatter_reduce(0, i, v, R::Amax)), (std::vector<float>{5, 9, -7, 4, 6}));
  EXPECT_EQ(on_cpu(t.scatter_reduce(0, i, v, R::Amin)), (std::vector<float>{-2, 9, -7, -1, 6}));
  EXPECT_EQ(on_cpu(t.scatter_reduce(0, i, v, R::Mean)),
            (std::vector<float>{1.7f, 9, -7, 4.0f / 3, 6}));
  EXPECT_EQ(on_cpu(t.scatter_reduce(0, i, v, R::Prod, false)),
            (std::vector<float>{-15, 9, -7, -4, 6}));
  EXPECT_EQ(on_cpu(t.scatter_reduce(0, i, v, R::Amax, false)),
            (std::vector<float>{5, 9, -7, 4, 6}));
  EXPECT_EQ(on_cpu(t.scatter_reduce(0, i, v, R::Amin, false)),
            (std::vector<float>{-2, 9, -7, -1, 6}));
  EXPECT_EQ(on_cpu(t.scatter_reduce(0, i, v, R::Mean, false)),
            (std::vector<float>{1.625f, 9, -7, 1.5f, 6}));
  // int32: a product that wraps, a max below every target value, a min of the dtype's lowest.
  const Tensor vi =
      Tensor(std::vector<int>{65536, 65536, 3, -1, INT32_MIN, 5}, {6}).shard(three, 0);
  const Tensor ti = Tensor(std::vector<int>{1, 2, 3, 1, 5}, {5}).shard(three);
  auto ints = [](const Tensor& x) { return x.to("CPU").to_vector<int>(); };
  EXPECT_EQ(ints(ti.scatter_reduce(0, i, vi, R::Prod)), (std::vector<int>{0, 2, 3, INT32_MIN, 5}));
  EXPECT_EQ(ints(ti.scatter_reduce(0, i, vi, R::Prod, false)),
            (std::vector<int>{0, 2, 3, INT32_MIN, 5}));
  EXPECT_EQ(ints(ti.scatter_reduce(0, i, vi, R::Amax)), (std::vector<int>{65536, 2, 3, 5, 5}));
  const Tensor negative = Tensor(std::vector<int>{-5, -6, -7, -8, -9, -10}, {6}).shard(three, 0);
  EXPECT_EQ(ints(ti.scatter_reduce(0, i, negative, R::Amax, false)),
            (std::vector<int>{-5, 2, 3, -9, 5}));
  EXPECT_EQ(ints(ti.scatter_reduce(0, i, vi, R::Amin, false)),
            (std::vector<int>{-1, 2, 3, INT32_MIN, 5}));
  EXPECT_EQ(ints(ti.scatter_reduce(0, i, vi, R::Sum)),
            (std::vector<int>{131075, 2, 3, INT32_MIN + 6, 5}));
  // uint32: identities 0 and 2^32 - 1 (a signed one would win here: 2^31 - 1 or 2^31).
  auto u32 = [](std::vector<int> v) { return Tensor(v, {6}).cast(dtypes::uint32).shard(three, 0); };
  const Tensor vu = u32({-2, -3, -4, -5, -1, -6}), small = u32({1, 2, 3, 4, 5, 0});
  const Tensor tu = Tensor(std::vector<int>{1, 2, 3, 4, 5}, {5}).cast(dtypes::uint32).shard(three);
  auto uints = [](const Tensor& x) { return x.to("CPU").to_vector<uint32_t>(); };
  EXPECT_EQ(uints(tu.scatter_reduce(0, i, vu, R::Amin, false)),
            (std::vector<uint32_t>{4294967291u, 2, 3, 4294967290u, 5}));
  EXPECT_EQ(uints(tu.scatter_reduce(0, i, small, R::Amax, false)),
            (std::vector<uint32_t>{4, 2, 3, 5, 5}));
}

// Bools: scatter_add is an or, so the other devices start from false (the sum's identity; a
// product's and min's is true, a max's false). By hand, against one device and the CPU device.
TEST(TensorShardScatter, BoolScatterAddIsAnOrAcrossDevices) {
  EXPECT_EQ(scatter_identity(ScatterCombine::Sum, dtypes::bool_).as_double(), 0);
  EXPECT_EQ(scatter_identity(ScatterCombine::Max, dtypes::bool_).as_double(), 0);
  EXPECT_EQ(scatter_identity(ScatterCombine::Prod, dtypes::bool_).as_double(), 1);
  EXPECT_EQ(scatter_identity(ScatterCombine::Min, dtypes::bool_).as_double(), 1);
  EXPECT_EQ(scatter_identity(ScatterCombine::Sum, dtypes::bool_).kind(), ScalarKind::Bool);
  // Device 0 sends true to element 0, device 1 true to element 2; element 1 is the target's.
  const std::vector<int32_t> to = {0, 0, 2, 2, 3, 0};
  const Tensor values = Tensor(std::vector<int>{1, 0, 0, 1, 0, 0}, {6}).cast(dtypes::bool_);
  const Tensor dest = Tensor(std::vector<int>{0, 1, 0, 0}, {4}).cast(dtypes::bool_);
  const std::vector<bool> want = {true, true, true, false};
  auto bools = [](const Tensor& t) {
    std::vector<bool> out;
    for (int v : t.to("CPU").cast(dtypes::int32).to_vector<int>()) out.push_back(v != 0);
    return out;
  };
  EXPECT_EQ(bools(dest.to("CPU").scatter_add(0, Tensor(to, {6}, "CPU"), values.to("CPU"))), want);
  EXPECT_EQ(bools(dest.scatter_add(0, Tensor(to, {6}), values)), want);
  for (const auto& devices : {two, three}) {
    const Tensor got = dest.shard(devices).scatter_add(0, Tensor(to, {6}).shard(devices, 0),
                                                       values.shard(devices, 0));
    EXPECT_EQ(bools(got), want) << join_devices(devices);
  }
}

// Plain scatter (the last value along the axis wins) is a max of positions underneath: it too
// runs with values sharded on the axis.
TEST(TensorShardScatter, PlainScatterWithShardedValues) {
  const std::vector<int32_t> to = {2, 0, 2, 1, 0, 2};
  const std::vector<float> values = {1, 2, 3, 4, 5, 6};
  const Tensor want = Tensor::zeros({4}, dtypes::float32, "CPU")
                          .scatter(0, Tensor(to, {6}, "CPU"), Tensor(values, {6}, "CPU"));
  EXPECT_EQ(want.to_vector<float>(), (std::vector<float>{5, 4, 6, 0}));
  for (const auto& devices : {two, three}) {
    const Tensor got =
        Tensor::zeros({4}, dtypes::float32, join_devices(devices))
            .scatter(0, Tensor(to, {6}).shard(devices, 0), Tensor(values, {6}).shard(devices, 0));
    EXPECT_EQ(on_cpu(got), want.to_vector<float>()) << join_devices(devices);
  }
}

// The gradients of dest and src (one-device leaves, sharded inside the loss) against the same loss
// unsharded on VK and on the CPU device: ties across devices share the gradient, a lone zero in a
// product gets the product of the others, two zeros (one per device) get nothing.
TEST(TensorShardScatter, GradientsMatchOneDevice) {
  const std::vector<float> dest = {1, 4, -2, 0.5f, 3};
  // Device 0 holds the first four values. Element 0: 2 from each device; 1: 4 from each and
  // from dest; 2: a zero from each; 3: a lone zero; 4: one value from device 1.
  const std::vector<float> values = {4, 2, 0, 0, 4, 2, 0, 1};
  const std::vector<int32_t> to = {1, 0, 2, 3, 1, 0, 2, 4};
  const std::vector<float> weights = {0.5f, -1, 2, 1.5f, -0.25f};
  for (ScatterReduce r : kReduces) {
    for (bool self : {true, false}) {
      SCOPED_TRACE(name_of(r) + (self ? " with self" : " without self"));
      auto grads = [&](const std::string& dev, bool sharded) {
        Tensor d(dest, {5}, dev), v(values, {8}, dev);
        d.requires_grad_();
        v.requires_grad_();
        Tensor i(to, {8}, dev);
        Tensor dd = d, vv = v;
        if (sharded) {
          dd = d.shard(two);
          vv = v.shard(two, 0);
          i = i.shard(two, 0);
        }
        Tensor out = dd.scatter_reduce(0, i, vv, r, self);
        if (sharded) out = out.to(dev);
        (out * Tensor(weights, {5}, dev)).sum().backward();
        return std::vector<std::vector<float>>{on_cpu(*d.grad()), on_cpu(*v.grad())};
      };
      const auto cpu = grads("CPU", false), vk = grads("VK", false), got = grads("VK", true);
      for (size_t k = 0; k < 2; ++k) {
        EXPECT_EQ(vk[k], cpu[k]) << (k ? "src" : "dest");
        EXPECT_EQ(got[k], cpu[k]) << (k ? "src" : "dest");
      }
    }
  }
}

}  // namespace
}  // namespace vkg
