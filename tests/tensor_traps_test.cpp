// The traps real Vulkan drivers set, each pinned at the Tensor level against the CPU reference
// device and closed forms: C semantics of integer / and %, masked loads past the end of a buffer,
// inf and nan through every float op, exp2/log2/sin at their edges, division and sqrt correctly
// rounded, bool storage, more buffers than binding slots, more workgroups than one grid axis,
// loops longer than Lavapipe runs, and a tensor over 128 MiB.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>

#include <vkgrad/core/schedule.hpp>

#include "support/device_compare.hpp"

using namespace vkg;
using namespace vkg::test;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNan = std::numeric_limits<float>::quiet_NaN();

Tensor floats(const std::vector<float>& v, const std::string& dev) {
  return Tensor(v, {int64_t(v.size())}, dev);
}

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

// Random float32 values spread over every exponent in [lo, hi] (powers of two), both signs.
std::vector<float> spread(int lo, int hi, size_t per_exponent, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> out;
  for (int e = lo; e <= hi; ++e)
    for (size_t k = 0; k < per_exponent; ++k) {
      const uint32_t mant = rng() & 0x7fffffu, sign = (rng() & 1u) << 31;
      out.push_back(std::bit_cast<float>(sign | uint32_t(e + 127) << 23 | mant));
    }
  return out;
}

}  // namespace

// GLSL's % is OpSMod (the divisor's sign) and undefined for negative operands; C's remainder takes
// the dividend's sign and / truncates toward zero.
TEST(Traps, IntegerDivisionAndModuloWithNegativeOperandsFollowC) {
  const std::vector<int32_t> a{7, -7, 7, -7, 0, 1, -1, 2147483647, -2147483647 - 1, 5};
  const std::vector<int32_t> b{2, 2, -2, -2, -3, -5, 5, -2, 3, 1};
  std::vector<int32_t> q, r;
  for (size_t i = 0; i < a.size(); ++i) q.push_back(a[i] / b[i]), r.push_back(a[i] % b[i]);
  for (const std::string dev : {"CPU", "VK"}) {
    SCOPED_TRACE(dev);
    Tensor ta(a, {10}, dev), tb(b, {10}, dev);
    EXPECT_EQ(ta.idiv(tb).to_vector<int32_t>(), q);
    EXPECT_EQ(ta.mod(tb).to_vector<int32_t>(), r);
    // Every narrow and wide signed type takes the same rules (int8 -7 % 2 == -1).
    for (DType d : {dtypes::int8, dtypes::int16, dtypes::int64}) {
      SCOPED_TRACE(d.name());
      Tensor x = Tensor(std::vector<int32_t>{7, -7, 7, -7, -100}, {5}, dev).cast(d);
      Tensor y = Tensor(std::vector<int32_t>{2, 2, -2, -2, 7}, {5}, dev).cast(d);
      EXPECT_EQ(x.idiv(y).cast(dtypes::int32).to_vector<int32_t>(),
                (std::vector<int32_t>{3, -3, -3, 3, -14}));
      EXPECT_EQ(x.mod(y).cast(dtypes::int32).to_vector<int32_t>(),
                (std::vector<int32_t>{1, -1, 1, -1, -2}));
    }
    // A scalar divisor folds into a constant: the renderer's constant path must agree too.
    EXPECT_EQ(ta.mod(Tensor::full({}, -3, dtypes::int32, dev)).to_vector<int32_t>()[1], -7 % -3);
    EXPECT_EQ(ta.idiv(Tensor::full({}, 4, dtypes::int32, dev)).to_vector<int32_t>()[1], -7 / 4);
  }
  // Unsigned operands with the top bit set are large, not negative.
  EXPECT_TRUE(cpu_vk_agree([](const std::string& dev) {
    Tensor x(std::vector<uint32_t>{4000000000u, 7u, 4294967295u}, {3}, dev),
        y(std::vector<uint32_t>{3u, 4000000000u, 2u}, {3}, dev);
    return x.mod(y) + x.idiv(y);
  }));
}

// A select does not stop a load: a masked load must clamp (or branch) so that a pad's raw index,
// which lies outside the buffer, is never read.
TEST(Traps, PaddedReadsNeverTouchMemoryOutsideTheBuffer) {
  for (const std::string dev : {"CPU", "VK"}) {
    SCOPED_TRACE(dev);
    Tensor x = floats({1, 2, 3}, dev);
    EXPECT_EQ(x.pad({{1000, 1000}}).sum().item<float>(), 6.0f);
    EXPECT_EQ(x.pad({{2, 3}}, -1.5).to_vector<float>(),
              (std::vector<float>{-1.5f, -1.5f, 1, 2, 3, -1.5f, -1.5f, -1.5f}));
    // A large pad before a small buffer: raw indexes far below 0 and far past the end.
    const std::vector<float> big = x.pad({{1 << 20, 1 << 20}}).to_vector<float>();
    EXPECT_EQ(big[(1 << 20) + 2], 3.0f);
    EXPECT_EQ(std::count(big.begin(), big.end(), 0.0f), int64_t(big.size()) - 3);
    // Padded 2-D views, flipped and permuted, in one fused kernel.
    Tensor m(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, {2, 3}, dev);
    EXPECT_EQ((m.pad({{1, 1}, {2, 0}}).flip({0, 1}).permute({1, 0}) * 2)
                  .contiguous()
                  .to_vector<int32_t>(),
              (std::vector<int32_t>{0, 12, 6, 0, 0, 10, 4, 0, 0, 8, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  }
}

// Every float op with inf and nan on either side, compared with the CPU by bits: nan must come
// out as nan, checked by its bits (fast math may fold x != x).
TEST(Traps, InfAndNanFlowThroughEveryFloatOp) {
  const std::vector<float> edge{0.0f, -0.0f, 1.0f, -1.0f, 2.5f, kInf, -kInf, kNan, 1e-40f, 3e38f};
  std::vector<float> a, b;
  for (float x : edge)
    for (float y : edge) a.push_back(x), b.push_back(y);
  using Op = std::function<Tensor(const Tensor&, const Tensor&)>;
  const std::vector<std::pair<const char*, Op>> ops = {
      {"add", [](auto& x, auto& y) { return x + y; }},
      {"sub", [](auto& x, auto& y) { return x - y; }},
      {"mul", [](auto& x, auto& y) { return x * y; }},
      {"div", [](auto& x, auto& y) { return x / y; }},
      {"maximum", [](auto& x, auto& y) { return x.maximum(y); }},
      {"minimum", [](auto& x, auto& y) { return x.minimum(y); }},
      {"lt", [](auto& x, auto& y) { return x.lt(y); }},
      {"eq", [](auto& x, auto& y) { return x.eq(y); }},
      {"ne", [](auto& x, auto& y) { return x.ne(y); }},
      {"ge", [](auto& x, auto& y) { return x.ge(y); }},
      {"where", [](auto& x, auto& y) { return x.lt(y).where(x, y); }},
      {"neg", [](auto& x, auto&) { return -x; }},
      {"exp2", [](auto& x, auto&) { return x.exp2(); }},
      {"log2", [](auto& x, auto&) { return x.log2(); }},
      {"sin", [](auto& x, auto&) { return x.sin(); }},
      {"sqrt", [](auto& x, auto&) { return x.sqrt(); }},
      {"reciprocal", [](auto& x, auto&) { return x.reciprocal(); }},
      {"exp", [](auto& x, auto&) { return x.exp(); }},
      {"log", [](auto& x, auto&) { return x.log(); }},
      {"relu", [](auto& x, auto&) { return x.relu(); }},
      {"abs", [](auto& x, auto&) { return x.abs(); }},
      {"isnan", [](auto& x, auto&) { return x.ne(x); }},
  };
  for (DType d : {dtypes::float32, dtypes::float16, dtypes::float64}) {
    SCOPED_TRACE(d.name());
    for (const auto& [name, op] : ops) {
      const std::string n = name;
      if (d == dtypes::float64 &&
          (n == "exp2" || n == "log2" || n == "sin" || n == "exp" || n == "log"))
        continue;
      SCOPED_TRACE(name);
      EXPECT_TRUE(cpu_vk_agree(
          [&](const std::string& dev) {
            return op(floats(a, dev).cast(d), floats(b, dev).cast(d));
          },
          2));
    }
    // The reduces see them too: a nan anywhere makes max nan; inf - inf in a sum is nan.
    EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) {
      return floats(a, dev).cast(d).reshape({10, 10}).max(1);
    }));
    EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) {
      return floats(b, dev).cast(d).reshape({10, 10}).sum(0);
    }));
  }
  // Closed forms, nan by bits.
  for (const std::string dev : {"CPU", "VK"}) {
    SCOPED_TRACE(dev);
    const std::vector<float> isnan = floats({kNan, -kNan, kInf, 0.0f, 1.0f}, dev)
                                         .ne(floats({kNan, -kNan, kInf, 0.0f, 1.0f}, dev))
                                         .cast(dtypes::float32)
                                         .to_vector<float>();
    EXPECT_EQ(isnan, (std::vector<float>{1, 1, 0, 0, 0}));
    Tensor x = floats({kNan, 1.0f}, dev);
    const std::vector<float> m = x.maximum(floats({1.0f, kNan}, dev)).to_vector<float>();
    EXPECT_TRUE(std::isnan(m[0]) && std::isnan(m[1])) << "max propagates nan from either side";
    EXPECT_TRUE(std::isnan(x.max().item<float>()));
  }
}

// Lavapipe's exp2 is up to 3 ulp off and flushes results below 2^-126 to 0; its log2 is dozens of
// ulps off near 1 and reads a subnormal's exponent field as is; its sin gives -1 for sin(1e10).
// The renderer has its own of each; these pin them within 2 ulp of libm over every exponent.
TEST(Traps, Exp2Log2AndSinAtTheirEdgesMatchLibm) {
  const std::vector<float> special{0.0f,    -0.0f,  kInf,    -kInf,   kNan,    1e-45f,    -1e-45f,
                                   1e-40f,  128.0f, 127.99f, -126.0f, -140.5f, -149.0f,   -150.0f,
                                   -200.0f, 1e10f,  1e30f,   -1e30f,  3.4e38f, 8388609.0f};
  std::vector<float> x = special;
  for (float f : spread(-30, 127, 8, 1)) x.push_back(f);
  for (int i = 0; i < 400; ++i) x.push_back(-155.0f + 0.1f * float(i));  // exp2's subnormal results
  for (int i = 0; i < 1000; ++i) x.push_back(0.5f + 0.0015f * float(i));    // log2 near 1
  for (int i = 0; i < 1000; ++i) x.push_back(-150.0f + 0.278f * float(i));  // exp2's whole range
  Tensor vk = floats(x, "VK");
  const std::vector<float> e = vk.exp2().to_vector<float>(), l = vk.log2().to_vector<float>(),
                           s = vk.sin().to_vector<float>();
  const std::vector<float> ce = floats(x, "CPU").exp2().to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i) {
    SCOPED_TRACE("x = " + std::to_string(x[i]) + " (bits " + std::to_string(bits(x[i])) + ")");
    auto near = [](float got, double want, uint64_t max_ulps) {
      const float w = float(want);
      return ulps(dtypes::float32, reinterpret_cast<const std::byte*>(&got),
                  reinterpret_cast<const std::byte*>(&w)) <= max_ulps;
    };
    EXPECT_PRED3(near, e[i], std::exp2(double(x[i])), 2);
    EXPECT_PRED3(near, l[i], std::log2(double(x[i])), 2);
    EXPECT_PRED3(near, s[i], std::sin(double(x[i])), 2);
    EXPECT_PRED3(near, e[i], double(ce[i]), 2);
  }
}

// Vulkan allows 2.5 ulp for x / y, and Lavapipe turns x / c for a constant c into x * (1 / c);
// vkgrad's division is correctly rounded, as the CPU's is, so the two agree bit for bit, and
// var() of 1..4 is 1.6666666 (samples/var.cpp printed 1.6666667).
TEST(Traps, FloatDivisionAndSqrtAreCorrectlyRounded) {
  std::vector<float> a = spread(-60, 60, 40, 2), b = spread(-60, 60, 40, 3);
  std::shuffle(b.begin(), b.end(), std::mt19937(4));
  const std::vector<float> small{1, 2, 3, 5, 7, 10, 1e-3f, 0.1f, 3.3f};
  for (float x : small)
    for (float y : small) a.push_back(x), b.push_back(y);
  std::vector<float> q(a.size()), r(a.size()), root(a.size());
  for (size_t i = 0; i < a.size(); ++i)
    q[i] = a[i] / b[i], r[i] = 1.0f / b[i], root[i] = std::sqrt(std::fabs(a[i]));
  for (const std::string dev : {"CPU", "VK"}) {
    SCOPED_TRACE(dev);
    Tensor ta = floats(a, dev), tb = floats(b, dev);
    EXPECT_TRUE(same_elements(dtypes::float32, Tensor(q, {int64_t(q.size())}, "CPU").bytes(),
                              (ta / tb).bytes()));
    EXPECT_TRUE(same_elements(dtypes::float32, Tensor(r, {int64_t(r.size())}, "CPU").bytes(),
                              tb.reciprocal().bytes()));
    EXPECT_TRUE(same_elements(dtypes::float32, Tensor(root, {int64_t(root.size())}, "CPU").bytes(),
                              ta.abs().sqrt().bytes()));
    EXPECT_EQ(floats({1, 2, 3, 4}, dev).var().item<float>(), 1.6666666f);
    EXPECT_EQ(bits(floats({1, 2, 3, 4}, dev).var().item<float>()), 0x3fd55555u);
    // Division by a constant (var's / 3), which Lavapipe rewrites, over 4096 elements: the
    // kernel is upcast, so the vector form is checked too.
    const std::vector<float> x = spread(-40, 23, 64, 5);
    for (float c : {3.0f, 7.0f, 10.0f, 0.1f, 3.3f, 1e-30f, 1e30f}) {
      SCOPED_TRACE(c);
      std::vector<float> want(x.size());
      for (size_t i = 0; i < x.size(); ++i) want[i] = x[i] / c;
      EXPECT_EQ((floats(x, dev) / c).to_vector<float>(), want);
    }
  }
  // float16 and float64 divide exactly too (float16 through float32, as the CPU does).
  for (DType d : {dtypes::float16, dtypes::float64}) {
    SCOPED_TRACE(d.name());
    EXPECT_TRUE(cpu_vk_agree(
        [&](const std::string& dev) { return floats(a, dev).cast(d) / floats(b, dev).cast(d); }));
    EXPECT_TRUE(
        cpu_vk_agree([&](const std::string& dev) { return floats(a, dev).cast(d).abs().sqrt(); }));
  }
}

// bool is one byte per element in buffers: written as 0/1, any nonzero byte reads as true.
TEST(Traps, BoolTensorsRoundTripThroughStorage) {
  for (const std::string dev : {"CPU", "VK"}) {
    SCOPED_TRACE(dev);
    Tensor b(std::vector<bool>{true, false, true, true, false, false, true}, {7}, dev);
    EXPECT_EQ(b.to_vector<bool>(),
              (std::vector<bool>{true, false, true, true, false, false, true}));
    Tensor stored =
        b.ne(Tensor::full({}, true, dtypes::bool_, dev)).realize();  // a kernel writes bools
    EXPECT_EQ(stored.to_vector<bool>(),
              (std::vector<bool>{false, true, false, false, true, true, false}));
    const std::vector<std::byte> raw = stored.bytes();
    for (std::byte x : raw) EXPECT_TRUE(x == std::byte{0} || x == std::byte{1});
    // Bytes other than 1 read as true (a bitcast-free way in: raw bytes with dtype bool).
    const std::vector<std::byte> odd{std::byte{0}, std::byte{2}, std::byte{255}, std::byte{128}};
    Tensor fromraw(odd, 4, dtypes::bool_, {4}, dev);
    EXPECT_EQ(fromraw.cast(dtypes::int32).to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 1, 1}));
    EXPECT_EQ(fromraw.sum().item<int32_t>(), 3);
    EXPECT_EQ((b + fromraw.pad({{0, 3}})).to_vector<bool>(),
              (std::vector<bool>{true, true, true, true, false, false, true}));
    EXPECT_EQ(
        b.where(Tensor::full({}, 5, dtypes::int8, dev), Tensor::full({}, -5, dtypes::int8, dev))
            .to_vector<int8_t>(),
        (std::vector<int8_t>{5, -5, 5, 5, -5, -5, 5}));
  }
}

// Vulkan guarantees 4 storage-buffer bindings per stage (Lavapipe has 32); 40 inputs fused into
// one kernel pass their addresses through a spilled argument buffer.
TEST(Traps, FortyInputsInOneFusedKernel) {
  for (const std::string dev : {"CPU", "VK"}) {
    SCOPED_TRACE(dev);
    Tensor total = Tensor::zeros({100}, dtypes::int32, dev);
    std::vector<int32_t> want(100, 0);
    for (int k = 0; k < 40; ++k) {
      std::vector<int32_t> v(100);
      for (int j = 0; j < 100; ++j) v[size_t(j)] = (j * (k + 1)) % 17 - k;
      for (int j = 0; j < 100; ++j) want[size_t(j)] += v[size_t(j)] * (k % 3 + 1);
      total = total + Tensor(v, {100}, dev) * (k % 3 + 1);
    }
    EXPECT_EQ(create_schedule({total.node()}).items.size(), 1u);
    EXPECT_EQ(create_schedule({total.node()}).items[0].buffers.size(), 41u);
    EXPECT_EQ(total.to_vector<int32_t>(), want);
  }
}

// 65535 workgroups per grid axis: larger launches fold into more axes. Prime sizes leave a
// ragged last workgroup.
TEST(Traps, MoreWorkgroupsThanOneGridAxisWithPrimeSizes) {
  for (int64_t n : {int64_t(4194319), int64_t(1000003), int64_t(65537)}) {
    SCOPED_TRACE(n);
    std::vector<int32_t> v(static_cast<size_t>(n));
    std::iota(v.begin(), v.end(), 0);
    Tensor x(v, {n}, "VK");
    for (int noopt : {1, 0}) {
      ScopedSetting s("NOOPT", noopt);
      const std::vector<int32_t> y = (x * 2 - x.flip({0})).to_vector<int32_t>();
      int64_t wrong = 0;
      for (int64_t i = 0; i < n; ++i) wrong += y[size_t(i)] != int32_t(2 * i - (n - 1 - i));
      EXPECT_EQ(wrong, 0) << "NOOPT=" << noopt;
    }
  }
}

// Lavapipe stops every loop after 65535 iterations per invocation (nested loops counted
// together), silently. Reduces over more elements than that must still see all of them.
TEST(Traps, ReducesLongerThanLavapipesLoopLimitSeeEveryElement) {
  for (int64_t n : {int64_t(65537), int64_t(70001), int64_t(1000003)}) {
    SCOPED_TRACE(n);
    std::vector<int32_t> v(static_cast<size_t>(n));
    std::iota(v.begin(), v.end(), -int32_t(n / 2));
    Tensor x(v, {n}, "VK");
    EXPECT_EQ(x.max().item<int32_t>(), v.back());
    EXPECT_EQ(x.flip({0}).max().item<int32_t>(), v.back());
    EXPECT_EQ((-x).max().item<int32_t>(), -v.front());
    EXPECT_EQ(x.cast(dtypes::int64).sum().item<int64_t>(),
              std::accumulate(v.begin(), v.end(), int64_t(0)));
    EXPECT_EQ(Tensor::ones({n}, dtypes::float32, "VK").sum().item<float>(), float(n));
  }
  // Nested loops: 301 x 307 reduced in one kernel, read through a permuted and flipped view.
  for (const std::string dev : {"CPU", "VK"}) {
    Tensor ones = Tensor::ones({301, 307}, dtypes::int32, dev).contiguous();
    EXPECT_EQ(ones.permute({1, 0}).flip({0}).sum().item<int32_t>(), 301 * 307) << dev;
    EXPECT_EQ(ones.sum(0, true).to_vector<int32_t>(), std::vector<int32_t>(307, 301)) << dev;
    // A dot product over 100000 elements, and a matmul with a long inner dimension.
    std::vector<float> a(100000, 0.5f), b(100000, 2.0f);
    EXPECT_EQ(Tensor(a, {100000}, dev).dot(Tensor(b, {100000}, dev)).item<float>(), 100000.0f)
        << dev;
    EXPECT_EQ(Tensor(a, {2, 50000}, dev).matmul(Tensor(b, {50000, 2}, dev)).to_vector<float>(),
              std::vector<float>(4, 50000.0f))
        << dev;
  }
}

// Long reduces over some axes only: the kept axes stay in place, keepdim included, and a reduce
// with more outputs than one grid axis holds workgroups.
TEST(Traps, LongReducesOverSomeAxesAgreeWithTheCpu) {
  EXPECT_TRUE(cpu_vk_agree([](const std::string& dev) {
    return random_tensor(dtypes::int32, {40000, 3}, dev, 1).sum(0);
  }));
  EXPECT_TRUE(cpu_vk_agree([](const std::string& dev) {
    return random_tensor(dtypes::float32, {3, 190, 190}, dev, 2).max({1, 2}, true);
  }));
  EXPECT_TRUE(cpu_vk_agree([](const std::string& dev) {
    return random_tensor(dtypes::int16, {2, 181, 3, 191}, dev, 3).permute({1, 0, 3, 2}).sum({0, 2});
  }));
  EXPECT_TRUE(cpu_vk_agree(
      [](const std::string& dev) {
        return random_tensor(dtypes::float32, {33000, 2}, dev, 4, true).var(0);
      },
      4));
  const std::vector<int32_t> rows =
      Tensor::ones({4194319, 3}, dtypes::int32, "VK").sum(1).to_vector<int32_t>();
  EXPECT_EQ(std::count(rows.begin(), rows.end(), 3), 4194319);
}

// 41M int32 is 164 MB: past maxStorageBufferRange (128 MiB on Lavapipe), which device addresses
// do not have. The values are made on the device (index = row * 4096 + column) so the host only
// reads them back.
TEST(Traps, ATensorOver128MiBIsComputedWhole) {
  const int64_t rows = 10000, cols = 4096, n = rows * cols;
  Tensor col = Tensor::arange(0, cols, 1, "VK").reshape({1, cols});
  Tensor row = Tensor::arange(0, rows, 1, "VK").reshape({rows, 1}) * int32_t(cols);
  Tensor index = (row + col).contiguous().realize();  // 164 MB
  ASSERT_GT(n * 4, int64_t(128) << 20);
  const std::vector<std::byte> raw = (index.reshape({n}).flip({0}) * 2 + 1).bytes();
  ASSERT_EQ(raw.size(), size_t(n) * 4);
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) {
    int32_t v;
    std::memcpy(&v, raw.data() + i * 4, 4);
    wrong += v != int32_t(2 * (n - 1 - i) + 1);
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(index.max().item<int32_t>(), int32_t(n - 1));
  EXPECT_EQ(index.reshape({n}).shrink({{n - 3, n}}).contiguous().to_vector<int32_t>(),
            (std::vector<int32_t>{int32_t(n - 3), int32_t(n - 2), int32_t(n - 1)}));
}
