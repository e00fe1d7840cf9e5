// The elementwise fuzzer's generator (support/elementwise_program_gen.hpp): a program's inputs,
// the choice of each op, and the ops of a few lines (where, cast, cat, cumsum, matmul, binary ops
// with a constant operand).
#include <cmath>
#include <cstdio>

#include "support/elementwise_program_gen.hpp"

namespace vkg::fuzz {

Program ElementwiseProgramGen::next() {
  prog_ = {};
  vals_.clear();
  const int inputs = pick(1, 3);
  for (int i = 0; i < inputs; ++i) add_input(random_dtype(), random_shape());
  const int ops = pick(2, 14);
  for (int tries = 0; int(prog_.steps.size()) < inputs + ops && tries < 200; ++tries) try_op();
  prog_.choose_outputs();
  return prog_;
}

DType ElementwiseProgramGen::random_dtype() {
  static const DType common[] = {dtypes::float32,  dtypes::float32, dtypes::float32,
                                 dtypes::int32,    dtypes::int32,   dtypes::bool_,
                                 dtypes::int64,    dtypes::uint8,   dtypes::float16,
                                 dtypes::bfloat16, dtypes::int8,    dtypes::uint32};
  return common[pick(0, int(std::size(common)) - 1)];
}

int64_t ElementwiseProgramGen::random_dim() {
  static const int64_t dims[] = {1, 1, 2, 3, 3, 5, 7, 4, 0};
  return dims[pick(0, int(std::size(dims)) - (chance(15) ? 1 : 2))];
}

Shape ElementwiseProgramGen::random_shape() {
  static const int ranks[] = {0, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 4};
  Shape s(size_t(ranks[pick(0, int(std::size(ranks)) - 1)]));
  for (auto& d : s) d = random_dim();
  return s;
}

size_t ElementwiseProgramGen::some_value() {
  // Mostly recent values, so that programs are chains rather than forests.
  const int n = int(vals_.size());
  return size_t(chance(60) ? n - 1 : pick(0, n - 1));
}

// Runs `make` on the CPU device's values to see that it is a valid op; adds it if so.
bool ElementwiseProgramGen::add(
    std::string text, std::vector<size_t> operands,
    std::function<Tensor(const std::vector<Tensor>&, const std::string&)> make, HostFn host,
    uint64_t host_ulps, bool relative_sum) {
  try {
    vals_.push_back(make(vals_, "CPU"));
  } catch (const Error&) {
    return false;  // shapes or dtypes the op refuses: not this program
  }
  prog_.steps.push_back({std::move(text), std::move(operands), std::move(make), std::move(host),
                         host_ulps, relative_sum});
  return true;
}

void ElementwiseProgramGen::add_input(DType d, Shape s) {
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

std::string ElementwiseProgramGen::fmt_input(DType d, const Shape& s, uint32_t seed, bool finite) {
  return "test::random_tensor(" + dtype_cpp(d) + ", " + shape_str(s) + ", dev, " +
         std::to_string(seed) + (finite ? "u, true)" : "u)");
}

// A second operand for a binary op on value a: an existing value whose shape broadcasts with
// a's, or a new input of a shape that does (some axes 1, some leading axes dropped).
size_t ElementwiseProgramGen::partner(size_t a, std::optional<DType> dtype) {
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

void ElementwiseProgramGen::try_op() {
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
void ElementwiseProgramGen::with_constant(size_t a) {
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

std::string ElementwiseProgramGen::fmt_double(double d) {
  if (std::isnan(d)) return "NAN";
  if (std::isinf(d)) return d > 0 ? "INFINITY" : "-INFINITY";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", d);
  return buf;
}

}  // namespace vkg::fuzz
