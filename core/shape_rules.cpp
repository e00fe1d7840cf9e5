#include <vkgrad/core/shape_rules.hpp>

#include <algorithm>

#include <vkgrad/core/buffer.hpp>
#include <vkgrad/core/symbolic_shape.hpp>
#include <vkgrad/core/uop.hpp>

namespace vkg {

namespace {

using Args = std::vector<int64_t>;

const Args* int_args(const UOp& u) { return movement_values(u); }

std::optional<Shape> movement_shape(const UOp& u, const Shape& in) {
  const Args* a = int_args(u);
  if (!a) return std::nullopt;
  switch (u.op) {
    case Ops::RESHAPE:
    case Ops::EXPAND: return *a;
    case Ops::FLIP: return a->size() == in.size() ? std::optional(in) : std::nullopt;
    case Ops::PERMUTE: {
      if (a->size() != in.size()) return std::nullopt;
      Shape out(in.size());
      for (size_t i = 0; i < a->size(); ++i) {
        if ((*a)[i] < 0 || size_t((*a)[i]) >= in.size()) return std::nullopt;
        out[i] = in[size_t((*a)[i])];
      }
      return out;
    }
    case Ops::PAD:
    case Ops::SHRINK: {
      if (a->size() != 2 * in.size()) return std::nullopt;
      Shape out(in.size());
      for (size_t i = 0; i < in.size(); ++i)
        out[i] = u.op == Ops::PAD ? in[i] + (*a)[2 * i] + (*a)[2 * i + 1] : (*a)[2 * i + 1] - (*a)[2 * i];
      return out;
    }
    default: return std::nullopt;
  }
}

}  // namespace

std::optional<Shape> compute_shape(const UOp& u) {
  switch (u.op) {
    case Ops::BUFFER: return Shape{buffer_of(u).count()};
    case Ops::CONST: return Shape{};
    // MULTI (DEVICE, shard...): the shards joined along the axis, or one of them (replicated).
    case Ops::MULTI: {
      if (u.src.size() < 2 || !u.src[1]->shape() || !std::holds_alternative<int64_t>(u.arg))
        return std::nullopt;
      Shape out = *u.src[1]->shape();
      const int64_t axis = std::get<int64_t>(u.arg);
      if (axis >= 0 && size_t(axis) < out.size())
        for (size_t i = 2; i < u.src.size(); ++i)
          out[size_t(axis)] += u.src[i]->shape() ? (*u.src[i]->shape())[size_t(axis)] : 0;
      return out;
    }
    // COPY (x, DEVICE): x's shape on another device.
    case Ops::COPY:
      return u.src.empty() || !u.src[0]->shape() ? std::nullopt : std::optional(*u.src[0]->shape());
    case Ops::BIND:
      return u.src.size() == 2 ? std::optional(Shape{}) : std::nullopt;  // a tensor-level variable
    case Ops::INDEX: {
      // Tensor level (core/indexed_load.hpp): INDEX(src, idx...) has the indices' shape. Kernel
      // level INDEX(DEFINE_GLOBAL, ...) has none.
      if (u.src.size() < 2 || !u.src[0]->shape()) return std::nullopt;
      const Shape* first = u.src[1]->shape();
      if (!first || first->size() != u.src[0]->shape()->size()) return std::nullopt;
      for (size_t i = 2; i < u.src.size(); ++i)
        if (!u.src[i]->shape() || *u.src[i]->shape() != *first) return std::nullopt;
      return *first;
    }
    case Ops::SCATTER:  // SCATTER(dest, values, idx...): dest's shape (core/indexed_load.hpp)
      if (u.src.size() < 3 || !u.src[0]->shape()) return std::nullopt;
      return *u.src[0]->shape();
    case Ops::REDUCE_AXIS: {
      const Shape* in = u.src.empty() ? nullptr : u.src[0]->shape();
      const auto* r = std::get_if<ReduceArg>(&u.arg);
      if (!in || !r) return std::nullopt;
      Shape out = *in;
      for (int64_t ax : r->axes)
        if (ax >= 0 && size_t(ax) < out.size()) out[size_t(ax)] = 1;
      return out;
    }
    default: break;
  }
  if (is_movement(u.op)) {
    const Shape* in = u.src.empty() ? nullptr : u.src[0]->shape();
    return in ? movement_shape(u, *in) : std::nullopt;
  }
  const bool elementwise = is_alu(u.op) || u.op == Ops::CAST || u.op == Ops::BITCAST ||
                           u.op == Ops::CONTIGUOUS || u.op == Ops::DETACH || u.op == Ops::COPY ||
                           u.op == Ops::ASSIGN;
  if (!elementwise || u.src.empty()) return std::nullopt;
  const Shape* first = u.src[0]->shape();
  if (!first) return std::nullopt;
  for (const UOpPtr& s : u.src)
    if (!s->shape() || *s->shape() != *first) return std::nullopt;
  return *first;
}

}  // namespace vkg
