// Sliding windows as a view (tinygrad's _pool): the convolutions (core/tensor_conv.cpp), the pools
// (core/tensor_pool_nd.cpp) and Tensor::unfold (core/tensor_layout.cpp) read their input through
// it.
#include <algorithm>

#include <vkgrad/core/int_math.hpp>
#include <vkgrad/core/tensor_pool.hpp>

namespace vkg {

// Sliding windows over the last k.size() dimensions: (..., i0, i1) becomes (..., o0, o1, k0, k1)
// where out[..., y, x, ky, kx] = in[..., y*s0 + ky*d0, x*s1 + kx*d1], from movement ops alone
// (tinygrad's _pool). Windows that do not overlap (k <= s, no dilation) are a reshape and a
// shrink. Overlapping ones tile the input, view the tiles with a row length one element longer
// (i*f + d) so that row ky starts ky*d elements further in, and shrink the strides away; the
// index math that results folds to y*s + ky*d in the symbolic engine.
Tensor pool(const Tensor& x, const std::vector<int64_t>& k, const std::vector<int64_t>& s,
            const std::vector<int64_t>& dil) {
  const size_t nk = k.size(), lead = size_t(x.ndim()) - nk;
  const Shape in(x.shape().end() - int64_t(nk), x.shape().end());
  Shape noop(x.shape().begin(), x.shape().begin() + int64_t(lead));
  std::vector<int64_t> o(nk);
  for (size_t j = 0; j < nk; ++j) o[j] = ceil_div(in[j] - dil[j] * (k[j] - 1), s[j]);
  using Pads = std::vector<std::pair<int64_t, int64_t>>;
  auto ranges_of = [&](const Shape& shape) {
    Pads r;
    for (int64_t d : shape) r.emplace_back(0, d);
    return r;
  };
  std::vector<int64_t> order(lead);
  for (size_t j = 0; j < lead; ++j) order[j] = int64_t(j);
  bool overlapping = false;
  for (size_t j = 0; j < nk; ++j) overlapping |= k[j] > s[j] || dil[j] != 1;
  if (overlapping) {
    std::vector<int64_t> f(nk), row(nk), reps(lead, 1);
    for (size_t j = 0; j < nk; ++j) {
      f[j] = 1 + (o[j] * s[j] > in[j] - dil[j] * (k[j] - 1) ? 1 : 0);  // room to shrink the strides
      row[j] = in[j] * f[j] + dil[j];
      reps.push_back(ceil_div(k[j] * row[j], in[j]));
    }
    Tensor t = x.repeat(reps);
    Pads r = ranges_of(noop);
    Shape sh = noop;
    for (size_t j = 0; j < nk; ++j) {
      r.emplace_back(0, k[j] * row[j]);
      sh.insert(sh.end(), {k[j], row[j]});
    }
    t = t.shrink(r).reshape(sh);
    r = ranges_of(noop), sh = noop;
    for (size_t j = 0; j < nk; ++j) {
      r.insert(r.end(), {{0, k[j]}, {0, o[j] * s[j]}});
      sh.insert(sh.end(), {k[j], o[j], s[j]});
    }
    t = t.shrink(r).reshape(sh);
    r = ranges_of(noop), sh = noop;
    for (size_t j = 0; j < nk; ++j) {
      r.insert(r.end(), {{0, k[j]}, {0, o[j]}, {0, 1}});
      sh.insert(sh.end(), {k[j], o[j]});
    }
    t = t.shrink(r).reshape(sh);
    for (size_t j = 0; j < nk; ++j) order.push_back(int64_t(lead + 2 * j + 1));
    for (size_t j = 0; j < nk; ++j) order.push_back(int64_t(lead + 2 * j));
    return t.permute(order);
  }
  Pads pads(lead, {0, 0}), r = ranges_of(noop);
  Shape sh = noop;
  for (size_t j = 0; j < nk; ++j) {
    pads.emplace_back(0, std::max<int64_t>(0, o[j] * s[j] - in[j]));
    r.emplace_back(0, o[j] * s[j]);
    sh.insert(sh.end(), {o[j], s[j]});
  }
  Tensor t = x.pad(pads).shrink(r).reshape(sh);
  r = ranges_of(noop);
  for (size_t j = 0; j < nk; ++j) r.insert(r.end(), {{0, o[j]}, {0, k[j]}});
  t = t.shrink(r);
  for (size_t j = 0; j < nk; ++j) order.push_back(int64_t(lead + 2 * j));
  for (size_t j = 0; j < nk; ++j) order.push_back(int64_t(lead + 2 * j + 1));
  return t.permute(order);
}

}  // namespace vkg
