// Combining stores (a scatter's, core/scatter_combine.hpp) in GLSL: every combine and every
// dtype that has one compiles, with buffers bound by descriptor and by device address; integer
// sums, maxima and minima are the atomics of that name, products and float combines a
// compare-and-swap loop (a float's on its bits); 64-bit ones need the device's int64 atomics.
// Running them is in tests/tensor_scatter_test.cpp (both devices).
#include <gtest/gtest.h>

#include <vkgrad/codegen/glsl_renderer.hpp>
#include <vkgrad/codegen/spirv_compiler.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/scatter_combine.hpp>

#include "support/linear_programs.hpp"
#include "support/render_and_compile.hpp"

namespace vkg::test {
namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// out[at[i]] (combine)= values[i] for i < n; an index outside [0, 8) stores nothing.
Program scatter_program(DType d, ScatterCombine c) {
  ProgramBuilder b("E_scatter");
  const UOpPtr out = b.global(d, 8, true), values = b.global(d, 16),
               at = b.global(dtypes::int32, 16);
  const UOpPtr i = b.special("idx0", 16);
  const UOpPtr to = b.load(at, i);
  const UOpPtr valid = to->ge(0)->alu(Ops::AND, {to->lt(8)});
  b.emit(UOp::make(Ops::STORE, dtypes::void_,
                   {ProgramBuilder::index(out, to, valid), b.load(values, i)}, int64_t(c)));
  return b.build({1, 1, 1}, {16, 1, 1});
}

TEST(GlslScatterStore, EveryCombineAndDtypeCompilesInBothLayouts) {
  GlslTarget bound = GlslTarget::everything();
  bound.max_bound_buffers = 8;
  bound.max_storage_buffer_range = 1 << 20;
  for (DType d : {dtypes::int32, dtypes::uint32, dtypes::float32, dtypes::int64, dtypes::uint64,
                  dtypes::float64})
    for (ScatterCombine c :
         {ScatterCombine::Sum, ScatterCombine::Prod, ScatterCombine::Max, ScatterCombine::Min})
      for (const GlslTarget& t : {GlslTarget::everything(), bound}) {
        SCOPED_TRACE(d.name() + " " + std::to_string(int(c)) +
                     (t.max_bound_buffers ? " bound" : ""));
        const std::string s = render_and_compile(scatter_program(d, c), t);
        const bool atomic_op = !d.is_float() && c != ScatterCombine::Prod;
        EXPECT_EQ(has(s, "atomicCompSwap"), !atomic_op) << s;
        EXPECT_EQ(has(s, "GL_EXT_shader_atomic_int64"), d.scalar_size() == 8) << s;
        if (d.is_float() && t.max_bound_buffers) {
          EXPECT_TRUE(has(s, "buffer Data0b {")) << s;  // the buffer's bits, aliased
        }
      }
  const std::string add = render_and_compile(scatter_program(dtypes::int32, ScatterCombine::Sum),
                                             GlslTarget::everything());
  EXPECT_TRUE(has(add, "atomicAdd(data0.v[")) << add;
}

// Float max and min compare the bits as order-preserving integer keys, never as floats: a device
// may flush subnormals in a float compare (nothing declares DenormPreserve), which would make
// 0x3 and 0x5 equal. Running subnormal pairs is in tests/tensor_scatter_test.cpp.
TEST(GlslScatterStore, FloatMaxAndMinCompareBitsAsIntegers) {
  for (DType d : {dtypes::float32, dtypes::float64})
    for (ScatterCombine c : {ScatterCombine::Max, ScatterCombine::Min}) {
      const std::string s = render_and_compile(scatter_program(d, c), GlslTarget::everything());
      EXPECT_FALSE(has(s, "uintBitsToFloat") || has(s, "uint64BitsToDouble")) << s;
      EXPECT_TRUE(has(s, d == dtypes::float32 ? "0x80000000u" : "0x8000000000000000UL")) << s;
    }
}

TEST(GlslScatterStore, SixtyFourBitsNeedTheDevicesInt64Atomics) {
  GlslTarget t = GlslTarget::everything();
  t.int64_atomics = false;
  try {
    render_glsl(scatter_program(dtypes::float64, ScatterCombine::Sum), t);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "shaderBufferInt64Atomics")) << e.what();
    EXPECT_TRUE(has(e.what(), "E_scatter")) << e.what();
  }
  EXPECT_NO_THROW(render_glsl(scatter_program(dtypes::float32, ScatterCombine::Max), t));
}

}  // namespace
}  // namespace vkg::test
