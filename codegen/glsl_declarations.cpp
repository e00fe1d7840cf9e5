#include <vkgrad/codegen/glsl_declarations.hpp>

#include <fmt/format.h>

#include <initializer_list>

namespace vkg::glsl {

namespace {

// The type of a buffer's elements: an emulated 16-bit float's bits are uint16_t, or two to a
// uint without 16-bit storage (glsl_half.cpp).
std::string element_type(DType e, const GlslTarget& t) {
  if (packed16(e, t)) return "uint";
  return emulated(e, t) ? "uint16_t" : storage_type_name(e);
}

// Storage buffers bound by push descriptor (set 0, binding = slot), each also declared as an
// array of each vector width the kernel reads or writes it in (descriptor aliasing).
std::string bound_buffers(const Program& p, const GlslTarget& t, const ArgLayout& layout,
                          const Declarations& d) {
  std::string h;
  for (const BufferParam& b : p.buffers) {
    if (layout.texel_read(size_t(b.slot))) {
      // Read through texel views of its 32-bit words (glsl_launch.hpp's ArgLayout::texel).
      const bool written = layout.texel_written(size_t(b.slot));
      for (int w : {1, 2, 4})
        if (layout.texel[size_t(b.slot)] & w)
          h += fmt::format("layout(set = 0, binding = {}) uniform usamplerBuffer data{}{}{};\n",
                           texel_binding(p.buffers.size(), size_t(b.slot), w, written), b.slot,
                           written ? "t" : "", w == 1 ? "" : fmt::format("x{}", w));
      if (!written) continue;  // else stored through its storage buffer, declared below
    }
    const std::string access = b.written ? "" : "readonly ";
    h += fmt::format(
        "layout(std430, set = 0, binding = {0}) {1}buffer Data{0} {{ {2} v[]; }} data{0};\n",
        b.slot, access, element_type(b.dtype.base(), t));
    for (const auto& [slot, width] : d.bound_vectors)
      if (slot == b.slot && (width == 2 || width == 4))
        h += fmt::format(
            "layout(std430, set = 0, binding = {0}) {1}buffer Data{0}x{2} {{ {3} v[]; }} "
            "data{0}x{2};\n",
            b.slot, access, width, storage_type_name(b.dtype.base().vec(width)));
    // A float scatter compare-and-swaps the elements' bits (GLSL has no float atomics in core).
    if (d.bound_bits.count(b.slot))
      h += fmt::format(
          "layout(std430, set = 0, binding = {0}) buffer Data{0}b {{ {1} v[]; }} data{0}b;\n",
          b.slot, b.dtype.scalar_size() == 8 ? "uint64_t" : "uint");
  }
  return h;
}

// SignedZeroInfNanPreserve for each float width the kernel computes in and the device honours:
// without it Lavapipe's compiler folds float expressions in ways that change infinities, nan and
// zero signs (sqrt(x) * sqrt(x) to x, (x * 1e38) * 10 to x * 1e39). It is enough there; `precise`
// on every value was not needed, and would forbid fma contraction on GPUs (matmul). GLSL has
// no syntax for it, so it is declared through GL_EXT_spirv_intrinsics (4466 is the capability,
// 4461 the execution mode; SPIR-V 1.4 made float controls core, so no extension is needed).
// DenormPreserve (capability 4464, mode 4459) likewise, where the device can keep subnormals:
// NVIDIA flushes float32 subnormals to zero unless asked. glslang keeps only the last mode of
// one id; spirv_execution_modes.cpp puts the other widths back after compilation.
std::string preserve_specials(const GlslTarget& t, const Needs& n) {
  std::string modes;
  const bool width[3] = {n.float16, true, n.float64};  // float32: every kernel may compute in it
  const bool specials[3] = {t.preserve_specials_float16, t.preserve_specials_float32,
                            t.preserve_specials_float64};
  const bool keeps[3] = {t.denorm_preserve_float16, t.denorm_preserve_float32,
                         t.denorm_preserve_float64};
  bool denorms[3];
  for (int w = 0; w < 3; ++w) denorms[w] = width[w] && keeps[w];
  // Widths whose denormal modes must agree (VUID-RuntimeSpirv-denormBehaviorIndependence-06289,
  // -06290): all of them declared where any is and the device keeps each, else none.
  auto tie = [&](std::initializer_list<int> group) {
    bool any = false, all = true;
    for (int w : group) any = any || denorms[w], all = all && keeps[w];
    for (int w : group) denorms[w] = any && all;
  };
  if (t.denorm_independence == GlslTarget::DenormIndependence::Bit32Only) tie({0, 2});
  if (t.denorm_independence == GlslTarget::DenormIndependence::None) tie({0, 1, 2});
  for (int w = 0; w < 3; ++w)
    if (width[w] && specials[w])
      modes += fmt::format("spirv_execution_mode(capabilities = [4466], 4461, {});\n", 16 << w);
  for (int w = 0; w < 3; ++w)
    if (denorms[w])
      modes += fmt::format("spirv_execution_mode(capabilities = [4464], 4459, {});\n", 16 << w);
  if (modes.empty()) return "";
  return "#extension GL_EXT_spirv_intrinsics : require\n" + modes;
}

}  // namespace

std::string declarations(const Program& p, const GlslTarget& t, const ArgLayout& layout,
                         const Declarations& d) {
  std::string h = "#version 450\n";
  if (!p.buffers.empty() && (!layout.bound || layout.spilled))
    h += "#extension GL_EXT_buffer_reference : require\n";
  if (d.vector_access) h += "#extension GL_EXT_buffer_reference_uvec2 : require\n";
  for (const std::string& e : extension_lines(d.needs)) h += e + "\n";
  if (d.shuffles) h += "#extension GL_KHR_shader_subgroup_shuffle : require\n";
  h += preserve_specials(t, d.needs);
  h += fmt::format("layout(local_size_x = {}, local_size_y = {}, local_size_z = {}) in;\n",
                   p.local_size[0], p.local_size[1], p.local_size[2]);
  std::set<std::pair<Scalar, int>> types = d.pointer_types;
  for (const BufferParam& b : p.buffers) types.insert({b.dtype.scalar, 1});
  if (layout.bound) {
    h += bound_buffers(p, t, layout, d);
    types.clear();
  }
  for (const auto& [scalar, width] : types) {
    const DType e{scalar, uint8_t(width)};
    const std::string member = width == 1 ? fmt::format("{} v[]", element_type(e, t))
                                          : fmt::format("{} v", storage_type_name(e));
    h += fmt::format(
        "layout(buffer_reference, std430, buffer_reference_align = {}) buffer {} {{ {}; }};\n",
        packed16(e, t) ? 4 : e.base().scalar_size(), pointer_type_name(e), member);  // uint v[]
  }
  std::string members;
  for (const BufferParam& b : p.buffers)
    if (!layout.bound)
      members += fmt::format(" {} data{};", pointer_type_name(b.dtype.base()), b.slot);
  for (const std::string& v : d.var_members) members += fmt::format(" int {};", v);
  if (!members.empty()) {
    if (layout.spilled) {
      h += fmt::format(
          "// {} bytes of arguments exceed the {} bytes of push constants: they live in a "
          "buffer\n",
          layout.arg_bytes, t.max_push_constants_size);
      h += fmt::format(
          "layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer Args "
          "{{{} }};\n",
          members);
      h += "layout(push_constant) uniform Push { Args args; };\n";
    } else {
      h += fmt::format("layout(push_constant) uniform Args {{{} }};\n", members);
    }
  }
  for (const SharedArray& s : d.shared)
    h += fmt::format("shared {} {}[{}];\n", s.type, s.name, s.count);
  if (d.vector_access)
    h += "// base + index * size in 64-bit arithmetic on two 32-bit words\n"
         "uvec2 element_address(uvec2 base, int index, uint size) {\n"
         "  uint hi, lo, carry;\n"
         "  umulExtended(uint(index), size, hi, lo);\n"
         "  lo = uaddCarry(base.x, lo, carry);\n"
         "  return uvec2(lo, base.y + hi + carry);\n"
         "}\n";
  h += d.helpers;
  return h;
}

}  // namespace vkg::glsl
