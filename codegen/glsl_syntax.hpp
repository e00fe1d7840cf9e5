// The pieces of GLSL the renderer assembles a kernel from: type names, literals, conversions,
// ALU expressions, and the small helper functions some ops need (C-semantics MOD, nan-propagating
// MAX, isnan by bits). Internal to codegen/glsl_*.cpp.
#pragma once
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <vkgrad/codegen/glsl_target.hpp>
#include <vkgrad/core/uop.hpp>

namespace vkg::glsl {

// The GLSL type of a register value: float, vec4, f16vec2, int8_t, bvec3. Throws vkg::Error for
// dtypes GLSL has no type for (bfloat16, vectors wider than 4).
std::string type_name(DType d);
// The type an element takes in a buffer: the register type, except bool, which is a byte.
std::string storage_type_name(DType d);
// The buffer_reference type that points at elements of d: Float32Ptr, Float32x4Ptr, BoolPtr.
std::string pointer_type_name(DType d);

// A literal for a CONST, typed so that it never needs an implicit conversion: 1.5f, 3u,
// int8_t(-4), float16_t(0.5), uintBitsToFloat(0x7f800000u) for inf. Negative values and calls
// come parenthesized or as calls, so the literal can stand anywhere in an expression.
// A float +0 constant is written as the bits of kOpaqueZeroBits (glsl_helpers.cpp), a +0 the
// driver cannot fold: Lavapipe turns x * 0, x + 0 and 0 - x into 0, x and -x wherever an operand
// is the constant +0, also one its compiler folds together after unrolling a loop.
std::string literal(const UOp& constant);
// The literal of an integer in integer dtype d, exact for all 64 bits.
std::string int_literal(DType d, int64_t v);
// The literal of a plain number in dtype d (for 0, 1 in generated code).
std::string number(DType d, double value);

// What a kernel's dtypes require of the device and of the source.
struct Needs {
  bool float16 = false, int8 = false, int16 = false, int64 = false, float64 = false;
  bool storage_8bit = false, storage_16bit = false;
  bool int64_atomics = false;  // a scatter combines into a 64-bit buffer
  void value(DType d);         // computes in d
  void buffer(DType d);        // loads and stores elements of d in a storage buffer
};
// Throws vkg::Error naming the dtype, the missing device feature and the kernel.
void check_target(const Needs& needs, const GlslTarget& target, const std::string& kernel);
// The #extension lines the needs call for.
std::vector<std::string> extension_lines(const Needs& needs);

// 16-bit floats the device cannot compute in: bfloat16 always (GLSL has no bfloat16 type), and
// float16 where the device lacks shaderFloat16 or 16-bit storage. Their values live in float32
// registers, rounded back to the 16-bit format after every op that makes a new value (as the CPU
// device computes them, so both agree bit for bit), and in buffers as their 16 bits: uint16_t
// elements with storageBuffer16BitAccess, else two to a uint (packed16). codegen/glsl_half.cpp.
bool emulated(DType d, const GlslTarget& t);
bool packed16(DType d, const GlslTarget& t);
// The dtype a value is held in: float32 lanes for an emulated dtype, d itself otherwise.
DType register_dtype(DType d, const GlslTarget& t);

// The helper functions a kernel calls, each by name and operand dtype, in the order they must be
// defined (a helper is defined after those it calls).
class Helpers {
 public:
  // float64: the device computes in double (shaderFloat64); some float32 helpers are cheaper so.
  // exact_sqrt: sqrt_exact corrects the device's float32 root (else it is the device's sqrt).
  // float_of_double_division: GlslTarget's (fdiv_exact for float32 is one double division).
  explicit Helpers(bool float64 = false, bool exact_sqrt = true,
                   bool float_of_double_division = false)
      : float64_(float64),
        exact_sqrt_(exact_sqrt),
        float_of_double_division_(float64 && float_of_double_division) {}
  // Returns the name to call; records the helper (and those it uses) for definitions().
  std::string use(const std::string& name, DType d);
  bool empty() const { return order_.empty(); }
  std::string definitions() const;

 private:
  std::vector<std::pair<std::string, DType>> order_;
  std::set<std::pair<std::string, int>> seen_;
  bool float64_ = false;
  bool exact_sqrt_ = true;
  bool float_of_double_division_ = false;
};

// Expressions. Arguments are already rendered expressions; results are parenthesized or calls.
// `operand` overrides the operands' dtype (an emulated dtype's register dtype) where not void.
std::string alu_expr(Ops op, DType out, std::span<const UOpPtr> src,
                     std::span<const std::string> args, Helpers& helpers, DType operand = {});
std::string cast_expr(DType from, DType to, const std::string& x, Helpers& helpers);
std::string bitcast_expr(DType from, DType to, const std::string& x);
// Emulated 16-bit floats (scalar d, an emulated dtype): a float register value rounded to d, its
// 16 bits as a uint, and the float value of 16 bits given as a uint. Exact where the value is
// already one of d's (loads and stores of rounded values); round to nearest even otherwise.
std::string half_round(DType d, const std::string& x, Helpers& helpers);
std::string half_bits(DType d, const std::string& x, Helpers& helpers);
std::string half_value(DType d, const std::string& bits, Helpers& helpers);

// bool <-> its one-byte storage, for loads and stores of bool buffers.
std::string bool_from_storage(DType d, const std::string& x);
std::string bool_to_storage(DType d, const std::string& x);

}  // namespace vkg::glsl
