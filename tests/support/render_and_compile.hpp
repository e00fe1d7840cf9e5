// render_and_compile(p, target): the GLSL a program renders to for `target`, after checking that
// shaderc compiles it (a failure shows the source). The renderer's tests assert on the text.
#pragma once
#include <string>

#include <gtest/gtest.h>

#include <vkgrad/codegen/glsl_renderer.hpp>
#include <vkgrad/codegen/spirv_compiler.hpp>

namespace vkg::test {

inline std::string render_and_compile(const Program& p,
                                      const GlslTarget& target = GlslTarget::everything()) {
  std::string glsl = render_glsl(p, target);
  SpirvCompileOptions o;
  o.disk_cache = false;
  o.name = p.name;
  EXPECT_NO_THROW(compile_glsl(glsl, o)) << glsl;
  return glsl;
}

}  // namespace vkg::test
