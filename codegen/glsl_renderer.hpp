// The GLSL renderer: a linear program (codegen/program.hpp) as a Vulkan GLSL 450 compute shader,
// one statement per UOp, named the way tinygrad names them (data0, ridx0, acc0, val0, alu0).
//
// How the kernel sees its arguments (glsl_launch.hpp packs them):
//   - buffers are GL_EXT_buffer_reference pointers, one pointer type per element dtype
//     (Float32Ptr { float v[]; }), passed as 64-bit device addresses in a push-constant block in
//     slot order, followed by the DEFINE_VARs as int. When they do not fit maxPushConstantsSize
//     the block lives in an argument buffer whose address is the only push constant ("spilled").
//   - upcast vector loads and stores reinterpret the element's address as a vector pointer
//     (Float32x4Ptr { vec4 v; }) with the address computed in two 32-bit words, so no int64 is
//     needed and an index need not be a multiple of the width.
//   - bool is stored in buffers as one byte (uint8_t, needs 8-bit storage): loaded as
//     (uint(x) != 0u), stored as uint8_t(uint(b)), so any nonzero byte reads as true.
//
// Exactness rules the CPU interpreter (cpu_alu.hpp) shares: integer MOD is C's remainder, not
// GLSL's %; MAX propagates nan; x != x is tested on the bits; float constants are written so that
// they read back exactly (inf and nan through their bits); a masked load clamps its index into
// range, since a select does not stop a load. A dtype the target cannot do is a vkg::Error naming
// the dtype and the kernel.
#pragma once
#include <string>

#include <vkgrad/codegen/glsl_launch.hpp>
#include <vkgrad/codegen/glsl_target.hpp>
#include <vkgrad/codegen/program.hpp>

namespace vkg {

// The compute shader (entry point main) of `program` for `target`. Throws vkg::Error when the
// program is not of the linear form or needs what the target lacks.
std::string render_glsl(const Program& program, const GlslTarget& target);

}  // namespace vkg
