// Differential fuzzing of backward: random small differentiable graphs (elementwise ops, their
// broadcasts, reductions, scans, softmax, movement ops, matmul, gather) of one to three inputs, and
// a loss that weighs every element of the result differently. Each program's input gradients are
//   - on the CPU device in float64, against central finite differences of the loss: catches a
//     gradient rule that both devices share and get wrong;
//   - in float32 on the Vulkan device against the CPU device's: catches a backward kernel one
//     device gets wrong.
// Smooth programs draw inputs from [-2, 2] (kinks, ties and zeros have probability zero, so the
// finite differences hold); kink programs draw them from {-1, -0.5, 0, 0.5, 1}, where relu, abs,
// max, clip and sort meet their kinks and ties, and compare the two devices only (torch's choices
// there are pinned in tensor_autograd_kinks_test.cpp).
// VKG_FUZZ_SEED picks the first seed, VKG_FUZZ_PROGRAMS how many; a mismatch prints the program.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "support/differential_fuzz.hpp"

namespace vkg {
namespace {

using fuzz::ints_str;
using fuzz::shape_str;

using Make = std::function<Tensor(const std::vector<Tensor>&)>;

struct GradStep {
  std::string text;
  Make make;
};

struct GradProgram {
  std::vector<Shape> inputs;
  std::vector<GradStep> steps;  // value inputs.size() + i is steps[i]

  std::string cpp() const {
    std::string s;
    for (size_t i = 0; i < inputs.size(); ++i)
      s += "  Tensor v" + std::to_string(i) + " = input " + shape_str(inputs[i]) + ";\n";
    for (size_t i = 0; i < steps.size(); ++i)
      s += "  Tensor v" + std::to_string(inputs.size() + i) + " = " + steps[i].text + ";\n";
    return s;
  }

  // The output of the last step, from inputs xs.
  Tensor run(const std::vector<Tensor>& xs) const {
    std::vector<Tensor> vals = xs;
    for (const GradStep& s : steps) vals.push_back(s.make(vals));
    return vals.back();
  }
};

// Input values: uniform in [-2, 2] (smooth) or from five values with zeros and ties (kinks).
std::vector<double> input_values(const Shape& s, uint32_t seed, bool kinks) {
  std::mt19937 rng(seed);
  std::vector<double> v(size_t(prod(s)));
  for (double& x : v)
    x = kinks ? std::vector<double>{-1, -0.5, 0, 0.5, 1}[rng() % 5]
              : std::uniform_real_distribution<double>(-2, 2)(rng);
  return v;
}

class GradGen {
 public:
  explicit GradGen(uint32_t seed) : rng_(seed) {}

  GradProgram next() {
    prog_ = {};
    shapes_.clear();
    read_.clear();
    const int inputs = pick(1, 3);
    for (int i = 0; i < inputs; ++i) {
      Shape s(size_t(pick(1, 3)));
      for (auto& d : s) d = pick(1, 4);
      prog_.inputs.push_back(s);
      shapes_.push_back(Tensor::zeros(s, dtypes::float32, "CPU"));
    }
    const int ops = pick(1, 6);
    for (int tries = 0; int(prog_.steps.size()) < ops && tries < 100; ++tries) try_op();
    // Every input feeds the result: a sum of what no step read, so each gets a gradient.
    read_.resize(shapes_.size(), false);
    std::vector<size_t> unread;
    for (size_t i = 0; i + 1 < shapes_.size(); ++i)
      if (!read_[i]) unread.push_back(i);
    if (!unread.empty()) {
      const size_t last = shapes_.size() - 1;
      std::string text = v(last) + ".sum()";
      for (size_t u : unread) text += " + " + v(u) + ".sum()";
      add(text, [last, unread](const auto& x) {
        Tensor t = x[last].sum();
        for (size_t u : unread) t = t + x[u].sum();
        return t;
      });
    }
    return prog_;
  }

 private:
  std::mt19937 rng_;
  GradProgram prog_;
  std::vector<Tensor> shapes_;  // CPU float32 zeros of each value's shape, lazily: for validity
  std::vector<bool> read_;

  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(int percent) { return pick(0, 99) < percent; }
  std::string v(size_t i) { return "v" + std::to_string(i); }
  size_t some_value() {
    const int n = int(shapes_.size());
    return size_t(chance(65) ? n - 1 : pick(0, n - 1));
  }

  bool add(std::string text, Make make) {
    try {
      Tensor t = make(shapes_);
      (void)t.shape();
      shapes_.push_back(t);
    } catch (const Error&) {
      return false;
    }
    prog_.steps.push_back({std::move(text), std::move(make)});
    read_.resize(shapes_.size(), false);
    return true;
  }
  void mark(std::initializer_list<size_t> operands) {
    read_.resize(shapes_.size(), false);
    for (size_t o : operands) read_[o] = true;
  }

  // A value whose shape broadcasts with a's: an existing one, or a's shape with some axes 1.
  std::optional<size_t> partner(size_t a) {
    const Shape& sa = shapes_[a].shape();
    std::vector<size_t> fits;
    for (size_t i = 0; i < shapes_.size(); ++i) {
      const Shape& sb = shapes_[i].shape();
      bool ok = true;
      for (size_t k = 0; k < std::min(sa.size(), sb.size()); ++k) {
        const int64_t x = sa[sa.size() - 1 - k], y = sb[sb.size() - 1 - k];
        ok = ok && (x == y || x == 1 || y == 1);
      }
      if (ok) fits.push_back(i);
    }
    if (fits.empty()) return std::nullopt;
    return fits[size_t(pick(0, int(fits.size()) - 1))];
  }

  void try_op() {
    const size_t a = some_value();
    const Shape s = shapes_[a].shape();
    const int64_t nd = int64_t(s.size());
    const int64_t axis = nd ? pick(0, int(nd) - 1) : 0;
    const std::string ax = std::to_string(axis);
    const size_t before = prog_.steps.size();
    switch (pick(0, 5)) {
      case 0:
      case 1:
        unary(a);
        break;
      case 2: {
        const std::optional<size_t> b = partner(a);
        if (b) binary(a, *b);
        break;
      }
      case 3:
        if (nd) reduce(a, axis, ax);
        break;
      case 4:
        movement(a, s);
        break;
      default: {
        if (!nd) break;
        const int64_t k = s.back(), n = pick(1, 3);
        // A constant right operand (weights), and a gather with repeated indices.
        if (chance(60)) {
          add(v(a) + ".matmul(arange(" + std::to_string(k * n) + ").reshape({" + std::to_string(k) +
                  ", " + std::to_string(n) + "}) * 0.25 - 1)",
              [a, k, n](const auto& x) {
                const Tensor w =
                    Tensor::arange(0, k * n, 1, x[a].device()).cast(x[a].dtype()).reshape({k, n}) *
                        0.25 -
                    1;
                return x[a].matmul(w);
              });
        } else {
          std::vector<int64_t> idx;
          for (int i = 0; i < 5; ++i) idx.push_back(pick(0, int(s[size_t(axis)]) - 1));
          add(v(a) + ".index_select(" + ax + ", " + ints_str(idx) + ")",
              [a, axis, idx](const auto& x) {
                return x[a].index_select(axis, Tensor(idx, {int64_t(idx.size())}, x[a].device()));
              });
        }
      }
    }
    if (prog_.steps.size() > before) mark({a});
  }

  void unary(size_t a) {
    struct U {
      const char* text;  // "%" is the operand
      Tensor (*f)(const Tensor&);
    };
    static const U table[] = {
        {"-%", [](const Tensor& x) { return -x; }},
        {"%.abs()", [](const Tensor& x) { return x.abs(); }},
        {"%.relu()", [](const Tensor& x) { return x.relu(); }},
        {"%.clip(-3, 3).exp()", [](const Tensor& x) { return x.clip(-3.0, 3.0).exp(); }},
        {"(%.abs() + 0.5).log()", [](const Tensor& x) { return (x.abs() + 0.5).log(); }},
        {"(%.abs() + 0.25).sqrt()", [](const Tensor& x) { return (x.abs() + 0.25).sqrt(); }},
        {"%.sin()", [](const Tensor& x) { return x.sin(); }},
        {"%.cos()", [](const Tensor& x) { return x.cos(); }},
        {"%.tanh()", [](const Tensor& x) { return x.tanh(); }},
        {"%.sigmoid()", [](const Tensor& x) { return x.sigmoid(); }},
        {"%.square()", [](const Tensor& x) { return x.square(); }},
        {"(%.abs() + 0.5).reciprocal()",
         [](const Tensor& x) { return (x.abs() + 0.5).reciprocal(); }},
        {"%.softplus()", [](const Tensor& x) { return x.softplus(); }},
        {"%.gelu()", [](const Tensor& x) { return x.gelu(); }},
        {"%.silu()", [](const Tensor& x) { return x.silu(); }},
        {"%.elu(0.7)", [](const Tensor& x) { return x.elu(0.7); }},
        {"%.leaky_relu(0.1)", [](const Tensor& x) { return x.leaky_relu(0.1); }},
        {"%.erf()", [](const Tensor& x) { return x.erf(); }},
        {"%.pow(3.0)", [](const Tensor& x) { return x.pow(3.0); }},
        {"(%.abs() + 0.5).pow(1.5)", [](const Tensor& x) { return (x.abs() + 0.5).pow(1.5); }},
        {"%.clip(-1, 1)", [](const Tensor& x) { return x.clip(-1.0, 1.0); }},
        {"%.hardtanh()", [](const Tensor& x) { return x.hardtanh(); }},
        {"%.mish()", [](const Tensor& x) { return x.mish(); }},
        {"%.logsigmoid()", [](const Tensor& x) { return x.logsigmoid(); }},
        {"%.atan()", [](const Tensor& x) { return x.atan(); }},
        {"%.hardswish()", [](const Tensor& x) { return x.hardswish(); }},
    };
    const U& u = table[size_t(pick(0, int(std::size(table)) - 1))];
    std::string text = u.text;
    text.replace(text.find('%'), 1, v(a));
    const auto f = u.f;
    add(text, [a, f](const auto& x) { return f(x[a]); });
  }

  void binary(size_t a, size_t b) {
    static const char* names[] = {"+",   "-",     "*",    "/",     "maximum", "minimum",
                                  "pow", "where", "lerp", "atan2", "pow_int"};
    const int op = pick(0, int(std::size(names)) - 1);
    const std::string va = v(a), vb = v(b);
    std::string text;
    switch (op) {
      case 0:
      case 1:
      case 2:
        text = va + " " + names[op] + " " + vb;
        break;
      case 3:
        text = va + " / (" + vb + ".abs() + 0.5)";
        break;
      case 4:
      case 5:
        text = va + "." + names[op] + "(" + vb + ")";
        break;
      case 6:
        text = "(" + va + ".abs() + 0.5).pow(" + vb + ".clip(-2, 2))";
        break;
      case 7:
        text = va + ".gt(" + vb + ").where(" + va + ", " + vb + " * 2)";
        break;
      case 8:
        text = va + ".lerp(" + vb + ", 0.3)";
        break;
      case 9:
        text = va + ".atan2(" + vb + ".abs() + 0.5)";
        break;
      default:  // a base of 0 or 1 in kink programs (torch's gradients there)
        text = va + ".pow(" + vb + ".round().clip(0, 3))";
    }
    if (add(text, [a, b, op](const auto& x) {
          const Tensor &p = x[a], &q = x[b];
          switch (op) {
            case 0:
              return p + q;
            case 1:
              return p - q;
            case 2:
              return p * q;
            case 3:
              return p / (q.abs() + 0.5);
            case 4:
              return p.maximum(q);
            case 5:
              return p.minimum(q);
            case 6:
              return (p.abs() + 0.5).pow(q.clip(-2.0, 2.0));
            case 7:
              return p.gt(q).where(p, q * 2);
            case 8:
              return p.lerp(q, 0.3);
            case 9:
              return p.atan2(q.abs() + 0.5);
            default:
              return p.pow(q.round().clip(0.0, 3.0));
          }
        }))
      mark({b});
  }

  void reduce(size_t a, int64_t axis, const std::string& ax) {
    const bool keep = chance(40);
    const std::string k = keep ? ", true)" : ")";
    switch (pick(0, 12)) {
      case 0:
        add(v(a) + ".sum(" + ax + k,
            [a, axis, keep](const auto& x) { return x[a].sum(axis, keep); });
        return;
      case 1:
        add(v(a) + ".mean(" + ax + k,
            [a, axis, keep](const auto& x) { return x[a].mean(axis, keep); });
        return;
      case 2:
        add(v(a) + ".max(" + ax + k,
            [a, axis, keep](const auto& x) { return x[a].max(axis, keep); });
        return;
      case 3:
        add(v(a) + ".min(" + ax + k,
            [a, axis, keep](const auto& x) { return x[a].min(axis, keep); });
        return;
      case 4:
        add(v(a) + ".logsumexp(" + ax + k,
            [a, axis, keep](const auto& x) { return x[a].logsumexp(axis, keep); });
        return;
      case 5:  // std of one element is nan (correction 1), and of copies (expand) nan where its
        // true gradient is 0, as torch: only of inputs, along axes longer than 1
        if (a >= prog_.inputs.size() || shapes_[a].shape()[size_t(axis)] < 2) return;
        add(v(a) + ".std(" + ax + k,
            [a, axis, keep](const auto& x) { return x[a].std(axis, keep); });
        return;
      case 6:
        add(v(a) + ".softmax(" + ax + ")", [a, axis](const auto& x) { return x[a].softmax(axis); });
        return;
      case 7:
        add(v(a) + ".log_softmax(" + ax + ")",
            [a, axis](const auto& x) { return x[a].log_softmax(axis); });
        return;
      case 8:
        add(v(a) + ".cumsum(" + ax + ")", [a, axis](const auto& x) { return x[a].cumsum(axis); });
        return;
      case 9:
        add(v(a) + ".cumprod(" + ax + ")", [a, axis](const auto& x) { return x[a].cumprod(axis); });
        return;
      case 10: {
        const bool mx = chance(50);
        add(v(a) + (mx ? ".cummax(" : ".cummin(") + ax + ").first", [a, axis, mx](const auto& x) {
          return mx ? x[a].cummax(axis).first : x[a].cummin(axis).first;
        });
        return;
      }
      case 11: {
        const bool mx = chance(50);
        add(v(a) + (mx ? ".max_with_indices(" : ".min_with_indices(") + ax + k + ".first",
            [a, axis, keep, mx](const auto& x) {
              return mx ? x[a].max_with_indices(axis, keep).first
                        : x[a].min_with_indices(axis, keep).first;
            });
        return;
      }
      default:
        add(v(a) + ".prod(" + ax + k,
            [a, axis, keep](const auto& x) { return x[a].prod(axis, keep); });
        return;
    }
  }

  void movement(size_t a, const Shape& s) {
    const int64_t nd = int64_t(s.size());
    switch (pick(0, 6)) {
      case 0: {
        add(v(a) + ".flatten()", [a](const auto& x) { return x[a].flatten(); });
        return;
      }
      case 1: {
        if (nd < 2) return;
        add(v(a) + ".transpose()", [a](const auto& x) { return x[a].transpose(); });
        return;
      }
      case 2: {
        const int64_t n = pick(2, 3);
        add(v(a) + ".unsqueeze(0).expand(" + std::to_string(n) + ", ...)", [a, n](const auto& x) {
          Shape out = x[a].shape();
          out.insert(out.begin(), n);
          return x[a].unsqueeze(0).expand(out);
        });
        return;
      }
      case 3: {
        std::vector<std::pair<int64_t, int64_t>> p;
        for (int64_t i = 0; i < nd; ++i) p.push_back({pick(0, 2), pick(0, 2)});
        add(v(a) + ".pad(...)", [a, p](const auto& x) { return x[a].pad(p, 0.5); });
        return;
      }
      case 4: {
        std::vector<std::pair<int64_t, int64_t>> r;
        for (int64_t d : s) {
          const int64_t b = pick(0, int(d) - 1);
          r.push_back({b, pick(int(b) + 1, int(d))});
        }
        add(v(a) + ".shrink(...)", [a, r](const auto& x) { return x[a].shrink(r); });
        return;
      }
      case 5: {
        add(v(a) + ".flip({0})", [a](const auto& x) { return x[a].flip({0}); });
        return;
      }
      default: {
        if (nd == 0) return;
        add("Tensor::cat({" + v(a) + ", " + v(a) + " * 3}, -1)", [a](const auto& x) {
          return Tensor::cat(std::vector<Tensor>{x[a], x[a] * 3}, -1);
        });
        return;
      }
    }
  }
};

// Distinct weights per element: every element of the result counts in the loss.
Tensor weighted_loss(const Tensor& out) {
  std::vector<double> w(size_t(out.numel()));
  for (size_t i = 0; i < w.size(); ++i) w[i] = 1.0 + 0.37 * double(i % 5) - 0.21 * double(i % 3);
  return (out * Tensor(w, out.shape(), out.device()).cast(out.dtype())).sum();
}

std::vector<Tensor> make_inputs(const GradProgram& p, uint32_t seed, bool kinks, DType d,
                                const std::string& dev,
                                const std::vector<std::vector<double>>* data = nullptr) {
  std::vector<Tensor> xs;
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const std::vector<double> v =
        data ? (*data)[i] : input_values(p.inputs[i], seed + uint32_t(i), kinks);
    xs.push_back(Tensor(v, p.inputs[i], dev).cast(d).contiguous());
    xs.back().realize();
    xs.back().requires_grad_();
  }
  return xs;
}

std::vector<std::vector<double>> gradients(const GradProgram& p, std::vector<Tensor> xs) {
  weighted_loss(p.run(xs)).backward();
  std::vector<std::vector<double>> g;
  for (const Tensor& x : xs) {
    if (!x.grad()) throw Error("an input got no gradient");
    g.push_back(test::values(*x.grad()));
  }
  return g;
}

// Float32 gradients of two devices: within 1e-4 of each input's largest magnitude (sums in
// another order, and transcendental functions within a few ulps, through a few ops), or 1e-5
// where all are small: a softmax's gradient cancels to float32 noise of its O(1) upstream one
// (seed 20261167: -1.2e-7 vs 0); nan only with nan, inf only with the same inf.
std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

std::string compare_grads(const std::vector<std::vector<double>>& want,
                          const std::vector<std::vector<double>>& got) {
  for (size_t k = 0; k < want.size(); ++k) {
    double scale = 0;
    for (double x : want[k])
      if (std::isfinite(x)) scale = std::max(scale, std::fabs(x));
    for (size_t i = 0; i < want[k].size(); ++i) {
      const double w = want[k][i], x = got[k][i];
      const bool ok =
          (std::isnan(w) && std::isnan(x)) || w == x ||
          (std::isfinite(w) && std::isfinite(x) && std::fabs(w - x) <= 1e-4 * std::max(scale, 0.1));
      if (!ok)
        return "input " + std::to_string(k) + " [" + std::to_string(i) + "]: " + num(w) + " vs " +
               num(x) + " (largest " + num(scale) + ")";
    }
  }
  return "";
}

std::string check(uint32_t seed) {
  const GradProgram p = GradGen(seed).next();
  if (std::getenv("VKG_FUZZ_PRINT")) std::printf("%s", p.cpp().c_str());
  const bool kinks = seed % 4 == 3;
  // The two devices in float32.
  const auto cpu = gradients(p, make_inputs(p, seed, kinks, dtypes::float32, "CPU"));
  const auto vk = gradients(p, make_inputs(p, seed, kinks, dtypes::float32, "VK"));
  if (std::string e = compare_grads(cpu, vk); !e.empty()) return "CPU vs VK: " + e + "\n" + p.cpp();
  if (kinks) return "";
  // float64 on the CPU device against central differences of the loss.
  std::vector<std::vector<double>> data;
  for (size_t i = 0; i < p.inputs.size(); ++i)
    data.push_back(input_values(p.inputs[i], seed + uint32_t(i), false));
  const auto analytic = gradients(p, make_inputs(p, seed, false, dtypes::float64, "CPU", &data));
  auto loss_at = [&](const std::vector<std::vector<double>>& d) {
    std::vector<Tensor> xs;
    for (size_t i = 0; i < p.inputs.size(); ++i) xs.emplace_back(d[i], p.inputs[i], "CPU");
    return weighted_loss(p.run(xs)).item<double>();
  };
  const double h = 1e-6;
  for (size_t k = 0; k < data.size(); ++k)
    for (size_t i = 0; i < data[k].size(); ++i) {
      auto shifted = data;
      shifted[k][i] += h;
      const double up = loss_at(shifted);
      shifted[k][i] -= 2 * h;
      const double numeric = (up - loss_at(shifted)) / (2 * h);
      const double a = analytic[k][i];
      if (!(std::fabs(a - numeric) <= 1e-4 * std::max(1.0, std::fabs(numeric))))
        return "input " + std::to_string(k) + " [" + std::to_string(i) + "]: analytic " + num(a) +
               ", finite differences " + num(numeric) + "\n" + p.cpp();
    }
  return "";
}

TEST(GradFuzz, BackwardAgreesWithFiniteDifferencesAndAcrossDevices) {
  fuzz::fuzz_seeds("gradient fuzz", 20261128, 80, check);
}

}  // namespace
}  // namespace vkg
