// Differential fuzzing of the op families tensor_differential_fuzz_test.cpp leaves out: matmul
// with odd and batched shapes, convolutions (1-3 d, transposed, stride, dilation, padding, groups,
// bias), pools (max with indices, avg, ceil_mode, padding, dilation, adaptive), gather, take,
// index_select and advanced indexing, scatter and its reduce modes, cumsum/cumprod/cummax/cummin/
// logcumsumexp, sort/argsort/topk/argmax/argmin (ties, nan), where, masked_fill, clip, casts
// between all thirteen dtypes, reflect/replicate/circular pads, and values sharded over VK and
// VK:1 (the VK run shards, the CPU run does not). A few elementwise ops glue them into chains so
// that they fuse with their neighbours. Each program is run and compared as the other fuzzer's
// (support/differential_fuzz.hpp): VK vs CPU, fused vs step by step.
//
// Where the devices may differ by documentation, the generator does not go: float scatter sums,
// products, means, maxima and minima get indices that never repeat along the scattered axis
// (tensor.hpp: the order floats combine in on a GPU), and an index that is out of range is given
// only where the op defines it (gather and scatter: reads 0, writes nothing).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "support/differential_fuzz.hpp"
#include "support/fuzz_generators.hpp"
#include "support/fuzz_host_ops.hpp"

namespace vkg {
namespace {

using namespace fuzz;
using fuzz::shape_str;  // not vkg::shape_str

using Make = std::function<Tensor(const std::vector<Tensor>&, const std::string&)>;

std::string pairs_str(const std::vector<std::pair<int64_t, int64_t>>& v) {
  std::string out = "{";
  for (size_t i = 0; i < v.size(); ++i)
    out +=
        (i ? ", {" : "{") + std::to_string(v[i].first) + ", " + std::to_string(v[i].second) + "}";
  return out + "}";
}

class OpsGen {
 public:
  explicit OpsGen(uint32_t seed) : rng_(seed) {}

  Program next() {
    prog_ = {};
    vals_.clear();
    const int inputs = pick(1, 2);
    for (int i = 0; i < inputs; ++i) add_input(random_dtype(), random_shape());
    const int ops = pick(2, 8);  // not counting the inputs the ops add
    auto made = [&] {
      return std::count_if(prog_.steps.begin(), prog_.steps.end(),
                           [](const Step& s) { return !s.operands.empty(); });
    };
    for (int tries = 0; made() < ops && tries < 200; ++tries) try_op();
    prog_.choose_outputs();
    return prog_;
  }

 private:
  std::mt19937 rng_;
  Program prog_;
  std::vector<Tensor> vals_;  // on the CPU device, lazy: shapes and dtypes

  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  int64_t pick64(int64_t lo, int64_t hi) { return pick(int(lo), int(hi)); }
  bool chance(int percent) { return pick(0, 99) < percent; }

  DType random_dtype() {
    static const DType common[] = {
        dtypes::float32, dtypes::float32,  dtypes::float32, dtypes::int32,
        dtypes::int32,   dtypes::float16,  dtypes::int64,   dtypes::uint8,
        dtypes::bool_,   dtypes::bfloat16, dtypes::int8,    dtypes::uint32,
        dtypes::int16,   dtypes::uint16,   dtypes::uint64,  dtypes::float64};
    return common[pick(0, int(std::size(common)) - 1)];
  }
  DType float_dtype() {
    static const DType f[] = {dtypes::float32, dtypes::float32,  dtypes::float32,
                              dtypes::float16, dtypes::bfloat16, dtypes::float64};
    return f[pick(0, int(std::size(f)) - 1)];
  }
  int64_t random_dim() {
    static const int64_t dims[] = {1, 2, 3, 3, 5, 4, 7, 0};
    return dims[pick(0, int(std::size(dims)) - (chance(10) ? 1 : 2))];
  }
  Shape random_shape() {
    static const int ranks[] = {0, 1, 1, 2, 2, 2, 3, 3, 4};
    Shape s(size_t(ranks[pick(0, int(std::size(ranks)) - 1)]));
    for (auto& d : s) d = random_dim();
    return s;
  }
  size_t some_value() {
    const int n = int(vals_.size());
    return size_t(chance(60) ? n - 1 : pick(0, n - 1));
  }
  std::string v(size_t i) { return "v" + std::to_string(i); }

  // host: the float64 reference (support/fuzz_host_ops.hpp), if any; relative: a float sum's
  // tolerance rather than equality.
  bool add(std::string text, std::vector<size_t> operands, Make make, HostFn host = {},
           bool relative = false) {
    try {
      vals_.push_back(make(vals_, "CPU"));
    } catch (const Error&) {
      return false;  // shapes, dtypes or options the op refuses: not this program
    }
    prog_.steps.push_back(
        {std::move(text), std::move(operands), std::move(make), std::move(host), 0, relative});
    return true;
  }
  bool exact(size_t a) { return exact_in_double(vals_[a].dtype()); }

  size_t add_input(DType d, Shape s, bool finite = false) {
    const uint32_t seed = uint32_t(rng_());
    if (!finite) finite = chance(25);
    add("test::random_tensor(" + dtype_cpp(d) + ", " + shape_str(s) + ", dev, " +
            std::to_string(seed) + (finite ? "u, true)" : "u)"),
        {}, [d, s, seed, finite](const std::vector<Tensor>&, const std::string& dev) {
          return test::random_tensor(d, s, dev, seed, finite);
        });
    prog_.steps.back().fresh = [d, s, finite](const std::string& dev, uint32_t other) {
      return test::random_tensor(d, s, dev, other, finite);
    };
    return vals_.size() - 1;
  }

  // An integer tensor of `s` with the given values (row-major), int32 or int64.
  size_t add_index(const Shape& s, std::vector<int64_t> values) {
    const bool wide = chance(30);
    std::string text = std::string("Tensor(std::vector<") + (wide ? "int64_t" : "int32_t") + ">" +
                       ints_str(values) + ", " + shape_str(s) + ", dev)";
    add(text, {}, [s, values, wide](const std::vector<Tensor>&, const std::string& dev) {
      if (wide) return Tensor(values, s, dev);
      return Tensor(std::vector<int32_t>(values.begin(), values.end()), s, dev);
    });
    return vals_.size() - 1;
  }

  void try_op() {
    const size_t a = some_value();
    switch (pick(0, 13)) {
      case 0:
        return matmul(a);
      case 1:
        return conv(a);
      case 2:
        return pool(a);
      case 3:
        return gather(a);
      case 4:
        return scatter(a);
      case 5:
        return scan(a);
      case 6:
        return sort(a);
      case 7:
        return masked(a);
      case 8:
        return cast(a);
      case 9:
        return pad_mode(a);
      case 10:
        return shard(a);
      default:
        return glue(a);
    }
  }

  // ---- glue: a few elementwise ops and reductions that fuse with their neighbours ----
  void glue(size_t a) {
    const Tensor t = vals_[a];  // a handle: vals_ grows below
    switch (pick(0, 5)) {
      case 0:
        add("-" + v(a), {a}, [a](const auto& x, const auto&) { return -x[a]; });
        return;
      case 1:
        add(v(a) + ".abs()", {a}, [a](const auto& x, const auto&) { return x[a].abs(); });
        return;
      case 2: {
        const size_t b = add_input(t.dtype(), t.shape());
        add(v(a) + " * " + v(b), {a, b},
            [a, b](const auto& x, const auto&) { return x[a] * x[b]; });
        return;
      }
      case 3:
        add(v(a) + " + 1", {a}, [a](const auto& x, const auto&) { return x[a] + 1; });
        return;
      case 4: {
        if (t.shape().empty()) return;
        const int64_t axis = pick(0, int(t.shape().size()) - 1);
        add(v(a) + ".sum(" + std::to_string(axis) + ")", {a},
            [a, axis](const auto& x, const auto&) { return x[a].sum(axis); });
        return;
      }
      default:  // exact (IEEE), unlike exp: a cast to an integer after it stays exact
        add(v(a) + ".square()", {a}, [a](const auto& x, const auto&) { return x[a].square(); });
        return;
    }
  }

  // ---- matmul: odd, empty and batched shapes, vectors on either side ----
  void matmul(size_t a) {
    const Tensor t = vals_[a];  // a handle: vals_ grows below
    const Shape s = t.shape();
    if (s.empty() || t.dtype().is_bool()) return;
    const int64_t k = s.back();
    Shape bs;
    switch (pick(0, 3)) {
      case 0:
        bs = {k};
        break;
      case 1:
        bs = {k, random_dim()};
        break;
      default: {  // batched: b's batch broadcasts with a's
        bs = {k, random_dim()};
        if (s.size() >= 2) {
          const int64_t batch = s.size() >= 3 ? s[s.size() - 3] : random_dim();
          bs.insert(bs.begin(), chance(40) ? 1 : batch);
        }
      }
    }
    const size_t b = add_input(chance(80) ? t.dtype() : random_dtype(), bs);
    if (chance(25) && bs.size() >= 2) {  // b @ a^T: a on the right
      add(v(b) + ".transpose(-1, -2).matmul(" + v(a) + ".transpose(-1, -2))", {a, b},
          [a, b](const auto& x, const auto&) {
            return x[b].transpose(-1, -2).matmul(x[a].transpose(-1, -2));
          });
      return;
    }
    const bool dot = chance(25);  // the same product by its other name
    add(v(a) + (dot ? ".dot(" : ".matmul(") + v(b) + ")", {a, b},
        [a, b, dot](const auto& x, const auto&) {
          return dot ? x[a].dot(x[b]) : x[a].matmul(x[b]);
        });
  }

  // ---- convolutions, 1-3 d, transposed too ----
  void conv(size_t a) {
    const int nd = pick(1, 3);
    const int64_t groups = pick(1, 3), cin_g = pick(1, 2), cout_g = pick(1, 2);
    const int64_t n = pick(1, 2), cin = groups * cin_g, cout = groups * cout_g;
    const bool transposed = chance(25);
    std::vector<int64_t> spatial, kernel, stride, padding, dilation, out_pad;
    for (int i = 0; i < nd; ++i) {
      spatial.push_back(pick(1, nd == 3 ? 4 : 7));
      kernel.push_back(pick(1, 3));
      stride.push_back(pick(1, 3));
      dilation.push_back(pick(1, 2));
      padding.push_back(pick(0, 2));
      out_pad.push_back(transposed && chance(30)
                            ? pick(0, int(std::max(stride.back(), dilation.back())) - 1)
                            : 0);
    }
    const DType d = chance(70) ? dtypes::float32 : chance(50) ? float_dtype() : random_dtype();
    size_t x = a;
    Shape xs = {n, cin};
    xs.insert(xs.end(), spatial.begin(), spatial.end());
    const Tensor ta = vals_[a];
    if (!(chance(30) && ta.shape().size() == size_t(nd + 2) && ta.shape()[1] % groups == 0 &&
          ta.dtype() == d))
      x = add_input(d, xs, chance(50));
    const int64_t c_in = vals_[x].shape()[1];
    Shape ws = transposed ? Shape{c_in, cout_g} : Shape{cout, c_in / groups};
    ws.insert(ws.end(), kernel.begin(), kernel.end());
    const size_t w = add_input(d, ws, chance(70));
    const bool has_bias = chance(50);
    const int64_t bias_len = transposed ? cout_g * groups : cout;
    const size_t b = has_bias ? add_input(d, {bias_len}, true) : 0;
    ConvOptions o{stride, padding, dilation, out_pad, groups};
    const std::string opts = "ConvOptions{" + ints_str(stride) + ", " + ints_str(padding) + ", " +
                             ints_str(dilation) + ", " + ints_str(out_pad) + ", " +
                             std::to_string(groups) + "}";
    const std::string name =
        std::string(transposed ? "conv_transpose" : "conv") + std::to_string(nd) + "d";
    std::vector<size_t> ops = {x, w};
    if (has_bias) ops.push_back(b);
    add(v(x) + "." + name + "(" + v(w) + ", " + (has_bias ? v(b) : "std::nullopt") + ", " + opts +
            ")",
        ops, [x, w, b, has_bias, o, nd, transposed](const auto& t, const auto&) {
          const std::optional<Tensor> bias = has_bias ? std::optional<Tensor>(t[b]) : std::nullopt;
          if (nd == 2) {
            if (transposed)
              return t[x].conv_transpose2d(
                  t[w], bias,
                  ConvTranspose2dOptions{Size2(o.stride[0], o.stride[1]),
                                         Size2(o.padding[0], o.padding[1]),
                                         Size2(o.output_padding[0], o.output_padding[1]),
                                         Size2(o.dilation[0], o.dilation[1]), o.groups});
            return t[x].conv2d(
                t[w], bias,
                Conv2dOptions{Size2(o.stride[0], o.stride[1]), Size2(o.padding[0], o.padding[1]),
                              Size2(o.dilation[0], o.dilation[1]), o.groups});
          }
          if (nd == 1)
            return transposed ? t[x].conv_transpose1d(t[w], bias, o) : t[x].conv1d(t[w], bias, o);
          return transposed ? t[x].conv_transpose3d(t[w], bias, o) : t[x].conv3d(t[w], bias, o);
        });
  }

  // ---- pools: max (with indices), avg, adaptive avg ----
  void pool(size_t a) {
    const int nd = pick(1, 3);
    size_t x = a;
    const Tensor ta = vals_[a];
    if (!(chance(40) && ta.shape().size() >= size_t(nd + 1) && !ta.dtype().is_bool())) {
      Shape s = {pick(1, 2), pick(1, 3)};
      if (chance(20)) s.erase(s.begin());
      for (int i = 0; i < nd; ++i) s.push_back(pick(1, nd == 3 ? 5 : 8));
      x = add_input(chance(70) ? dtypes::float32 : random_dtype(), s, chance(30));
    }
    PoolOptions o;
    o.kernel.clear();
    std::vector<int64_t> stride;
    o.padding.clear();
    o.dilation.clear();
    for (int i = 0; i < nd; ++i) {
      o.kernel.push_back(pick(1, 3));
      stride.push_back(pick(1, 3));
      o.padding.push_back(pick(0, int(o.kernel.back() / 2)));
      o.dilation.push_back(chance(25) ? 2 : 1);
    }
    if (chance(70)) o.stride = stride;
    o.ceil_mode = chance(40);
    o.count_include_pad = chance(50);
    const std::string opts = "PoolOptions{" + ints_str(o.kernel) + ", " +
                             (o.stride ? ints_str(*o.stride) : "std::nullopt") + ", " +
                             ints_str(o.padding) + ", " + ints_str(o.dilation) + ", " +
                             (o.ceil_mode ? "true" : "false") + ", " +
                             (o.count_include_pad ? "true" : "false") + "}";
    const bool undilated =
        std::all_of(o.dilation.begin(), o.dilation.end(), [](int64_t d) { return d == 1; });
    switch (pick(0, 3)) {
      case 0:
        add(
            v(x) + ".max_pool(" + opts + ")", {x},
            [x, o](const auto& t, const auto&) { return t[x].max_pool(o); },
            exact(x) ? HostFn(HostPool{o, HostPool::Max}) : HostFn());
        return;
      case 1:
        add(
            v(x) + ".max_pool_with_indices(" + opts + ").second", {x},
            [x, o](const auto& t, const auto&) { return t[x].max_pool_with_indices(o).second; },
            exact(x) ? HostFn(HostPool{o, HostPool::MaxIndex}) : HostFn());
        return;
      case 2:
        // torch's avg_pool has no dilation to follow.
        add(
            v(x) + ".avg_pool(" + opts + ")", {x},
            [x, o](const auto& t, const auto&) { return t[x].avg_pool(o); },
            vals_[x].dtype() == dtypes::float32 && undilated ? HostFn(HostPool{o, HostPool::Avg})
                                                             : HostFn(),
            true);
        return;
      default: {
        Shape out;
        for (int i = 0; i < nd; ++i) out.push_back(pick(1, 4));
        add(v(x) + ".adaptive_avg_pool(" + shape_str(out) + ")", {x},
            [x, out](const auto& t, const auto&) { return t[x].adaptive_avg_pool(out); });
        return;
      }
    }
  }

  // ---- reading by index ----
  std::vector<int64_t> random_indices(size_t n, int64_t lo, int64_t hi) {
    std::vector<int64_t> out(n);
    for (auto& i : out) i = lo > hi ? 0 : pick64(lo, hi);
    return out;
  }

  void gather(size_t a) {
    const Shape s = vals_[a].shape();
    const int64_t nd = int64_t(s.size());
    switch (pick(0, 5)) {
      case 5: {  // setitem through an index tensor on axis 0 (repeats: the last write wins)
        if (nd == 0 || s[0] == 0) return;
        const Shape is = {pick(0, 4)};
        const size_t idx = add_index(is, random_indices(size_t(is[0]), -s[0], s[0] - 1));
        Shape vs = s;
        vs[0] = is[0];
        if (chance(40)) vs.erase(vs.begin(), vs.begin() + 1 + pick(0, int(nd) - 1));  // broadcast
        const size_t val = add_input(chance(70) ? vals_[a].dtype() : random_dtype(), vs);
        add("[&] { Tensor t = " + v(a) + ".clone(); t.setitem({" + v(idx) + "}, " + v(val) +
                "); return t; }()",
            {a, idx, val}, [a, idx, val](const auto& x, const auto&) {
              Tensor t = x[a].clone();
              t.setitem({x[idx]}, x[val]);
              return t;
            });
        return;
      }
      case 0: {  // gather: an index outside [0, size) reads 0
        if (nd == 0) return;
        const int64_t axis = pick(0, int(nd) - 1);
        Shape is = s;
        for (size_t i = 0; i < is.size(); ++i)
          is[i] = int64_t(i) == axis ? pick(0, 4) : pick64(0, s[i]);
        const int64_t len = s[size_t(axis)];
        const size_t idx = add_index(
            is, random_indices(size_t(prod(is)), chance(20) ? -1 : 0, chance(20) ? len : len - 1));
        add(
            v(a) + ".gather(" + std::to_string(axis) + ", " + v(idx) + ")", {a, idx},
            [a, idx, axis](const auto& x, const auto&) { return x[a].gather(axis, x[idx]); },
            exact(a) ? host_gather(axis) : HostFn());
        return;
      }
      case 1: {  // take: negative counts from the end
        const int64_t n = prod(s);
        if (n == 0) return;
        const Shape is = random_shape();
        const size_t idx = add_index(is, random_indices(size_t(prod(is)), -n, n - 1));
        add(v(a) + ".take(" + v(idx) + ")", {a, idx},
            [a, idx](const auto& x, const auto&) { return x[a].take(x[idx]); });
        return;
      }
      case 2: {  // index_select
        if (nd == 0) return;
        const int64_t axis = pick(0, int(nd) - 1), len = s[size_t(axis)];
        if (len == 0) return;
        const Shape is = {pick(0, 5)};
        const size_t idx = add_index(is, random_indices(size_t(is[0]), 0, len - 1));
        add(v(a) + ".index_select(" + std::to_string(axis) + ", " + v(idx) + ")", {a, idx},
            [a, idx, axis](const auto& x, const auto&) { return x[a].index_select(axis, x[idx]); });
        return;
      }
      case 3: {  // advanced indexing, one or two index tensors, with a slice between or not
        if (nd == 0) return;
        const int64_t axis = pick(0, int(nd) - 1), len = s[size_t(axis)];
        if (len == 0) return;
        const Shape is = chance(50) ? Shape{pick(0, 4)} : Shape{2, pick(1, 3)};
        const size_t idx = add_index(is, random_indices(size_t(prod(is)), -len, len - 1));
        std::optional<size_t> idx2;
        const int64_t axis2 = nd >= 2 && chance(40) ? (axis + 1 + pick(0, int(nd) - 2)) % nd : -1;
        if (axis2 >= 0 && s[size_t(axis2)] > 0)
          idx2 = add_index({is.back()}, random_indices(size_t(is.back()), -s[size_t(axis2)],
                                                       s[size_t(axis2)] - 1));
        std::string text = v(a) + "[{";
        for (int64_t i = 0; i < nd; ++i)
          text += std::string(i ? ", " : "") + (i == axis            ? v(idx)
                                                : idx2 && i == axis2 ? v(*idx2)
                                                                     : "Slice{}");
        std::vector<size_t> ops = {a, idx};
        if (idx2) ops.push_back(*idx2);
        add(text + "}]", ops, [a, idx, idx2, axis, axis2, nd](const auto& x, const auto&) {
          std::vector<Index> ix;
          for (int64_t i = 0; i < nd; ++i) {
            if (i == axis)
              ix.push_back(x[idx]);
            else if (idx2 && i == axis2)
              ix.push_back(x[*idx2]);
            else
              ix.push_back(Slice{});
          }
          return x[a][ix];
        });
        return;
      }
      default: {  // a bool mask (a host read): masked_select
        const size_t m = add_input(dtypes::bool_, s);
        add(v(a) + ".masked_select(" + v(m) + ")", {a, m},
            [a, m](const auto& x, const auto&) { return x[a].masked_select(x[m]); });
        return;
      }
    }
  }

  // ---- writing by index ----
  void scatter(size_t a) {
    const Tensor t = vals_[a];  // a handle: vals_ grows below
    const Shape s = t.shape();
    const int64_t nd = int64_t(s.size());
    if (nd == 0) return;
    const int64_t axis = pick(0, int(nd) - 1), len = s[size_t(axis)];
    const int mode = pick(0, 7);  // 0 scatter, 1 scatter value, 2 scatter_add, 3.. reduce modes
    // Float combinations depend on arrival order (tensor.hpp): indices unique along the axis.
    const bool unique = t.dtype().is_float() && mode >= 2;
    Shape is = s;
    for (size_t i = 0; i < is.size(); ++i)
      is[i] = int64_t(i) == axis ? (unique ? pick64(0, len) : pick(0, 4)) : pick64(0, s[i]);
    std::vector<int64_t> values(size_t(prod(is)));
    if (unique) {  // each line along axis: distinct positions
      int64_t inner = 1;
      for (size_t i = size_t(axis) + 1; i < is.size(); ++i) inner *= is[i];
      const int64_t along = is[size_t(axis)],
                    outer =
                        along ? int64_t(values.size()) / (along * std::max<int64_t>(inner, 1)) : 0;
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          std::vector<int64_t> perm(static_cast<size_t>(len));
          std::iota(perm.begin(), perm.end(), 0);
          std::shuffle(perm.begin(), perm.end(), rng_);
          for (int64_t j = 0; j < along; ++j)
            values[size_t((o * along + j) * inner + i)] = perm[size_t(j)];
        }
    } else {
      values = random_indices(values.size(), chance(15) ? -1 : 0, chance(15) ? len : len - 1);
    }
    const size_t idx = add_index(is, values);
    Shape ss = is;
    for (auto& d : ss) d += chance(20) ? 1 : 0;  // src may be larger than index
    const size_t src = add_input(chance(85) ? t.dtype() : random_dtype(), ss);
    const std::string ax = std::to_string(axis);
    const bool checked = exact(a);
    if (mode == 0) {
      add(
          v(a) + ".scatter(" + ax + ", " + v(idx) + ", " + v(src) + ")", {a, idx, src},
          [a, idx, src, axis](const auto& x, const auto&) {
            return x[a].scatter(axis, x[idx], x[src]);
          },
          checked ? host_scatter(axis, -1, false) : HostFn());
    } else if (mode == 1) {
      add(
          v(a) + ".scatter(" + ax + ", " + v(idx) + ", 3)", {a, idx},
          [a, idx, axis](const auto& x, const auto&) { return x[a].scatter(axis, x[idx], 3); },
          checked && !t.dtype().is_bool() ? host_scatter(axis, -2, false) : HostFn());
    } else if (mode == 2) {
      add(
          v(a) + ".scatter_add(" + ax + ", " + v(idx) + ", " + v(src) + ")", {a, idx, src},
          [a, idx, src, axis](const auto& x, const auto&) {
            return x[a].scatter_add(axis, x[idx], x[src]);
          },
          checked ? host_scatter(axis, int(ScatterReduce::Sum), true) : HostFn());
    } else {
      static const char* names[] = {"Sum", "Prod", "Mean", "Amax", "Amin"};
      const int r = mode - 3 + (chance(20) ? 1 : 0);
      const ScatterReduce reduce = ScatterReduce(std::min(r, 4));
      const bool self = chance(60);
      add(
          v(a) + ".scatter_reduce(" + ax + ", " + v(idx) + ", " + v(src) +
              ", ScatterReduce::" + names[int(reduce)] + (self ? ", true)" : ", false)"),
          {a, idx, src},
          [a, idx, src, axis, reduce, self](const auto& x, const auto&) {
            return x[a].scatter_reduce(axis, x[idx], x[src], reduce, self);
          },
          checked ? host_scatter(axis, int(reduce), self) : HostFn());
    }
  }

  // ---- running reductions ----
  void scan(size_t a) {
    const Tensor t = vals_[a];  // a handle: vals_ grows below
    const int64_t nd = int64_t(t.shape().size());
    if (nd == 0) return;
    const int64_t axis = pick(0, int(nd) - 1);
    const std::string ax = std::to_string(axis);
    switch (pick(0, 5)) {
      case 0:
        add(v(a) + ".cumsum(" + ax + ")", {a},
            [a, axis](const auto& x, const auto&) { return x[a].cumsum(axis); });
        return;
      case 1:
        add(v(a) + ".cumprod(" + ax + ")", {a},
            [a, axis](const auto& x, const auto&) { return x[a].cumprod(axis); });
        return;
      case 2:
      case 3: {
        const bool mx = pick(0, 1);
        const bool idx = chance(50);
        add(
            v(a) + (mx ? ".cummax(" : ".cummin(") + ax + (idx ? ").second" : ").first"), {a},
            [a, axis, mx, idx](const auto& x, const auto&) {
              auto r = mx ? x[a].cummax(axis) : x[a].cummin(axis);
              return idx ? r.second : r.first;
            },
            exact(a) ? host_cum_extreme(axis, mx, idx) : HostFn());
        return;
      }
      default:
        if (t.dtype() == dtypes::float64) return;  // no float64 exp2 or log2 in the GLSL
        add(v(a) + ".logcumsumexp(" + ax + ")", {a},
            [a, axis](const auto& x, const auto&) { return x[a].logcumsumexp(axis); });
        return;
    }
  }

  // ---- order: sort, argsort, topk, argmax, argmin (ties and nan in the data) ----
  void sort(size_t a) {
    const Tensor t = vals_[a];  // a handle: vals_ grows below
    const int64_t nd = int64_t(t.shape().size());
    size_t x = a;
    if (chance(30)) {  // many ties: a small-range integer or rounded float input
      const size_t r = add_input(float_dtype(), t.shape());
      add(v(r) + ".round().clip(-2, 2)", {r},
          [r](const auto& y, const auto&) { return y[r].round().clip(-2, 2); });
      x = vals_.size() - 1;
    }
    const int64_t axis = nd == 0 ? 0 : pick(0, int(nd) - 1);
    const std::string ax = std::to_string(axis);
    const bool flag = chance(50);
    switch (pick(0, 4)) {
      case 0: {
        const bool idx = chance(50);
        add(
            v(x) + ".sort(" + ax + (flag ? ", true)" : ", false)") + (idx ? ".second" : ".first"),
            {x},
            [x, axis, flag, idx](const auto& y, const auto&) {
              auto r = y[x].sort(axis, flag);
              return idx ? r.second : r.first;
            },
            exact(x) ? host_sort(axis, flag, idx) : HostFn());
        return;
      }
      case 1:
        add(
            v(x) + ".argsort(" + ax + (flag ? ", true)" : ", false)"), {x},
            [x, axis, flag](const auto& y, const auto&) { return y[x].argsort(axis, flag); },
            exact(x) ? host_sort(axis, flag, true) : HostFn());
        return;
      case 2: {
        if (nd == 0) return;
        const int64_t k = pick64(0, t.shape()[size_t(axis)]);
        const bool idx = chance(50);
        add(
            v(x) + ".topk(" + std::to_string(k) + ", " + ax + (flag ? ", true)" : ", false)") +
                (idx ? ".second" : ".first"),
            {x},
            [x, k, axis, flag, idx](const auto& y, const auto&) {
              auto r = y[x].topk(k, axis, flag);
              return idx ? r.second : r.first;
            },
            // Which of tied elements topk names is unsaid: its values only.
            exact(x) && !idx ? host_sort(axis, flag, false, k) : HostFn());
        return;
      }
      default: {
        const bool mn = chance(50), flat = chance(30) || nd == 0;
        add(
            v(x) + (mn ? ".argmin(" : ".argmax(") + (flat ? "" : ax + (flag ? ", true" : "")) + ")",
            {x},
            [x, axis, flag, mn, flat](const auto& y, const auto&) {
              const std::optional<int64_t> ax_ = flat ? std::nullopt : std::optional<int64_t>(axis);
              return mn ? y[x].argmin(ax_, flag && !flat) : y[x].argmax(ax_, flag && !flat);
            },
            exact(x) ? host_arg_extreme(flat ? std::nullopt : std::optional<int64_t>(axis), !mn)
                     : HostFn());
        return;
      }
    }
  }

  // ---- where, masked_fill, clip ----
  void masked(size_t a) {
    const Tensor t = vals_[a];  // a handle: vals_ grows below
    static const double fills[] = {0.0, -0.0, 1.5, -3.0, INFINITY, -INFINITY, NAN, 300.0, -1e30};
    const double f = fills[pick(0, int(std::size(fills)) - 1)];
    const std::string ft = std::isnan(f)   ? "NAN"
                           : std::isinf(f) ? (f > 0 ? "INFINITY" : "-INFINITY")
                                           : std::to_string(f);
    switch (pick(0, 3)) {
      case 0: {
        Shape ms = t.shape();
        for (auto& d : ms)
          if (chance(30)) d = 1;
        const size_t m = add_input(dtypes::bool_, ms);
        add(v(a) + ".masked_fill(" + v(m) + ", " + ft + ")", {a, m},
            [a, m, f](const auto& x, const auto&) { return x[a].masked_fill(x[m], f); });
        return;
      }
      case 1: {
        const size_t m = add_input(dtypes::bool_, {});
        const size_t val = add_input(chance(50) ? t.dtype() : random_dtype(), {});
        add(v(a) + ".masked_fill(" + v(m) + ", " + v(val) + ")", {a, m, val},
            [a, m, val](const auto& x, const auto&) { return x[a].masked_fill(x[m], x[val]); });
        return;
      }
      case 2: {  // clip, with lo > hi sometimes (torch: everything is hi)
        // Not 0: which zero max(-0, 0) gives is unsaid (torch's vector and scalar paths differ).
        double lo = double(pick(-300, 300)) / 4, hi = double(pick(-300, 300)) / 4;
        if (lo == 0) lo = 0.25;
        if (hi == 0) hi = -0.25;
        const bool ints = !t.dtype().is_float() && chance(70);
        const Scalarish l = ints ? Scalarish(int64_t(lo)) : Scalarish(lo),
                        h = ints ? Scalarish(int64_t(hi)) : Scalarish(hi);
        add(
            v(a) + ".clip(" +
                (ints ? std::to_string(int64_t(lo)) + ", " + std::to_string(int64_t(hi))
                      : std::to_string(lo) + ", " + std::to_string(hi)) +
                ")",
            {a}, [a, l, h](const auto& x, const auto&) { return x[a].clip(l, h); },
            t.dtype() == dtypes::float32 ? host_clip(lo, hi) : HostFn());
        return;
      }
      default: {
        const size_t c = add_input(random_dtype(), t.shape());
        add(v(c) + ".where(" + v(a) + ", " + ft + ")", {c, a},
            [c, a, f](const auto& x, const auto&) { return x[c].where(x[a], f); });
        return;
      }
    }
  }

  // ---- casts between every pair of dtypes (float to int saturates, nan is 0: tensor.hpp) ----
  void cast(size_t a) {
    const DType to = random_dtype();
    if (vals_[a].dtype().is_float() && !to.is_float() && inexact(prog_, a)) return;
    const bool twice = chance(40);
    const DType then = random_dtype();
    if (!twice) {
      add(
          v(a) + ".cast(" + dtype_cpp(to) + ")", {a},
          [a, to](const auto& x, const auto&) { return x[a].cast(to); }, host_cast(to));
      return;
    }
    add(v(a) + ".cast(" + dtype_cpp(to) + ").cast(" + dtype_cpp(then) + ")", {a},
        [a, to, then](const auto& x, const auto&) { return x[a].cast(to).cast(then); });
  }

  // ---- pads that read the tensor: reflect, replicate, circular ----
  void pad_mode(size_t a) {
    const Shape s = vals_[a].shape();
    if (s.empty()) return;
    const int mode = pick(1, 3);
    std::vector<std::pair<int64_t, int64_t>> r;
    for (size_t i = 0; i < s.size(); ++i)
      r.push_back(i + 3 < s.size() || chance(30)
                      ? std::pair<int64_t, int64_t>{0, 0}
                      : std::pair<int64_t, int64_t>{pick(0, 3), pick(0, 3)});
    static const char* names[] = {"Constant", "Reflect", "Replicate", "Circular"};
    add(
        v(a) + ".pad(" + pairs_str(r) + ", PadMode::" + names[mode] + ")", {a},
        [a, r, mode](const auto& x, const auto&) { return x[a].pad(r, PadMode(mode)); },
        exact(a) ? host_pad(r, PadMode(mode)) : HostFn());
  }

  // ---- sharded over VK and VK:1 (the CPU runs the same op on one device) ----
  void shard(size_t a) {
    const Tensor t = vals_[a];  // a handle: vals_ grows below
    const Shape s = t.shape();
    std::optional<int64_t> axis;
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i] % 2 == 0 && chance(60)) axis = int64_t(i);
    const int op = pick(0, 6);
    // A float sum over the sharded axis adds the shards' partials (core/multi.cpp): another order
    // than one device's ([-3e38, -0 | 3e38, 7.4].cumsum() ends 0, not 7.4: seed 30057).
    auto reorders = [&](int64_t ax) { return t.dtype().is_float() && axis && *axis == ax; };
    std::function<Tensor(const Tensor&)> f;
    std::string text;
    std::optional<size_t> b;
    switch (op) {
      case 0:
        f = [](const Tensor& x) { return x * 2 + 1; };
        text = "x * 2 + 1";
        break;
      case 1: {
        if (s.empty()) return;
        const int64_t ax = pick(0, int(s.size()) - 1);
        if (reorders(ax)) return;
        f = [ax](const Tensor& x) { return x.sum(ax); };
        text = "x.sum(" + std::to_string(ax) + ")";
        break;
      }
      case 2: {
        if (s.empty()) return;
        const int64_t ax = pick(0, int(s.size()) - 1);
        if (reorders(ax)) return;
        f = [ax](const Tensor& x) { return x.cumsum(ax); };
        text = "x.cumsum(" + std::to_string(ax) + ")";
        break;
      }
      case 3:
        if (s.empty()) return;
        f = [](const Tensor& x) { return x.flip({0}); };
        text = "x.flip({0})";
        break;
      case 5: {  // a pad across every axis (the sharded one's rows move between devices)
        std::vector<std::pair<int64_t, int64_t>> pads;
        for (size_t i = 0; i < s.size(); ++i) pads.push_back({pick(0, 2), pick(0, 2)});
        f = [pads](const Tensor& x) { return x.pad(pads, 1); };
        text = "x.pad(" + pairs_str(pads) + ", 1)";
        break;
      }
      case 6:  // a reshape that mixes the sharded axis with the others
        f = [](const Tensor& x) { return x.flatten(); };
        text = "x.flatten()";
        break;
      default: {
        if (s.empty() || t.dtype().is_bool() || reorders(int64_t(s.size()) - 1)) return;
        b = add_input(t.dtype(), {s.back(), pick(1, 3)});
        f = nullptr;
        text = "x.matmul(" + v(*b) + ")";
        break;
      }
    }
    const std::string devs = axis ? ", " + std::to_string(*axis) + ")" : ")";
    std::vector<size_t> ops = {a};
    if (b) ops.push_back(*b);
    Make make = [a, b, f, axis](const std::vector<Tensor>& x, const std::string& dev) {
      const std::vector<std::string> two = {"VK", "VK:1"};
      if (dev != "VK") return f ? f(x[a]) : x[a].matmul(x[*b]);
      const Tensor sharded = x[a].shard(two, axis);
      return (f ? f(sharded) : sharded.matmul(x[*b].shard(two))).to("VK");
    };
    // The sharded form must be accepted as well (built lazily on VK, nothing runs).
    try {
      std::vector<Tensor> on_vk;
      for (const Tensor& x : vals_) on_vk.push_back(x.to("VK"));
      (void)make(on_vk, "VK");
    } catch (const Error&) {
      return;
    }
    add("/* on VK: x.shard({\"VK\", \"VK:1\"}" + devs +
            ", then .to(\"VK\") */ [&](Tensor x) { return " + text + "; }(" + v(a) + ")",
        ops, make);
  }
};

TEST(TensorDifferentialFuzzOps, RandomOpProgramsAgreeAcrossDevicesAndFusion) {
  fuzz::fuzz_programs("differential fuzz (op families)", 20261128, 200,
                      [](uint32_t seed) { return OpsGen(seed).next(); });
}

}  // namespace

// For the fuzzers of the JIT and of symbolic shapes (support/fuzz_generators.hpp).
fuzz::Program fuzz::op_family_program(uint32_t seed) { return OpsGen(seed).next(); }

}  // namespace vkg
