// The elementwise fuzzer's layout ops and composed ops (support/elementwise_program_gen.hpp):
// movement, slicing, bitcasts, ops composed of reductions (std, var, softmax, ...) and assign.
#include <algorithm>
#include <cmath>
#include <optional>

#include "support/elementwise_program_gen.hpp"
#include "support/fuzz_host_ops.hpp"

namespace vkg::fuzz {

void ElementwiseProgramGen::movement(size_t a) {
  const Shape s = vals_[a].shape();
  const int64_t nd = int64_t(s.size());
  switch (pick(0, 6)) {
    case 0: {  // reshape: the same elements in a random factorization
      int64_t n = prod(s);
      Shape out;
      if (n == 0) {
        out = chance(50) ? Shape{0} : Shape{1, 0, 3};
      } else {
        for (int64_t f : {2, 3, 5, 7})
          while (n % f == 0) {
            if (out.empty() || chance(50))
              out.push_back(f);
            else
              out.back() *= f;
            n /= f;
          }
        if (n > 1) out.push_back(n);
        if (chance(30)) out.insert(out.begin() + pick(0, int(out.size())), 1);
        std::shuffle(out.begin(), out.end(), rng_);
      }
      add(v(a) + ".reshape(" + shape_str(out) + ")", {a},
          [a, out](const auto& x, const auto&) { return x[a].reshape(out); });
      return;
    }
    case 1: {  // permute
      std::vector<int64_t> order(static_cast<size_t>(nd));
      for (int64_t i = 0; i < nd; ++i) order[size_t(i)] = i;
      std::shuffle(order.begin(), order.end(), rng_);
      add(v(a) + ".permute(" + ints_str(order) + ")", {a},
          [a, order](const auto& x, const auto&) { return x[a].permute(order); });
      return;
    }
    case 2: {  // expand size-1 axes (after an unsqueeze sometimes)
      Shape src = s;
      std::string text = v(a);
      const bool unsq = chance(40);
      const int64_t at = pick(0, int(nd));
      if (unsq) src.insert(src.begin() + at, 1);
      Shape out = src;
      for (auto& d : out)
        if (d == 1 && chance(70)) d = random_dim();
      if (unsq) text += ".unsqueeze(" + std::to_string(at) + ")";
      add(text + ".expand(" + shape_str(out) + ")", {a},
          [a, out, unsq, at](const auto& x, const auto&) {
            return (unsq ? x[a].unsqueeze(at) : x[a]).expand(out);
          });
      return;
    }
    case 3: {  // shrink
      std::vector<std::pair<int64_t, int64_t>> r;
      std::string text = "{";
      for (int64_t d : s) {
        const int64_t b = pick(0, int(d)), e = pick(int(b), int(d));
        r.push_back({b, e});
        text += (r.size() > 1 ? ", {" : "{") + std::to_string(b) + ", " + std::to_string(e) + "}";
      }
      add(v(a) + ".shrink(" + text + "})", {a},
          [a, r](const auto& x, const auto&) { return x[a].shrink(r); });
      return;
    }
    case 4: {  // pad with a constant
      std::vector<std::pair<int64_t, int64_t>> r;
      std::string text = "{";
      for (size_t i = 0; i < s.size(); ++i) {
        r.push_back({chance(50) ? pick(0, 2) : 0, chance(50) ? pick(0, 2) : 0});
        text += (i ? ", {" : "{") + std::to_string(r.back().first) + ", " +
                std::to_string(r.back().second) + "}";
      }
      const int value = chance(70) ? 0 : pick(-3, 3);
      add(v(a) + ".pad(" + text + "}, " + std::to_string(value) + ")", {a},
          [a, r, value](const auto& x, const auto&) { return x[a].pad(r, value); });
      return;
    }
    case 5: {  // flip
      std::vector<int64_t> axes;
      for (int64_t i = 0; i < nd; ++i)
        if (chance(50)) axes.push_back(i);
      add(v(a) + ".flip(" + ints_str(axes) + ")", {a},
          [a, axes](const auto& x, const auto&) { return x[a].flip(axes); });
      return;
    }
    default: {  // a transpose, then contiguous: a copy kernel in the middle of a chain
      if (nd < 2) return;
      add(v(a) + ".transpose().contiguous()", {a},
          [a](const auto& x, const auto&) { return x[a].transpose().contiguous(); });
      return;
    }
  }
}

// Slicing with steps (negative too), basic indexing.
void ElementwiseProgramGen::slice(size_t a) {
  const Shape s = vals_[a].shape();
  std::vector<Index> idx;
  std::string text = "{";
  for (size_t i = 0; i < s.size(); ++i) {
    std::optional<int64_t> b, e;
    if (chance(50)) b = pick(-int(s[i]) - 1, int(s[i]) + 1);
    if (chance(50)) e = pick(-int(s[i]) - 1, int(s[i]) + 1);
    int64_t step = pick(1, 3);
    if (chance(25)) step = -step;
    auto opt = [](const std::optional<int64_t>& o) {
      return o ? std::to_string(*o) : std::string("std::nullopt");
    };
    if (s[i] > 0 && chance(15)) {
      const int64_t k = pick(-int(s[i]), int(s[i]) - 1);
      idx.push_back(k);
      text += (i ? ", " : "") + std::string("int64_t(") + std::to_string(k) + ")";
      continue;
    }
    idx.push_back(Slice{b, e, step});
    text += (i ? ", " : "") + std::string("Slice{") + opt(b) + ", " + opt(e) + ", " +
            std::to_string(step) + "}";
  }
  add(v(a) + "[" + text + "}]", {a}, [a, idx](const auto& x, const auto&) { return x[a][idx]; });
}

// A bitcast to another dtype (of another size too, where the last axis divides), checked on the
// host byte by byte. A float's nan is made 0 first: the bits of a nan that arithmetic makes are
// unspecified (IEEE 754-2019 6.2.3). Not of a value an ulp may separate between devices: its
// bits would differ by more than an ulp as integers.
void ElementwiseProgramGen::bitcast(size_t a) {
  const DType d = vals_[a].dtype();
  if (reorders_sums(prog_, a) || inexact(prog_, a)) return;
  static const DType to_dtypes[] = {dtypes::float32,  dtypes::int32,  dtypes::uint32,
                                    dtypes::int16,    dtypes::uint16, dtypes::float16,
                                    dtypes::bfloat16, dtypes::int8,   dtypes::uint8,
                                    dtypes::int64,    dtypes::uint64};
  const DType to = to_dtypes[pick(0, int(std::size(to_dtypes)) - 1)];
  const bool wrap = d.is_float();
  const std::string src = wrap ? v(a) + ".isnan().where(0, " + v(a) + ")" : v(a);
  HostFn host;
  if (exact_in_double(d) && exact_in_double(to))
    host = [to](const std::vector<HostArray>& in) -> std::optional<HostArray> {
      const HostArray& x = in[0];
      std::vector<std::byte> bytes;
      for (double e : x.v) {
        const auto b = element_bytes(x.dtype, std::isnan(e) ? 0.0 : e);
        bytes.insert(bytes.end(), b.begin(), b.end());
      }
      Shape shape = x.shape;
      if (!shape.empty()) shape.back() = shape.back() * x.dtype.scalar_size() / to.scalar_size();
      HostArray out{shape, {}, to};
      for (size_t i = 0; i + size_t(to.scalar_size()) <= bytes.size();
           i += size_t(to.scalar_size()))
        out.v.push_back(test::element(to, bytes.data() + i));
      return out;
    };
  add(
      src + ".bitcast(" + dtype_cpp(to) + ")", {a},
      [a, to, wrap](const auto& x, const auto&) {
        return (wrap ? x[a].isnan().where(0, x[a]) : x[a]).bitcast(to);
      },
      host);
}

// Ops composed of reductions and elementwise ones: std and var with a correction (past the
// count too), logsumexp, softmax, log_softmax; and triangle masks and rolls, which are
// index arithmetic.
void ElementwiseProgramGen::composite(size_t a) {
  const Shape s = vals_[a].shape();
  const int64_t nd = int64_t(s.size());
  const std::string ax = nd ? std::to_string(pick(0, int(nd) - 1)) : "0";
  const int64_t axis = nd ? std::stoll(ax) : 0;
  switch (pick(0, 5)) {
    case 0: {
      std::vector<int64_t> axes;
      for (int64_t i = 0; i < nd; ++i)
        if (chance(50)) axes.push_back(i);
      const bool keep = chance(40), sd = chance(50);
      const int64_t correction = pick(0, 2);
      add(v(a) + (sd ? ".std(" : ".var(") + ints_str(axes) + (keep ? ", true, " : ", false, ") +
              std::to_string(correction) + ")",
          {a}, [a, axes, keep, sd, correction](const auto& x, const auto&) {
            return sd ? x[a].std(axes, keep, correction) : x[a].var(axes, keep, correction);
          });
      return;
    }
    case 1: {
      std::vector<int64_t> axes;
      for (int64_t i = 0; i < nd; ++i)
        if (chance(50)) axes.push_back(i);
      const bool keep = chance(40);
      add(v(a) + ".logsumexp(" + ints_str(axes) + (keep ? ", true)" : ")"), {a},
          [a, axes, keep](const auto& x, const auto&) { return x[a].logsumexp(axes, keep); });
      return;
    }
    case 2: {
      if (nd == 0) return;
      const bool log = chance(50);
      add(v(a) + (log ? ".log_softmax(" : ".softmax(") + ax + ")", {a},
          [a, axis, log](const auto& x, const auto&) {
            return log ? x[a].log_softmax(axis) : x[a].softmax(axis);
          });
      return;
    }
    case 3: {
      const int64_t k = pick(-3, 3);
      const bool upper = chance(50);
      add(v(a) + (upper ? ".triu(" : ".tril(") + std::to_string(k) + ")", {a},
          [a, k, upper](const auto& x, const auto&) {
            return upper ? x[a].triu(k) : x[a].tril(k);
          });
      return;
    }
    case 4: {
      if (nd == 0) return;
      const int64_t shift = pick(-9, 9);
      add(v(a) + ".roll({" + std::to_string(shift) + "}, {" + ax + "})", {a},
          [a, shift, axis](const auto& x, const auto&) { return x[a].roll({shift}, {axis}); });
      return;
    }
    default: {  // lerp and logaddexp with a partner
      const size_t b = partner(a, vals_[a].dtype());
      if (chance(50)) {
        const double w = std::vector<double>{0.0, 0.25, 0.5, 1.0, -0.5, 2.0}[size_t(pick(0, 5))];
        add(v(a) + ".lerp(" + v(b) + ", " + fmt_double(w) + ")", {a, b},
            [a, b, w](const auto& x, const auto&) { return x[a].lerp(x[b], w); });
      } else {
        add(v(a) + ".logaddexp(" + v(b) + ")", {a, b},
            [a, b](const auto& x, const auto&) { return x[a].logaddexp(x[b]); });
      }
      return;
    }
  }
}

// An in-place update of a fresh realized buffer by a value that reads it (at the element written,
// or flipped, which the scheduler must give a kernel of its own first).
void ElementwiseProgramGen::assign(size_t a) {
  const Shape s = vals_[a].shape();
  const DType d = vals_[a].dtype();
  const uint32_t seed = uint32_t(rng_());
  const bool flip = !s.empty() && chance(40);
  const int how = pick(0, 2);
  static const char* ops[] = {"add", "maximum", "sub"};
  const std::string target = fmt_input(d, s, seed, false);
  const std::string read = flip ? "t.flip({0})" : "t";
  add("[&] { Tensor t = " + target + "; t.realize(); return t.assign(" + read + "." + ops[how] +
          "(" + v(a) + ")); }()",
      {a}, [a, d, s, seed, flip, how](const auto& x, const std::string& dev) {
        Tensor t = test::random_tensor(d, s, dev, seed);
        t.realize();
        const Tensor r = flip ? t.flip({0}) : t;
        const Tensor val = how == 0 ? r.add(x[a]) : how == 1 ? r.maximum(x[a]) : r.sub(x[a]);
        if (val.dtype() != d) throw Error("assign of another dtype");
        Tensor out = t;
        out.assign(val);
        return out;
      });
}

}  // namespace vkg::fuzz
