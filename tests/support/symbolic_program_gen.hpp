// Random programs over tensors whose sizes are linear in a bound variable n (core/variable.hpp):
// inputs shaped (n, ...) (and 2n + 1, ... after a cat), elementwise ops with broadcasting
// partners, reductions over the symbolic axis and the others, softmax, matmul over and along it,
// cat, permutes, size-1 reshapes and expands, pads and shrinks of the plain axes, cumsum, casts.
// Each step is made under a SymContext: symbolic (sizes are n.bind(value)) or plain (sizes are
// numbers), so that one program runs both ways for a binding and the two must agree
// (tests/tensor_symbolic_fuzz_test.cpp). The generator keeps only ops every binding of the
// program accepts (a vkg::Error at generation: not this op).
//
// In its `one_binding` form (tests/tensor_symbolic_jit_binding_fuzz_test.cpp) the generator keeps
// ops that only the capture's binding accepts, n in [0, 12]: plain sizes equal to n there as
// broadcast partners, matmul and cat operands, shrinks to n of plain axes, pads of n - c (negative
// pads trim) of plain axes, broadcasts of an n bound to 1; a Jit's replay at another binding must
// then do what an eager call does there, values or a vkg::Error.
#pragma once
#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <vkgrad/core/symbolic.hpp>
#include <vkgrad/vkgrad.hpp>

#include "support/device_compare.hpp"
#include "support/differential_fuzz.hpp"

namespace vkg::fuzz {

// How a program's steps make sizes: symbolic (n.bind(value)) or plain (value).
struct SymContext {
  Variable var{"n", 1, 12};
  bool symbolic = false;
  int64_t value = 1;
  // The size mul * n + add.
  SymInt size(int64_t mul, int64_t add) const {
    if (mul == 0) return add;
    if (!symbolic) return mul * value + add;
    const SymInt n = var.bind(value);
    return (mul == 1 ? n : n * SymInt(mul)) + SymInt(add);
  }
};

// An axis of size mul * n + add (mul 0: plain).
struct Dim {
  int64_t mul = 0, add = 0;
  std::string str() const {
    if (mul == 0) return std::to_string(add);
    std::string s = mul == 1 ? "N" : std::to_string(mul) + " * N";
    return add ? s + " + " + std::to_string(add) : s;
  }
};
using Dims = std::vector<Dim>;

inline Shape values_of(const Dims& d, int64_t n) {
  Shape s;
  for (const Dim& x : d) s.push_back(x.mul * n + x.add);
  return s;
}
inline SymShape sym_of(const Dims& d, const SymContext& c) {
  SymShape s;
  for (const Dim& x : d) s.push_back(c.size(x.mul, x.add));
  return s;
}
inline std::string dims_str(const Dims& d) {
  std::string s = "{";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + d[i].str();
  return s + "}";
}

class SymProgramGen {
 public:
  using Make = std::function<Tensor(const std::vector<Tensor>&, const std::string&)>;

  SymProgramGen(uint32_t seed, std::shared_ptr<SymContext> ctx, bool one_binding = false)
      : rng_(seed), ctx_(std::move(ctx)), one_binding_(one_binding) {
    if (one_binding_) ctx_->var = Variable("n", 0, 12);
  }

  // A program and (bindings()) the values of n it is run with: three to five distinct ones.
  Program next() {
    prog_ = {};
    bindings_.clear();
    const int count = one_binding_ ? 1 : pick(3, 5);
    if (one_binding_) {  // the capture's binding; 1 often, where a size n broadcasts
      static const int64_t capture[] = {1, 1, 1, 2, 3, 3, 4, 5, 7, 12};
      bindings_.push_back(capture[pick(0, int(std::size(capture)) - 1)]);
    }
    while (int(bindings_.size()) < count) {
      const int64_t b = pick(1, 12);
      if (std::find(bindings_.begin(), bindings_.end(), b) == bindings_.end())
        bindings_.push_back(b);
    }
    vals_.assign(bindings_.size(), {});
    Dims first{{1, 0}};
    for (int r = pick(0, 2); r > 0; --r) first.push_back({0, random_dim()});
    add_input(random_dtype(), first);
    const int ops = pick(2, 10);
    for (int tries = 0; made() < ops && tries < 200; ++tries) try_op();
    prog_.choose_outputs();
    return prog_;
  }
  const std::vector<int64_t>& bindings() const { return bindings_; }

 private:
  std::mt19937 rng_;
  std::shared_ptr<SymContext> ctx_;
  bool one_binding_ = false;
  Program prog_;
  std::vector<int64_t> bindings_;
  std::vector<std::vector<Tensor>> vals_;  // per binding: the symbolic values, lazy, on the CPU

  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(int percent) { return pick(0, 99) < percent; }
  // In the one-binding form, sometimes a plain size where `d` is symbolic: n's value at the
  // capture (the same size there only), or any (a broadcast where n is 1 there).
  Dim hazard(const Dim& d) {
    if (!one_binding_ || d.mul == 0 || !chance(30)) return d;
    return Dim{0, chance(70) ? d.mul * bindings_[0] + d.add : random_dim()};
  }
  int64_t random_dim() {
    static const int64_t dims[] = {1, 2, 3, 3, 4, 5};
    return dims[pick(0, int(std::size(dims)) - 1)];
  }
  DType random_dtype() {
    static const DType d[] = {dtypes::float32, dtypes::float32, dtypes::float32, dtypes::int32,
                              dtypes::float16, dtypes::bool_,   dtypes::int64,   dtypes::uint8};
    return d[pick(0, int(std::size(d)) - 1)];
  }
  long made() const {
    return std::count_if(prog_.steps.begin(), prog_.steps.end(),
                         [](const Step& s) { return !s.operands.empty(); });
  }
  std::string v(size_t i) const { return "v" + std::to_string(i); }
  size_t some_value() {
    const int n = int(vals_[0].size());
    return size_t(chance(60) ? n - 1 : pick(0, n - 1));
  }
  const Tensor& at(size_t i) const { return vals_[0][i]; }

  // Value i's axes as mul * n + add, from its sizes under two bindings (or, with one, from its
  // symbolic sizes at n = 0 and 1).
  Dims dims(size_t i) const {
    Dims out;
    if (one_binding_) {
      for (const SymInt& d : vals_[0][i].sym_shape()) {
        if (!d.is_symbolic()) {
          out.push_back({0, d.value()});
          continue;
        }
        const int64_t at0 = eval_int(d.expr(), {{"n", 0}}), at1 = eval_int(d.expr(), {{"n", 1}});
        out.push_back({at1 - at0, at0});
      }
      return out;
    }
    const Shape a = vals_[0][i].shape(), b = vals_[1][i].shape();
    for (size_t d = 0; d < a.size(); ++d) {
      const int64_t mul = (b[d] - a[d]) / (bindings_[1] - bindings_[0]);
      out.push_back({mul, a[d] - mul * bindings_[0]});
    }
    return out;
  }

  // Makes the step under every binding, symbolic and plain; keeps it if all are accepted.
  bool add(std::string text, std::vector<size_t> operands, Make make, bool relative = false) {
    std::vector<Tensor> made;
    try {
      for (size_t b = 0; b < bindings_.size(); ++b) {
        ctx_->value = bindings_[b];
        ctx_->symbolic = false;
        std::vector<Tensor> plain;  // the plain form's checks too: shapes from the values
        for (const Tensor& t : vals_[b])
          plain.push_back(Tensor::zeros(t.shape(), t.dtype(), "CPU"));
        const Tensor p = make(plain, "CPU");
        ctx_->symbolic = true;
        made.push_back(make(vals_[b], "CPU"));
        if (made.back().shape() != p.shape() || made.back().dtype() != p.dtype()) return false;
      }
    } catch (const Error&) {
      return false;
    }
    for (size_t b = 0; b < bindings_.size(); ++b) vals_[b].push_back(made[b]);
    prog_.steps.push_back({std::move(text), std::move(operands), std::move(make), {}, 0, relative});
    return true;
  }

  size_t add_input(DType d, const Dims& shape) {
    const uint32_t seed = uint32_t(rng_());
    const bool finite = chance(25);
    auto make_with = [d, shape, finite, ctx = ctx_](const std::string& dev, uint32_t s) {
      const Shape sizes = values_of(shape, ctx->value);
      // One binding: n - c past a pad that trims is negative where n < c, and so is an input of
      // that size (a program with no call at that binding).
      for (int64_t n : sizes)
        if (n < 0) throw Error("an input of size " + dims_str(shape) + " at this binding");
      const Tensor t = test::random_tensor(d, sizes, dev, s, finite);
      return ctx->symbolic ? t.reshape(sym_of(shape, *ctx)) : t;
    };
    add("test::random_tensor(" + dtype_cpp(d) + ", values " + dims_str(shape) + ", dev, " +
            std::to_string(seed) + (finite ? "u, true)" : "u)") + ".reshape(" + dims_str(shape) +
            ")",
        {}, [make_with, seed](const std::vector<Tensor>&, const std::string& dev) {
          return make_with(dev, seed);
        });
    prog_.steps.back().fresh = make_with;
    return vals_[0].size() - 1;
  }

  // A second operand for value a: a new input of a's axes (some plain ones 1, or leading ones
  // dropped), or an existing value of the same axes.
  size_t partner(size_t a, DType d) {
    const Dims da = dims(a);
    for (size_t i = 0; i < vals_[0].size() && chance(40); ++i)
      if (i != a && at(i).dtype() == d && at(i).shape() == at(a).shape()) return i;
    Dims s = da;
    if (!s.empty() && chance(25)) s.erase(s.begin(), s.begin() + pick(0, int(s.size())));
    for (Dim& x : s)
      if (x.mul == 0 && chance(30)) x.add = 1;
    for (Dim& x : s) x = hazard(x);
    return add_input(d, s);
  }

  void try_op() {
    const size_t a = some_value();
    switch (pick(0, 11)) {
      case 0:
      case 1:
        return unary(a);
      case 2:
      case 3:
        return binary(a);
      case 4:
        return reduce(a);
      case 5:
        return softmax(a);
      case 6:
        return matmul(a);
      case 7:
        return cat(a);
      case 8:
      case 9:
        return movement(a);
      case 10:
        return cumsum(a);
      default:
        return cast(a);
    }
  }

  void unary(size_t a) {
    static const char* names[] = {"neg",   "abs",    "relu",    "exp2",       "log2",
                                  "sqrt",  "sin",    "sigmoid", "tanh",       "floor",
                                  "trunc", "square", "isnan",   "reciprocal", "sign"};
    const std::string name = names[pick(0, int(std::size(names)) - 1)];
    add(name == "neg" ? "-" + v(a) : v(a) + "." + name + "()", {a},
        [a, name](const std::vector<Tensor>& x, const std::string&) {
          const Tensor& t = x[a];
          if (name == "neg") return -t;
          if (name == "abs") return t.abs();
          if (name == "relu") return t.relu();
          if (name == "exp2") return t.exp2();
          if (name == "log2") return t.log2();
          if (name == "sqrt") return t.sqrt();
          if (name == "sin") return t.sin();
          if (name == "sigmoid") return t.sigmoid();
          if (name == "tanh") return t.tanh();
          if (name == "floor") return t.floor();
          if (name == "trunc") return t.trunc();
          if (name == "square") return t.square();
          if (name == "isnan") return t.isnan();
          if (name == "reciprocal") return t.reciprocal();
          return t.sign();
        });
  }

  void binary(size_t a) {
    static const char* names[] = {"add",     "sub", "mul", "div",  "maximum",
                                  "minimum", "lt",  "eq",  "where"};
    const int op = pick(0, int(std::size(names)) - 1);
    const DType d = chance(75) ? at(a).dtype() : random_dtype();
    const size_t b = partner(a, d);
    if (op == 8) {
      const size_t c = partner(a, dtypes::bool_);
      add(v(c) + ".where(" + v(a) + ", " + v(b) + ")", {c, a, b},
          [a, b, c](const auto& x, const auto&) { return x[c].where(x[a], x[b]); });
      return;
    }
    add(v(a) + "." + names[op] + "(" + v(b) + ")", {a, b},
        [a, b, op](const std::vector<Tensor>& x, const std::string&) {
          const Tensor &l = x[a], &r = x[b];
          switch (op) {
            case 0:
              return l.add(r);
            case 1:
              return l.sub(r);
            case 2:
              return l.mul(r);
            case 3:
              return l.div(r);
            case 4:
              return l.maximum(r);
            case 5:
              return l.minimum(r);
            case 6:
              return l.lt(r);
            default:
              return l.eq(r);
          }
        });
  }

  void reduce(size_t a) {
    const int64_t nd = int64_t(at(a).shape().size());
    if (nd == 0) return;
    std::vector<int64_t> axes;
    for (int64_t i = 0; i < nd; ++i)
      if (chance(50)) axes.push_back(i);
    const bool keep = chance(40);
    static const char* names[] = {"sum", "max", "min", "mean", "var"};
    const int op = pick(0, 4);
    if (op == 4 && axes.size() != 1) return;
    // mean and var of 32- and 64-bit integers sum in float32: with the samples' extremes (+-2^63)
    // cancelling, the result is the rounding of the order each device sums in (seed 2001036: a
    // mean of -12.5 came out 2.7e10 on one device, 2.1e10 on the other), not a comparable value.
    const DType d = at(a).dtype();
    if (op >= 3 && !d.is_float() && !d.is_bool() && d.itemsize() >= 4) return;
    const std::string args =
        op == 4 ? "(" + std::to_string(axes[0]) + ", " + (keep ? "true" : "false") + ")"
                : "(" + ints_str(axes) + (keep ? ", true)" : ")");
    add(
        v(a) + "." + names[op] + args, {a},
        [a, axes, keep, op](const std::vector<Tensor>& x, const std::string&) {
          switch (op) {
            case 0:
              return x[a].sum(axes, keep);
            case 1:
              return x[a].max(axes, keep);
            case 2:
              return x[a].min(axes, keep);
            case 3:
              return x[a].mean(axes, keep);
            default:
              return x[a].var(axes[0], keep);
          }
        },
        op == 4);
  }

  void softmax(size_t a) {
    const int64_t nd = int64_t(at(a).shape().size());
    if (nd == 0 || !at(a).dtype().is_float()) return;
    const int64_t axis = pick(0, int(nd) - 1);
    const bool log = chance(30);
    add(
        v(a) + (log ? ".log_softmax(" : ".softmax(") + std::to_string(axis) + ")", {a},
        [a, axis, log](const auto& x, const auto&) {
          return log ? x[a].log_softmax(axis) : x[a].softmax(axis);
        },
        true);
  }

  // (..., k) x (k, j) for a plain k, or over a symbolic last axis with a new (k, j) input.
  void matmul(size_t a) {
    const Dims da = dims(a);
    if (da.empty() || at(a).dtype().is_bool()) return;
    const size_t b = add_input(at(a).dtype(), {hazard(da.back()), {0, random_dim()}});
    if (chance(30) && da.size() >= 2) {  // a^T-like: contract over the first axis instead
      const size_t c = add_input(at(a).dtype(), {da.front(), {0, random_dim()}});
      add(v(a) + ".transpose(0, -1).matmul(" + v(c) + ")", {a, c},
          [a, c](const auto& x, const auto&) { return x[a].transpose(0, -1).matmul(x[c]); });
      return;
    }
    add(v(a) + ".matmul(" + v(b) + ")", {a, b},
        [a, b](const auto& x, const auto&) { return x[a].matmul(x[b]); });
  }

  void cat(size_t a) {
    const Dims da = dims(a);
    if (da.empty()) return;
    const int64_t axis = pick(0, int(da.size()) - 1);
    Dims s = da;
    if (chance(50)) s[size_t(axis)] = chance(50) ? Dim{1, 0} : Dim{0, random_dim()};
    for (size_t i = 0; i < s.size(); ++i)
      if (int64_t(i) != axis) s[i] = hazard(s[i]);
    const size_t b = add_input(at(a).dtype(), s);
    add("Tensor::cat(std::vector<Tensor>{" + v(a) + ", " + v(b) + "}, " + std::to_string(axis) +
            ")",
        {a, b}, [a, b, axis](const auto& x, const auto&) {
          return Tensor::cat(std::vector<Tensor>{x[a], x[b]}, axis);
        });
  }

  void movement(size_t a) {
    const Dims da = dims(a);
    const int64_t nd = int64_t(da.size());
    switch (pick(0, 4)) {
      case 0: {  // permute
        std::vector<int64_t> order(static_cast<size_t>(nd));
        for (int64_t i = 0; i < nd; ++i) order[size_t(i)] = i;
        std::shuffle(order.begin(), order.end(), rng_);
        add(v(a) + ".permute(" + ints_str(order) + ")", {a},
            [a, order](const auto& x, const auto&) { return x[a].permute(order); });
        return;
      }
      case 1: {  // a size-1 axis inserted, then expanded to a plain size
        const int64_t at_axis = pick(0, int(nd));
        Dims out = da;
        out.insert(out.begin() + at_axis, Dim{0, random_dim()});
        add(v(a) + ".unsqueeze(" + std::to_string(at_axis) + ").expand(" + dims_str(out) + ")", {a},
            [a, at_axis, out, ctx = ctx_](const auto& x, const auto&) {
              return x[a].unsqueeze(at_axis).expand(sym_of(out, *ctx));
            });
        return;
      }
      case 2: {  // zero pads of the plain axes
        std::vector<std::pair<int64_t, int64_t>> pads;
        // One binding: sometimes a width of N - c (c in the pair) on a plain axis, from -2 to 2
        // at the capture: a trim where it is negative (torch's F.pad), more than the axis at some
        // bindings (an error). 1: the width before, 2: after.
        std::vector<int> minus_c(da.size(), 0);
        std::string text = "{";
        for (size_t i = 0; i < da.size(); ++i) {
          const Dim& x = da[i];
          pads.push_back(x.mul ? std::pair<int64_t, int64_t>{0, 0}
                               : std::pair<int64_t, int64_t>{pick(0, 2), pick(0, 2)});
          if (one_binding_ && !x.mul && chance(30)) {
            minus_c[i] = pick(1, 2);
            int64_t& c = minus_c[i] == 1 ? pads.back().first : pads.back().second;
            c = bindings_[0] - pick(-int(std::min<int64_t>(x.add, 2)), 2);
          }
          auto width = [&](int side, int64_t w) {
            return minus_c[i] == side ? "N - " + std::to_string(w) : std::to_string(w);
          };
          text += (text.size() > 1 ? ", {" : "{") + width(1, pads.back().first) + ", " +
                  width(2, pads.back().second) + "}";
        }
        add(v(a) + ".pad(" + text + "})", {a},
            [a, pads, minus_c, ctx = ctx_](const auto& x, const auto&) {
              std::vector<std::pair<SymInt, SymInt>> r;
              for (size_t i = 0; i < pads.size(); ++i) {
                auto width = [&](int side, int64_t w) {
                  return minus_c[i] == side ? ctx->size(1, -w) : SymInt(w);
                };
                r.push_back({width(1, pads[i].first), width(2, pads[i].second)});
              }
              return x[a].pad(r);
            });
        return;
      }
      case 3: {                                          // shrinks of the plain axes
        std::vector<std::pair<int64_t, int64_t>> plain;  // end -1: the whole symbolic axis
        std::string text = "{";
        for (const Dim& x : da) {
          // Sometimes to nothing (an output with no elements, symbolic fuzzer seed 20261349).
          const int64_t b = x.mul ? 0 : pick(0, int(x.add));
          int64_t e = x.mul ? -1 : pick(int(b), int(x.add));
          // One binding: sometimes to n on a plain axis (outside it where n is larger).
          if (one_binding_ && !x.mul && b == 0 && chance(30)) e = -2;
          plain.push_back({b, e});
          text += (text.size() > 1 ? ", {" : "{") + std::to_string(b) + ", " +
                  (e < 0 ? "N" : std::to_string(e)) + "}";
        }
        add(v(a) + ".shrink(" + text + "})", {a},
            [a, plain, da, ctx = ctx_](const auto& x, const auto&) {
              std::vector<std::pair<SymInt, SymInt>> r;
              for (size_t i = 0; i < plain.size(); ++i)
                r.push_back({plain[i].first, plain[i].second == -1 ? ctx->size(da[i].mul, da[i].add)
                                             : plain[i].second == -2 ? ctx->size(1, 0)
                                                                     : SymInt(plain[i].second)});
              return x[a].shrink(r);
            });
        return;
      }
      default:  // a transposed copy
        if (nd < 2) return;
        add(v(a) + ".transpose().contiguous()", {a},
            [a](const auto& x, const auto&) { return x[a].transpose().contiguous(); });
        return;
    }
  }

  void cumsum(size_t a) {
    const int64_t nd = int64_t(at(a).shape().size());
    if (nd == 0 || at(a).dtype().is_bool()) return;
    // Along a plain axis only: a scan along a symbolic one takes its bound value, so a Jit
    // replays it only at its capture's binding (core/tensor_scan.cpp).
    std::vector<int64_t> plain;
    const Dims d = dims(a);
    for (int64_t i = 0; i < nd; ++i)
      if (d[size_t(i)].mul == 0) plain.push_back(i);
    if (plain.empty()) return;
    const int64_t axis = plain[size_t(pick(0, int(plain.size()) - 1))];
    add(v(a) + ".cumsum(" + std::to_string(axis) + ")", {a},
        [a, axis](const auto& x, const auto&) { return x[a].cumsum(axis); });
  }

  void cast(size_t a) {
    const DType to = random_dtype();
    if (at(a).dtype().is_float() && !to.is_float() && reorders_sums(prog_, a)) return;
    add(v(a) + ".cast(" + dtype_cpp(to) + ")", {a},
        [a, to](const auto& x, const auto&) { return x[a].cast(to); });
  }
};

}  // namespace vkg::fuzz
