// bfloat16, and float16 on devices without shaderFloat16, as the GLSL renderer emulates them:
// 16 bits in buffers, float32 in registers, rounded back to 16 bits after every op that makes a
// new value. The conversions are written out in integer arithmetic, round to nearest even and
// keep inf and nan, exactly as core/half.hpp does on the host: GLSL's packHalf2x16 leaves its
// rounding to the implementation, and the CPU device is the oracle.
#include <fmt/format.h>

#include <vkgrad/codegen/glsl_syntax.hpp>
#include <vkgrad/core/error.hpp>

namespace vkg::glsl {

bool emulated(DType d, const GlslTarget& t) {
  return d.scalar == Scalar::BFloat16 ||
         (d.scalar == Scalar::Float16 && (!t.float16 || !t.storage_16bit));
}

// Without 16-bit storage a buffer of them is an array of uints, element i in the half i & 1 of
// word i >> 1 (little-endian, so the bytes are those of a uint16_t array). Stores clear and set
// their own half with atomicAnd and atomicOr: a neighbour may store the other half at once.
bool packed16(DType d, const GlslTarget& t) { return emulated(d, t) && !t.storage_16bit; }

DType register_dtype(DType d, const GlslTarget& t) {
  return emulated(d, t) ? DType{Scalar::Float32, d.count, d.addr} : d;
}

namespace {

const char* stem(DType d) {
  if (d.scalar == Scalar::BFloat16) return "bf16";
  if (d.scalar == Scalar::Float16) return "f16";
  throw Error("no 16-bit float emulation for " + d.name());
}

}  // namespace

std::string half_round(DType d, const std::string& x, Helpers& helpers) {
  const std::string s = stem(d);
  if (d.scalar == Scalar::Float16) helpers.use("f16_value", dtypes::uint32);  // f16_round calls it
  return fmt::format("{}({})", helpers.use(s + "_round", DType{Scalar::Float32, d.count}), x);
}

std::string half_bits(DType d, const std::string& x, Helpers& helpers) {
  return fmt::format("{}({})", helpers.use(std::string(stem(d)) + "_bits", dtypes::float32), x);
}

std::string half_value(DType d, const std::string& bits, Helpers& helpers) {
  return fmt::format("{}({})", helpers.use(std::string(stem(d)) + "_value", dtypes::uint32), bits);
}

}  // namespace vkg::glsl
