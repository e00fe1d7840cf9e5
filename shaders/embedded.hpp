// The runtime's own GLSL shaders (shaders/*.comp), compiled to SPIR-V at build time and embedded.
#pragma once
#include <cstdint>
#include <span>
#include <string_view>

namespace vkg::shaders {

struct Embedded {
  std::string_view name;             // file name without .comp
  std::string_view glsl;             // the source text
  std::span<const uint32_t> spirv;   // compiled by glslangValidator for Vulkan 1.3
};

// Every embedded shader.
std::span<const Embedded> all();

// The shader with this name; throws vkg::Error naming the known shaders if there is none.
const Embedded& get(std::string_view name);

}  // namespace vkg::shaders
