// bfloat16 on Vulkan, and float16 on a device without shaderFloat16 (forced by VKG_NO_FLOAT16,
// since Lavapipe has it): 16 bits in buffers, float32 in registers, rounded back after every op
// (codegen/glsl_half.cpp). Casts agree with the CPU device bit for bit (round to nearest even,
// nan stays nan, overflow to inf, subnormals); elementwise ops, reductions, matmul, gradients,
// uploads and safetensors go through.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>

#include "support/device_compare.hpp"

using namespace vkg;
using namespace vkg::test;

namespace {

// Floats that probe the rounding of both 16-bit formats: exact ties (to even, down and up), a
// bit either side of them, the largest values that still round to a finite number and the
// smallest that overflow, subnormals of both formats, nan with payloads and signs, -0, inf.
std::vector<float> rounding_probes() {
  std::vector<float> v{0.0f,
                       -0.0f,
                       1.0f,
                       -1.0f,
                       std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity(),
                       std::bit_cast<float>(0x7fc00000u),
                       std::bit_cast<float>(0xffc01234u),
                       std::bit_cast<float>(0x7f800001u),
                       std::numeric_limits<float>::max(),
                       65504.0f,
                       65519.99f,
                       65520.0f,
                       3.3895313e38f,
                       3.3961776e38f,
                       1e-40f,
                       -1e-45f,
                       6e-8f,
                       2.9802322e-8f,
                       2.9802326e-8f,
                       6.1035156e-5f,
                       6.097555e-5f};
  for (float base : {1.0f, -3.0f, 1e-20f, 5e30f, 0.1f, 1000.0f}) {
    const uint32_t b = std::bit_cast<uint32_t>(base);
    for (uint32_t low : {0x7fffu, 0x8000u, 0x8001u, 0x18000u, 0xfffu, 0x1000u, 0x1001u, 0x3000u})
      v.push_back(std::bit_cast<float>((b & 0xffff0000u) + low));
  }
  return v;
}

std::vector<uint16_t> bits16(const Tensor& t) {
  std::vector<uint16_t> out;
  const std::vector<std::byte> b = t.bytes();
  for (size_t i = 0; i + 1 < b.size(); i += 2)
    out.push_back(uint16_t(uint16_t(b[i]) | uint16_t(b[i + 1]) << 8));
  return out;
}

// Every value `make` gives on Vulkan has the CPU device's bits.
template <class Make>
void expect_same_bits(Make&& make) {
  const Tensor cpu = make(std::string("CPU")), vk = make(std::string("VK"));
  ASSERT_EQ(cpu.dtype(), vk.dtype());
  EXPECT_EQ(cpu.bytes(), vk.bytes()) << cpu.dtype().name();
}

using Op = std::function<Tensor(const Tensor&, const Tensor&)>;
struct NamedOp {
  const char* name;
  Op f;
  uint64_t ulps;  // 0: the op is exact in float32 or one float32 rounding of it
};

std::vector<NamedOp> elementwise_ops() {
  return {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }, 0},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }, 0},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }, 0},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }, 0},
      {"maximum", [](const Tensor& a, const Tensor& b) { return a.maximum(b); }, 0},
      {"minimum", [](const Tensor& a, const Tensor& b) { return a.minimum(b); }, 0},
      {"where", [](const Tensor& a, const Tensor& b) { return a.lt(b).where(a, -b); }, 0},
      {"eq", [](const Tensor& a, const Tensor& b) { return a.eq(b); }, 0},
      {"mulacc", [](const Tensor& a, const Tensor& b) { return a * b + a; }, 0},
      {"fmod", [](const Tensor& a, const Tensor& b) { return a.fmod(b); }, 0},
      {"remainder", [](const Tensor& a, const Tensor& b) { return a.remainder(b); }, 0},
      {"abs", [](const Tensor& a, const Tensor&) { return a.abs(); }, 0},
      {"trunc", [](const Tensor& a, const Tensor&) { return a.trunc(); }, 0},
      {"signbit", [](const Tensor& a, const Tensor&) { return a.signbit(); }, 0},
      {"isnan", [](const Tensor& a, const Tensor&) { return a.isnan(); }, 0},
      {"sqrt", [](const Tensor& a, const Tensor&) { return a.abs().sqrt(); }, 1},
      {"exp2", [](const Tensor& a, const Tensor&) { return a.exp2(); }, 1},
      {"log2", [](const Tensor& a, const Tensor&) { return a.abs().log2(); }, 1},
      {"sin", [](const Tensor& a, const Tensor&) { return a.sin(); }, 1},
      {"erf", [](const Tensor& a, const Tensor&) { return a.erf(); }, 1},
  };
}

}  // namespace

TEST(HalfEmulation, CastsToBFloat16RoundAsTheCpuDeviceBitForBit) {
  const std::vector<float> p = rounding_probes();
  const int64_t n = int64_t(p.size());
  // Hand-checked: ties go to even, a bit past a tie goes up, nan stays a (quiet) nan, FLT_MAX
  // overflows to inf, -0 keeps its sign, a float32 subnormal becomes a bfloat16 subnormal.
  const Tensor hand(std::vector<float>{1.00390625f, 1.01171875f, std::bit_cast<float>(0x3f808001u),
                                       std::numeric_limits<float>::max(),
                                       std::bit_cast<float>(0x7f800001u), -0.0f, 1e-40f},
                    {7}, "VK");
  EXPECT_EQ(bits16(hand.cast(dtypes::bfloat16)),
            (std::vector<uint16_t>{0x3f80, 0x3f82, 0x3f81, 0x7f80, 0x7fc0, 0x8000, 0x0001}));
  expect_same_bits(
      [&](const std::string& dev) { return Tensor(p, {n}, dev).cast(dtypes::bfloat16); });
  for (DType from : {dtypes::float64, dtypes::int32, dtypes::int64, dtypes::uint8, dtypes::bool_,
                     dtypes::float16}) {
    SCOPED_TRACE(from.name());
    expect_same_bits([&](const std::string& dev) {
      return random_tensor(from, {97}, dev, 11).cast(dtypes::bfloat16);
    });
  }
  // And back: every bfloat16 to each dtype, and the float32 the host reads.
  const Tensor all_bits = Tensor::arange(0, 65536, 1).cast(dtypes::uint16);
  for (DType to : {dtypes::float32, dtypes::float64, dtypes::int32, dtypes::uint8, dtypes::int64,
                   dtypes::bool_}) {
    SCOPED_TRACE(to.name());
    EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) {
      return all_bits.to(dev).bitcast(dtypes::bfloat16).cast(to);
    }));
  }
  std::vector<float> host;
  for (uint32_t b = 0; b < 65536; ++b) host.push_back(float(bfloat16_t::from_bits(uint16_t(b))));
  const std::vector<float> vk =
      all_bits.to("VK").bitcast(dtypes::bfloat16).cast(dtypes::float32).to_vector<float>();
  for (size_t i = 0; i < host.size(); ++i)
    ASSERT_TRUE(std::bit_cast<uint32_t>(host[i]) == std::bit_cast<uint32_t>(vk[i]) ||
                (std::isnan(host[i]) && std::isnan(vk[i])))
        << i;
}

TEST(HalfEmulation, BFloat16ElementwiseOpsAgreeWithTheCpuDevice) {
  for (const NamedOp& op : elementwise_ops()) {
    SCOPED_TRACE(op.name);
    // 1027 elements: the kernels upcast, and the tail is odd.
    EXPECT_TRUE(cpu_vk_agree(
        [&](const std::string& dev) {
          return op.f(random_tensor(dtypes::bfloat16, {1027}, dev, 1),
                      random_tensor(dtypes::bfloat16, {1027}, dev, 2));
        },
        op.ulps));
  }
}

TEST(HalfEmulation, BFloat16ReductionsMatmulAndGradients) {
  auto data = [](const std::string& dev, Shape s, uint32_t seed) {
    return random_tensor(dtypes::bfloat16, std::move(s), dev, seed, /*finite=*/true);
  };
  // Reductions accumulate in float32 on both; the sums' order differs, so one bfloat16 ulp.
  EXPECT_TRUE(cpu_vk_agree(
      [&](const std::string& dev) {
        return data(dev, {37, 45}, 3).sum(1);
      },
      1));
  EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) { return data(dev, {37, 45}, 3).max(0); }));
  EXPECT_TRUE(cpu_vk_agree(
      [&](const std::string& dev) {
        return data(dev, {37, 45}, 3).mean();
      },
      1));
  EXPECT_TRUE(cpu_vk_agree(
      [&](const std::string& dev) {
        return data(dev, {33, 40}, 4).matmul(data(dev, {40, 17}, 5));
      },
      1));
  // A closed form: the sum of 1..256 is 32896 = 2^15 + 128, a tie between bfloat16's 32768 and
  // 33024 (8 significant bits), which goes to the even 32768; 1..255 sum to 32640, exact.
  for (const char* dev : {"CPU", "VK"}) {
    const Tensor n = Tensor::arange(1, 257, 1, dev).cast(dtypes::bfloat16);
    EXPECT_EQ(n.sum().cast(dtypes::float32).item<float>(), 32768.0f) << dev;
    EXPECT_EQ(Tensor::arange(1, 256, 1, dev)
                  .cast(dtypes::bfloat16)
                  .sum()
                  .cast(dtypes::float32)
                  .item<float>(),
              32640.0f)
        << dev;
  }
  // d/dx sum(x * x) = 2x, exact in bfloat16.
  for (const char* dev : {"CPU", "VK"}) {
    const Tensor x = data(dev, {5, 7}, 6).requires_grad_();
    (x * x).sum().backward();
    EXPECT_EQ(x.grad()->bytes(), (x.detach() * 2).bytes()) << dev;
    EXPECT_EQ(x.grad()->dtype(), dtypes::bfloat16);
  }
}

TEST(HalfEmulation, BFloat16UploadsDownloadsAndSafetensors) {
  const Tensor x = random_tensor(dtypes::bfloat16, {3, 5}, "VK", 7);
  const std::vector<bfloat16_t> back = x.to_vector<bfloat16_t>();
  EXPECT_EQ(Tensor(back, {3, 5}, "VK").bytes(), x.bytes());
  const std::string path = ::testing::TempDir() + "/vkg_half_emulation.safetensors";
  const Tensor y = (x * 3).realize();
  nn::save_safetensors(path, {{"y", y}});
  const nn::StateDict loaded = nn::load_safetensors(path, "VK");
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].second.dtype(), dtypes::bfloat16);
  EXPECT_EQ(loaded[0].second.bytes(), y.bytes());
  EXPECT_EQ((loaded[0].second + 0).bytes(), (y + 0).bytes());
  std::remove(path.c_str());
}

// float16 on a device without shaderFloat16: the same ops through float32, the same bits as the
// CPU device (and as the device's own float16 arithmetic).
TEST(HalfEmulation, Float16WithoutShaderFloat16AgreesWithTheCpuDevice) {
  const std::vector<float> p = rounding_probes();
  const int64_t n = int64_t(p.size());
  const Tensor native = Tensor(p, {n}, "VK").cast(dtypes::float16).realize();
  ScopedSetting emulate("VKG_NO_FLOAT16", 1);
  expect_same_bits(
      [&](const std::string& dev) { return Tensor(p, {n}, dev).cast(dtypes::float16); });
  EXPECT_EQ(Tensor(p, {n}, "VK").cast(dtypes::float16).bytes(), native.bytes());
  for (const NamedOp& op : elementwise_ops()) {
    SCOPED_TRACE(op.name);
    EXPECT_TRUE(cpu_vk_agree(
        [&](const std::string& dev) {
          return op.f(random_tensor(dtypes::float16, {1027}, dev, 1),
                      random_tensor(dtypes::float16, {1027}, dev, 2));
        },
        op.ulps));
  }
  for (DType to : {dtypes::float32, dtypes::bfloat16, dtypes::int16, dtypes::uint8}) {
    SCOPED_TRACE(to.name());
    expect_same_bits([&](const std::string& dev) {
      return random_tensor(dtypes::float16, {301}, dev, 9).cast(to);
    });
  }
  auto data = [](const std::string& dev, Shape s, uint32_t seed) {
    return random_tensor(dtypes::float16, std::move(s), dev, seed, /*finite=*/true);
  };
  EXPECT_TRUE(cpu_vk_agree(
      [&](const std::string& dev) {
        return data(dev, {33, 40}, 4).matmul(data(dev, {40, 17}, 5));
      },
      1));
  EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) { return data(dev, {64, 45}, 3).max(1); }));
}

// Without 16-bit storage (forced by VKG_NO_STORAGE16): float16 and bfloat16 buffers hold two
// elements per uint; neighbouring invocations store the two halves of a word at once (atomicAnd,
// atomicOr), odd lengths end in half a word. The same bits as the CPU device.
TEST(HalfEmulation, WithoutSixteenBitStorageTwoElementsShareAWord) {
  ScopedSetting packed("VKG_NO_STORAGE16", 1);
  const std::vector<float> p = rounding_probes();
  const int64_t n = int64_t(p.size());
  for (DType d : {dtypes::bfloat16, dtypes::float16}) {
    SCOPED_TRACE(d.name());
    expect_same_bits([&](const std::string& dev) { return Tensor(p, {n}, dev).cast(d); });
    for (int64_t len : {1, 5, 1027}) {
      expect_same_bits([&](const std::string& dev) {
        return random_tensor(d, {len}, dev, 1) * random_tensor(d, {len}, dev, 2) -
               random_tensor(d, {len}, dev, 3);
      });
    }
    EXPECT_TRUE(cpu_vk_agree(
        [&](const std::string& dev) {
          return random_tensor(d, {33, 40}, dev, 4, true)
              .matmul(random_tensor(d, {40, 17}, dev, 5, true));
        },
        1));
    EXPECT_TRUE(cpu_vk_agree([&](const std::string& dev) {
      return random_tensor(d, {37, 45}, dev, 6).max(1);
    }));
    // Uploads and downloads are bytes: a packed buffer reads back as the host wrote it.
    const Tensor x = random_tensor(d, {7}, "VK", 7);
    EXPECT_EQ((x + 0).bytes(), (random_tensor(d, {7}, "CPU", 7) + 0).bytes());
  }
  // int16 has no packed form: an error naming the missing feature.
  std::string e;
  try {
    (Tensor(std::vector<int16_t>{1, 2}, {2}, "VK") + 1).realize();
  } catch (const Error& err) {
    e = err.what();
  }
  EXPECT_NE(e.find("storageBuffer16BitAccess"), std::string::npos) << e;
}
