// Operators whose result's shape depends on the values (Unique, NonMaxSuppression) or that are
// small serial algorithms (Det): they read their inputs on the host (a sync, as Tensor::unique
// does) and return tensors built from the answer.
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <numeric>

#include <vkgrad/onnx/ops.hpp>

namespace vkg::onnx {
namespace {

Tensor int64_tensor(const std::vector<int64_t>& v, const std::string& device) {
  return Tensor(v, Shape{int64_t(v.size())}, device);
}

// Unique over elements (no axis) or over slices along axis; sorted or in order of appearance.
std::vector<Value> unique(OpContext& c) {
  Tensor x = c.in(0);
  const auto axis_attr = c.attr_i("axis");
  const bool sorted = c.attr_i("sorted", 1) != 0;
  int64_t axis = 0;
  if (axis_attr)
    axis = axis_of(c, *axis_attr, x.ndim());
  else
    x = x.flatten();
  const Tensor moved = x.transpose(0, axis).contiguous();
  const int64_t n = moved.shape()[0], width = n ? moved.numel() / n : 0;
  const std::vector<double> v = host_doubles(moved);
  std::vector<std::vector<double>> slices(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    slices[size_t(i)].assign(v.begin() + i * width, v.begin() + (i + 1) * width);
  std::map<std::vector<double>, int64_t> first;  // slice -> first position
  std::vector<int64_t> order;                    // first positions in order of appearance
  for (int64_t i = 0; i < n; ++i)
    if (first.emplace(slices[size_t(i)], i).second) order.push_back(i);
  if (sorted) {
    order.clear();
    for (auto& [_, i] : first) order.push_back(i);
  }
  std::map<std::vector<double>, int64_t> rank;
  for (size_t j = 0; j < order.size(); ++j) rank[slices[size_t(order[j])]] = int64_t(j);
  std::vector<int64_t> inverse(static_cast<size_t>(n)), counts(order.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    inverse[size_t(i)] = rank[slices[size_t(i)]];
    counts[size_t(inverse[size_t(i)])]++;
  }
  const Tensor y = x.index_select(axis, int64_tensor(order, x.device()));
  return {y, int64_tensor(order, x.device()), int64_tensor(inverse, x.device()),
          int64_tensor(counts, x.device())};
}

// Greedy non-maximum suppression per batch and class, as ONNX's reference: boxes above the score
// threshold by descending score, each kept unless its IoU with a kept one exceeds the threshold.
std::vector<Value> non_max_suppression(OpContext& c) {
  const Tensor boxes = c.in(0), scores = c.in(1);
  const int64_t max_out = c.has(2) ? c.ints_in(2).at(0) : 0;
  const double iou_th = c.has(3) ? c.doubles_in(3).at(0) : 0.0;
  const bool has_score_th = c.has(4);
  const double score_th = has_score_th ? c.doubles_in(4).at(0) : 0.0;
  const bool center = c.attr_i("center_point_box", 0) != 0;
  const int64_t nb = boxes.shape()[0], n = boxes.shape()[1], nc = scores.shape()[1];
  const std::vector<double> bx = host_doubles(boxes), sc = host_doubles(scores);
  auto corners = [&](int64_t b, int64_t i) {
    const double* p = &bx[size_t((b * n + i) * 4)];
    if (center)
      return std::array<double, 4>{p[1] - p[3] / 2, p[0] - p[2] / 2, p[1] + p[3] / 2,
                                   p[0] + p[2] / 2};
    return std::array<double, 4>{std::min(p[0], p[2]), std::min(p[1], p[3]), std::max(p[0], p[2]),
                                 std::max(p[1], p[3])};
  };
  auto iou = [&](int64_t b, int64_t i, int64_t j) {
    const auto a = corners(b, i), q = corners(b, j);
    const double ih = std::max(0.0, std::min(a[2], q[2]) - std::max(a[0], q[0]));
    const double iw = std::max(0.0, std::min(a[3], q[3]) - std::max(a[1], q[1]));
    const double inter = ih * iw;
    const double uni = (a[2] - a[0]) * (a[3] - a[1]) + (q[2] - q[0]) * (q[3] - q[1]) - inter;
    return uni > 0 ? inter / uni : 0.0;
  };
  std::vector<int64_t> out;
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t k = 0; k < nc; ++k) {
      const double* s = &sc[size_t((b * nc + k) * n)];
      std::vector<int64_t> cand;
      for (int64_t i = 0; i < n; ++i)
        if (!has_score_th || s[i] > score_th) cand.push_back(i);
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t i, int64_t j) { return s[i] > s[j]; });
      std::vector<int64_t> kept;
      for (int64_t i : cand) {
        if (int64_t(kept.size()) >= max_out) break;
        if (std::all_of(kept.begin(), kept.end(),
                        [&](int64_t j) { return iou(b, i, j) <= iou_th; }))
          kept.push_back(i);
      }
      for (int64_t i : kept) out.insert(out.end(), {b, k, i});
    }
  return {Tensor(out, Shape{int64_t(out.size() / 3), 3}, boxes.device())};
}

// Determinants of (..., n, n) by LU with partial pivoting in double.
std::vector<Value> det(OpContext& c) {
  const Tensor x = c.in(0);
  if (x.ndim() < 2 || x.shape()[size_t(x.ndim() - 1)] != x.shape()[size_t(x.ndim() - 2)])
    c.fail("needs square matrices");
  const int64_t n = x.shape().back(), count = n ? x.numel() / (n * n) : 0;
  std::vector<double> a = host_doubles(x), out(static_cast<size_t>(count));
  for (int64_t m = 0; m < count; ++m) {
    double* p = &a[size_t(m * n * n)];
    double d = 1;
    for (int64_t col = 0; col < n && d != 0; ++col) {
      int64_t piv = col;
      for (int64_t r = col + 1; r < n; ++r)
        if (std::abs(p[r * n + col]) > std::abs(p[piv * n + col])) piv = r;
      if (p[piv * n + col] == 0) {
        d = 0;
        break;
      }
      if (piv != col) {
        for (int64_t k = 0; k < n; ++k) std::swap(p[piv * n + k], p[col * n + k]);
        d = -d;
      }
      d *= p[col * n + col];
      for (int64_t r = col + 1; r < n; ++r) {
        const double f = p[r * n + col] / p[col * n + col];
        for (int64_t k = col; k < n; ++k) p[r * n + k] -= f * p[col * n + k];
      }
    }
    out[size_t(m)] = d;
  }
  const Shape s(x.shape().begin(), x.shape().end() - 2);
  return {Tensor(out, s, x.device()).cast(x.dtype())};
}

}  // namespace

void add_host_ops(OpTable& t) {
  t["Unique"] = unique;
  t["NonMaxSuppression"] = non_max_suppression;
  t["Det"] = det;
}

}  // namespace vkg::onnx
