#include <vkgrad/core/shape.hpp>

#include <algorithm>

#include <vkgrad/core/error.hpp>

namespace vkg {

int64_t prod(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

void check_size(const Shape& s, int64_t itemsize, std::string_view op) {
  for (int64_t d : s)
    if (d < 0)
      throw Error(std::string(op) + ": shape " + shape_str(s) + " has a negative dimension");
  if (std::find(s.begin(), s.end(), 0) != s.end()) return;  // no elements, whatever the others
  int64_t bytes = std::max<int64_t>(itemsize, 1);
  for (int64_t d : s)
    if (__builtin_mul_overflow(bytes, d, &bytes))
      throw Error(std::string(op) + ": shape " + shape_str(s) +
                  " has too many elements (its size in bytes does not fit in 64 bits)");
}

std::string shape_str(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

int normalize_axis(int64_t axis, const Shape& shape, std::string_view op) {
  const int64_t n = int64_t(shape.size());
  if (axis < -n || axis >= n || n == 0)
    throw Error(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for shape " +
                shape_str(shape));
  return int(axis < 0 ? axis + n : axis);
}

Shape broadcast_shape(const Shape& a, const Shape& b, std::string_view op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (x != y && x != 1 && y != 1)
      throw Error(std::string(op) + ": shapes " + shape_str(a) + " and " + shape_str(b) +
                  " do not broadcast (dimension " + std::to_string(i) + ": " + std::to_string(x) +
                  " vs " + std::to_string(y) + ")");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

}  // namespace vkg
