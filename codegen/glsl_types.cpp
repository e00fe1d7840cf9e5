// GLSL type names, literals, conversions and the device features each dtype needs.
#include <fmt/format.h>

#include <array>
#include <bit>
#include <charconv>
#include <cmath>

#include <vkgrad/codegen/glsl_syntax.hpp>
#include <vkgrad/core/error.hpp>

namespace vkg::glsl {

namespace {

struct TypeInfo {
  const char* scalar;      // GLSL scalar type
  const char* vec_prefix;  // prefix of its vector types: "" (vec4), "i", "f16", "u8"
  const char* pointer;     // stem of its buffer_reference type name
};

// Indexed by Scalar; bfloat16 has no GLSL type.
constexpr std::array<TypeInfo, kScalarCount> kTypes = {{
    {"void", "", "Void"},
    {"bool", "b", "Bool"},
    {"int8_t", "i8", "Int8"},
    {"uint8_t", "u8", "UInt8"},
    {"int16_t", "i16", "Int16"},
    {"uint16_t", "u16", "UInt16"},
    {"int", "i", "Int32"},
    {"uint", "u", "UInt32"},
    {"int64_t", "i64", "Int64"},
    {"uint64_t", "u64", "UInt64"},
    {"float16_t", "f16", "Float16"},
    {nullptr, nullptr, "BFloat16"},  // held in float registers, stored as bits (glsl_half.cpp)
    {"float", "", "Float32"},
    {"double", "d", "Float64"},
}};

const TypeInfo& info(DType d) {
  const TypeInfo& t = kTypes[std::size_t(d.scalar)];
  if (!t.scalar) throw Error("the GLSL renderer has no type for " + d.name());
  if (d.count < 1 || d.count > 4)
    throw Error("GLSL has no vector type of " + std::to_string(d.count) + " lanes (" + d.name() +
                ")");
  return t;
}

// The shortest decimal that reads back as exactly x, with a '.' or exponent so that GLSL parses
// a floating-point literal.
template <class F>
std::string shortest(F x) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), x);
  std::string s(buf, end);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string float_bits(uint32_t bits) { return fmt::format("uintBitsToFloat(0x{:08x}u)", bits); }

std::string float_literal(DType d, double v) {
  switch (d.scalar) {
    case Scalar::Float64:
      if (!std::isfinite(v)) {
        const uint64_t b = std::bit_cast<uint64_t>(v);
        return fmt::format("packDouble2x32(uvec2(0x{:08x}u, 0x{:08x}u))", uint32_t(b),
                           uint32_t(b >> 32));
      }
      return v < 0 || std::signbit(v) ? "(" + shortest(v) + "lf)" : shortest(v) + "lf";
    case Scalar::Float16:
      // The value is exactly a float16, so the float literal converts without rounding.
      return "float16_t(" + float_literal(dtypes::float32, v) + ")";
    default: {
      const float f = float(v);
      if (!std::isfinite(f)) return float_bits(std::bit_cast<uint32_t>(f));
      return std::signbit(f) ? "(" + shortest(f) + "f)" : shortest(f) + "f";
    }
  }
}

}  // namespace

std::string int_literal(DType d, int64_t v) {
  switch (d.scalar) {
    case Scalar::Int32:
      if (v == INT32_MIN) return "(-2147483647-1)";
      return v < 0 ? fmt::format("({})", v) : std::to_string(v);
    case Scalar::UInt32:
      return fmt::format("{}u", uint32_t(v));
    case Scalar::Int64:
      if (v == INT64_MIN) return "(-9223372036854775807l-1l)";
      return v < 0 ? fmt::format("({}l)", v) : fmt::format("{}l", v);
    case Scalar::UInt64:
      return fmt::format("{}ul", uint64_t(v));
    case Scalar::Int8:
    case Scalar::Int16:
      return fmt::format("{}({})", kTypes[std::size_t(d.scalar)].scalar, v);
    default:
      return fmt::format("{}({}u)", kTypes[std::size_t(d.scalar)].scalar, v);  // uint8, uint16
  }
}

std::string type_name(DType d) {
  const TypeInfo& t = info(d);
  if (d.count == 1) return t.scalar;
  return fmt::format("{}vec{}", t.vec_prefix, d.count);
}

std::string storage_type_name(DType d) {
  return d.is_bool() ? type_name(DType{Scalar::UInt8, d.count}) : type_name(d);
}

std::string pointer_type_name(DType d) {
  const TypeInfo& t = d.scalar == Scalar::BFloat16 ? kTypes[std::size_t(d.scalar)] : info(d);
  return d.count == 1 ? fmt::format("{}Ptr", t.pointer)
                      : fmt::format("{}x{}Ptr", t.pointer, d.count);
}

std::string number(DType d, double value) {
  const DType s = d.base();
  if (s.is_bool()) return value != 0 ? "true" : "false";
  if (s.is_float()) return float_literal(s, value);
  return int_literal(s, int64_t(value));
}

std::string literal(const UOp& c) {
  const DType s = c.dtype.base();
  std::string x;
  if (s.is_bool())
    x = c.const_int() ? "true" : "false";
  else if (s.is_float() && c.const_value() == 0 && !std::signbit(c.const_value())) {
    // +0 whose bits the driver cannot prove constant (a dispatch has workgroups): (0 + 0) * inf
    // of padded rows after an unrolled loop gave 0 on Lavapipe, not nan (symbolic fuzzer seed
    // 2000512, a padded cat squared times a matrix holding inf).
    const std::string zero = "uintBitsToFloat(uint(gl_NumWorkGroups.x == 0u))";
    x = s.scalar == Scalar::Float64   ? "double(" + zero + ")"
        : s.scalar == Scalar::Float16 ? "float16_t(" + zero + ")"
                                      : zero;
  } else if (s.is_float())
    x = float_literal(s, c.const_value());
  else
    x = int_literal(s, c.const_int());
  return c.dtype.count == 1 ? x : type_name(c.dtype) + "(" + x + ")";
}

void Needs::value(DType d) {
  switch (d.scalar) {
    case Scalar::Int8:
    case Scalar::UInt8:
      int8 = true;
      break;
    case Scalar::Int16:
    case Scalar::UInt16:
      int16 = true;
      break;
    case Scalar::Int64:
    case Scalar::UInt64:
      int64 = true;
      break;
    case Scalar::Float16:
      float16 = true;
      break;
    case Scalar::Float64:
      float64 = true;
      break;
    default:
      break;
  }
  if (d.scalar != Scalar::Void) info(d);  // throws for dtypes GLSL cannot hold
}

void Needs::buffer(DType d) {
  value(d);
  if (d.scalar_size() == 1) storage_8bit = true;
  if (d.scalar_size() == 2) storage_16bit = true;
}

void check_target(const Needs& n, const GlslTarget& t, const std::string& kernel) {
  struct Rule {
    bool needed, available;
    const char* dtype;
    const char* feature;
  };
  const Rule rules[] = {
      {n.float16, t.float16, "float16", "shaderFloat16"},
      {n.int8, t.int8, "int8/uint8", "shaderInt8"},
      {n.int16, t.int16, "int16/uint16", "shaderInt16"},
      {n.int64, t.int64, "int64/uint64", "shaderInt64"},
      {n.float64, t.float64, "float64", "shaderFloat64"},
      {n.storage_8bit, t.storage_8bit, "bool/int8/uint8 buffers", "storageBuffer8BitAccess"},
      {n.storage_16bit, t.storage_16bit, "float16/bfloat16/int16/uint16 buffers",
       "storageBuffer16BitAccess"},
      {n.int64_atomics, t.int64_atomics, "a scatter into a 64-bit tensor",
       "shaderBufferInt64Atomics"},
  };
  for (const Rule& r : rules)
    if (r.needed && !r.available)
      throw Error(fmt::format("kernel '{}' uses {}, which this device cannot do (it lacks {})",
                              kernel, r.dtype, r.feature));
}

std::vector<std::string> extension_lines(const Needs& n) {
  std::vector<std::string> out;
  auto add = [&](bool on, const char* ext) {
    if (on) out.push_back(fmt::format("#extension {} : require", ext));
  };
  add(n.int8, "GL_EXT_shader_explicit_arithmetic_types_int8");
  add(n.int16, "GL_EXT_shader_explicit_arithmetic_types_int16");
  add(n.int64, "GL_EXT_shader_explicit_arithmetic_types_int64");
  add(n.float16, "GL_EXT_shader_explicit_arithmetic_types_float16");
  add(n.storage_8bit, "GL_EXT_shader_8bit_storage");
  add(n.storage_16bit, "GL_EXT_shader_16bit_storage");
  add(n.int64_atomics, "GL_EXT_shader_atomic_int64");
  return out;
}

std::string cast_expr(DType from, DType to, const std::string& x, Helpers& helpers) {
  if (to.is_bool() && !from.is_bool()) {
    const std::string zero = number(from.base(), 0);
    if (from.count == 1) return fmt::format("({} != {})", x, zero);
    return fmt::format("notEqual({}, {}({}))", x, type_name(from), zero);
  }
  // Out of range and nan are undefined in GLSL: a helper saturates them as the CPU device does.
  if (from.is_float() && !to.is_float())
    return fmt::format("{}({})", helpers.use("to_" + to.base().name(), from), x);
  // Lavapipe (Mesa 22.3) miscompiles a signed comparison of a sign-extended 32-bit value:
  // int64_t(x) < 3 was false for x in {2, 0, 1}. Widen through the unsigned value (which it
  // compiles right) and subtract 2^32 where the sign bit is set: the same value, no sign-extend.
  if (from.scalar == Scalar::Int32 && to.scalar == Scalar::Int64) {
    const DType u = DType{Scalar::UInt32, from.count};
    const std::string wide = type_name(to), bits = fmt::format("{}({})", type_name(u), x);
    return fmt::format("({0}({1}) - ({0}({1} >> 31u) << 32))", wide, bits);
  }
  // Lavapipe (Mesa 22.3) drops the rounding of int64 -> float32 -> int64 (or uint64) in one
  // kernel: 16777217 came back unrounded (fuzzer seed 700000). A product by 1, exact for every
  // value an integer converts to, keeps the pair apart.
  if (from.is_int() && to.is_float() && from.scalar_size() == 8 && to.scalar != Scalar::Float64)
    return fmt::format("({}({}) * {}(1))", type_name(to), x, type_name(to));
  return fmt::format("{}({})", type_name(to), x);
}

std::string bitcast_expr(DType from, DType to, const std::string& x) {
  if (from.scalar_size() != to.scalar_size() || from.is_bool() || to.is_bool())
    throw Error(fmt::format("BITCAST from {} to {}: sizes differ", from.name(), to.name()));
  struct Rule {
    Scalar from, to;
    const char* fn;
  };
  static constexpr Rule kRules[] = {
      {Scalar::Float32, Scalar::Int32, "floatBitsToInt"},
      {Scalar::Float32, Scalar::UInt32, "floatBitsToUint"},
      {Scalar::Int32, Scalar::Float32, "intBitsToFloat"},
      {Scalar::UInt32, Scalar::Float32, "uintBitsToFloat"},
      {Scalar::Float16, Scalar::Int16, "float16BitsToInt16"},
      {Scalar::Float16, Scalar::UInt16, "float16BitsToUint16"},
      {Scalar::Int16, Scalar::Float16, "int16BitsToFloat16"},
      {Scalar::UInt16, Scalar::Float16, "uint16BitsToFloat16"},
      {Scalar::Float64, Scalar::Int64, "doubleBitsToInt64"},
      {Scalar::Float64, Scalar::UInt64, "doubleBitsToUint64"},
      {Scalar::Int64, Scalar::Float64, "int64BitsToDouble"},
      {Scalar::UInt64, Scalar::Float64, "uint64BitsToDouble"},
  };
  if (from.scalar == to.scalar) return x;
  for (const Rule& r : kRules)
    if (r.from == from.scalar && r.to == to.scalar) return fmt::format("{}({})", r.fn, x);
  // Integers of one width: the conversion constructor keeps the bits.
  if (from.is_int() && to.is_int()) return fmt::format("{}({})", type_name(to), x);
  throw Error(fmt::format("the GLSL renderer cannot BITCAST {} to {}", from.name(), to.name()));
}

std::string bool_from_storage(DType d, const std::string& x) {
  // Only conversions are allowed on 8-bit storage types without int8 arithmetic: widen first.
  if (d.count == 1) return fmt::format("(uint({}) != 0u)", x);
  return fmt::format("notEqual(uvec{}({}), uvec{}(0u))", d.count, x, d.count);
}

std::string bool_to_storage(DType d, const std::string& x) {
  if (d.count == 1) return fmt::format("uint8_t(uint({}))", x);
  return fmt::format("u8vec{}(uvec{}({}))", d.count, d.count, x);
}

}  // namespace vkg::glsl
