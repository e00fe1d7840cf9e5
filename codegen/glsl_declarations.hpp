// The text of a kernel before main(): #version and #extension lines, the workgroup size, how
// buffers are reached (storage buffers bound by push descriptor, or buffer_reference pointers in
// push constants or in a spilled argument buffer), the push-constant block, shared arrays and the
// helper functions. The renderer (glsl_renderer.cpp) collects what the body uses into
// Declarations while it writes the body, then calls declarations(). Internal to codegen.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <vkgrad/codegen/glsl_launch.hpp>
#include <vkgrad/codegen/glsl_syntax.hpp>
#include <vkgrad/codegen/program.hpp>

namespace vkg::glsl {

struct SharedArray {
  std::string type, name;
  int64_t count;
};

struct Declarations {
  Needs needs;
  std::set<std::pair<Scalar, int>> pointer_types;   // (scalar, width) reached by buffer_reference
  std::set<std::pair<int64_t, int>> bound_vectors;  // (slot, width) of vector accesses
  std::set<int64_t> bound_bits;  // slots of float buffers a scatter combines into as their bits
  bool vector_access = false;                       // element_address() is called
  bool shuffles = false;                            // subgroupShuffle is called
  std::vector<std::string> var_members;  // the push-constant member of each Program::vars entry
  std::vector<SharedArray> shared;
  std::string helpers;  // Helpers::definitions()
};

std::string declarations(const Program& program, const GlslTarget& target, const ArgLayout& layout,
                         const Declarations& d);

}  // namespace vkg::glsl
