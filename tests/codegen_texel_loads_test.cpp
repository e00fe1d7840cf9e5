// Read-only 32-bit buffers read as uniform texel buffers (GlslTarget::texel_loads,
// ArgLayout::texel): which buffers qualify, what the GLSL declares, and on the device that every
// bit comes through (nan payloads, denormals, -0, inf) in scalar and vector loads, aligned or not,
// next to a buffer past the texel limit that stays a storage buffer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <vkgrad/codegen/glsl_launch.hpp>
#include <vkgrad/core/scatter_combine.hpp>
#include <vkgrad/devices/vk_target.hpp>

#include "support/kernel_agree.hpp"
#include "support/linear_programs.hpp"
#include "support/render_and_compile.hpp"

namespace vkg::test {
namespace {

using B = ProgramBuilder;

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

GlslTarget texel_target(uint64_t max_elements) {
  GlslTarget t = GlslTarget::everything();
  t.max_bound_buffers = 16;
  t.max_storage_buffer_range = 1 << 20;
  t.texel_loads = true;
  t.max_texel_buffer_elements = max_elements;
  t.max_texel_descriptors = 16;
  return t;
}

// out_f[i] = f[i] (scalar), out_v[4i..4i+3] = v[4i..] (aligned vec4), out_u[4i..] = u[4i+1..]
// (unaligned vec4), out_i[i] = i32[i] + 0, out_big[i] = big[i], out_l[i] = l[i] (int64), with
// 4 invocations: every buffer holds 16 elements but the uint one 20.
Program copies() {
  B b("E_texel_copies");
  auto out_f = b.global(dtypes::float32, 16, true), out_v = b.global(dtypes::float32, 16, true),
       out_u = b.global(dtypes::uint32, 16, true), out_i = b.global(dtypes::int32, 16, true),
       out_big = b.global(dtypes::float32, 16, true), out_l = b.global(dtypes::int64, 16, true);
  auto f = b.global(dtypes::float32, 16), v = b.global(dtypes::float32, 16),
       u = b.global(dtypes::uint32, 20), i32 = b.global(dtypes::int32, 16),
       big = b.global(dtypes::float32, 16), l = b.global(dtypes::int64, 16);
  auto i = b.special("lidx0", 4);
  for (int k = 0; k < 4; ++k) {
    auto at = i * 4 + k;
    b.store(out_f, at, b.load(f, at));
    b.store(out_i, at, b.load(i32, at));
    b.store(out_big, at, b.load(big, at));
    b.store(out_l, at, b.load(l, at));
  }
  b.store(out_v, i * 4, b.load(v, i * 4, nullptr, nullptr, 4));
  b.store(out_u, i * 4, b.load(u, i * 4 + 1, nullptr, nullptr, 4));
  return b.build({1, 1, 1}, {4, 1, 1});
}

TEST(TexelLoads, ReadOnly32BitBuffersWithinTheLimitAreTexelBuffers) {
  const Program p = copies();
  const ArgLayout l = arg_layout(p, texel_target(1 << 20));
  ASSERT_TRUE(l.bound);
  // Written buffers (0-5) and int64 (11) stay storage buffers; v gets a quad view and no word
  // view (it is read by aligned vec4s only), u no quad view: its vec4 at 4i + 1 is never
  // aligned, so the renderer reads it lane by lane through the word view.
  EXPECT_EQ(l.texel, (std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 1, 4, 1, 1, 1, 0}));
  const std::string s = render_and_compile(p, texel_target(1 << 20));
  EXPECT_TRUE(has(s, "layout(set = 0, binding = 6) uniform usamplerBuffer data6;")) << s;
  EXPECT_TRUE(has(s, "layout(set = 0, binding = 31) uniform usamplerBuffer data7x4;")) << s;
  EXPECT_TRUE(has(s, "uintBitsToFloat(texelFetch(data6, ")) << s;
  EXPECT_TRUE(has(s, "uintBitsToFloat(texelFetch(data7x4, ")) << s;  // aligned: one texel
  EXPECT_TRUE(has(s, "int(texelFetch(data9, ")) << s;
  EXPECT_TRUE(has(s, "readonly buffer Data11 { int64_t v[]; } data11;")) << s;
  EXPECT_TRUE(has(s, "layout(std430, set = 0, binding = 0) buffer Data0 { float v[]; }")) << s;
  EXPECT_FALSE(has(s, "Data6")) << s;
  EXPECT_FALSE(has(s, "data8x4")) << s;  // no descriptor the kernel never reads
  EXPECT_FALSE(has(s, "usamplerBuffer data7;")) << s;
}

TEST(TexelLoads, BuffersPastTheLimitOrWithTheSettingOffStayStorageBuffers) {
  const Program p = copies();
  // 16 elements fit, u's 20 do not.
  EXPECT_EQ(arg_layout(p, texel_target(16)).texel,
            (std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 1, 4, 0, 1, 1, 0}));
  GlslTarget off = texel_target(1 << 20);
  off.texel_loads = false;
  EXPECT_TRUE(arg_layout(p, off).texel.empty());
  EXPECT_FALSE(has(render_and_compile(p, off), "samplerBuffer"));
  // Buffers by device address have no descriptors at all.
  GlslTarget by_address = texel_target(1 << 20);
  by_address.max_bound_buffers = 0;
  EXPECT_TRUE(arg_layout(p, by_address).texel.empty());
  // Vector views only while the descriptors fit: 12 buffers + 1 view = 13.
  GlslTarget tight = texel_target(1 << 20);
  tight.max_bound_buffers = 13;
  EXPECT_EQ(arg_layout(p, tight).texel, (std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 1, 4, 1, 1, 1, 0}));
}

// In place, 4 invocations: a and b (16 float32 each) exchange their elements, scalars in a and
// aligned vec4s in b (every load before every store, as the linearizer orders them); c[i] = a[i]
// written only; s gets an atomic sum of its old value (a combining store keeps the storage path).
Program exchange() {
  B b("E_texel_exchange");
  auto a = b.global(dtypes::float32, 16, true), v = b.global(dtypes::float32, 16, true),
       c = b.global(dtypes::float32, 16, true), s = b.global(dtypes::int32, 4, true);
  auto i = b.special("lidx0", 4);
  std::vector<UOpPtr> old_a;
  for (int k = 0; k < 4; ++k) old_a.push_back(b.load(a, i * 4 + k));
  auto old_v = b.load(v, i * 4, nullptr, nullptr, 4);
  auto old_s = b.load(s, i);
  for (int k = 0; k < 4; ++k)
    b.store(a, i * 4 + k,
            b.emit(UOp::make(Ops::GEP, dtypes::float32, {old_v}, std::vector<int64_t>{k})));
  b.store(v, i * 4, b.emit(UOp::make(Ops::VECTORIZE, DType{Scalar::Float32, 4}, old_a)));
  for (int k = 0; k < 4; ++k) b.store(c, i * 4 + k, old_a[size_t(k)]);
  b.emit(
      UOp::make(Ops::STORE, dtypes::void_, {B::index(s, i), old_s}, int64_t(ScatterCombine::Sum)));
  return b.build({1, 1, 1}, {4, 1, 1});
}

// GlslTarget::texel_loads_written: a buffer the kernel loads and plainly stores gets texel views
// for the loads (bit 8, kTexelWritten) beside its storage buffer for the stores; one it only
// writes, or stores into by an atomic, gets none.
TEST(TexelLoads, BuffersAlsoWrittenAreReadThroughViewsBesideTheirStorageBuffer) {
  GlslTarget t = texel_target(1 << 20);
  EXPECT_EQ(arg_layout(exchange(), t).texel, (std::vector<uint8_t>{0, 0, 0, 0}));
  t.texel_loads_written = true;
  const ArgLayout l = arg_layout(exchange(), t);
  EXPECT_EQ(l.texel, (std::vector<uint8_t>{1 | 8, 4 | 8, 0, 0}));
  EXPECT_TRUE(l.texel_written(0));
  EXPECT_FALSE(l.texel_written(2));
  const std::string s = render_and_compile(exchange(), t);
  // 4 buffers: the word views of written slots at 3n + slot, quads at 2n + slot as always.
  EXPECT_TRUE(has(s, "layout(set = 0, binding = 12) uniform usamplerBuffer data0t;")) << s;
  EXPECT_TRUE(has(s, "layout(set = 0, binding = 9) uniform usamplerBuffer data1tx4;")) << s;
  EXPECT_TRUE(has(s, "layout(std430, set = 0, binding = 0) buffer Data0 { float v[]; }")) << s;
  EXPECT_TRUE(has(s, "layout(std430, set = 0, binding = 1) buffer Data1x4 { vec4 v[]; }")) << s;
  EXPECT_TRUE(has(s, "uintBitsToFloat(texelFetch(data0t, ")) << s;
  EXPECT_TRUE(has(s, "uintBitsToFloat(texelFetch(data1tx4, ")) << s;
  EXPECT_FALSE(has(s, "data1t;")) << s;  // v is read by aligned vec4s only
  EXPECT_FALSE(has(s, "data2t")) << s;
  EXPECT_FALSE(has(s, "data3t")) << s;
  // Each written view takes a descriptor beside the storage buffer: with room for 5, only a.
  t.max_bound_buffers = 5;
  EXPECT_EQ(arg_layout(exchange(), t).texel, (std::vector<uint8_t>{1 | 8, 0, 0, 0}));
  // A load after a store to the same buffer must see that store: no view.
  B late("E_texel_store_then_load");
  auto x = late.global(dtypes::float32, 4, true), y = late.global(dtypes::float32, 4, true);
  auto i = late.special("lidx0", 4);
  late.store(x, i, late.load(y, i));
  late.store(y, i, late.load(x, i));
  EXPECT_EQ(arg_layout(late.build({1, 1, 1}, {4, 1, 1}), t).texel,
            (std::vector<uint8_t>{0, 1 | 8}));
}

// out[i] = sum of x_k[i] over `operands` read-only float32 buffers, one invocation per element.
Program sum_of(int operands) {
  B b("E_sum_of_" + std::to_string(operands));
  auto out = b.global(dtypes::float32, 16, true);
  std::vector<UOpPtr> xs;
  for (int k = 0; k < operands; ++k) xs.push_back(b.global(dtypes::float32, 16));
  auto i = b.special("lidx0", 16);
  UOpPtr acc = b.load(xs[0], i);
  for (int k = 1; k < operands; ++k) acc = acc + b.load(xs[size_t(k)], i);
  b.store(out, i, acc);
  return b.build({1, 1, 1}, {16, 1, 1});
}

// Uniform texel buffers count as sampled images (maxPerStageDescriptorSampledImages may be 16):
// past max_texel_descriptors the read-only buffers stay storage buffers, and no vector view is
// added once the views reach it.
TEST(TexelLoads, TexelViewsStopAtTheSampledImageLimit) {
  GlslTarget t = texel_target(1 << 20);
  t.max_bound_buffers = 32;
  t.max_texel_descriptors = 8;
  const ArgLayout l = arg_layout(sum_of(20), t);
  ASSERT_TRUE(l.bound);
  std::vector<uint8_t> expected(21, 0);
  for (int k = 1; k <= 8; ++k) expected[size_t(k)] = 1;
  EXPECT_EQ(l.texel, expected);
  const std::string s = render_and_compile(sum_of(20), t);
  EXPECT_TRUE(has(s, "uniform usamplerBuffer data8;")) << s;
  EXPECT_TRUE(has(s, "readonly buffer Data9 { float v[]; } data9;")) << s;
  // copies() has five texel buffers and v's aligned vec4: with room for five views, no quad view.
  GlslTarget five = texel_target(1 << 20);
  five.max_texel_descriptors = 5;
  EXPECT_EQ(arg_layout(copies(), five).texel,
            (std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0}));
  five.max_texel_descriptors = 6;
  EXPECT_EQ(arg_layout(copies(), five).texel,
            (std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 1, 4, 1, 1, 1, 0}));
}

// Bits that a float conversion could change: nan payloads of both signs, signalling nan,
// denormals, -0, infinities.
std::vector<uint32_t> special_bits(size_t n) {
  const std::vector<uint32_t> specials{0x7fc00001u, 0xffc12345u, 0x7f800001u, 0xff800001u,
                                       0x00000001u, 0x807fffffu, 0x80000000u, 0x00000000u,
                                       0x7f800000u, 0xff800000u, 0x3f800000u, 0x00400000u,
                                       0x80000001u, 0x7fffffffu, 0xffffffffu, 0x12345678u};
  std::vector<uint32_t> v(n);
  for (size_t k = 0; k < n; ++k) v[k] = specials[(k * 7 + 3) % specials.size()];
  return v;
}

class TexelLoadsOnDevice : public Kernels {
 protected:
  void run_copies(uint64_t max_elements) {
    target_.texel_loads = true;  // whatever VKG_TEXEL_LOADS says: this tests the texel path
    target_.max_texel_buffer_elements = max_elements;
    const Program p = copies();
    const std::vector<uint32_t> f = special_bits(16), v = special_bits(16), u = special_bits(20),
                                big = special_bits(16);
    std::vector<int32_t> i32(16);
    std::vector<int64_t> l(16);
    for (int k = 0; k < 16; ++k) {
      i32[k] = k % 2 ? std::numeric_limits<int32_t>::min() + k : -k * 1000003;
      l[k] = (int64_t(1) << 62) - k;
    }
    std::vector<Bytes> buffers{Bytes(64),   Bytes(64),     Bytes(64),     Bytes(64),
                               Bytes(64),   Bytes(128),    to_bytes(f),   to_bytes(v),
                               to_bytes(u), to_bytes(i32), to_bytes(big), to_bytes(l)};
    run_on_vulkan(p, buffers);
    EXPECT_EQ(from_bytes<uint32_t>(buffers[0]), f);
    EXPECT_EQ(from_bytes<uint32_t>(buffers[1]), v);
    EXPECT_EQ(from_bytes<uint32_t>(buffers[2]), std::vector<uint32_t>(u.begin() + 1, u.end() - 3));
    EXPECT_EQ(from_bytes<int32_t>(buffers[3]), i32);
    EXPECT_EQ(from_bytes<uint32_t>(buffers[4]), big);
    EXPECT_EQ(from_bytes<int64_t>(buffers[5]), l);
  }
};

TEST_F(TexelLoadsOnDevice, EveryBitComesThroughScalarAndVectorLoads) {
  ASSERT_EQ(arg_layout(copies(),
                       [&] {
                         GlslTarget t = target_;
                         t.texel_loads = true;
                         return t;
                       }())
                .texel.at(7),
            4);
  run_copies(target_.max_texel_buffer_elements);
}

// u (20 elements) past a limit of 16 reads as a storage buffer beside the texel ones.
TEST_F(TexelLoadsOnDevice, ABufferPastTheLimitIsReadAsAStorageBufferBesideTexelOnes) {
  run_copies(16);
}

// Twenty read-only operands on the device with room for 8 texel views: 8 texel buffers, 12
// storage buffers beside them, the sum exact (small integers).
TEST_F(TexelLoadsOnDevice, ManyOperandsPastTheSampledImageLimitReadAsStorageBuffers) {
  target_.texel_loads = true;
  target_.max_texel_descriptors = 8;
  const Program p = sum_of(20);
  const std::vector<uint8_t> texel = arg_layout(p, target_).texel;
  ASSERT_EQ(std::count(texel.begin(), texel.end(), 1), 8);
  std::vector<Bytes> buffers{Bytes(64)};
  std::vector<float> expected(16, 0.0f);
  for (int k = 0; k < 20; ++k) {
    std::vector<float> x(16);
    for (int i = 0; i < 16; ++i) expected[size_t(i)] += x[size_t(i)] = float((k + 1) * (i + 2));
    buffers.push_back(to_bytes(x));
  }
  run_on_vulkan(p, buffers);
  EXPECT_EQ(from_bytes<float>(buffers[0]), expected);
}

// On the device, every bit comes through the views of buffers the kernel also writes, and the
// loads see the values from before the dispatch.
TEST_F(TexelLoadsOnDevice, BuffersUpdatedInPlaceReadEveryBitBeforeTheirStores) {
  target_.texel_loads = true;
  target_.texel_loads_written = true;
  const Program p = exchange();
  ASSERT_EQ(arg_layout(p, target_).texel.at(1), 4 | 8);
  const std::vector<uint32_t> a = special_bits(16);
  std::vector<uint32_t> v(16);
  for (size_t k = 0; k < 16; ++k) v[k] = a[15 - k] ^ 0x80000000u;
  const std::vector<int32_t> s{1, -2, 3, 1 << 20};
  std::vector<Bytes> buffers{to_bytes(a), to_bytes(v), Bytes(64), to_bytes(s)};
  run_on_vulkan(p, buffers);
  EXPECT_EQ(from_bytes<uint32_t>(buffers[0]), v);
  EXPECT_EQ(from_bytes<uint32_t>(buffers[1]), a);
  EXPECT_EQ(from_bytes<uint32_t>(buffers[2]), a);
  EXPECT_EQ(from_bytes<int32_t>(buffers[3]), (std::vector<int32_t>{2, -4, 6, 1 << 21}));
}

// VKG_TEXEL_LOADS: unset, texel loads where the Vulkan device is a CPU (Lavapipe) only; 0 never;
// 1 always.
TEST(TexelLoads, TheSettingDefaultsToCpuDevicesAndForcesBothWays) {
  const char* saved = std::getenv("VKG_TEXEL_LOADS");
  const std::string restore = saved ? saved : "";
  const auto on = [](VkPhysicalDeviceType type, const char* value) {
    if (value)
      setenv("VKG_TEXEL_LOADS", value, 1);
    else
      unsetenv("VKG_TEXEL_LOADS");
    vk::Capabilities caps;
    caps.type = type;
    return glsl_target_of(caps).texel_loads;
  };
  EXPECT_TRUE(on(VK_PHYSICAL_DEVICE_TYPE_CPU, nullptr));
  EXPECT_FALSE(on(VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, nullptr));
  EXPECT_FALSE(on(VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU, nullptr));
  EXPECT_TRUE(on(VK_PHYSICAL_DEVICE_TYPE_CPU, ""));  // set but empty: as unset
  EXPECT_FALSE(on(VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, ""));
  EXPECT_FALSE(on(VK_PHYSICAL_DEVICE_TYPE_CPU, "0"));
  EXPECT_FALSE(on(VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, "0"));
  EXPECT_TRUE(on(VK_PHYSICAL_DEVICE_TYPE_CPU, "1"));
  EXPECT_TRUE(on(VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, "1"));
  if (saved)
    setenv("VKG_TEXEL_LOADS", restore.c_str(), 1);
  else
    unsetenv("VKG_TEXEL_LOADS");
}

// A device whose texel views would need a larger offset alignment than a Buffer's 256 gets no
// texel loads, and then none for the buffers a kernel also writes either (texel_loads_written is
// decided after that limit, so the target never holds one without the other).
TEST(TexelLoads, AnAlignmentOver256TurnsOffWrittenTexelLoadsToo) {
  std::vector<std::pair<const char*, std::optional<std::string>>> saved;
  for (const char* name : {"VKG_TEXEL_LOADS", "VKG_TEXEL_WRITTEN"}) {
    const char* value = std::getenv(name);
    saved.emplace_back(name, value ? std::optional<std::string>(value) : std::nullopt);
    unsetenv(name);
  }
  vk::Capabilities caps;
  caps.type = VK_PHYSICAL_DEVICE_TYPE_CPU;
  caps.limits.min_texel_buffer_offset_alignment = 256;
  GlslTarget t = glsl_target_of(caps);
  EXPECT_TRUE(t.texel_loads);
  EXPECT_TRUE(t.texel_loads_written);
  caps.limits.min_texel_buffer_offset_alignment = 512;
  t = glsl_target_of(caps);
  EXPECT_FALSE(t.texel_loads);
  EXPECT_FALSE(t.texel_loads_written);
  setenv("VKG_TEXEL_LOADS", "1", 1);  // forcing them on does not pass the limit either
  t = glsl_target_of(caps);
  EXPECT_FALSE(t.texel_loads);
  EXPECT_FALSE(t.texel_loads_written);
  for (const auto& [name, value] : saved)
    if (value)
      setenv(name, value->c_str(), 1);
    else
      unsetenv(name);
}

}  // namespace
}  // namespace vkg::test
