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
  const int64_t max_out = c.has(2) ? c.int_in(2) : 0;
  const double iou_th = c.has(3) ? c.double_in(3) : 0.0;
  const bool has_score_th = c.has(4);
  const double score_th = has_score_th ? c.double_in(4) : 0.0;
  const bool center = c.attr_i("center_point_box", 0) != 0;
  if (boxes.ndim() != 3 || boxes.shape()[2] != 4 || scores.ndim() != 3 ||
      scores.shape()[0] != boxes.shape()[0] || scores.shape()[2] != boxes.shape()[1])
    c.fail("boxes " + shape_str(boxes.shape()) + " and scores " + shape_str(scores.shape()) +
           " must be (batches, boxes, 4) and (batches, classes, boxes)");
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

// TfIdfVectorizer over integer inputs: counts of the pool's n-grams (items skip_count + 1 apart,
// for every skip up to max_skip_count; unigrams once per position) per row, then TF, IDF or TFIDF.
std::vector<Value> tfidf(OpContext& c) {
  const Tensor x = c.in(0);
  if (!x.dtype().is_int()) c.unsupported("TfIdfVectorizer on " + x.dtype().name());
  if (c.has_attr("pool_strings")) c.unsupported("attribute 'pool_strings'");
  const int64_t min_n = c.attr_i("min_gram_length", 1), max_n = c.attr_i("max_gram_length", 1);
  const int64_t max_skip = c.attr_i("max_skip_count", 0);
  const std::string mode = c.attr_s("mode", "TF");
  const auto counts = c.attr_ints("ngram_counts", {}), indexes = c.attr_ints("ngram_indexes", {});
  const auto pool = c.attr_ints("pool_int64s", {});
  const auto weights = c.attr_floats("weights").value_or(std::vector<float>{});
  if (min_n < 1 || max_n < min_n || max_skip < 0)
    c.fail("gram lengths " + std::to_string(min_n) + ".." + std::to_string(max_n) +
           " and max_skip_count " + std::to_string(max_skip) + " are not valid");
  std::map<std::vector<int64_t>, int64_t> column;
  size_t j = 0;
  for (size_t k = 0; k < counts.size(); ++k) {
    const int64_t n = int64_t(k) + 1;
    const int64_t end = k + 1 < counts.size() ? counts[k + 1] : int64_t(pool.size());
    // The n-grams of length n lie in pool[counts[k], end): ascending offsets inside the pool.
    if (counts[k] < 0 || counts[k] > end || end > int64_t(pool.size()))
      c.fail("ngram_counts " + std::to_string(counts[k]) + ".." + std::to_string(end) +
             " do not lie in a pool of " + std::to_string(pool.size()));
    for (int64_t p = counts[k]; p + n <= end; p += n, ++j)
      column[std::vector<int64_t>(pool.begin() + p, pool.begin() + p + n)] =
          j < indexes.size() ? indexes[j] : int64_t(j);
  }
  int64_t width = 0;
  for (int64_t i : indexes) {
    if (i < 0) c.fail("ngram_indexes holds " + std::to_string(i));
    width = std::max(width, i + 1);
  }
  // A pool entry without an index takes its position j as its column.
  for (const auto& [gram, col] : column)
    if (col >= width)
      c.fail("n-gram column " + std::to_string(col) + " is past the output's " +
             std::to_string(width) + " columns (ngram_indexes too short)");
  if (!weights.empty() && int64_t(weights.size()) < width)
    c.fail("weights holds " + std::to_string(weights.size()) + " values for " +
           std::to_string(width) + " columns");
  if (x.ndim() > 2) c.fail("input must have rank 0, 1 or 2, not shape " + shape_str(x.shape()));
  const std::vector<double> v = host_doubles(x);
  const int64_t rows = x.ndim() == 2 ? x.shape()[0] : 1, len = x.ndim() == 0 ? 1 : x.shape().back();
  std::vector<float> out(size_t(rows * width), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = &v[size_t(r * len)];
    for (int64_t i = 0; i < len; ++i)
      for (int64_t n = min_n; n <= max_n; ++n)
        for (int64_t skip = 0; skip <= (n == 1 ? 0 : max_skip); ++skip) {
          if (i + (n - 1) * (skip + 1) >= len) break;
          std::vector<int64_t> gram;
          for (int64_t k = 0; k < n; ++k) gram.push_back(int64_t(row[i + k * (skip + 1)]));
          if (auto it = column.find(gram); it != column.end())
            out[size_t(r * width + it->second)] += 1;
        }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    const float w = weights.empty() ? 1.0f : weights[i % size_t(width)];
    if (mode == "IDF")
      out[i] = out[i] > 0 ? w : 0;
    else if (mode == "TFIDF")
      out[i] *= w;
    else if (mode != "TF")
      c.fail("mode must be TF, IDF or TFIDF, not '" + mode + "'");
  }
  Shape s = x.ndim() == 2 ? Shape{rows, width} : Shape{width};
  return {Tensor(out, s, x.device())};
}

}  // namespace

void add_host_ops(OpTable& t) {
  t["TfIdfVectorizer"] = tfidf;
  t["Unique"] = unique;
  t["NonMaxSuppression"] = non_max_suppression;
  t["Det"] = det;
}

}  // namespace vkg::onnx
