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
  void value(DType d);   // computes in d
  void buffer(DType d);  // loads and stores elements of d in a storage buffer
};
// Throws vkg::Error naming the dtype, the missing device feature and the kernel.
void check_target(const Needs& needs, const GlslTarget& target, const std::string& kernel);
// The #extension lines the needs call for.
std::vector<std::string> extension_lines(const Needs& needs);

// The helper functions a kernel calls, each by name and operand dtype, in the order they must be
// defined (a helper is defined after those it calls).
class Helpers {
 public:
  // Returns the name to call; records the helper (and those it uses) for definitions().
  std::string use(const std::string& name, DType d);
  bool empty() const { return order_.empty(); }
  std::string definitions() const;

 private:
  std::vector<std::pair<std::string, DType>> order_;
  std::set<std::pair<std::string, int>> seen_;
};

// Expressions. Arguments are already rendered expressions; results are parenthesized or calls.
std::string alu_expr(Ops op, DType out, std::span<const UOpPtr> src,
                     std::span<const std::string> args, Helpers& helpers);
std::string cast_expr(DType from, DType to, const std::string& x, Helpers& helpers);
std::string bitcast_expr(DType from, DType to, const std::string& x);
// bool <-> its one-byte storage, for loads and stores of bool buffers.
std::string bool_from_storage(DType d, const std::string& x);
std::string bool_to_storage(DType d, const std::string& x);

}  // namespace vkg::glsl
