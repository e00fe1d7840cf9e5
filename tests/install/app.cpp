// Compiles a kernel through the installed library and prints its SPIR-V word count.
#include <vkgrad/vkgrad.hpp>
#include <vkgrad/codegen/spirv_compiler.hpp>

#include <cstdio>

int main() {
  vkg::SpirvCompileOptions options;
  options.disk_cache = false;
  try {
    auto words = vkg::compile_glsl(R"(#version 460
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer Data { float v[]; };
void main() { v[gl_GlobalInvocationID.x] *= 2.0; }
)", options);
    if (words.empty() || words[0] != 0x07230203u) {
      std::puts("not a SPIR-V module");
      return 1;
    }
    std::printf("SPIR-V words: %zu\n", words.size());
  } catch (const vkg::Error& e) {
    std::printf("vkg::Error: %s\n", e.what());
    return 1;
  }
  return 0;
}
