// Data types: the scalar types vkgrad computes in, their vector and pointer forms as kernels use
// them, the C++ type of each, and the promotion rule for mixed operands.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>

#include <vkgrad/core/error.hpp>
#include <vkgrad/core/half.hpp>

namespace vkg {

// Scalar types, in the priority order that breaks ties in promotion (lowest first).
enum class Scalar : uint8_t {
  Void, Bool, Int8, UInt8, Int16, UInt16, Int32, UInt32, Int64, UInt64,
  Float16, BFloat16, Float32, Float64,
};
inline constexpr int kScalarCount = int(Scalar::Float64) + 1;

// Where a pointer points: kernels address global buffers and workgroup-local memory.
enum class AddrSpace : uint8_t { None, Global, Local };

// A dtype is a scalar type, a lane count (vec4 of float32 when kernels upcast) and, for buffer
// arguments and local arrays, the address space it points into. Small and compared by value.
struct DType {
  Scalar scalar = Scalar::Void;
  uint8_t count = 1;
  AddrSpace addr = AddrSpace::None;

  constexpr bool operator==(const DType&) const = default;

  constexpr DType base() const { return DType{scalar, 1, AddrSpace::None}; }
  constexpr DType vec(int n) const { return DType{scalar, uint8_t(n), addr}; }
  constexpr DType ptr(AddrSpace space = AddrSpace::Global) const { return DType{scalar, count, space}; }
  constexpr bool is_ptr() const { return addr != AddrSpace::None; }

  constexpr bool is_bool() const { return scalar == Scalar::Bool; }
  constexpr bool is_float() const { return scalar >= Scalar::Float16; }
  constexpr bool is_int() const { return scalar >= Scalar::Int8 && scalar <= Scalar::UInt64; }
  constexpr bool is_unsigned() const {
    return scalar == Scalar::UInt8 || scalar == Scalar::UInt16 || scalar == Scalar::UInt32 ||
           scalar == Scalar::UInt64;
  }
  // Bytes of one scalar element (bool is stored as one byte).
  int scalar_size() const;
  // Bytes of the whole value: scalar size times lanes.
  int itemsize() const { return scalar_size() * count; }
  // "float32", "float32x4", "float32*" (global pointer), "float32[local]".
  std::string name() const;
};

namespace dtypes {
inline constexpr DType void_{Scalar::Void};
inline constexpr DType bool_{Scalar::Bool};
inline constexpr DType int8{Scalar::Int8};
inline constexpr DType uint8{Scalar::UInt8};
inline constexpr DType int16{Scalar::Int16};
inline constexpr DType uint16{Scalar::UInt16};
inline constexpr DType int32{Scalar::Int32};
inline constexpr DType uint32{Scalar::UInt32};
inline constexpr DType int64{Scalar::Int64};
inline constexpr DType uint64{Scalar::UInt64};
inline constexpr DType float16{Scalar::Float16};
inline constexpr DType bfloat16{Scalar::BFloat16};
inline constexpr DType float32{Scalar::Float32};
inline constexpr DType float64{Scalar::Float64};

// The dtype a float literal or a float-producing op on integers gets.
inline constexpr DType default_float = float32;
// The dtype an integer literal gets (Tensor({1, 2}) is int32).
inline constexpr DType default_int = int32;

// Every non-void scalar dtype, in priority order.
std::span<const DType> all();
// The dtype called `name` ("float32", "half", "int", ...); throws vkg::Error if unknown.
DType from_name(const std::string& name);

// Smallest and largest finite values representable (as double; exact for every type up to
// 53-bit magnitudes, which is what bounds reasoning needs).
double min_value(DType d);
double max_value(DType d);
}  // namespace dtypes

// Least upper bound of two dtypes on the promotion lattice (numpy's and tinygrad's rule):
// int32 + float16 -> float16, int8 + uint8 -> int16, int64 + uint64 -> float16, bool + x -> x.
DType promote(DType a, DType b);

// What a tensor of dtype `t` combined with a C++ scalar literal gives. A scalar never upcasts a
// tensor of its own kind (int8 tensor + 3 stays int8, float16 tensor * 2.5 stays float16); a float
// scalar with an integer or bool tensor gives the default float; a bool scalar changes nothing.
enum class ScalarKind { Bool, Int, Float };
DType promote_with_scalar(DType t, ScalarKind s);

// The dtype a sum reduction accumulates in: small integers sum in 32 bits (int8 -> int32,
// uint8 -> uint32), bool counts in int32, float16/bfloat16 in float32, the rest in themselves.
DType sum_acc_dtype(DType d);

// C++ type <-> dtype.
template <class T> constexpr DType dtype_of() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, bool>) return dtypes::bool_;
  else if constexpr (std::is_same_v<U, int8_t>) return dtypes::int8;
  else if constexpr (std::is_same_v<U, uint8_t>) return dtypes::uint8;
  else if constexpr (std::is_same_v<U, int16_t>) return dtypes::int16;
  else if constexpr (std::is_same_v<U, uint16_t>) return dtypes::uint16;
  else if constexpr (std::is_same_v<U, int32_t>) return dtypes::int32;
  else if constexpr (std::is_same_v<U, uint32_t>) return dtypes::uint32;
  else if constexpr (std::is_same_v<U, int64_t> || std::is_same_v<U, long long>) return dtypes::int64;
  else if constexpr (std::is_same_v<U, uint64_t> || std::is_same_v<U, unsigned long long>) return dtypes::uint64;
  else if constexpr (std::is_same_v<U, float16_t>) return dtypes::float16;
  else if constexpr (std::is_same_v<U, bfloat16_t>) return dtypes::bfloat16;
  else if constexpr (std::is_same_v<U, float>) return dtypes::float32;
  else if constexpr (std::is_same_v<U, double>) return dtypes::float64;
  else static_assert(sizeof(T) == 0, "no vkgrad dtype for this C++ type");
}

template <Scalar S> struct cpp_type_of;
template <> struct cpp_type_of<Scalar::Bool> { using type = bool; };
template <> struct cpp_type_of<Scalar::Int8> { using type = int8_t; };
template <> struct cpp_type_of<Scalar::UInt8> { using type = uint8_t; };
template <> struct cpp_type_of<Scalar::Int16> { using type = int16_t; };
template <> struct cpp_type_of<Scalar::UInt16> { using type = uint16_t; };
template <> struct cpp_type_of<Scalar::Int32> { using type = int32_t; };
template <> struct cpp_type_of<Scalar::UInt32> { using type = uint32_t; };
template <> struct cpp_type_of<Scalar::Int64> { using type = int64_t; };
template <> struct cpp_type_of<Scalar::UInt64> { using type = uint64_t; };
template <> struct cpp_type_of<Scalar::Float16> { using type = float16_t; };
template <> struct cpp_type_of<Scalar::BFloat16> { using type = bfloat16_t; };
template <> struct cpp_type_of<Scalar::Float32> { using type = float; };
template <> struct cpp_type_of<Scalar::Float64> { using type = double; };
template <Scalar S> using cpp_type = typename cpp_type_of<S>::type;

// Calls f(T{}) with T the C++ type of scalar dtype d, so code can be written once per type:
//   visit_dtype(d, [&](auto tag) { using T = decltype(tag); ... });
// Throws vkg::Error for void.
template <class F> decltype(auto) visit_dtype(DType d, F&& f) {
  switch (d.scalar) {
    case Scalar::Bool: return f(bool{});
    case Scalar::Int8: return f(int8_t{});
    case Scalar::UInt8: return f(uint8_t{});
    case Scalar::Int16: return f(int16_t{});
    case Scalar::UInt16: return f(uint16_t{});
    case Scalar::Int32: return f(int32_t{});
    case Scalar::UInt32: return f(uint32_t{});
    case Scalar::Int64: return f(int64_t{});
    case Scalar::UInt64: return f(uint64_t{});
    case Scalar::Float16: return f(float16_t{});
    case Scalar::BFloat16: return f(bfloat16_t{});
    case Scalar::Float32: return f(float{});
    case Scalar::Float64: return f(double{});
    case Scalar::Void: break;
  }
  throw Error("dtype " + d.name() + " has no C++ value type");
}

}  // namespace vkg
