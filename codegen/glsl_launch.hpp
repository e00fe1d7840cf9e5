// How to launch a program that render_glsl() wrote: the bytes of its arguments and the workgroup
// counts of its dispatch. The renderer and these functions decide the same layout and the same
// grid from the same (Program, GlslTarget), so a caller never packs arguments by hand:
//
//   std::string glsl = render_glsl(program, target);
//   ArgLayout layout = arg_layout(program, target);
//   vk::Program kernel(device, program.name, compile_glsl(glsl), layout.push_constant_bytes,
//                      bindings_of(layout, program.buffers.size()));  // devices/vk_target.hpp
//   std::vector<std::byte> args = pack_args(program, layout, addresses, var_values);
//   if (layout.spilled) args = pack_spill_address(queue.spill(args));
//   auto [x, y, z] = launch_dims(program, target);
//   queue.dispatch(kernel, {x, y, z}, args, uses);
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <vkgrad/codegen/glsl_target.hpp>
#include <vkgrad/codegen/program.hpp>

namespace vkg {

// How a kernel's buffers are bound, decided here and nowhere else: by push descriptor ("bound":
// storage buffers at set 0, binding = slot) when the target can bind them all (count and
// maxStorageBufferRange, see vk/queue.hpp for why both paths exist), else by device address.
// The arguments of a kernel, in std430 layout: unless bound, the 64-bit device address of each
// buffer in slot order; then each DEFINE_VAR as an int32 in Program::vars order (every offset is
// aligned to its size, as vk::ArgPack packs). They are the push constants when they fit
// maxPushConstantsSize and the kernel has no variables; otherwise they are "spilled": the caller
// copies them to an argument buffer (vk::Queue::spill) and the only push constant is that buffer's
// 64-bit address. Variables always go there, so that a replay can rewrite their values (see
// arg_layout).
struct ArgLayout {
  bool bound = false;  // buffers by push descriptor; no addresses in the block
  bool spilled = false;
  uint32_t arg_bytes = 0;            // the argument block (what pack_args returns)
  uint32_t push_constant_bytes = 0;  // arg_bytes, or 8 when spilled
  // Bound only, GlslTarget::texel_loads: per slot, the texel views the kernel reads the buffer
  // through (empty or 0: a storage buffer at binding = slot). Bit 1: 32-bit words at binding =
  // slot (only where some load reads single words); bit 2: pairs of words at n + slot; bit 4:
  // quads at 2n + slot (n buffers). Vector views are added for the vector widths the kernel
  // loads at aligned indices (aligned_vector_index) while the descriptors fit max_bound_buffers
  // and the views max_texel_descriptors.
  // Bit 8 (kTexelWritten, GlslTarget::texel_loads_written): the kernel also writes the buffer, so
  // its storage buffer stays at binding = slot for the stores and the 1-word view moves to
  // 3n + slot.
  std::vector<uint8_t> texel;
  static constexpr uint8_t kTexelWritten = 8;
  bool texel_read(size_t slot) const { return slot < texel.size() && texel[slot]; }
  bool texel_written(size_t slot) const {
    return texel_read(slot) && (texel[slot] & kTexelWritten);
  }
};

// The descriptor binding of slot's texel view of `width` words (1, 2 or 4) in a kernel of n
// buffers (ArgLayout::texel); `written`: the slot also has its storage buffer (kTexelWritten).
inline uint32_t texel_binding(size_t n, size_t slot, int width, bool written = false) {
  if (width == 1 && written) return uint32_t(3 * n + slot);
  return uint32_t((width == 4 ? 2 * n : width == 2 ? n : 0) + slot);
}

ArgLayout arg_layout(const Program& program, const GlslTarget& target);

// Whether a bound buffer's vector of dtype d at `index` (an INDEX's offset) is one element of the
// buffer read as an array of d: d is 2 or 4 wide and the index a proven multiple of the width.
// The renderer reads such a vector in one load (or one texel), any other lane by lane.
bool aligned_vector_index(const UOp* index, DType d);

// The argument block. `addresses` holds one device address per buffer slot, `var_values` one
// value per Program::vars entry; throws vkg::Error when the counts differ or a value is outside
// its variable's bounds.
std::vector<std::byte> pack_args(const Program& program, std::span<const uint64_t> addresses,
                                 std::span<const int64_t> var_values = {});

// The same for a launch of this layout: the addresses are left out when its buffers are bound.
std::vector<std::byte> pack_args(const Program& program, const ArgLayout& layout,
                                 std::span<const uint64_t> addresses,
                                 std::span<const int64_t> var_values = {});

// The byte offset of Program::vars[k]'s int32 in the argument block of this layout.
uint32_t arg_offset_of_var(const Program& program, const ArgLayout& layout, size_t k);

// The push constants of a spilled launch: the argument buffer's address.
std::vector<std::byte> pack_spill_address(uint64_t argument_buffer_address);

// Whether the program's grid exceeds the device's workgroup count on some axis. The renderer
// then reads the workgroup id as one linear index over the dispatch (x fastest, then y, then z)
// and rebuilds gidx0..2 from it; launches past the end return at once.
bool folds_grid(const Program& program, const GlslTarget& target);

// The workgroup counts to dispatch. Unfolded: Program::global_size. Folded: the linear count
// covered as vk::Groups::cover does (x up to its limit, then rows in y, then planes in z).
// Throws vkg::Error when even that does not fit.
std::array<uint32_t, 3> launch_dims(const Program& program, const GlslTarget& target);

// Whether the grid of a launch depends on the values of the variables (Program::groups_needed).
bool grid_follows_vars(const Program& program);
// The workgroup counts of a launch with these values of Program::vars: launch_dims() with axis
// 0 cut to Program::groups_needed (at least 1) where grid_follows_vars (a folded grid covers
// that many). A kernel over a
// symbolic size bound far below its maximum so launches only the workgroups with work: each
// guarded invocation past the bound size still costs its launch (on Lavapipe, 60x the time of
// a softmax attention at 16 of 512 tokens; bench_nn BM_SymbolicAttention_*).
std::array<uint32_t, 3> launch_dims(const Program& program, const GlslTarget& target,
                                    std::span<const int64_t> var_values);

}  // namespace vkg
