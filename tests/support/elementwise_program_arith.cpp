// The elementwise fuzzer's arithmetic (support/elementwise_program_gen.hpp): unary and binary
// elementwise ops and reductions, each with its float64 reference on the host where cheap.
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include "support/elementwise_program_gen.hpp"
#include "support/fuzz_host_ints.hpp"

namespace vkg::fuzz {

namespace {

// Row-major strides with 0 on broadcast (size-1 or missing) axes of `from` inside `to`.
std::vector<int64_t> broadcast_strides(const Shape& from, const Shape& to) {
  std::vector<int64_t> s(to.size(), 0);
  int64_t step = 1;
  for (size_t i = 0; i < from.size(); ++i) {
    const size_t a = from.size() - 1 - i, b = to.size() - 1 - i;
    s[b] = from[a] == 1 ? 0 : step;
    step *= from[a];
  }
  return s;
}

Shape broadcast_shape(const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t x = i < a.size() ? a[a.size() - 1 - i] : 1,
                  y = i < b.size() ? b[b.size() - 1 - i] : 1;
    out[out.size() - 1 - i] = x == 1 ? y : x;
  }
  return out;
}

// out[i] = f(operands at i), broadcasting.
HostArray host_map(const std::vector<HostArray>& in, DType out_dtype,
                   const std::function<double(const std::vector<double>&)>& f) {
  Shape shape = in[0].shape;
  for (size_t k = 1; k < in.size(); ++k) shape = broadcast_shape(shape, in[k].shape);
  std::vector<std::vector<int64_t>> strides;
  for (const auto& a : in) strides.push_back(broadcast_strides(a.shape, shape));
  const int64_t n = prod(shape);
  HostArray out{shape, std::vector<double>(size_t(n)), out_dtype};
  std::vector<double> args(in.size());
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i;
    std::vector<int64_t> at(in.size(), 0);
    for (size_t d = shape.size(); d-- > 0;) {
      const int64_t c = rest % shape[d];
      rest /= shape[d];
      for (size_t k = 0; k < in.size(); ++k) at[k] += c * strides[k][d];
    }
    for (size_t k = 0; k < in.size(); ++k) args[k] = in[k].v[size_t(at[k])];
    out.v[size_t(i)] = f(args);
  }
  return out;
}

// A reduce of one axis (keepdim) by `f` from `init`.
HostArray host_reduce(const HostArray& a, int64_t axis, double init,
                      const std::function<double(double, double)>& f) {
  Shape shape = a.shape;
  const int64_t len = shape[size_t(axis)];
  shape[size_t(axis)] = 1;
  int64_t inner = 1;
  for (size_t d = size_t(axis) + 1; d < a.shape.size(); ++d) inner *= a.shape[d];
  const int64_t outer = prod(shape) / std::max<int64_t>(inner, 1);
  HostArray out{shape, std::vector<double>(size_t(prod(shape)), init), a.dtype};
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < len; ++j)
      for (int64_t i = 0; i < inner; ++i) {
        double& acc = out.v[size_t(o * inner + i)];
        acc = f(acc, a.v[size_t((o * len + j) * inner + i)]);
      }
  return out;
}

}  // namespace

Shape ElementwiseProgramGen::broadcast_shape_checked(const Shape& a, const Shape& b) {
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const int64_t x = a[a.size() - 1 - i], y = b[b.size() - 1 - i];
    if (x != y && x != 1 && y != 1) throw Error("no broadcast");
  }
  return broadcast_shape(a, b);
}

void ElementwiseProgramGen::unary(size_t a) {
  const DType d = vals_[a].dtype();
  struct U {
    const char* name;
    Tensor (Tensor::*f)() const;
    bool floats_only, ints_only;
    double (*host)(double);
  };
  static const U table[] = {
      {"operator-", &Tensor::operator-, false, false, [](double x) { return -x; }},
      {"abs", &Tensor::abs, false, false, [](double x) { return std::fabs(x); }},
      // relu keeps nan; relu(-0) and sign(-0) are +0, sign(nan) is nan.
      {"relu", &Tensor::relu, false, false,
       [](double x) { return x > 0 || std::isnan(x) ? x : 0.0; }},
      {"sign", &Tensor::sign, false, false,
       [](double x) { return std::isnan(x) ? x : double(x > 0) - double(x < 0); }},
      {"exp2", &Tensor::exp2, true, false, nullptr},
      {"log2", &Tensor::log2, true, false, nullptr},
      {"sqrt", &Tensor::sqrt, true, false, [](double x) { return std::sqrt(x); }},
      {"reciprocal", &Tensor::reciprocal, true, false, [](double x) { return 1.0 / x; }},
      {"sin", &Tensor::sin, true, false, nullptr},
      {"exp", &Tensor::exp, true, false, nullptr},
      {"log", &Tensor::log, true, false, nullptr},
      {"sigmoid", &Tensor::sigmoid, true, false, nullptr},
      {"tanh", &Tensor::tanh, true, false, nullptr},
      {"trunc", &Tensor::trunc, false, false, [](double x) { return std::trunc(x); }},
      {"floor", &Tensor::floor, false, false, [](double x) { return std::floor(x); }},
      {"ceil", &Tensor::ceil, false, false, [](double x) { return std::ceil(x); }},
      {"round", &Tensor::round, false, false, [](double x) { return std::nearbyint(x); }},
      {"square", &Tensor::square, false, false, [](double x) { return x * x; }},
      {"isnan", &Tensor::isnan, false, false, [](double x) { return double(std::isnan(x)); }},
      {"isinf", &Tensor::isinf, false, false, [](double x) { return double(std::isinf(x)); }},
      {"logical_not", &Tensor::logical_not, false, false, [](double x) { return double(x == 0); }},
      {"bitwise_not", &Tensor::bitwise_not, false, true, nullptr},
      {"signbit", &Tensor::signbit, false, false, nullptr},
      {"erf", &Tensor::erf, true, false, [](double x) { return std::erf(x); }},
      {"erfc", &Tensor::erfc, true, false, [](double x) { return std::erfc(x); }},
      {"isfinite", &Tensor::isfinite, false, false,
       [](double x) { return double(std::isfinite(x)); }},
  };
  const U& u = table[size_t(pick(0, int(std::size(table)) - 1))];
  if (u.ints_only && d.is_float()) return;
  (void)u.floats_only;  // integers are promoted to float by these: allowed
  const auto f = u.f;
  HostFn host;
  const std::string name = u.name;
  // erf is within 4 ulps of libm's, erfc within 8 (its tail is up to 6 off:
  // codegen_kernels_test's ErfAgreesWithLibmAcrossItsRange and ErfcKeepsItsDigitsInItsTail); the
  // others are exact.
  const uint64_t ulps = name == "erf" ? 4 : name == "erfc" ? 8 : 0;
  if (u.host && d == dtypes::float32) {
    host = [h = u.host](const std::vector<HostArray>& in) -> std::optional<HostArray> {
      return host_map(in, dtypes::float32,
                      [h](const std::vector<double>& x) { return double(float(h(x[0]))); });
    };
  }
  if (!host && d.is_int() && exact_in_double(d))
    host = host_int_unary_fn(name, name == "logical_not" ? dtypes::bool_ : d, host_map);
  // Rounding to an integer jumps by a whole unit where an inexact value is an ulp off.
  if ((name == "trunc" || name == "floor" || name == "ceil" || name == "round") && d.is_float() &&
      inexact(prog_, a))
    return;
  if (name == "signbit") {
    // IEEE 754-2019 6.3 leaves the sign of a nan that arithmetic makes unspecified (x86 makes
    // it negative, Lavapipe positive): signbit is asked only of values that are not nan.
    add(v(a) + ".isnan().where(0, " + v(a) + ").signbit()", {a},
        [a](const auto& x, const auto&) { return x[a].isnan().where(0, x[a]).signbit(); });
    return;
  }
  add(
      name == "operator-" ? "-" + v(a) : v(a) + "." + name + "()", {a},
      [a, f](const auto& x, const auto&) { return (x[a].*f)(); }, host, ulps);
}

void ElementwiseProgramGen::binary(size_t a) {
  const DType d = vals_[a].dtype();
  struct B {
    const char* name;
    Tensor (Tensor::*f)(const Tensor&) const;
    double (*host)(double, double);  // float32 only; nullptr: no host reference
  };
  static const B table[] = {
      {"add", &Tensor::add, [](double x, double y) { return x + y; }},
      {"sub", &Tensor::sub, [](double x, double y) { return x - y; }},
      {"mul", &Tensor::mul, [](double x, double y) { return x * y; }},
      {"div", &Tensor::div, [](double x, double y) { return x / y; }},
      {"idiv", &Tensor::idiv, nullptr},
      {"mod", &Tensor::mod, nullptr},
      {"floordiv", &Tensor::floordiv, nullptr},
      {"fmod", &Tensor::fmod, [](double x, double y) { return std::fmod(x, y); }},
      {"remainder", &Tensor::remainder, nullptr},
      {"maximum", &Tensor::maximum, nullptr},
      {"minimum", &Tensor::minimum, nullptr},
      {"pow", &Tensor::pow, [](double x, double y) { return std::pow(x, y); }},
      {"bitwise_and", &Tensor::bitwise_and, nullptr},
      {"bitwise_or", &Tensor::bitwise_or, nullptr},
      {"bitwise_xor", &Tensor::bitwise_xor, nullptr},
      {"lshift", &Tensor::lshift, nullptr},
      {"rshift", &Tensor::rshift, nullptr},
      {"lt", &Tensor::lt, [](double x, double y) { return double(x < y); }},
      {"le", &Tensor::le, [](double x, double y) { return double(x <= y); }},
      {"eq", &Tensor::eq, [](double x, double y) { return double(x == y); }},
      {"ne", &Tensor::ne, [](double x, double y) { return double(x != y); }},
      {"gt", &Tensor::gt, [](double x, double y) { return double(x > y); }},
      {"ge", &Tensor::ge, [](double x, double y) { return double(x >= y); }},
      {"copysign", &Tensor::copysign, nullptr},
      {"atan2", &Tensor::atan2, nullptr},
      {"logical_and", &Tensor::logical_and, nullptr},
      {"logical_xor", &Tensor::logical_xor, nullptr},
      {"logical_or", &Tensor::logical_or, nullptr},
  };
  const B& b_ = table[size_t(pick(0, int(std::size(table)) - 1))];
  const size_t b = partner(a, chance(70) ? std::optional<DType>(d) : std::nullopt);
  const auto f = b_.f;
  HostFn host;
  if (b_.host && d == dtypes::float32 && vals_[b].dtype() == dtypes::float32) {
    const bool cmp = std::string(b_.name).size() == 2;
    host = [h = b_.host, cmp](const std::vector<HostArray>& in) -> std::optional<HostArray> {
      return host_map(in, cmp ? dtypes::bool_ : dtypes::float32,
                      [h](const std::vector<double>& x) { return double(float(h(x[0], x[1]))); });
    };
  }
  // Integers: the documented semantics in int64 (support/fuzz_host_ints.hpp). Both operands of
  // one dtype, but for a shift's amount, which may be of any integer dtype.
  const std::string bname = b_.name;
  const DType db = vals_[b].dtype();
  const bool shift = bname == "lshift" || bname == "rshift";
  if (d.is_int() && exact_in_double(d) &&
      (db == d || (shift && db.is_int() && exact_in_double(db)))) {
    const bool to_bool = bname.size() == 2 || bname.rfind("logical_", 0) == 0;
    host = host_int_binary_fn(bname, to_bool ? dtypes::bool_ : d, host_map);
  }
  // Quotients and remainders jump by a whole divisor where an inexact value is an ulp off
  // (exp(x)^2 fmod y gave 0 on one device, 41 on the other: JIT fuzzer seed 1000577).
  static const std::string stepwise[] = {"idiv", "mod", "floordiv", "fmod", "remainder"};
  if (std::find(std::begin(stepwise), std::end(stepwise), b_.name) != std::end(stepwise) &&
      (inexact(prog_, a) || inexact(prog_, b)))
    return;
  if (std::string(b_.name) == "copysign") {
    // The sign of a nan that arithmetic makes is unspecified (IEEE 754-2019 6.3; see signbit).
    add(v(a) + ".copysign(" + v(b) + ".isnan().where(1, " + v(b) + "))", {a, b},
        [a, b](const auto& x, const auto&) { return x[a].copysign(x[b].isnan().where(1, x[b])); });
    return;
  }
  // A float pow is exp2(y * log2|x|) in float32: an ulp of t = y * log2|x| (|t| < 150 for a
  // finite result) is up to ~180 ulps of 2^t; its special cases (C11 F.10.4.4) are exact.
  const uint64_t ulps = bname == "pow" && d.is_float() ? 512 : 0;
  add(
      v(a) + "." + b_.name + "(" + v(b) + ")", {a, b},
      [a, b, f](const auto& x, const auto&) { return (x[a].*f)(x[b]); }, host, ulps);
}

void ElementwiseProgramGen::reduce(size_t a) {
  const Tensor& t = vals_[a];
  const int64_t nd = int64_t(t.shape().size());
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < nd; ++i)
    if (chance(50)) axes.push_back(chance(20) ? i - nd : i);
  const bool keep = chance(40);
  const std::string args = "(" + ints_str(axes) + (keep ? ", true)" : ")");
  const int which = pick(0, 7);
  // A single-axis keepdim reduce of a float32 value gets the float64 reference.
  const bool one_axis = axes.size() == 1 && keep && t.dtype() == dtypes::float32;
  const int64_t ax = axes.empty() ? 0 : (axes[0] + nd) % std::max<int64_t>(nd, 1);
  switch (which) {
    case 0:
    case 1: {
      HostFn host;
      if (one_axis)
        host = [ax](const std::vector<HostArray>& in) -> std::optional<HostArray> {
          return host_reduce(in[0], ax, 0.0, [](double x, double y) { return x + y; });
        };
      add(
          v(a) + ".sum" + args, {a},
          [a, axes, keep](const auto& x, const auto&) { return x[a].sum(axes, keep); }, host, 0,
          true);
      return;
    }
    case 2:
    case 3: {
      const bool mx = which == 2;
      HostFn host;
      // torch's amax/amin: nan propagates.
      if (one_axis)
        host = [ax, mx](const std::vector<HostArray>& in) -> std::optional<HostArray> {
          return host_reduce(in[0], ax, mx ? -INFINITY : INFINITY, [mx](double x, double y) {
            if (std::isnan(x) || std::isnan(y)) return double(NAN);
            return mx ? std::max(x, y) : std::min(x, y);
          });
        };
      add(
          v(a) + (mx ? ".max" : ".min") + args, {a},
          [a, axes, keep, mx](const auto& x, const auto&) {
            return mx ? x[a].max(axes, keep) : x[a].min(axes, keep);
          },
          host);
      return;
    }
    case 4:
      // A float product is a product in a different order than the stepwise run's: ints only.
      if (t.dtype().is_float()) return;
      add(v(a) + ".prod" + args, {a},
          [a, axes, keep](const auto& x, const auto&) { return x[a].prod(axes, keep); });
      return;
    case 5:
      add(v(a) + ".mean" + args, {a},
          [a, axes, keep](const auto& x, const auto&) { return x[a].mean(axes, keep); });
      return;
    case 6: {
      if (nd == 0) return;
      const int64_t axis = pick(0, int(nd) - 1);
      const bool argmin = chance(30);
      add(v(a) + (argmin ? ".argmin(" : ".argmax(") + std::to_string(axis) +
              (keep ? ", true)" : ")"),
          {a}, [a, axis, keep, argmin](const auto& x, const auto&) {
            return argmin ? x[a].argmin(axis, keep) : x[a].argmax(axis, keep);
          });
      return;
    }
    default: {
      const bool any = chance(50);
      add(v(a) + (any ? ".any" : ".all") + args, {a},
          [a, axes, keep, any](const auto& x, const auto&) {
            return any ? x[a].any(axes, keep) : x[a].all(axes, keep);
          });
      return;
    }
  }
}

}  // namespace vkg::fuzz
