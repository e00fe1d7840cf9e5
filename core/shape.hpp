// Shapes of tensors and the small utilities every op that takes shapes or axes needs.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace vkg {

using Shape = std::vector<int64_t>;

// The axes a reduction runs over, written as one axis (x.sum(1)) or a list (x.sum({0, 2})).
// Empty means every axis.
struct Axes {
  std::vector<int64_t> list;
  Axes() = default;
  Axes(int64_t axis) : list{axis} {}
  Axes(int axis) : list{axis} {}
  Axes(std::initializer_list<int64_t> axes) : list(axes) {}
  Axes(std::vector<int64_t> axes) : list(std::move(axes)) {}
};

// Number of elements (1 for the 0-d shape ()).
int64_t prod(const Shape& s);
// Throws vkg::Error naming `op` when a dimension of s is negative, or when its element count or
// its size in bytes (itemsize bytes an element) does not fit in int64: a shape that wraps
// around would name a tiny buffer for a huge tensor.
void check_size(const Shape& s, int64_t itemsize, std::string_view op);
// "(2, 3)", "(5,)", "()" — as tinygrad and numpy print shapes.
std::string shape_str(const Shape& s);
// An axis counted from the end when negative (-1 is the last), checked against ndim. Throws
// vkg::Error naming `op`, the axis and the shape when it is out of range.
int normalize_axis(int64_t axis, const Shape& shape, std::string_view op);
// The shape two shapes broadcast to (numpy rules: align right, 1 stretches). Throws vkg::Error
// naming `op` and both shapes when they do not broadcast.
Shape broadcast_shape(const Shape& a, const Shape& b, std::string_view op);

}  // namespace vkg
