// Differential fuzzing of whole tensor programs: random lazy programs of a few to ~15 ops over
// small odd shapes (0-size and 0-d included, broadcasting) mixing elementwise ops, casts,
// reductions, movement ops, cat, where, cumsum, matmul and assign, on inputs holding the values
// drivers get wrong (inf, nan, -0, subnormals, INT_MIN, the types' extremes). Each program runs
//   - fused on the Vulkan device and fused on the CPU device (the reference interpreter of the same
//     kernels): they must agree bit for bit on integers and bools, within a few ulps on floats
//     (nan equals nan, the sign of a zero counts);
//   - step by step on the CPU device, every value realized as it is made (each op its own
//     kernels): catches a fusion or scheduling bug that both devices share;
//   - where cheap, against float64 loops on the host, op by op on the realized operands
//     (elementwise arithmetic, comparisons, where, sum/max/min): catches a lowering bug shared
//     by every device.
// A mismatch prints the program as C++ to paste into a unit test.
//
// Reproducible: VKG_FUZZ_SEED picks the first seed (default fixed), VKG_FUZZ_PROGRAMS how many
// programs (default sized for CI, ~tens of seconds on 2 cores).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <vkgrad/vkgrad.hpp>

#include "support/differential_fuzz.hpp"
#include "support/fuzz_generators.hpp"
#include "support/fuzz_host_ints.hpp"

namespace vkg {
namespace {

using namespace fuzz;
using fuzz::shape_str;  // not vkg::shape_str

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

// Where it is documented that the devices may differ, the generator does not go. Each such rule
// names the place that documents it.
class ProgramGen {
 public:
  explicit ProgramGen(uint32_t seed) : rng_(seed) {}

  Program next() {
    prog_ = {};
    vals_.clear();
    const int inputs = pick(1, 3);
    for (int i = 0; i < inputs; ++i) add_input(random_dtype(), random_shape());
    const int ops = pick(2, 14);
    for (int tries = 0; int(prog_.steps.size()) < inputs + ops && tries < 200; ++tries) try_op();
    prog_.choose_outputs();
    return prog_;
  }

 private:
  std::mt19937 rng_;
  Program prog_;
  std::vector<Tensor> vals_;  // built on the CPU device while generating, lazily: shapes and dtypes

  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(int percent) { return pick(0, 99) < percent; }

  DType random_dtype() {
    static const DType common[] = {dtypes::float32,  dtypes::float32, dtypes::float32,
                                   dtypes::int32,    dtypes::int32,   dtypes::bool_,
                                   dtypes::int64,    dtypes::uint8,   dtypes::float16,
                                   dtypes::bfloat16, dtypes::int8,    dtypes::uint32};
    return common[pick(0, int(std::size(common)) - 1)];
  }
  int64_t random_dim() {
    static const int64_t dims[] = {1, 1, 2, 3, 3, 5, 7, 4, 0};
    return dims[pick(0, int(std::size(dims)) - (chance(15) ? 1 : 2))];
  }
  Shape random_shape() {
    static const int ranks[] = {0, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 4};
    Shape s(size_t(ranks[pick(0, int(std::size(ranks)) - 1)]));
    for (auto& d : s) d = random_dim();
    return s;
  }

  size_t some_value() {
    // Mostly recent values, so that programs are chains rather than forests.
    const int n = int(vals_.size());
    return size_t(chance(60) ? n - 1 : pick(0, n - 1));
  }

  // Runs `make` on the CPU device's values to see that it is a valid op; adds it if so.
  bool add(std::string text, std::vector<size_t> operands,
           std::function<Tensor(const std::vector<Tensor>&, const std::string&)> make,
           HostFn host = {}, uint64_t host_ulps = 0, bool relative_sum = false) {
    try {
      vals_.push_back(make(vals_, "CPU"));
    } catch (const Error&) {
      return false;  // shapes or dtypes the op refuses: not this program
    }
    prog_.steps.push_back({std::move(text), std::move(operands), std::move(make), std::move(host),
                           host_ulps, relative_sum});
    return true;
  }

  void add_input(DType d, Shape s) {
    const uint32_t seed = uint32_t(rng_());
    const bool finite = chance(25);
    add(fmt_input(d, s, seed, finite), {},
        [d, s, seed, finite](const std::vector<Tensor>&, const std::string& dev) {
          return test::random_tensor(d, s, dev, seed, finite);
        });
    prog_.steps.back().fresh = [d, s, finite](const std::string& dev, uint32_t other) {
      return test::random_tensor(d, s, dev, other, finite);
    };
  }
  static std::string fmt_input(DType d, const Shape& s, uint32_t seed, bool finite) {
    return "test::random_tensor(" + dtype_cpp(d) + ", " + shape_str(s) + ", dev, " +
           std::to_string(seed) + (finite ? "u, true)" : "u)");
  }

  // A second operand for a binary op on value a: an existing value whose shape broadcasts with
  // a's, or a new input of a shape that does (some axes 1, some leading axes dropped).
  size_t partner(size_t a, std::optional<DType> dtype = {}) {
    const Shape& sa = vals_[a].shape();
    std::vector<size_t> fits;
    for (size_t i = 0; i < vals_.size(); ++i) {
      if (dtype && vals_[i].dtype() != *dtype) continue;
      try {
        (void)broadcast_shape_checked(sa, vals_[i].shape());
        fits.push_back(i);
      } catch (const Error&) {
      }
    }
    if (!fits.empty() && chance(60)) return fits[size_t(pick(0, int(fits.size()) - 1))];
    Shape s = sa;
    if (!s.empty() && chance(30)) s.erase(s.begin(), s.begin() + pick(0, int(s.size())));
    for (auto& d : s)
      if (chance(30)) d = 1;
    if (chance(10)) s.insert(s.begin(), random_dim() == 0 ? 1 : 2);
    add_input(dtype ? *dtype : (chance(60) ? vals_[a].dtype() : random_dtype()), s);
    return vals_.size() - 1;
  }
  static Shape broadcast_shape_checked(const Shape& a, const Shape& b) {
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
      const int64_t x = a[a.size() - 1 - i], y = b[b.size() - 1 - i];
      if (x != y && x != 1 && y != 1) throw Error("no broadcast");
    }
    return broadcast_shape(a, b);
  }

  std::string v(size_t i) { return "v" + std::to_string(i); }

  void try_op() {
    const size_t a = some_value();
    const Tensor& ta = vals_[a];
    const DType da = ta.dtype();
    const int64_t nd = int64_t(ta.shape().size());
    switch (pick(0, 23)) {
      case 0:
      case 1:
        return unary(a);
      case 2:
      case 3:
      case 4:
        return binary(a);
      case 5: {  // where(cond, a, b)
        const size_t c = partner(a);
        const size_t b = partner(a);
        add(v(c) + ".ne(0).where(" + v(a) + ", " + v(b) + ")", {c, a, b},
            [c, a, b](const auto& x, const auto&) { return x[c].ne(0).where(x[a], x[b]); });
        return;
      }
      case 6: {  // cast
        const DType to = random_dtype();
        if (da.is_float() && !to.is_float() && inexact(prog_, a)) return;
        add(v(a) + ".cast(" + dtype_cpp(to) + ")", {a},
            [a, to](const auto& x, const auto&) { return x[a].cast(to); });
        return;
      }
      case 7:
      case 8:
        return reduce(a);
      case 9:
      case 10:
      case 11:
        return movement(a);
      case 12: {  // cat along an axis, with itself or a same-shaped slice
        if (nd == 0) return;
        const int64_t axis = pick(0, int(nd) - 1);
        size_t b = a;
        if (chance(50)) {
          Shape s = ta.shape();
          s[size_t(axis)] = random_dim();
          add_input(da, s);
          b = vals_.size() - 1;
        }
        add("Tensor::cat(std::vector<Tensor>{" + v(a) + ", " + v(b) + "}, " + std::to_string(axis) +
                ")",
            {a, b}, [a, b, axis](const auto& x, const auto&) {
              return Tensor::cat(std::vector<Tensor>{x[a], x[b]}, axis);
            });
        return;
      }
      case 13: {  // cumsum
        if (nd == 0 || da.is_bool()) return;
        // Float cumsums are sums in a different order than the stepwise run's: only ints.
        if (da.is_float() && !chance(30)) return;
        const int64_t axis = pick(0, int(nd) - 1);
        add(v(a) + ".cumsum(" + std::to_string(axis) + ")", {a},
            [a, axis](const auto& x, const auto&) { return x[a].cumsum(axis); });
        return;
      }
      case 14: {  // matmul with a new operand
        if (nd == 0 || da.is_bool()) return;
        const int64_t k = ta.shape().back();
        const Shape s = chance(70) ? Shape{k, random_dim()} : Shape{k};
        add_input(da, s);
        const size_t b = vals_.size() - 1;
        add(v(a) + ".matmul(" + v(b) + ")", {a, b},
            [a, b](const auto& x, const auto&) { return x[a].matmul(x[b]); });
        return;
      }
      case 15:
        return assign(a);
      case 16:
      case 17:
        return slice(a);
      case 18:
        return with_constant(a);
      case 19:
        return bitcast(a);
      case 20:
        return composite(a);
      default:
        return binary(a);
    }
  }

  // A binary op with a constant operand, on either side: the renderer treats constants (+0 above
  // all) apart, and the driver folds them.
  void with_constant(size_t a) {
    static const double floats[] = {0.0, -0.0, 1.0,      -1.0,      2.0, 0.5,
                                    3.0, -7.0, INFINITY, -INFINITY, NAN, 1e30};
    static const int64_t ints[] = {0, 1, -1, 2, 3, 7, -8, 31, 255, 65536};
    const bool is_float = vals_[a].dtype().is_float();
    const Scalarish c = is_float ? Scalarish(floats[pick(0, int(std::size(floats)) - 1)])
                                 : Scalarish(ints[pick(0, int(std::size(ints)) - 1)]);
    const std::string ct = is_float ? "double(" + fmt_double(std::get<double>(c.v)) + ")"
                                    : "int64_t(" + std::to_string(std::get<int64_t>(c.v)) + ")";
    const bool left = chance(35);
    static const char* names[] = {"+",       "-",   "*",  "/",  "maximum",
                                  "minimum", "pow", "lt", "eq", "where"};
    const int op = pick(0, int(std::size(names)) - 1);
    auto apply = [op, c, left](const Tensor& x) -> Tensor {
      const Tensor k = Tensor::full_like(x, c);
      const Tensor& l = left ? k : x;
      const Tensor& r = left ? x : k;
      switch (op) {
        case 0:
          return l + r;
        case 1:
          return l - r;
        case 2:
          return l * r;
        case 3:
          return l / r;
        case 4:
          return l.maximum(r);
        case 5:
          return l.minimum(r);
        case 6:
          return l.pow(r);
        case 7:
          return l.lt(r);
        case 8:
          return l.eq(r);
        default:
          return x.ne(0).where(x, k);
      }
    };
    const std::string k = "Tensor::full_like(" + v(a) + ", " + ct + ")";
    const std::string l = left ? k : v(a), r = left ? v(a) : k;
    std::string text;
    if (op < 4)
      text = "(" + l + " " + names[op] + " " + r + ")";
    else if (op < 9)
      text = l + "." + names[op] + "(" + r + ")";
    else
      text = v(a) + ".ne(0).where(" + v(a) + ", " + k + ")";
    add(text, {a}, [a, apply](const auto& x, const auto&) { return apply(x[a]); });
  }
  static std::string fmt_double(double d) {
    if (std::isnan(d)) return "NAN";
    if (std::isinf(d)) return d > 0 ? "INFINITY" : "-INFINITY";
    if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", d);
    return buf;
  }

  void unary(size_t a) {
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
        {"logical_not", &Tensor::logical_not, false, false,
         [](double x) { return double(x == 0); }},
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

  void binary(size_t a) {
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
          [a, b](const auto& x, const auto&) {
            return x[a].copysign(x[b].isnan().where(1, x[b]));
          });
      return;
    }
    // A float pow is exp2(y * log2|x|) in float32: an ulp of t = y * log2|x| (|t| < 150 for a
    // finite result) is up to ~180 ulps of 2^t; its special cases (C11 F.10.4.4) are exact.
    const uint64_t ulps = bname == "pow" && d.is_float() ? 512 : 0;
    add(
        v(a) + "." + b_.name + "(" + v(b) + ")", {a, b},
        [a, b, f](const auto& x, const auto&) { return (x[a].*f)(x[b]); }, host, ulps);
  }

  void reduce(size_t a) {
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

  void movement(size_t a) {
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
  void slice(size_t a) {
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
  void bitcast(size_t a) {
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
  void composite(size_t a) {
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
  void assign(size_t a) {
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
};

// The comparison itself: an element off by 1e20 next to a -1e30 fill is a mismatch unless the
// value comes from a sum (whose error scales with the largest partial), 5 ulps always is.
TEST(TensorDifferentialFuzz, ComparisonScalesByTheOutputOnlyForSums) {
  Program p;
  p.steps.push_back({"Tensor::full({2}, -1e30f)", {}, nullptr});
  p.steps.push_back({"v0.sum(0, true)", {0}, nullptr});
  const float one_ulp = std::nextafter(1.0f, 2.0f) - 1.0f;
  const Tensor want(std::vector<float>{-1e30f, 1.0f}, {2}, "CPU");
  const Tensor off(std::vector<float>{-1e30f, 1e20f}, {2}, "CPU");
  const Tensor ulps4(std::vector<float>{-1e30f, 1.0f + 4 * one_ulp}, {2}, "CPU");
  const Tensor ulps5(std::vector<float>{-1e30f, 1.0f + 5 * one_ulp}, {2}, "CPU");
  EXPECT_NE(compare_output(p, 0, want, off), "");
  EXPECT_EQ(compare_output(p, 0, want, ulps4), "");
  EXPECT_NE(compare_output(p, 0, want, ulps5), "");
  EXPECT_EQ(compare_output(p, 1, want, off), "");  // a sum's: 1e20 <= 1e-6 * 1e30
  const Tensor neg_zero(std::vector<float>{-1e30f, -0.0f}, {2}, "CPU");
  const Tensor pos_zero(std::vector<float>{-1e30f, 0.0f}, {2}, "CPU");
  EXPECT_NE(compare_output(p, 1, neg_zero, pos_zero), "");
}

// A pow's value may differ by the float32 error of exp2(y * log2|x|): 3e-5 of the output's largest
// magnitude, not more (seed 802948: 7440348 on the CPU, 7440338 on Lavapipe).
TEST(TensorDifferentialFuzz, APowIsComparedWithinTheErrorOfItsFloat32Formula) {
  Program p;
  p.steps.push_back({"Tensor::full({2}, 7.83f)", {}, nullptr});
  p.steps.push_back({"v0.pow(v0)", {0}, nullptr});
  p.steps.push_back({"v1.sum(0, true)", {1}, nullptr});
  const Tensor want(std::vector<float>{1.0f, 7440348.0f}, {2}, "CPU");
  const Tensor close(std::vector<float>{1.0f, 7440338.0f}, {2}, "CPU");
  const Tensor far(std::vector<float>{1.0f, 7440048.0f}, {2}, "CPU");  // 4e-5 off
  EXPECT_NE(compare_output(p, 0, want, close), "");
  EXPECT_EQ(compare_output(p, 1, want, close), "");
  EXPECT_EQ(compare_output(p, 2, want, close), "");
  EXPECT_NE(compare_output(p, 1, want, far), "");
}

TEST(TensorDifferentialFuzz, RandomProgramsAgreeAcrossDevicesFusionAndHost) {
  fuzz::fuzz_programs("differential fuzz", 20261127, 300,
                      [](uint32_t seed) { return ProgramGen(seed).next(); });
}

}  // namespace

// For the fuzzers of the JIT and of symbolic shapes (support/fuzz_generators.hpp).
fuzz::Program fuzz::elementwise_program(uint32_t seed) { return ProgramGen(seed).next(); }

}  // namespace vkg
