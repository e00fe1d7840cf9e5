// bitcast between element sizes, torch's view(dtype): the last axis changes length, bytes in
// little-endian order, against the host's memcpy of the same values on Vulkan and the CPU device;
// round trips; bool, 16-bit floats and 64-bit words; torch's shape rule as errors.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <limits>

#include <vkgrad/core/schedule.hpp>

#include "support/device_compare.hpp"
#include "support/error_of.hpp"

using namespace vkg;
using namespace vkg::test;

namespace {

// The bytes of `from` read as To elements: what view(dtype) gives on a little-endian host.
template <class To, class From>
std::vector<To> host_view(const std::vector<From>& from) {
  std::vector<To> out(from.size() * sizeof(From) / sizeof(To));
  std::memcpy(out.data(), from.data(), out.size() * sizeof(To));
  return out;
}

template <class T>
std::vector<uint64_t> raw(const std::vector<T>& v) {
  std::vector<uint64_t> out;
  for (const T& x : v) {
    uint64_t b = 0;
    std::memcpy(&b, &x, sizeof(T));
    out.push_back(b);
  }
  return out;
}

}  // namespace

TEST(BitcastSizes, FloatToBytesAndBack) {
  const std::vector<float> f{1.0f,  -2.5f,  std::numeric_limits<float>::infinity(),
                             -0.0f, 1e-40f, std::bit_cast<float>(0x7fc01234u)};
  for (const char* dev : {"CPU", "VK"}) {
    const Tensor x(f, {3, 2}, dev);
    const Tensor bytes = x.bitcast(dtypes::uint8);
    EXPECT_EQ(bytes.shape(), (Shape{3, 8})) << dev;
    EXPECT_EQ(bytes.to_vector<uint8_t>(), host_view<uint8_t>(f)) << dev;
    const Tensor back = bytes.bitcast(dtypes::float32);
    EXPECT_EQ(back.shape(), (Shape{3, 2})) << dev;
    EXPECT_EQ(raw(back.to_vector<float>()), raw(f)) << dev;
    // Computed values on either side, in one graph: (x * 2) as bytes, the bytes plus 0 as floats.
    EXPECT_EQ((x * 2).bitcast(dtypes::int8).to_vector<int8_t>(),
              host_view<int8_t>((x * 2).to_vector<float>()))
        << dev;
  }
}

TEST(BitcastSizes, Int64AndInt32Pairs) {
  const std::vector<int64_t> w{0x0000000100000002, -1, INT64_MIN, 0x7ffffffe80000001};
  for (const char* dev : {"CPU", "VK"}) {
    const Tensor x(w, {2, 2}, dev);
    const Tensor halves = x.bitcast(dtypes::int32);
    EXPECT_EQ(halves.shape(), (Shape{2, 4})) << dev;
    EXPECT_EQ(halves.to_vector<int32_t>(), host_view<int32_t>(w)) << dev;
    EXPECT_EQ(halves.to_vector<int32_t>()[0], 2) << dev;  // the low word comes first
    EXPECT_EQ(halves.bitcast(dtypes::int64).to_vector<int64_t>(), w) << dev;
    EXPECT_EQ(x.bitcast(dtypes::uint16).to_vector<uint16_t>(), host_view<uint16_t>(w)) << dev;
    const std::vector<double> d{1.5, -0.0, 1e-310};
    EXPECT_EQ(Tensor(d, {3}, dev).bitcast(dtypes::uint8).to_vector<uint8_t>(),
              host_view<uint8_t>(d))
        << dev;
  }
}

TEST(BitcastSizes, SixteenBitFloatsAndBool) {
  const std::vector<float16_t> h{float16_t(1.0f), float16_t(-0.5f), float16_t(65504.0f),
                                 float16_t(6e-8f)};
  const std::vector<bfloat16_t> b{bfloat16_t(1.0f), bfloat16_t(-3.0e38f), bfloat16_t(1e-40f),
                                  bfloat16_t(-0.0f)};
  for (const char* dev : {"CPU", "VK"}) {
    EXPECT_EQ(Tensor(h, {4}, dev).bitcast(dtypes::uint8).to_vector<uint8_t>(),
              host_view<uint8_t>(h))
        << dev;
    EXPECT_EQ(raw(Tensor(h, {4}, dev).bitcast(dtypes::float32).to_vector<float>()),
              raw(host_view<float>(h)))
        << dev;
    EXPECT_EQ(Tensor(b, {2, 2}, dev).bitcast(dtypes::int32).to_vector<int32_t>(),
              host_view<int32_t>(b))
        << dev;
    EXPECT_EQ(raw(Tensor(host_view<uint8_t>(b), {8}, dev)
                      .bitcast(dtypes::bfloat16)
                      .to_vector<bfloat16_t>()),
              raw(b))
        << dev;
    // bool is its byte, 0 or 1.
    EXPECT_EQ(Tensor::full({1, 2}, true, dtypes::bool_, dev)
                  .bitcast(dtypes::uint16)
                  .to_vector<uint16_t>(),
              (std::vector<uint16_t>{0x0101}))
        << dev;
    EXPECT_EQ(
        Tensor(std::vector<uint16_t>{0x0100}, {1}, dev).bitcast(dtypes::bool_).to_vector<bool>(),
        (std::vector<bool>{false, true}))
        << dev;
  }
}

TEST(BitcastSizes, ShapesAndErrorsAsTorch) {
  // Empty and broadcast inputs keep their leading axes.
  EXPECT_EQ(Tensor::zeros({0, 2}).bitcast(dtypes::uint8).shape(), (Shape{0, 8}));
  const Tensor row(std::vector<int32_t>{1, 2}, {1, 2});
  EXPECT_EQ(row.expand({3, 2}).bitcast(dtypes::int16).to_vector<int16_t>(),
            (std::vector<int16_t>{1, 0, 2, 0, 1, 0, 2, 0, 1, 0, 2, 0}));
  // A permuted tensor is read in its logical order (torch: x.contiguous().view(dtype)).
  const Tensor m(std::vector<int16_t>{1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(m.permute({1, 0}).bitcast(dtypes::int32).to_vector<int32_t>(),
            (std::vector<int32_t>{1 + (3 << 16), 2 + (4 << 16)}));
  std::string e = error_of([] { Tensor::full({}, 1.0f).bitcast(dtypes::uint8); });
  EXPECT_NE(e.find("bitcast: cannot view float32 () as uint8"), std::string::npos) << e;
  EXPECT_NE(e.find("0-d"), std::string::npos) << e;
  e = error_of([] { Tensor::zeros({2, 6}, dtypes::int8).bitcast(dtypes::float32); });
  EXPECT_NE(e.find("bitcast: cannot view int8 (2, 6) as float32"), std::string::npos) << e;
  EXPECT_NE(e.find("last dimension (6) must be divisible by 4"), std::string::npos) << e;
  // Same size stays one elementwise op and still refuses what has no value type.
  EXPECT_NE(error_of([] { Tensor::zeros({2}).bitcast(dtypes::void_); }).find("bitcast"),
            std::string::npos);
}

// Arithmetic, not aliasing, so it fuses: splitting a computed float32 into bytes is one kernel
// with the multiply, joining bytes into words one reduce kernel (the shift amounts are a small
// uploaded constant, not a kernel).
TEST(BitcastSizes, FusesIntoOneKernel) {
  auto kernels = [](const Tensor& t) {
    size_t n = 0;
    for (const auto& item : create_schedule({t.node()}).items) n += item.ast->op == Ops::SINK;
    return n;
  };
  const Tensor x = Tensor(std::vector<float>{1.5f, -2.0f, 3.0f, 0.25f}, {2, 2}).realize();
  EXPECT_EQ(kernels((x * 2).bitcast(dtypes::uint8)), 1u);
  const Tensor b = x.bitcast(dtypes::uint8).realize();
  EXPECT_EQ(kernels((b + 0).bitcast(dtypes::float32) * 3), 1u);
}
