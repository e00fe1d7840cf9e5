// render_glsl() and the launch helpers: what the source must contain (and must not), that it
// compiles, and the argument bytes and grid a caller gets. Running the kernels is in
// codegen_kernels_test.cpp.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include <vkgrad/codegen/glsl_renderer.hpp>
#include <vkgrad/codegen/spirv_compiler.hpp>
#include <vkgrad/core/error.hpp>

#include "support/linear_programs.hpp"
#include "support/render_and_compile.hpp"

namespace vkg::test {
namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string error_of(const Program& p, const GlslTarget& target) {
  try {
    render_glsl(p, target);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(GlslRenderer, SeedDotProductReadsLikeTinygrad) {
  const std::string s = render_and_compile(dot_product());
  EXPECT_TRUE(has(s, "void main() {  // r_2")) << s;
  EXPECT_TRUE(has(s, "  int acc0 = 0;\n  for (int ridx0 = 0; ridx0 < 2; ridx0++) {\n")) << s;
  EXPECT_TRUE(has(s, "    int val0 = data1.v[ridx0];\n    int val1 = data2.v[ridx0];\n")) << s;
  EXPECT_TRUE(has(s, "    acc0 = (acc0+(val0*val1));\n  }\n  data0.v[0] = acc0;\n")) << s;
  EXPECT_TRUE(has(
      s, "layout(push_constant) uniform Args { Int32Ptr data0; Int32Ptr data1; Int32Ptr data2; };"))
      << s;
}

TEST(GlslRenderer, ExtensionsOnlyWhenADtypeNeedsThem) {
  const std::string f32 = render_and_compile(elementwise_add(dtypes::float32, 64));
  EXPECT_FALSE(has(f32, "arithmetic_types")) << f32;
  EXPECT_FALSE(has(f32, "storage")) << f32;
  EXPECT_FALSE(has(f32, "uvec2")) << f32;

  const std::string f16 = render_and_compile(elementwise_add(dtypes::float16, 64));
  EXPECT_TRUE(has(f16, "#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require"))
      << f16;
  EXPECT_TRUE(has(f16, "#extension GL_EXT_shader_16bit_storage : require")) << f16;
  EXPECT_FALSE(has(f16, "int64")) << f16;

  // bool buffers need 8-bit storage only: the bytes are widened to uint before any arithmetic.
  const std::string b = render_and_compile(bool_storage(5));
  EXPECT_TRUE(has(b, "#extension GL_EXT_shader_8bit_storage : require")) << b;
  EXPECT_FALSE(has(b, "arithmetic_types_int8")) << b;
  EXPECT_TRUE(has(b, "(uint(data2.v[gidx0]) != 0u)")) << b;
  EXPECT_TRUE(has(b, "data0.v[gidx0] = uint8_t(uint(")) << b;

  const std::string v = render_and_compile(vec4_add(8));
  EXPECT_TRUE(has(v, "#extension GL_EXT_buffer_reference_uvec2 : require")) << v;
  EXPECT_TRUE(has(v, "buffer Float32x4Ptr { vec4 v; };")) << v;
}

// Drivers may otherwise fold float expressions across inf, nan and -0 (Lavapipe turned
// sqrt(x) * sqrt(x) into x): where the device can keep IEEE semantics, the kernel asks for it.
TEST(GlslRenderer, FloatKernelsAskToPreserveInfNanAndSignedZero) {
  const std::string f32 = render_and_compile(elementwise_add(dtypes::float32, 64));
  EXPECT_TRUE(has(f32, "spirv_execution_mode(capabilities = [4466], 4461, 32);")) << f32;
  EXPECT_FALSE(has(f32, "4461, 64")) << f32;
  const std::string f64 = render_and_compile(elementwise_add(dtypes::float64, 64));
  EXPECT_TRUE(has(f64, "4461, 64")) << f64;
  GlslTarget without = GlslTarget::everything();
  without.preserve_specials_float32 = false;
  EXPECT_FALSE(has(render_and_compile(elementwise_add(dtypes::float32, 64), without), "4461"));
}

TEST(GlslRenderer, ADtypeTheDeviceCannotDoIsAnErrorNamingDtypeAndKernel) {
  const GlslTarget bare;  // a Vulkan 1.3 device with no optional features
  // float16 and bfloat16 work everywhere (float32 arithmetic, two to a uint in buffers); int16
  // arithmetic has no such form.
  EXPECT_EQ(error_of(elementwise_add(dtypes::int16, 8), bare),
            "kernel 'E_8' uses int16/uint16, which this device cannot do (it lacks shaderInt16)");
  EXPECT_EQ(error_of(elementwise_add(dtypes::float16, 8), bare), "(no error)");
  EXPECT_EQ(error_of(elementwise_add(dtypes::bfloat16, 8), bare), "(no error)");
  EXPECT_TRUE(has(error_of(bool_storage(4), bare), "storageBuffer8BitAccess"));
  EXPECT_TRUE(has(error_of(elementwise_add(dtypes::int64, 8), bare), "int64/uint64"));
  EXPECT_TRUE(has(error_of(elementwise_add(dtypes::float64, 8), bare), "shaderFloat64"));
  GlslTarget arithmetic_only = GlslTarget::everything();
  arithmetic_only.storage_16bit = false;
  EXPECT_TRUE(has(error_of(elementwise_add(dtypes::uint16, 8), arithmetic_only),
                  "storageBuffer16BitAccess"));
}

// bfloat16 (no GLSL type), and float16 on a device without shaderFloat16: 16 bits in buffers,
// float32 in registers, rounded back after each op by integer helpers; no 16-bit arithmetic.
TEST(GlslRenderer, SixteenBitFloatsTheDeviceCannotComputeInAreFloat32InRegisters) {
  const std::string bf = render_and_compile(elementwise_add(dtypes::bfloat16, 8));
  EXPECT_TRUE(has(bf, "uint16_t v[]")) << bf;
  EXPECT_TRUE(has(bf, "float val0 = bf16_value(uint(data1.v[idx0]));")) << bf;
  EXPECT_TRUE(has(bf, "data0.v[idx0] = uint16_t(bf16_bits(bf16_round((val0+val1))));")) << bf;
  EXPECT_FALSE(has(bf, "arithmetic_types")) << bf;
  GlslTarget no_float16 = GlslTarget::everything();
  no_float16.float16 = false;
  no_float16.int16 = false;
  const std::string h = render_and_compile(elementwise_add(dtypes::float16, 64), no_float16);
  EXPECT_TRUE(has(h, "#extension GL_EXT_shader_16bit_storage : require")) << h;
  EXPECT_TRUE(has(h, "f16_round(")) << h;
  EXPECT_FALSE(has(h, "float16_t")) << h;
  EXPECT_FALSE(has(h, "arithmetic_types")) << h;
  // Without 16-bit storage: two elements per uint, halves stored by atomics; no 16-bit types.
  GlslTarget no_storage = no_float16;
  no_storage.storage_16bit = false;
  for (DType d : {dtypes::bfloat16, dtypes::float16}) {
    const std::string w = render_and_compile(elementwise_add(d, 9), no_storage);
    EXPECT_TRUE(has(w, "uint v[]")) << w;
    EXPECT_TRUE(has(w, "atomicOr(")) << w;
    EXPECT_FALSE(has(w, "16bit_storage")) << w;
    EXPECT_FALSE(has(w, "int16_t")) << w;
  }
}

// Packed two to a uint, a half is stored with atomicAnd/atomicOr while the neighbouring
// invocation may store the other half. A kernel that also reads that buffer (an in-place update,
// x[i] = x[i] + x[i]) must read the word atomically too: a plain read racing with those atomic
// writes is a data race under the Vulkan memory model. Buffers only read stay plain reads.
TEST(GlslRenderer, PackedHalvesOfABufferAlsoStoredAreReadAtomically) {
  GlslTarget packed = GlslTarget::everything();
  packed.float16 = packed.int16 = packed.storage_16bit = false;
  for (DType d : {dtypes::bfloat16, dtypes::float16}) {
    ProgramBuilder b("E_9");
    const UOpPtr x = b.global(d, 9, true), y = b.global(d, 9);
    const UOpPtr i = b.special("idx0", 9);
    b.store(x, i, b.load(x, i) + b.load(y, i));
    const std::string s = render_and_compile(b.build({1, 1, 1}, {9, 1, 1}), packed);
    EXPECT_TRUE(has(s, "(atomicOr(data0.v[(idx0)>>1], 0u) >> (uint((idx0)&1)<<4))")) << s;
    EXPECT_TRUE(has(s, "((data1.v[(idx0)>>1] >> (uint((idx0)&1)<<4)) & 0xffffu)")) << s;
    EXPECT_FALSE(has(s, "atomicOr(data1")) << s;
    // Reading a buffer the kernel does not store into needs nothing atomic.
    const std::string plain = render_and_compile(elementwise_add(d, 9), packed);
    EXPECT_FALSE(has(plain, ", 0u)")) << plain;
  }
}

// E_4_4: out[i] = x[4i] + x[4i+3], x read as one 4-wide load (16-bit floats emulated).
Program four_wide_half_load(DType d) {
  ProgramBuilder b("E_4_4");
  const UOpPtr out = b.global(d, 4, true), x = b.global(d, 16);
  const UOpPtr i = b.special("gidx0", 4);
  const UOpPtr v = b.load(x, i * 4, nullptr, nullptr, 4);
  const UOpPtr first = UOp::make(Ops::GEP, d, {v}, std::vector<int64_t>{0});
  const UOpPtr last = UOp::make(Ops::GEP, d, {v}, std::vector<int64_t>{3});
  b.store(out, i, first + last);
  return b.build({4, 1, 1}, {1, 1, 1});
}

// An emulated 16-bit vector load reads lane by lane, so it declares no vector pointer type and
// no element_address; packed two to a uint, the buffer's pointer type is aligned as the uint it
// holds (4), not as a 16-bit element.
TEST(GlslRenderer, EmulatedSixteenBitVectorLoadsAreLaneByLane) {
  GlslTarget no_float16 = GlslTarget::everything();
  no_float16.float16 = false;
  no_float16.int16 = false;
  GlslTarget no_storage = no_float16;
  no_storage.storage_16bit = false;
  for (DType d : {dtypes::bfloat16, dtypes::float16}) {
    const std::string s = render_and_compile(four_wide_half_load(d), no_float16);
    EXPECT_FALSE(has(s, "element_address")) << s;
    EXPECT_TRUE(has(s, "buffer_reference_align = 2) buffer")) << s;  // uint16_t v[]
    const std::string w = render_and_compile(four_wide_half_load(d), no_storage);
    EXPECT_FALSE(has(w, "element_address")) << w;
    EXPECT_TRUE(has(w, "buffer_reference_align = 4) buffer")) << w;
    EXPECT_FALSE(has(w, "buffer_reference_align = 2")) << w;
  }
}

TEST(GlslRenderer, IntegerModIsCRemainderNotGlslPercent) {
  const std::string s = render_and_compile(int_div_mod_by(dtypes::int32, 4, 3));
  EXPECT_TRUE(has(s, "int mod_c(int a, int b) {\n  return a - (a / b) * b;\n}")) << s;
  EXPECT_TRUE(has(s, "data1.v[gidx0] = mod_c(val0, 3);")) << s;
  EXPECT_TRUE(has(s, "data0.v[gidx0] = (val0/3);")) << s;
  EXPECT_FALSE(has(s, "%")) << s;
  // Unsigned operands have one meaning of %: it stays.
  const std::string u = render_and_compile(int_div_mod_by(dtypes::uint32, 4, 3));
  EXPECT_TRUE(has(u, "(val0%3u)")) << u;
}

// Vulkan leaves x / 0 and x % 0 undefined (Lavapipe gives 0xffffffff for unsigned ones): a
// divisor that may be 0 goes through helpers that give the CPU device's 0 and x
// (core/alu_semantics.hpp); a constant divisor, as in index math, keeps the plain form above.
TEST(GlslRenderer, ADivisorThatMayBeZeroIsGuarded) {
  const std::string s = render_and_compile(int_div_mod(dtypes::int32, 4));
  EXPECT_TRUE(has(s, "int idiv_safe(int a, int b) {\n  return b == 0 ? 0 : a / b;\n}")) << s;
  EXPECT_TRUE(has(s, "int mod_safe(int a, int b) {\n  return b == 0 ? a : a - (a / b) * b;\n}"))
      << s;
  EXPECT_TRUE(has(s, "data0.v[gidx0] = idiv_safe(val0, val1);")) << s;
  EXPECT_TRUE(has(s, "data1.v[gidx0] = mod_safe(val0, val1);")) << s;
  const std::string u = render_and_compile(int_div_mod(dtypes::uint32, 4));
  EXPECT_TRUE(has(u, "uint mod_safe(uint a, uint b) {\n  return b == 0u ? a : a % b;\n}")) << u;
}

// A shift count outside [0, width) is undefined in Vulkan: one not known to be in range is taken
// modulo the width, as the CPU device and Lavapipe do; a constant count in range stays bare.
TEST(GlslRenderer, ShiftCountsNotKnownInRangeAreMasked) {
  const std::string s = render_and_compile(binary_op(Ops::SHL, dtypes::int32, 4));
  EXPECT_TRUE(has(s, "(val0<<(val1&31))")) << s;
  const std::string b = render_and_compile(binary_op(Ops::SHR, dtypes::uint8, 4));
  EXPECT_TRUE(has(b, "(val0>>(val1&uint8_t(7u)))")) << b;
  EXPECT_TRUE(has(render_and_compile(binary_op_by(Ops::SHL, dtypes::int32, 4, 5)), "(val0<<5)"));
}

TEST(GlslRenderer, MaskedLoadClampsItsIndexBeforeSelectingAlt) {
  const std::string s = render_and_compile(padded_load());
  EXPECT_TRUE(has(s, "bool alu0 = ")) << s;
  EXPECT_TRUE(has(s, "float val0 = (alu0?data1.v[(alu0?(gidx0-3):0)]:(-1.5f));")) << s;
}

TEST(GlslRenderer, NanTestsReadTheBits) {
  ProgramBuilder b("E_isnan");
  auto out = b.global(dtypes::bool_, 4, true), in = b.global(dtypes::float32, 4);
  auto i = b.special("gidx0", 4);
  auto x = b.load(in, i);
  b.store(out, i, x->ne(x));
  const std::string s = render_and_compile(b.build({4, 1, 1}, {1, 1, 1}));
  EXPECT_TRUE(has(s, "(floatBitsToUint(a) & 0x7fffffffu) > 0x7f800000u")) << s;
  EXPECT_TRUE(has(s, "isnan_bits(val0)")) << s;
  EXPECT_FALSE(has(s, "isnan(")) << s;
  const std::string m = render_and_compile(binary_op(Ops::MAX, dtypes::float32, 4));
  EXPECT_TRUE(has(m, "max_nan(val0, val1)")) << m;
  EXPECT_FALSE(has(m, " max(")) << m;
}

TEST(GlslRenderer, FloatConstantsReadBackExactly) {
  ProgramBuilder b("E_consts");
  auto f = b.global(dtypes::float32, 8, true), d = b.global(dtypes::float64, 2, true),
       h = b.global(dtypes::float16, 2, true);
  const double inf = std::numeric_limits<double>::infinity(),
               nan = std::numeric_limits<double>::quiet_NaN();
  const double values[] = {inf, -inf, nan, 0.1, -0.0, 1e-45, 16777217.0, 3.4028234663852886e38};
  for (int k = 0; k < 8; ++k)
    b.store(f, ProgramBuilder::i32(k), ProgramBuilder::c(dtypes::float32, values[k]));
  b.store(d, ProgramBuilder::i32(0), ProgramBuilder::c(dtypes::float64, 0.1));
  b.store(d, ProgramBuilder::i32(1), ProgramBuilder::c(dtypes::float64, -inf));
  b.store(h, ProgramBuilder::i32(0), ProgramBuilder::c(dtypes::float16, 0.1));
  b.store(h, ProgramBuilder::i32(1), ProgramBuilder::c(dtypes::float16, inf));
  const std::string s = render_and_compile(b.build({1, 1, 1}, {1, 1, 1}));
  for (const char* line :
       {"data0.v[0] = uintBitsToFloat(0x7f800000u);", "data0.v[1] = uintBitsToFloat(0xff800000u);",
        "data0.v[2] = uintBitsToFloat(0x7fc00000u);", "data0.v[3] = 0.1f;", "data0.v[4] = (-0.0f);",
        "data0.v[5] = 1e-45f;", "data0.v[6] = 16777216.0f;", "data0.v[7] = 3.4028235e+38f;",
        "data1.v[0] = 0.1lf;", "data1.v[1] = packDouble2x32(uvec2(0x00000000u, 0xfff00000u));",
        "data2.v[0] = float16_t(0.099975586f);",
        "data2.v[1] = float16_t(uintBitsToFloat(0x7f800000u));"})
    EXPECT_TRUE(has(s, line)) << line << "\n" << s;
}

TEST(GlslRenderer, EverySampleProgramCompiles) {
  for (const Program& p : {elementwise_add(dtypes::float32, 100),
                           elementwise_add(dtypes::int8, 100),
                           elementwise_add(dtypes::uint16, 10),
                           elementwise_add(dtypes::float64, 10),
                           dot_product(),
                           padded_load(),
                           int_div_mod(dtypes::int32, 10),
                           int_div_mod(dtypes::int64, 3),
                           int_div_mod(dtypes::int8, 3),
                           bool_storage(5),
                           workgroup_sum(3),
                           vec4_add(12),
                           binary_op(Ops::THREEFRY, dtypes::uint64, 3),
                           binary_op(Ops::CMPLT, dtypes::float16, 3),
                           binary_op(Ops::MAX, dtypes::float64, 3),
                           binary_op(Ops::SHR, dtypes::int16, 3),
                           unary_op(Ops::RECIP, dtypes::float16, 3),
                           convert_op(Ops::BITCAST, dtypes::float16, dtypes::int16, 3),
                           convert_op(Ops::CAST, dtypes::float32, dtypes::bool_, 3),
                           convert_op(Ops::CAST, dtypes::bool_, dtypes::int8, 3)}) {
    SCOPED_TRACE(p.name);
    render_and_compile(p);
  }
}

TEST(GlslRenderer, Float32DivisionComputesInDoubleWhereTheDeviceHasFloat64) {
  // The double quotient rounds correctly to float (glsl_helpers_arithmetic.cpp,
  // fdiv_via_double_body); without shaderFloat64 the float-only helper with its remainder
  // corrections stays.
  const Program p = binary_op(Ops::FDIV, dtypes::float32, 3);
  const std::string fast = render_and_compile(p);
  EXPECT_TRUE(has(fast, "double q = da / db;")) << fast;
  EXPECT_FALSE(has(fast, "precise float r1")) << fast;
  // glslang keeps only the last SignedZeroInfNanPreserve mode: a 64-bit one would drop float32's.
  EXPECT_TRUE(has(fast, "4461, 32);")) << fast;
  EXPECT_FALSE(has(fast, "4461, 64);")) << fast;
  const std::string plain = render_and_compile(p, GlslTarget{});
  EXPECT_FALSE(has(plain, "double")) << plain;
  EXPECT_TRUE(has(plain, "precise float r1")) << plain;
  // float64 itself keeps the remainder corrections; float16 goes through the float32 form.
  const std::string f64 = render_and_compile(binary_op(Ops::FDIV, dtypes::float64, 3));
  EXPECT_TRUE(has(f64, "precise double r1")) << f64;
  EXPECT_FALSE(has(f64, "double q = da / db;")) << f64;
  const std::string f16 = render_and_compile(unary_op(Ops::RECIP, dtypes::float16, 3));
  EXPECT_TRUE(has(f16, "double q = da / db;")) << f16;
}

TEST(GlslRenderer, ArgumentsSpillToABufferWhenPushConstantsOverflow) {
  ProgramBuilder b("E_many");
  std::vector<UOpPtr> in;
  auto out = b.global(dtypes::float32, 1, true);
  for (int k = 0; k < 16; ++k) in.push_back(b.global(dtypes::float32, 1));
  UOpPtr sum = b.load(in[0], ProgramBuilder::i32(0));
  for (size_t k = 1; k < in.size(); ++k) sum = sum + b.load(in[k], ProgramBuilder::i32(0));
  b.store(out, ProgramBuilder::i32(0), sum);
  const Program p = b.build({1, 1, 1}, {1, 1, 1});

  const ArgLayout pushed = arg_layout(p, GlslTarget::everything());  // 17 * 8 bytes > 128
  EXPECT_TRUE(pushed.spilled);
  EXPECT_EQ(pushed.arg_bytes, 136u);
  EXPECT_EQ(pushed.push_constant_bytes, 8u);
  const std::string s = render_and_compile(p);
  EXPECT_TRUE(has(s, "readonly buffer Args { Float32Ptr data0;")) << s;
  EXPECT_TRUE(has(s, " Float32Ptr data16; };\nlayout(push_constant) uniform Push { Args args; };"))
      << s;
  EXPECT_TRUE(has(s, "  Float32Ptr data16 = args.data16;\n")) << s;

  GlslTarget roomy = GlslTarget::everything();
  roomy.max_push_constants_size = 256;
  const ArgLayout fits = arg_layout(p, roomy);
  EXPECT_FALSE(fits.spilled);
  EXPECT_EQ(fits.push_constant_bytes, 136u);
  EXPECT_TRUE(
      has(render_and_compile(p, roomy), "layout(push_constant) uniform Args { Float32Ptr data0;"));
}

// A target that binds up to 4 buffers of at most 64 bytes by push descriptor: one program on
// each side of both limits.
TEST(GlslRenderer, BuffersAreBoundByDescriptorOnlyWhereTheyFitTheLimits) {
  GlslTarget t = GlslTarget::everything();
  t.max_bound_buffers = 4;
  t.max_storage_buffer_range = 64;
  auto program = [](int inputs, int64_t count) {
    ProgramBuilder b("E_bind");
    auto out = b.global(dtypes::float32, count, true);
    auto n = b.var("n", 0, 10);
    UOpPtr sum = n->cast(dtypes::float32);
    for (int k = 0; k < inputs; ++k)
      sum = sum + b.load(b.global(dtypes::float32, count), ProgramBuilder::i32(0));
    b.store(out, ProgramBuilder::i32(0), sum);
    return b.build({1, 1, 1}, {1, 1, 1});
  };
  const Program fits = program(3, 16);  // 4 buffers of 64 bytes
  const ArgLayout bound = arg_layout(fits, t);
  EXPECT_TRUE(bound.bound);
  EXPECT_EQ(bound.arg_bytes, 4u);  // only n, in the argument buffer (its address is pushed)
  EXPECT_EQ(bound.push_constant_bytes, 8u);
  EXPECT_EQ(arg_offset_of_var(fits, bound, 0), 0u);
  const std::vector<uint64_t> addresses(4, 0x100);
  EXPECT_EQ(pack_args(fits, bound, addresses, std::vector<int64_t>{7}).size(), 4u);
  const std::string s = render_and_compile(fits, t);
  EXPECT_TRUE(
      has(s, "layout(std430, set = 0, binding = 3) readonly buffer Data3 { float v[]; } data3;"))
      << s;
  EXPECT_TRUE(has(s, "readonly buffer Args { int n; };")) << s;
  EXPECT_TRUE(has(s, "  int n = args.n;\n")) << s;
  EXPECT_FALSE(has(s, "Float32Ptr")) << s;            // no buffer by address
  EXPECT_FALSE(arg_layout(program(4, 16), t).bound);  // 5 buffers
  EXPECT_FALSE(arg_layout(program(3, 17), t).bound);  // 68 bytes each
  EXPECT_FALSE(arg_layout(fits, GlslTarget::everything()).bound);
}

TEST(GlslRenderer, PackArgsLaysOutAddressesThenVarsAndChecksBounds) {
  ProgramBuilder b("E_args");
  auto out = b.global(dtypes::int32, 1, true);
  auto in = b.global(dtypes::int32, 1);
  auto n = b.var("n", -5, 5), m = b.var("m", 0, 100);
  b.store(out, ProgramBuilder::i32(0), b.load(in, ProgramBuilder::i32(0)) + n * m);
  const Program p = b.build({1, 1, 1}, {1, 1, 1});
  const std::vector<uint64_t> addresses{0x1122334455667788ull, 0x100};
  const std::vector<std::byte> args = pack_args(p, addresses, std::vector<int64_t>{-3, 77});
  ASSERT_EQ(args.size(), 24u);
  uint64_t a0, a1;
  int32_t v0, v1;
  std::memcpy(&a0, args.data(), 8);
  std::memcpy(&a1, args.data() + 8, 8);
  std::memcpy(&v0, args.data() + 16, 4);
  std::memcpy(&v1, args.data() + 20, 4);
  EXPECT_EQ(a0, addresses[0]);
  EXPECT_EQ(a1, addresses[1]);
  EXPECT_EQ(v0, -3);
  EXPECT_EQ(v1, 77);
  EXPECT_THROW(pack_args(p, addresses, std::vector<int64_t>{6, 0}), Error);
  EXPECT_THROW(pack_args(p, std::vector<uint64_t>{1}, std::vector<int64_t>{0, 0}), Error);
  EXPECT_EQ(pack_spill_address(0xabcdef00ull).size(), 8u);
  // Push constants are part of a recorded command buffer: a kernel with variables reads its
  // arguments from the argument buffer, whose bytes a Jit replay rewrites where
  // arg_offset_of_var says, however few they are.
  const ArgLayout l = arg_layout(p, GlslTarget::everything());
  EXPECT_TRUE(l.spilled);
  EXPECT_EQ(l.push_constant_bytes, 8u);
  EXPECT_EQ(arg_offset_of_var(p, l, 0), 16u);
  EXPECT_EQ(arg_offset_of_var(p, l, 1), 20u);
  const std::string s = render_and_compile(p);
  EXPECT_TRUE(has(s, "readonly buffer Args { Int32Ptr data0; Int32Ptr data1; int n; int m; };"))
      << s;
  EXPECT_TRUE(has(s, "  int n = args.n;\n  int m = args.m;\n")) << s;
}

TEST(GlslRenderer, GridBeyondTheWorkgroupCountLimitIsFolded) {
  const int64_t n = 70001 * 4;
  Program p = elementwise_add(dtypes::float32, n);
  p.global_size = {70001, 1, 1};
  p.local_size = {4, 1, 1};
  const GlslTarget t = GlslTarget::everything();  // 65535 per axis
  ASSERT_TRUE(folds_grid(p, t));
  EXPECT_EQ(launch_dims(p, t), (std::array<uint32_t, 3>{65535, 2, 1}));
  const std::string s = render_and_compile(p, t);
  EXPECT_TRUE(has(s,
                  "uint wg = gl_WorkGroupID.x + gl_NumWorkGroups.x * (gl_WorkGroupID.y + "
                  "gl_NumWorkGroups.y * gl_WorkGroupID.z);"))
      << s;
  EXPECT_TRUE(has(s, "if (wg >= 70001u) return;")) << s;
  EXPECT_TRUE(has(s, "int idx0 = int(wg % 70001u)*4+int(gl_LocalInvocationID.x);")) << s;

  Program small = elementwise_add(dtypes::float32, 100);
  EXPECT_FALSE(folds_grid(small, t));
  EXPECT_EQ(launch_dims(small, t), (std::array<uint32_t, 3>{4, 1, 1}));
  EXPECT_TRUE(has(render_glsl(small, t), "int idx0 = int(gl_GlobalInvocationID.x);"));

  Program huge = small;
  huge.global_size = {65536, 65536, 2};
  EXPECT_THROW(launch_dims(huge, t), Error);
}

TEST(GlslRenderer, ShuffleNeedsTheFeatureAndAWorkgroupOfOneSubgroup) {
  GlslTarget t = GlslTarget::everything();
  t.subgroup_size = 8;
  const std::string s = render_and_compile(subgroup_shuffle(2), t);
  EXPECT_TRUE(has(s, "#extension GL_KHR_shader_subgroup_shuffle : require")) << s;
  EXPECT_TRUE(has(s, "subgroupShuffle(val0, 3u)")) << s;
  t.subgroup_size = 32;
  EXPECT_TRUE(
      has(error_of(subgroup_shuffle(2), t), "SHUFFLE needs a workgroup of one 32-wide subgroup"));
  t.subgroup_size = 8;
  t.subgroup_shuffle = false;
  EXPECT_TRUE(has(error_of(subgroup_shuffle(2), t), "no subgroupShuffle"));
}

TEST(GlslRenderer, MalformedProgramsAreErrors) {
  Program p = padded_load();
  p.global_size = {4, 1, 1};  // gidx0 of size 10 cannot run on 4 workgroups
  EXPECT_TRUE(
      has(error_of(p, GlslTarget::everything()), "gidx0 of size 10 exceeds the launch's 4"));
  Program q = dot_product();
  std::swap(q.uops[3], q.uops[6]);
  EXPECT_TRUE(has(error_of(q, GlslTarget::everything()), "not defined before its use"));
  Program open = dot_product();
  std::erase_if(open.uops, [](const UOpPtr& u) { return u->op == Ops::ENDRANGE; });
  EXPECT_TRUE(has(error_of(open, GlslTarget::everything()), "never closed"));
  Program e = unary_op(Ops::EXP2, dtypes::int32, 2);
  EXPECT_TRUE(has(error_of(e, GlslTarget::everything()), "EXP2 on int32"));
}

}  // namespace
}  // namespace vkg::test
