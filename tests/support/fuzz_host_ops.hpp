// float64 references on the host for the op families of tensor_differential_fuzz_ops_test.cpp:
// each returns a HostFn (support/differential_fuzz.hpp) computing the op's documented semantics
// (torch's where the op says so) from its realized operands, so that a definition both devices
// share and get wrong still fails. Only for dtypes whose values doubles hold exactly (the fuzzer
// asks `exact_in_double`: every dtype but the 64-bit integers).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>
#include <vector>

#include "support/differential_fuzz.hpp"

namespace vkg::fuzz {

inline bool exact_in_double(DType d) { return d != dtypes::int64 && d != dtypes::uint64; }

// Calls f(first, step) for every line along `axis` of a row-major shape (a 0-d shape is one line
// of one element); len is shape[axis].
template <class F>
void for_each_line(const Shape& s, int64_t axis, F f) {
  if (s.empty()) return f(int64_t(0), int64_t(1));
  int64_t inner = 1;
  for (size_t d = size_t(axis) + 1; d < s.size(); ++d) inner *= s[d];
  const int64_t len = s[size_t(axis)];
  if (len == 0 || inner == 0) return;
  const int64_t outer = prod(s) / (len * inner);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) f(o * len * inner + i, inner);
}

inline int64_t line_len(const Shape& s, int64_t axis) { return s.empty() ? 1 : s[size_t(axis)]; }

// cummax / cummin as torch: the index of the last position holding the running extreme, updated
// at ties and at every nan (a nan is the extreme from where it appears). The value is the first
// of tied ones: vkgrad's running max keeps -0 where a later +0 ties it (and the reverse), where
// torch gives the later zero; tensor.hpp ties -0 with 0, so this is pinned, not a bug.
inline HostFn host_cum_extreme(int64_t axis, bool max, bool index) {
  return [=](const std::vector<HostArray>& in) -> std::optional<HostArray> {
    const HostArray& a = in[0];
    HostArray out{a.shape, std::vector<double>(a.v.size()), index ? dtypes::int32 : a.dtype};
    const int64_t len = line_len(a.shape, axis);
    for_each_line(a.shape, axis, [&](int64_t first, int64_t step) {
      double best = 0;
      int64_t at = 0;
      for (int64_t j = 0; j < len; ++j) {
        const double x = a.v[size_t(first + j * step)];
        if (j == 0 || std::isnan(x) || (!std::isnan(best) && (max ? x >= best : x <= best))) {
          if (j == 0 || x != best) best = x;  // a tie keeps the first zero's sign
          at = j;
        }
        out.v[size_t(first + j * step)] = index ? double(at) : best;
      }
    });
    return out;
  };
}

// Positions along a line in sorted order: stable, nan the largest (tensor.hpp's sort).
inline std::vector<int64_t> sorted_positions(const std::vector<double>& line, bool descending) {
  std::vector<int64_t> order(line.size());
  std::iota(order.begin(), order.end(), 0);
  auto key_less = [](double x, double y) {
    if (std::isnan(x)) return false;
    return std::isnan(y) || x < y;
  };
  std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) {
    return descending ? key_less(line[size_t(j)], line[size_t(i)])
                      : key_less(line[size_t(i)], line[size_t(j)]);
  });
  return order;
}

// sort's values or positions; topk's values (its first k, the shape's axis cut to k).
inline HostFn host_sort(int64_t axis, bool descending, bool index, int64_t k = -1) {
  return [=](const std::vector<HostArray>& in) -> std::optional<HostArray> {
    const HostArray& a = in[0];
    const int64_t len = line_len(a.shape, axis), keep = k < 0 ? len : k;
    Shape shape = a.shape;
    if (!shape.empty()) shape[size_t(axis)] = keep;
    HostArray out{shape, std::vector<double>(size_t(prod(shape))), index ? dtypes::int32 : a.dtype};
    for_each_line(a.shape, axis, [&](int64_t first, int64_t step) {
      std::vector<double> line(static_cast<size_t>(len));
      for (int64_t j = 0; j < len; ++j) line[size_t(j)] = a.v[size_t(first + j * step)];
      const std::vector<int64_t> order = sorted_positions(line, descending);
      // The line's first element in the output: the same outer and inner coordinates.
      const int64_t outer = first / (len * step), inner = first % step;
      const int64_t out_first = outer * keep * step + inner;
      for (int64_t j = 0; j < keep; ++j)
        out.v[size_t(out_first + j * step)] =
            index ? double(order[size_t(j)]) : line[size_t(order[size_t(j)])];
    });
    return out;
  };
}

// argmax / argmin along an axis (keepdim or not: the same elements in order) or over all: the
// first extreme, a nan counting as the extreme (torch).
inline HostFn host_arg_extreme(std::optional<int64_t> axis, bool max) {
  return [=](const std::vector<HostArray>& in) -> std::optional<HostArray> {
    HostArray a = in[0];
    int64_t ax = 0;
    if (!axis)
      a.shape = {int64_t(a.v.size())};
    else
      ax = *axis;
    if (a.shape.empty()) a.shape = {1};
    const int64_t len = a.shape[size_t(ax)];
    if (len == 0) return std::nullopt;  // an error, not a value
    Shape shape = a.shape;
    shape[size_t(ax)] = 1;
    HostArray out{shape, std::vector<double>(size_t(prod(shape))), dtypes::int32};
    for_each_line(a.shape, ax, [&](int64_t first, int64_t step) {
      int64_t at = 0;
      double best = a.v[size_t(first)];
      for (int64_t j = 1; j < len && !std::isnan(best); ++j) {
        const double x = a.v[size_t(first + j * step)];
        if (std::isnan(x) || (max ? x > best : x < best)) best = x, at = j;
      }
      const int64_t outer = first / (len * step), inner = first % step;
      out.v[size_t(outer * step + inner)] = double(at);
    });
    return out;
  };
}

// clip as torch.clamp: min(max(x, lo), hi), so hi where lo > hi; nan stays nan.
inline HostFn host_clip(double lo, double hi) {
  return [=](const std::vector<HostArray>& in) -> std::optional<HostArray> {
    HostArray out = in[0];
    for (double& x : out.v)
      if (!std::isnan(x)) x = std::min(std::max(x, lo), hi);
    return out;
  };
}

// A value converted to dtype `to` (tensor.hpp's cast): float to integer truncates, saturates at
// the integer's bounds, nan gives 0; integer to integer wraps (C); to bool is != 0; to a float
// rounds once to nearest even (_Float16 for float16; bfloat16 from float32's bits). None for the
// 64-bit integers (doubles lose their bits) and for float64 to a 16-bit float (the CPU device
// rounds through float32 there, twice).
inline std::optional<double> host_convert(double x, DType from, DType to) {
  if (to == dtypes::bool_) return double(x != 0);
  if (to.is_float()) {
    if (to == dtypes::float64) return x;
    if (to == dtypes::float32) return double(float(x));
    if (from == dtypes::float64) return std::nullopt;
    if (to == dtypes::float16) return double(_Float16(float(x)));
    const float f = float(x);  // bfloat16: round float32's bits to the upper 16
    uint32_t b;
    std::memcpy(&b, &f, 4);
    if (std::isnan(f)) return x;
    b = ((b + 0x7fffu + ((b >> 16) & 1u)) >> 16) << 16;
    float r;
    std::memcpy(&r, &b, 4);
    return double(r);
  }
  const int bits = to.scalar_size() * 8;
  const bool is_unsigned = to.is_unsigned();
  const double lo = is_unsigned ? 0 : -std::ldexp(1.0, bits - 1),
               hi = is_unsigned ? std::ldexp(1.0, bits) - 1 : std::ldexp(1.0, bits - 1) - 1;
  if (from.is_float()) {
    if (std::isnan(x)) return 0.0;
    return std::clamp(std::trunc(x), lo, hi) + 0.0;  // an integer has no -0
  }
  // Integer (or bool) to integer: modulo 2^bits.
  const double m = std::ldexp(1.0, bits);
  double r = std::fmod(x, m) + 0.0;  // fmod(-m, m) is -0
  if (r < 0) r += m;
  if (!is_unsigned && r > hi) r -= m;
  return r;
}

inline HostFn host_cast(DType to) {
  return [=](const std::vector<HostArray>& in) -> std::optional<HostArray> {
    const HostArray& a = in[0];
    if (!exact_in_double(a.dtype) || !exact_in_double(to)) return std::nullopt;
    HostArray out{a.shape, std::vector<double>(a.v.size()), to};
    for (size_t i = 0; i < a.v.size(); ++i) {
      const std::optional<double> r = host_convert(a.v[i], a.dtype, to);
      if (!r) return std::nullopt;
      out.v[i] = *r;
    }
    return out;
  };
}

// Reflect, replicate and circular pads: every output element reads one input element.
inline HostFn host_pad(std::vector<std::pair<int64_t, int64_t>> pads, PadMode mode) {
  return [=](const std::vector<HostArray>& in) -> std::optional<HostArray> {
    const HostArray& a = in[0];
    Shape shape = a.shape;
    for (size_t d = 0; d < shape.size(); ++d) shape[d] += pads[d].first + pads[d].second;
    HostArray out{shape, std::vector<double>(size_t(prod(shape))), a.dtype};
    for (int64_t i = 0; i < int64_t(out.v.size()); ++i) {
      int64_t rest = i, src = 0, step = 1;
      for (size_t d = shape.size(); d-- > 0;) {
        const int64_t n = a.shape[d];
        int64_t c = rest % shape[d] - pads[d].first;
        rest /= shape[d];
        if (mode == PadMode::Reflect)
          c = c < 0 ? -c : c >= n ? 2 * (n - 1) - c : c;
        else if (mode == PadMode::Replicate)
          c = std::clamp<int64_t>(c, 0, n - 1);
        else
          c = ((c % n) + n) % n;
        src += c * step;
        step *= n;
      }
      out.v[size_t(i)] = a.v[size_t(src)];
    }
    return out;
  };
}

// gather along axis (an index outside [0, size) reads 0), as tensor.hpp says.
inline HostFn host_gather(int64_t axis) {
  return [=](const std::vector<HostArray>& in) -> std::optional<HostArray> {
    const HostArray &a = in[0], &index = in[1];
    HostArray out{index.shape, std::vector<double>(index.v.size()), a.dtype};
    for (int64_t i = 0; i < int64_t(index.v.size()); ++i) {
      int64_t rest = i, src = 0, step = 1;
      bool inside = true;
      for (size_t d = index.shape.size(); d-- > 0;) {
        int64_t c = rest % index.shape[d];
        rest /= index.shape[d];
        if (int64_t(d) == axis) {
          c = int64_t(index.v[size_t(i)]);
          inside = inside && c >= 0 && c < a.shape[d];
        }
        src += c * step;
        step *= a.shape[d];
      }
      out.v[size_t(i)] = inside ? a.v[size_t(src)] : 0.0;
    }
    return out;
  };
}

// An integer of dtype d from the low bits of x (two's complement), as the devices wrap.
inline double wrap_to(uint64_t x, DType d) {
  const int bits = d.scalar_size() * 8;
  if (bits < 64) x &= (uint64_t(1) << bits) - 1;
  if (!d.is_unsigned() && bits < 64 && (x >> (bits - 1)) & 1)
    return double(int64_t(x) - (int64_t(1) << bits));
  return double(x);
}

// scatter (mode -1: src, -2: the value 3) and scatter_reduce as tensor.hpp says: a copy of self
// where every index position (row-major) sends src's element to the index's place along axis (an
// index outside the axis sends nothing); plain scatter's last write wins; a reduce combines
// what lands, with self's own value when include_self (integers wrap; an integer mean rounds
// down). None for floats where the order of combining matters (the fuzzer gives floats unique
// indices; max and min of floats are left to the device comparison: their -0 and +0 ties).
inline HostFn host_scatter(int64_t axis, int mode, bool include_self) {
  return [=](const std::vector<HostArray>& in) -> std::optional<HostArray> {
    const HostArray &self = in[0], &index = in[1];
    const bool with_src = mode != -2;
    const DType d = self.dtype;
    if (with_src && in[2].dtype != d) return std::nullopt;  // a cast on the way: not modelled
    const ScatterReduce r = ScatterReduce(std::max(mode, 0));
    if (d.is_float() && mode >= 0 && (r == ScatterReduce::Amax || r == ScatterReduce::Amin))
      return std::nullopt;
    if ((d.is_bool() || (d.is_float() && d != dtypes::float32)) && mode >= 0)
      return std::nullopt;  // (the rounding below is float32's)
    HostArray out = self;
    std::vector<std::vector<double>> landed(self.v.size());
    for (int64_t i = 0; i < int64_t(index.v.size()); ++i) {
      int64_t rest = i, dst = 0, src = 0, dst_step = 1, src_step = 1;
      bool inside = true;
      for (size_t k = index.shape.size(); k-- > 0;) {
        const int64_t c = rest % index.shape[k];
        rest /= index.shape[k];
        const int64_t at = int64_t(k) == axis ? int64_t(index.v[size_t(i)]) : c;
        inside = inside && at >= 0 && at < self.shape[k];
        dst += at * dst_step;
        dst_step *= self.shape[k];
        if (with_src) src += c * src_step, src_step *= in[2].shape[k];
      }
      if (!inside) continue;
      const double value = with_src ? in[2].v[size_t(src)] : 3.0;
      if (mode < 0)
        out.v[size_t(dst)] = value;
      else
        landed[size_t(dst)].push_back(value);
    }
    if (mode < 0) return out;
    for (size_t e = 0; e < out.v.size(); ++e) {
      std::vector<double> vs = landed[e];
      if (vs.empty()) continue;
      if (include_self) vs.insert(vs.begin(), self.v[e]);
      // Without self, torch (aten's scatter_reduce_exclude_self_helper) first fills the place with
      // the reduction's identity, +0 for a sum or mean, and then adds: a lone -0 lands as +0.
      else if (d.is_float() && (r == ScatterReduce::Sum || r == ScatterReduce::Mean))
        vs.insert(vs.begin(), 0.0);
      const size_t identity = !include_self && d.is_float() && r != ScatterReduce::Prod ? 1 : 0;
      if (d.is_float() && vs.size() - identity > 2) return std::nullopt;  // order matters
      double acc = vs[0];
      if (r == ScatterReduce::Amax || r == ScatterReduce::Amin) {
        for (double x : vs) acc = r == ScatterReduce::Amax ? std::max(acc, x) : std::min(acc, x);
      } else if (d.is_float()) {
        for (size_t j = 1; j < vs.size(); ++j)
          acc = double(float(r == ScatterReduce::Prod ? acc * vs[j] : acc + vs[j]));
        if (r == ScatterReduce::Mean) acc = double(float(acc / double(vs.size() - identity)));
      } else {
        uint64_t w = uint64_t(int64_t(vs[0]));
        for (size_t j = 1; j < vs.size(); ++j)
          w = r == ScatterReduce::Prod ? w * uint64_t(int64_t(vs[j]))
                                       : w + uint64_t(int64_t(vs[j]));
        acc = wrap_to(w, d);
        if (r == ScatterReduce::Mean) acc = std::floor(acc / double(vs.size()));
      }
      out.v[e] = acc;
    }
    return out;
  };
}

// The max or avg pool of the last kernel.size() axes, as torch: output length
// (n + 2p - d(k-1) - 1) / s + 1 rounded down (up with ceil_mode, but no window starts in the
// right padding); a max window's nan wins (its index the last nan's, else the first maximum's);
// an avg window divides by its size cut at the padded edge (count_include_pad) or by the input
// elements in it. None where a max window holds no input element (torch leaves that unsaid).
struct HostPool {
  PoolOptions o;
  enum Kind { Max, MaxIndex, Avg } kind;

  std::optional<HostArray> operator()(const std::vector<HostArray>& in) const {
    const HostArray& a = in[0];
    const size_t nd = o.kernel.size(), lead = a.shape.size() - nd;
    auto at = [&](const std::vector<int64_t>& v, size_t i) { return v.size() == 1 ? v[0] : v[i]; };
    Shape shape = a.shape;
    std::vector<int64_t> stride(nd);
    for (size_t i = 0; i < nd; ++i) {
      stride[i] = o.stride ? at(*o.stride, i) : o.kernel[i];
      const int64_t n = a.shape[lead + i], p = at(o.padding, i), d = at(o.dilation, i);
      const int64_t span = n + 2 * p - d * (o.kernel[i] - 1) - 1;
      if (span < 0) return std::nullopt;
      int64_t len = (o.ceil_mode ? (span + stride[i] - 1) / stride[i] : span / stride[i]) + 1;
      if (o.ceil_mode && (len - 1) * stride[i] >= n + p) --len;
      shape[lead + i] = len;
    }
    HostArray out{shape, std::vector<double>(size_t(prod(shape))),
                  kind == MaxIndex ? dtypes::int32 : a.dtype};
    int64_t window_in = 1, window_out = 1;
    for (size_t i = 0; i < nd; ++i) window_in *= a.shape[lead + i], window_out *= shape[lead + i];
    const int64_t planes = window_out ? int64_t(out.v.size()) / window_out : 0;
    for (int64_t plane = 0; plane < planes; ++plane)
      for (int64_t w = 0; w < window_out; ++w) {
        std::vector<int64_t> pos(nd);
        for (int64_t rest = w, i = int64_t(nd) - 1; i >= 0; --i)
          pos[size_t(i)] = rest % shape[lead + size_t(i)], rest /= shape[lead + size_t(i)];
        // Every kernel offset: the input coordinate, inside or not; the divisor's counts.
        double best = -INFINITY, sum = 0, magnitude = 0;
        int64_t best_at = -1, inside = 0, total = 1, padded = 1;
        for (size_t i = 0; i < nd; ++i) {
          const int64_t n = a.shape[lead + i], p = at(o.padding, i);
          const int64_t start = pos[i] * stride[i] - p;
          const int64_t end = std::min(start + o.kernel[i], n + p);
          padded *= end - start;
          total *= o.kernel[i];
        }
        for (int64_t k = 0; k < total; ++k) {
          int64_t rest = k, flat = 0;
          bool valid = true;
          for (int64_t i = int64_t(nd) - 1; i >= 0; --i) {
            const size_t u = size_t(i);
            const int64_t off = rest % o.kernel[u];
            rest /= o.kernel[u];
            const int64_t c = pos[u] * stride[u] - at(o.padding, u) + off * at(o.dilation, u);
            valid = valid && c >= 0 && c < a.shape[lead + u];
            int64_t mul = 1;
            for (size_t j = u + 1; j < nd; ++j) mul *= a.shape[lead + j];
            flat += c * mul;
          }
          if (!valid) continue;
          ++inside;
          const double x = a.v[size_t(plane * window_in + flat)];
          sum += x;
          magnitude += std::fabs(x);
          if (std::isnan(x) || best_at < 0 || (!std::isnan(best) && x > best))
            best = x, best_at = flat;
        }
        double& r = out.v[size_t(plane * window_out + w)];
        if (kind == Avg) {
          // A float32 partial sum can overflow where float64's does not: no reference.
          if (std::isfinite(magnitude) && magnitude >= 3.4e38) return std::nullopt;
          r = double(float(sum / double(o.count_include_pad ? padded : inside)));
        } else {
          if (!inside) return std::nullopt;
          r = kind == Max ? best : double(best_at);
        }
      }
    return out;
  }
};

}  // namespace vkg::fuzz
