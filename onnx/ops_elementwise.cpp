// Elementwise operators: unary math and activations, binary arithmetic with numpy broadcasting,
// comparisons and logic, Cast, Where, Clip. ONNX wants the inputs' dtype back where vkgrad would
// promote (integer Div truncates, Pow keeps the base's dtype).
#include <cmath>
#include <limits>

#include <vkgrad/onnx/ops.hpp>

namespace vkg::onnx {
namespace {

using Unary = Tensor (*)(const Tensor&);

OpFn unary(Unary f) {
  return [f](OpContext& c) -> std::vector<Value> { return {f(c.in(0))}; };
}

// Before opset 7, B broadcast only with broadcast = 1, aligned at `axis` (the suffix by default).
Tensor legacy_broadcast(OpContext& c, const Tensor& a, const Tensor& b) {
  if (c.opset() >= 7) return b;
  if (!c.attr_i("broadcast", 0)) return b;
  const int64_t axis = c.attr_i("axis", a.ndim() - b.ndim());
  if (axis < 0 || axis + b.ndim() > a.ndim())
    c.fail("B of shape " + shape_str(b.shape()) + " does not fit at axis " + std::to_string(axis));
  Shape s(size_t(axis), 1);
  s.insert(s.end(), b.shape().begin(), b.shape().end());
  s.resize(size_t(a.ndim()), 1);
  return b.reshape(s);
}

using HostOp = std::optional<int64_t> (*)(int64_t, int64_t);

// v (of shape `from`) broadcast to `to`, on the host.
std::vector<int64_t> broadcast_host(const std::vector<int64_t>& v, const Shape& from,
                                    const Shape& to) {
  const size_t r = to.size(), off = r - from.size();
  std::vector<int64_t> out(size_t(vkg::prod(to)));
  for (size_t i = 0; i < out.size(); ++i) {
    size_t rest = i, src = 0, stride = 1;
    for (size_t d = r; d-- > 0;) {
      const size_t coord = rest % size_t(to[d]);
      rest /= size_t(to[d]);
      if (d >= off) {
        const size_t n = size_t(from[d - off]);
        src += (n == 1 ? 0 : coord) * stride;
        stride *= n;
      }
    }
    out[i] = v[src];
  }
  return out;
}

// Binary ops whose operands are known on the host compute their integer result there too, so
// the shape arithmetic exporters write (Shape -> Gather -> Div -> Slice) never waits for the
// device.
OpFn binary(Tensor (*f)(const Tensor&, const Tensor&), HostOp host = nullptr) {
  return [f, host](OpContext& c) -> std::vector<Value> {
    const Tensor a = c.in(0);
    const Tensor y = f(a, legacy_broadcast(c, a, c.in(1)));
    const Value &va = c.value(0), &vb = c.value(1);
    if (!host || !va.host || !vb.host || !(y.dtype().is_int() || y.dtype().is_bool()) ||
        y.ndim() > 1)
      return {y};
    const auto xa = broadcast_host(*va.host, va.tensor().shape(), y.shape());
    const auto xb = broadcast_host(*vb.host, vb.tensor().shape(), y.shape());
    std::vector<int64_t> out;
    for (size_t i = 0; i < xa.size(); ++i) {
      const auto r = host(xa[i], xb[i]);
      if (!r) return {y};  // a division by zero: the device's answer
      out.push_back(*r);
    }
    return {Value(y, out)};
  };
}

// Max, Min, Sum, Mean: any number of inputs, broadcast together.
OpFn variadic(Tensor (*f)(const Tensor&, const Tensor&), bool mean = false) {
  return [f, mean](OpContext& c) -> std::vector<Value> {
    Tensor acc = c.in(0);
    for (size_t i = 1; i < c.num_inputs(); ++i) acc = f(acc, c.in(i));
    if (mean) acc = acc / double(c.num_inputs());
    return {acc};
  };
}

Tensor div(const Tensor& a, const Tensor& b) {
  if (a.dtype().is_int()) return a.idiv(b);
  return a.div(b);
}

// fmod = 0: the remainder has the divisor's sign (Python); fmod = 1: the dividend's (C).
std::vector<Value> mod(OpContext& c) {
  const Tensor a = c.in(0), b = c.in(1);
  const bool fmod = c.attr_i("fmod", 0) != 0;
  if (a.dtype().is_int()) {
    if (fmod) return {a.mod(b)};
    return {a - a.floordiv(b) * b};
  }
  if (!fmod) c.fail("fmod must be 1 for floating-point inputs");
  return {a - (a / b).trunc() * b};
}

// Pow keeps the base's dtype. An integer base to a float exponent goes through vkgrad's float pow
// (exp2 of a log2: 3^6 comes out as 728.9999), so a whole exponent takes the exact integer power
// instead; a fractional one truncates as ONNX's reference (numpy's astype) does.
std::vector<Value> pow(OpContext& c) {
  const Tensor x = c.in(0), e = c.in(1);
  if (!(x.dtype().is_int() && e.dtype().is_float())) return {as_dtype(x.pow(e), x.dtype())};
  const Tensor whole = e.trunc().eq(e);
  const double lim = double(1 << 30);  // keeps the cast defined; only +-1 and 0 bases reach it
  const Tensor ie = whole.where(e, e.scalar_like(0.0)).clip(-lim, lim).cast(x.dtype());
  return {whole.where(x.pow(ie), as_dtype(x.pow(e), x.dtype()))};
}

std::vector<Value> cast(OpContext& c) {
  const int64_t to = c.attr_i("to", 0);
  const Value& v = c.value(0);
  if (to == ::onnx::TensorProto::STRING) return {cast_strings(c, v, std::nullopt)};
  const DType d = dtype_from_onnx(int32_t(to), c.where());
  if (v.is_strings()) return {cast_strings(c, v, d)};
  Tensor t = as_dtype(v.tensor(), d);
  // ONNX 1.12 casts to bfloat16 by dropping the low 16 bits of the float32 (its test data too).
  if (d == dtypes::bfloat16 && v.tensor().dtype() != d)
    t = as_dtype(v.tensor(), dtypes::float32)
            .bitcast(dtypes::uint32)
            .rshift(16)
            .cast(dtypes::uint16)
            .bitcast(d);
  if (v.host && (d.is_int() || d.is_bool()) && d != dtypes::uint64)
    return {Value(t, host_cast(*v.host, d))};
  return {t};
}

std::vector<Value> cast_like(OpContext& c) {
  if (c.value(1).is_strings()) return {cast_strings(c, c.value(0), std::nullopt)};
  if (c.value(0).is_strings()) return {cast_strings(c, c.value(0), c.in(1).dtype())};
  return {as_dtype(c.in(0), c.in(1).dtype())};
}

std::vector<Value> where(OpContext& c) { return {c.in(0).where(c.in(1), c.in(2))}; }

// Clip: bounds are attributes up to opset 6, optional 0-d inputs after.
std::vector<Value> clip(OpContext& c) {
  Tensor x = c.in(0);
  if (c.opset() < 11) {
    const float lo = c.attr_f("min", -std::numeric_limits<float>::infinity());
    const float hi = c.attr_f("max", std::numeric_limits<float>::infinity());
    return {x.maximum(double(lo)).minimum(double(hi))};
  }
  if (c.has(1)) x = x.maximum(as_dtype(c.in(1), x.dtype()));
  if (c.has(2)) x = x.minimum(as_dtype(c.in(2), x.dtype()));
  return {x};
}

std::vector<Value> identity(OpContext& c) { return {c.value(0)}; }

std::vector<Value> is_inf(OpContext& c) {
  const Tensor x = c.in(0);
  const bool neg = c.attr_i("detect_negative", 1) != 0, pos = c.attr_i("detect_positive", 1) != 0;
  Tensor r = x.isinf();
  if (!neg) r = r.logical_and(x.gt(0.0));
  if (!pos) r = r.logical_and(x.lt(0.0));
  return {r};
}

std::vector<Value> bit_shift(OpContext& c) {
  const std::string dir = c.attr_s("direction", "");
  if (dir == "LEFT") return {c.in(0).lshift(c.in(1))};
  if (dir == "RIGHT") return {c.in(0).rshift(c.in(1))};
  c.fail("direction must be LEFT or RIGHT, not '" + dir + "'");
}

// Activations with parameters (alpha, beta, gamma as ONNX names them).
std::vector<Value> leaky_relu(OpContext& c) {
  return {c.in(0).leaky_relu(c.attr_f("alpha", 0.01f))};
}
std::vector<Value> elu(OpContext& c) { return {c.in(0).elu(c.attr_f("alpha", 1.0f))}; }
std::vector<Value> celu(OpContext& c) { return {c.in(0).celu(c.attr_f("alpha", 1.0f))}; }
std::vector<Value> selu(OpContext& c) {
  const double alpha = c.attr_f("alpha", 1.67326319217681884765625f);
  const double gamma = c.attr_f("gamma", 1.05070102214813232421875f);
  return {c.in(0).elu(alpha) * gamma};
}
std::vector<Value> hard_sigmoid(OpContext& c) {
  const double alpha = c.attr_f("alpha", 0.2f), beta = c.attr_f("beta", 0.5f);
  return {(c.in(0) * alpha + beta).clip(0.0, 1.0)};
}
std::vector<Value> thresholded_relu(OpContext& c) {
  const Tensor x = c.in(0);
  return {x.gt(double(c.attr_f("alpha", 1.0f))).where(x, 0.0)};
}
std::vector<Value> shrink(OpContext& c) {
  const Tensor x = c.in(0);
  const double bias = c.attr_f("bias", 0.0f), lambd = c.attr_f("lambd", 0.5f);
  const Tensor y = x.lt(-lambd).where(x + bias, x.gt(lambd).where(x - bias, x.scalar_like(0)));
  return {as_dtype(y, x.dtype())};
}
// PRelu: the slope broadcasts to x; a 1-D slope of x's channel count (older exporters) runs
// along axis 1.
std::vector<Value> prelu(OpContext& c) {
  const Tensor x = c.in(0);
  Tensor slope = c.in(1);
  if (slope.ndim() == 1 && x.ndim() > 2 && slope.shape()[0] == x.shape()[1] &&
      slope.shape()[0] != x.shape().back()) {
    Shape s(size_t(x.ndim() - 1), 1);
    s[0] = slope.shape()[0];
    slope = slope.reshape(s);
  }
  return {x.lt(0.0).where(x * slope, x)};
}
std::vector<Value> softplus(OpContext& c) { return {c.in(0).softplus()}; }
std::vector<Value> hard_swish(OpContext& c) {
  const Tensor x = c.in(0);
  return {x * (x / 6.0 + 0.5).clip(0.0, 1.0)};
}

}  // namespace

void add_elementwise_ops(OpTable& t) {
  t["Abs"] = unary([](const Tensor& x) { return x.abs(); });
  t["Neg"] = [](OpContext& c) -> std::vector<Value> {
    const Value& v = c.value(0);
    if (!v.host) return {-v.tensor()};
    std::vector<int64_t> h = *v.host;
    for (auto& x : h) x = -x;
    return {Value(-v.tensor(), h)};
  };
  t["Exp"] = unary([](const Tensor& x) { return x.exp(); });
  t["Log"] = unary([](const Tensor& x) { return x.log(); });
  t["Sqrt"] = unary([](const Tensor& x) { return x.sqrt(); });
  t["Reciprocal"] = unary([](const Tensor& x) { return x.reciprocal(); });
  t["Sin"] = unary([](const Tensor& x) { return x.sin(); });
  t["Cos"] = unary([](const Tensor& x) { return x.cos(); });
  t["Tan"] = unary([](const Tensor& x) { return x.tan(); });
  t["Asin"] = unary([](const Tensor& x) { return x.asin(); });
  t["Acos"] = unary([](const Tensor& x) { return x.acos(); });
  t["Atan"] = unary([](const Tensor& x) { return x.atan(); });
  t["Sinh"] = unary([](const Tensor& x) { return x.sinh(); });
  t["Cosh"] = unary([](const Tensor& x) { return x.cosh(); });
  t["Asinh"] = unary([](const Tensor& x) { return x.asinh(); });
  t["Acosh"] = unary([](const Tensor& x) { return x.acosh(); });
  t["Atanh"] = unary([](const Tensor& x) { return x.atanh(); });
  t["Floor"] = unary([](const Tensor& x) { return x.floor(); });
  t["Ceil"] = unary([](const Tensor& x) { return x.ceil(); });
  t["Round"] = unary([](const Tensor& x) { return x.round(); });
  t["Sign"] = unary([](const Tensor& x) { return x.sign(); });
  t["Erf"] = unary([](const Tensor& x) { return x.erf(); });
  t["Relu"] = unary([](const Tensor& x) { return x.relu(); });
  t["Sigmoid"] = unary([](const Tensor& x) { return x.sigmoid(); });
  t["Tanh"] = unary([](const Tensor& x) { return x.tanh(); });
  t["Softsign"] = unary([](const Tensor& x) { return x.softsign(); });
  t["Mish"] = unary([](const Tensor& x) { return x.mish(); });
  t["IsNaN"] = unary([](const Tensor& x) { return x.isnan(); });
  t["Not"] = unary([](const Tensor& x) { return x.logical_not(); });
  t["Softplus"] = softplus;
  t["HardSwish"] = hard_swish;
  t["Identity"] = identity;
  t["IsInf"] = is_inf;
  t["LeakyRelu"] = leaky_relu;
  t["Elu"] = elu;
  t["Celu"] = celu;
  t["Selu"] = selu;
  t["HardSigmoid"] = hard_sigmoid;
  t["ThresholdedRelu"] = thresholded_relu;
  t["Shrink"] = shrink;
  t["PRelu"] = prelu;

  using R = std::optional<int64_t>;
  t["Add"] = binary([](const Tensor& a, const Tensor& b) { return a + b; },
                    [](int64_t a, int64_t b) -> R { return a + b; });
  t["Sub"] = binary([](const Tensor& a, const Tensor& b) { return a - b; },
                    [](int64_t a, int64_t b) -> R { return a - b; });
  t["Mul"] = binary([](const Tensor& a, const Tensor& b) { return a * b; },
                    [](int64_t a, int64_t b) -> R { return a * b; });
  t["Div"] = binary(div, [](int64_t a, int64_t b) -> R { return b ? R(a / b) : std::nullopt; });
  t["Pow"] = pow;
  t["Mod"] = mod;
  t["Max"] = variadic([](const Tensor& a, const Tensor& b) { return a.maximum(b); });
  t["Min"] = variadic([](const Tensor& a, const Tensor& b) { return a.minimum(b); });
  t["Sum"] = variadic([](const Tensor& a, const Tensor& b) { return a + b; });
  t["Mean"] = variadic([](const Tensor& a, const Tensor& b) { return a + b; }, true);
  t["Equal"] = binary([](const Tensor& a, const Tensor& b) { return a.eq(b); },
                      [](int64_t a, int64_t b) -> R { return a == b; });
  t["Greater"] = binary([](const Tensor& a, const Tensor& b) { return a.gt(b); },
                        [](int64_t a, int64_t b) -> R { return a > b; });
  t["Less"] = binary([](const Tensor& a, const Tensor& b) { return a.lt(b); },
                     [](int64_t a, int64_t b) -> R { return a < b; });
  t["GreaterOrEqual"] = binary([](const Tensor& a, const Tensor& b) { return a.ge(b); });
  t["LessOrEqual"] = binary([](const Tensor& a, const Tensor& b) { return a.le(b); });
  t["And"] = binary([](const Tensor& a, const Tensor& b) { return a.logical_and(b); });
  t["Or"] = binary([](const Tensor& a, const Tensor& b) { return a.logical_or(b); });
  t["Xor"] = binary([](const Tensor& a, const Tensor& b) { return a.logical_xor(b); });
  t["BitShift"] = bit_shift;
  t["Cast"] = cast;
  t["CastLike"] = cast_like;
  t["Where"] = where;
  t["Clip"] = clip;
}

}  // namespace vkg::onnx
