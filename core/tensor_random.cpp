// Random tensors, counter-based as tinygrad's: one global (seed, counter); a tensor of n elements
// takes the counters [counter, counter + n) and element i's bits are threefry2x32(counter + i,
// seed). The bits are a pure function of (seed, counter, index), computed on the device by the
// THREEFRY op, so every device gives the same values and nothing random is made on the host: the
// host uploads the two words (counter, seed) and one small arange per dimension.
#include <cmath>
#include <cstring>
#include <mutex>
#include <numbers>

#include <vkgrad/core/binding_guard.hpp>
#include <vkgrad/core/buffer.hpp>
#include <vkgrad/core/device.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/tensor.hpp>

namespace vkg {

namespace {

struct Generator {
  std::mutex mu;
  uint64_t seed = 0;
  uint64_t counter = 0;
};

Generator& generator() {
  static Generator g;
  return g;
}

void check_shape(const Shape& shape, std::string_view op) {
  for (int64_t d : shape)
    if (d < 0)
      throw Error(std::string(op) + ": shape " + shape_str(shape) + " has a negative dimension");
}

void check_float(DType d, const Shape& shape, std::string_view op) {
  if (!d.is_float())
    throw Error(std::string(op) + ": needs a float dtype, got " + d.name() + " for shape " +
                shape_str(shape));
}

Tensor broadcast_scalar(const Tensor& one_element, const Shape& shape) {
  return one_element.reshape(Shape(shape.size(), 1)).expand(shape);
}

// The row-major index of every element of `shape` (uint64), from one arange per dimension: the
// sum of the dimensions is uploaded, never their product.
Tensor element_index(const Shape& shape, const std::string& device) {
  Tensor index = Tensor::full(shape, 0, dtypes::uint64, device);
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] > 1) {
      Shape along(shape.size(), 1);
      along[d] = shape[d];
      const Tensor a =
          Tensor::arange(0, shape[d], 1, device).cast(dtypes::uint64).reshape(along).expand(shape);
      index = index + a * stride;
    }
    stride *= shape[d];
  }
  return index;
}

// 64 random bits per element of `shape`, taking prod(shape) counters from the generator.
Tensor random_bits(const Shape& shape, const std::string& device_or_default) {
  const std::string device =
      canonical_device(device_or_default.empty() ? default_device() : device_or_default);
  // One buffer for both words, so that a new counter or seed is new data, never a new kernel.
  // A JIT replay draws them again (Buffer::regenerate): replayed randoms advance as eager ones.
  const auto draw = [n = uint64_t(vkg::prod(shape))] {
    Generator& g = generator();
    std::lock_guard lock(g.mu);
    const uint64_t w[2] = {g.counter, g.seed};
    g.counter += n;
    std::vector<std::byte> bytes(sizeof w);
    std::memcpy(bytes.data(), w, sizeof w);
    return bytes;
  };
  auto buffer = std::make_shared<Buffer>(device, dtypes::uint64, 2);
  buffer->initial_data = std::make_shared<const std::vector<std::byte>>(draw());
  buffer->regenerate = draw;
  const Tensor words(UOp::make(Ops::BUFFER, dtypes::uint64,
                               {UOp::make(Ops::DEVICE, dtypes::void_, {}, device)},
                               std::shared_ptr<const ArgPayload>(buffer)));
  const Tensor counter =
      element_index(shape, device) + broadcast_scalar(words.shrink({{0, 1}}), shape);
  const Tensor key = broadcast_scalar(words.shrink({{1, 2}}), shape);
  return Tensor(UOp::make(Ops::THREEFRY, dtypes::uint64, {counter.node(), key.node()}));
}

// Floats in [1, 2) from the top mantissa bits of a random word and the exponent of 1.0, minus 1:
// every value k / 2^mantissa equally likely, exactly, and never 1.
Tensor uniform_from_bits(const Tensor& bits64, DType d) {
  const auto word = [&](int64_t v, DType w) { return Tensor::full({}, v, w, bits64.device()); };
  if (d == dtypes::float64)
    return (bits64.rshift(12) | word(0x3FF0000000000000, dtypes::uint64)).bitcast(d) - 1.0;
  const Tensor bits32 = bits64.cast(dtypes::uint32);  // the low word
  if (d == dtypes::float32)
    return (bits32.rshift(9) | word(0x3F800000, dtypes::uint32)).bitcast(d) - 1.0;
  const int mantissa = d == dtypes::float16 ? 10 : 7;  // float16, bfloat16
  const int64_t one = d == dtypes::float16 ? 0x3C00 : 0x3F80;
  return (bits32.rshift(32 - mantissa).cast(dtypes::uint16) | word(one, dtypes::uint16))
             .bitcast(d) -
         1.0;
}

// fan_in = shape[1] * receptive field, fan_out = shape[0] * receptive field, as torch.nn.init.
std::pair<double, double> fans(const Shape& shape, std::string_view op) {
  check_shape(shape, op);
  if (shape.size() < 2)
    throw Error(std::string(op) +
                ": needs a weight shape of at least 2 dimensions (out, in, ...), got " +
                shape_str(shape));
  const int64_t field = vkg::prod(Shape(shape.begin() + 2, shape.end()));
  const double fan_in = double(shape[1] * field), fan_out = double(shape[0] * field);
  if (fan_in == 0) throw Error(std::string(op) + ": shape " + shape_str(shape) + " has fan_in 0");
  return {fan_in, fan_out};
}

}  // namespace

void Tensor::manual_seed(uint64_t seed) {
  Generator& g = generator();
  std::lock_guard lock(g.mu);
  g.seed = seed;
  g.counter = 0;
}

Tensor Tensor::rand(Shape shape, DType dtype, std::string device) {
  check_shape(shape, "rand");
  check_float(dtype, shape, "rand");
  return uniform_from_bits(random_bits(shape, device), dtype);
}

// Box-Muller on the two 32-bit halves of one draw: u1 from the low word, u2 from the high one; 1 -
// u1 is in (0, 1], so the log is finite. Computed in float32 and cast.
Tensor Tensor::randn(Shape shape, DType dtype, std::string device) {
  check_shape(shape, "randn");
  check_float(dtype, shape, "randn");
  const Tensor bits = random_bits(shape, device);
  const Tensor u1 = uniform_from_bits(bits, dtypes::float32);
  const Tensor u2 = uniform_from_bits(bits.rshift(32), dtypes::float32);
  return ((1.0 - u1).log() * -2.0).sqrt().mul((u2 * (2 * std::numbers::pi)).cos()).cast(dtype);
}

// floor(u32 * range / 2^32) + low: exact integer arithmetic, each value equally likely up to
// range / 2^32.
Tensor Tensor::randint(int64_t low, int64_t high, Shape shape, DType dtype, std::string device) {
  check_shape(shape, "randint");
  if (!dtype.is_int())
    throw Error("randint: needs an integer dtype, got " + dtype.name() + " for shape " +
                shape_str(shape));
  if (high <= low)
    throw Error("randint: high (" + std::to_string(high) + ") must be greater than low (" +
                std::to_string(low) + ")");
  if (double(low) < dtypes::min_value(dtype) || double(high - 1) > dtypes::max_value(dtype))
    throw Error("randint: [" + std::to_string(low) + ", " + std::to_string(high) +
                ") does not fit " + dtype.name());
  const uint64_t range = uint64_t(high) - uint64_t(low);
  if (range > (uint64_t(1) << 32))
    throw Error("randint: range [" + std::to_string(low) + ", " + std::to_string(high) +
                ") is wider than 2^32");
  const Tensor u32 = random_bits(shape, device).cast(dtypes::uint32).cast(dtypes::uint64);
  const Tensor offset =
      (u32 * Tensor::full({}, int64_t(range), dtypes::uint64, u32.device())).rshift(32);
  return (offset.cast(dtypes::int64) + low).cast(dtype);
}

Tensor Tensor::uniform(Shape shape, double low, double high, DType dtype, std::string device) {
  return rand(std::move(shape), dtype, std::move(device)) * (high - low) + low;
}

Tensor Tensor::normal(Shape shape, double mean, double std, DType dtype, std::string device) {
  return randn(std::move(shape), dtype, std::move(device)) * std + mean;
}

void guard_drawn_shape(const SymShape& s, std::string_view op) {
  if (!recording_guards()) return;
  for (const SymInt& d : s)
    if (d.is_symbolic())
      guard_binding(d.expr(), d.value(), d.value(), [&] {
        std::string shape = "(";
        for (size_t i = 0; i < s.size(); ++i) shape += (i ? ", " : "") + s[i].str();
        return std::string(op) + " of a tensor of symbolic shape " + shape +
               ") draws at the captured sizes: a Jit replays it at the captured binding only (call "
               "it eagerly, or reset() the Jit)";
      });
}

Tensor Tensor::rand_like(const Tensor& t) {
  if (t.has_symbolic_shape()) guard_drawn_shape(t.sym_shape(), "rand_like");
  return rand(t.shape(), t.dtype(), t.device());
}
Tensor Tensor::randn_like(const Tensor& t) {
  if (t.has_symbolic_shape()) guard_drawn_shape(t.sym_shape(), "randn_like");
  return randn(t.shape(), t.dtype(), t.device());
}

// gain = sqrt(2 / (1 + a^2)); uniform in +-gain * sqrt(3 / fan_in), or normal with std
// gain / sqrt(fan_in).
Tensor Tensor::kaiming_uniform(Shape shape, double a, std::string device) {
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double bound = gain * std::sqrt(3.0 / fans(shape, "kaiming_uniform").first);
  return uniform(std::move(shape), -bound, bound, dtypes::default_float, std::move(device));
}

Tensor Tensor::kaiming_normal(Shape shape, double a, std::string device) {
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double std = gain / std::sqrt(fans(shape, "kaiming_normal").first);
  return normal(std::move(shape), 0.0, std, dtypes::default_float, std::move(device));
}

Tensor Tensor::glorot_uniform(Shape shape, std::string device) {
  const auto [fan_in, fan_out] = fans(shape, "glorot_uniform");
  const double bound = std::sqrt(6.0 / (fan_in + fan_out));
  return uniform(std::move(shape), -bound, bound, dtypes::default_float, std::move(device));
}

// keep = rand >= p, so each element survives with probability 1 - p; survivors are scaled by
// 1 / (1 - p) so that the expectation is unchanged. p = 1 keeps nothing (no 1/0 anywhere).
Tensor Tensor::dropout(double p) const {
  if (!(p >= 0.0 && p <= 1.0))
    throw Error("dropout: p must be in [0, 1], got " + std::to_string(p) + " for " +
                dtype().name() + " " + shape_str(shape()));
  if (!training || p == 0.0) return *this;
  if (has_symbolic_shape()) guard_drawn_shape(sym_shape(), "dropout");
  const Tensor keep = rand(shape(), dtypes::default_float, device()).ge(p);
  if (p == 1.0) return keep.where(*this * 0, 0);
  return keep.where(*this * (1.0 / (1.0 - p)), 0);
}

}  // namespace vkg
