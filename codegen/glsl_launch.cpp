#include <vkgrad/codegen/glsl_launch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <variant>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/symbolic.hpp>

namespace vkg {

namespace {

constexpr uint32_t kAddressBytes = 8;
constexpr uint32_t kVarBytes = 4;

template <class T>
void put(std::vector<std::byte>& out, T v) {
  const std::size_t at = (out.size() + sizeof(T) - 1) / sizeof(T) * sizeof(T);
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

}  // namespace

bool aligned_vector_index(const UOp* index, DType d) {
  if (!index || (d.count != 2 && d.count != 4)) return false;
  const UOpPtr rem = simplify(index->ptr() % int64_t(d.count));
  return rem->op == Ops::CONST && rem->const_int() == 0;
}

ArgLayout arg_layout(const Program& program, const GlslTarget& target) {
  ArgLayout l;
  l.bound = !program.buffers.empty() && program.buffers.size() <= target.max_bound_buffers;
  for (const BufferParam& b : program.buffers)
    l.bound = l.bound &&
              uint64_t(b.count) * uint64_t(b.dtype.itemsize()) <= target.max_storage_buffer_range;
  l.arg_bytes = (l.bound ? 0 : uint32_t(program.buffers.size()) * kAddressBytes) +
                uint32_t(program.vars.size()) * kVarBytes;
  // A kernel with variables always reads its arguments from a buffer: push constants are
  // written into the command buffer, so a vkg::Jit replay could not give the variables new
  // values without recording again, while an argument buffer's host-visible bytes can be
  // rewritten before each submission (arg_offset_of_var). The cost is one load per argument.
  l.spilled = l.arg_bytes > target.max_push_constants_size || !program.vars.empty();
  l.push_constant_bytes = l.spilled ? kAddressBytes : l.arg_bytes;
  if (l.bound && target.texel_loads) {
    // Texel views exist for 32-bit words only: 8- and 16-bit elements would need formats whose
    // conversions are not bit-exact everywhere, and 64-bit ones two words each. Each view counts
    // against the device's sampled images per stage (max_texel_descriptors, as low as 16): the
    // buffers past it stay storage buffers, and vector views are added only while both it and
    // the push-descriptor total (max_bound_buffers, every slot taking one) leave room.
    const size_t n = program.buffers.size();
    l.texel.assign(n, 0);
    size_t texel_views = 0;
    size_t descriptors = n;
    // Written buffers qualify only where the kernel loads them, every load before the first
    // store (as the linearizer orders them; a view need not see the dispatch's own writes), and
    // stores them plainly.
    std::vector<bool> loaded(n, false), stored(n, false), excluded(n, false);
    if (target.texel_loads_written)
      for (const UOpPtr& u : program.uops) {
        if ((u->op != Ops::LOAD && u->op != Ops::STORE) || u->src.empty() ||
            u->src[0]->op != Ops::INDEX || u->src[0]->src.at(0)->op != Ops::DEFINE_GLOBAL)
          continue;
        const auto slot = size_t(u->src[0]->src[0]->arg_as<int64_t>());
        if (slot >= n) continue;
        if (u->op == Ops::LOAD) {
          loaded[slot] = true;
          excluded[slot] = excluded[slot] || stored[slot];
        } else {
          stored[slot] = true;
          excluded[slot] = excluded[slot] || std::holds_alternative<int64_t>(u->arg);
        }
      }
    for (const BufferParam& b : program.buffers) {
      const auto slot = size_t(b.slot);
      const bool rw = b.written && slot < n && loaded[slot] && !excluded[slot];
      if ((!b.written || rw) && b.dtype.count == 1 && b.count > 0 &&
          uint64_t(b.count) <= target.max_texel_buffer_elements &&
          (b.dtype.scalar == Scalar::Float32 || b.dtype.scalar == Scalar::Int32 ||
           b.dtype.scalar == Scalar::UInt32) &&
          texel_views < target.max_texel_descriptors &&
          (!rw || descriptors < target.max_bound_buffers)) {
        l.texel[slot] = rw ? 1 | ArgLayout::kTexelWritten : 1;
        ++texel_views;
        descriptors += rw;  // the storage buffer and the view
      }
    }
    for (const UOpPtr& u : program.uops) {
      if (u->op != Ops::LOAD || u->src.empty() || u->src[0]->op != Ops::INDEX) continue;
      const UOp& buffer = *u->src[0]->src.at(0);
      const int w = u->dtype.count;
      if (buffer.op != Ops::DEFINE_GLOBAL || (w != 2 && w != 4)) continue;
      // The renderer reads a vector through a view of its width only at an index proven a
      // multiple of the width (lane by lane otherwise): a view no load uses is not added.
      if (u->src[0]->src.size() < 2 || !aligned_vector_index(u->src[0]->src[1].get(), u->dtype))
        continue;
      const auto slot = size_t(buffer.arg_as<int64_t>());
      if (slot < n && l.texel[slot] && !(l.texel[slot] & w) &&
          descriptors < target.max_bound_buffers && texel_views < target.max_texel_descriptors) {
        l.texel[slot] |= uint8_t(w);
        ++descriptors;
        ++texel_views;
      }
    }
    // The word view only where a load reads through it: a scalar, or a vector read lane by lane
    // (no view of its width, or an index not proven aligned). A view no load reads is a pushed
    // descriptor for nothing (the MLP step's Adam kernel had four); its time on Lavapipe was
    // within the noise of a loaded machine.
    std::vector<bool> words(n, false);
    for (const UOpPtr& u : program.uops) {
      if (u->op != Ops::LOAD || u->src.empty() || u->src[0]->op != Ops::INDEX ||
          u->src[0]->src.at(0)->op != Ops::DEFINE_GLOBAL)
        continue;
      const auto slot = size_t(u->src[0]->src[0]->arg_as<int64_t>());
      if (slot >= n) continue;
      const int w = u->dtype.count;
      words[slot] = words[slot] || w == 1 || !(l.texel[slot] & w) || u->src[0]->src.size() < 2 ||
                    !aligned_vector_index(u->src[0]->src[1].get(), u->dtype);
    }
    for (size_t slot = 0; slot < n; ++slot)
      if (!words[slot] && (l.texel[slot] & (2 | 4))) l.texel[slot] &= uint8_t(~1u);
  }
  return l;
}

std::vector<std::byte> pack_args(const Program& program, std::span<const uint64_t> addresses,
                                 std::span<const int64_t> var_values) {
  if (addresses.size() != program.buffers.size() || var_values.size() != program.vars.size())
    throw Error(fmt::format("kernel '{}' takes {} buffers and {} variables, got {} and {}",
                            program.name, program.buffers.size(), program.vars.size(),
                            addresses.size(), var_values.size()));
  std::vector<std::byte> out;
  for (const uint64_t a : addresses) put(out, a);
  for (std::size_t i = 0; i < var_values.size(); ++i) {
    const VarArg& v = program.vars[i];
    if (var_values[i] < v.min || var_values[i] > v.max)
      throw Error(fmt::format("kernel '{}': variable '{}' = {} is outside [{}, {}]", program.name,
                              v.name, var_values[i], v.min, v.max));
    put(out, int32_t(var_values[i]));
  }
  return out;
}

std::vector<std::byte> pack_args(const Program& program, const ArgLayout& layout,
                                 std::span<const uint64_t> addresses,
                                 std::span<const int64_t> var_values) {
  std::vector<std::byte> out = pack_args(program, addresses, var_values);
  // Bound buffers reach the kernel by descriptor: only the variables follow.
  if (layout.bound)
    out.erase(out.begin(), out.begin() + std::ptrdiff_t(addresses.size() * kAddressBytes));
  return out;
}

uint32_t arg_offset_of_var(const Program& program, const ArgLayout& layout, size_t k) {
  return (layout.bound ? 0 : uint32_t(program.buffers.size()) * kAddressBytes) +
         uint32_t(k) * kVarBytes;
}

std::vector<std::byte> pack_spill_address(uint64_t argument_buffer_address) {
  std::vector<std::byte> out;
  put(out, argument_buffer_address);
  return out;
}

bool folds_grid(const Program& program, const GlslTarget& target) {
  for (int d = 0; d < 3; ++d)
    if (program.global_size[d] > int64_t(target.max_workgroup_count[d])) return true;
  return false;
}

namespace {

// A folded launch of `total` workgroups: x up to its limit, then rows in y, then planes in z.
std::array<uint32_t, 3> cover(const Program& program, const GlslTarget& target, uint64_t total) {
  const uint64_t mx = target.max_workgroup_count[0], my = target.max_workgroup_count[1],
                 mz = target.max_workgroup_count[2];
  const uint64_t x = std::min(total, mx), rows = (total + x - 1) / x;
  const uint64_t y = std::min(rows, my), planes = (rows + y - 1) / y;
  // The shader's linear id over the whole dispatch must fit its 32-bit arithmetic.
  if (planes > mz || x * y * planes > UINT32_MAX)
    throw Error(fmt::format("kernel '{}': {} workgroups do not fit the device's {} x {} x {} grid",
                            program.name, total, mx, my, mz));
  return {uint32_t(x), uint32_t(y), uint32_t(planes)};
}

}  // namespace

std::array<uint32_t, 3> launch_dims(const Program& program, const GlslTarget& target) {
  const auto& g = program.global_size;
  for (int d = 0; d < 3; ++d)
    if (g[d] < 1)
      throw Error(fmt::format("kernel '{}': global size {} on axis {}", program.name, g[d], d));
  if (!folds_grid(program, target)) return {uint32_t(g[0]), uint32_t(g[1]), uint32_t(g[2])};
  return cover(program, target, uint64_t(g[0]) * uint64_t(g[1]) * uint64_t(g[2]));
}

bool grid_follows_vars(const Program& program) { return program.groups_needed != nullptr; }

std::array<uint32_t, 3> launch_dims(const Program& program, const GlslTarget& target,
                                    std::span<const int64_t> var_values) {
  std::array<uint32_t, 3> dims = launch_dims(program, target);
  if (!grid_follows_vars(program)) return dims;
  if (var_values.size() != program.vars.size())
    throw Error(fmt::format("kernel '{}' takes {} variables, got {}", program.name,
                            program.vars.size(), var_values.size()));
  std::map<std::string, int64_t> vars;
  for (size_t i = 0; i < var_values.size(); ++i) vars[program.vars[i].name] = var_values[i];
  const auto& g = program.global_size;
  const int64_t needed = std::clamp<int64_t>(eval_int(program.groups_needed, vars), 1, g[0]);
  if (!folds_grid(program, target)) {
    dims[0] = uint32_t(needed);
    return dims;
  }
  // A folded kernel reads its linear id from the dispatch's own counts (gl_NumWorkGroups).
  return cover(program, target, uint64_t(needed) * uint64_t(g[1]) * uint64_t(g[2]));
}

}  // namespace vkg
