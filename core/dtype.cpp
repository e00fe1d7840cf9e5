#include <vkgrad/core/dtype.hpp>

#include <array>
#include <bitset>
#include <limits>
#include <utility>

namespace vkg {

namespace {

struct ScalarInfo {
  const char* name;
  int size;
};

constexpr std::array<ScalarInfo, kScalarCount> kInfo{{
    {"void", 0}, {"bool", 1}, {"int8", 1}, {"uint8", 1}, {"int16", 2}, {"uint16", 2},
    {"int32", 4}, {"uint32", 4}, {"int64", 8}, {"uint64", 8}, {"float16", 2}, {"bfloat16", 2},
    {"float32", 4}, {"float64", 8},
}};

const ScalarInfo& info(Scalar s) { return kInfo[size_t(s)]; }

// The promotion lattice: each type's immediate upper types. A mixed operation gets the least
// type reachable from both operands, ties broken by the Scalar order. Signed and unsigned
// integers of one width meet one width up; 64-bit integers meet only in the floats.
constexpr std::pair<Scalar, std::array<Scalar, 2>> kLattice[] = {
    {Scalar::Bool, {Scalar::Int8, Scalar::UInt8}},
    {Scalar::Int8, {Scalar::Int16, Scalar::Int16}},
    {Scalar::UInt8, {Scalar::Int16, Scalar::UInt16}},
    {Scalar::Int16, {Scalar::Int32, Scalar::Int32}},
    {Scalar::UInt16, {Scalar::Int32, Scalar::UInt32}},
    {Scalar::Int32, {Scalar::Int64, Scalar::Int64}},
    {Scalar::UInt32, {Scalar::Int64, Scalar::UInt64}},
    {Scalar::Int64, {Scalar::Float16, Scalar::BFloat16}},
    {Scalar::UInt64, {Scalar::Float16, Scalar::BFloat16}},
    {Scalar::Float16, {Scalar::Float32, Scalar::Float32}},
    {Scalar::BFloat16, {Scalar::Float32, Scalar::Float32}},
    {Scalar::Float32, {Scalar::Float64, Scalar::Float64}},
};

using ScalarSet = std::bitset<kScalarCount>;

// Every type reachable upward from s, s included.
ScalarSet upper_set(Scalar s) {
  ScalarSet out;
  out.set(size_t(s));
  for (const auto& [from, ups] : kLattice)
    if (from == s)
      for (Scalar u : ups) out |= upper_set(u);
  return out;
}

}  // namespace

int DType::scalar_size() const { return info(scalar).size; }

std::string DType::name() const {
  std::string n = info(scalar).name;
  if (count > 1) n += "x" + std::to_string(count);
  if (addr == AddrSpace::Global) n += "*";
  if (addr == AddrSpace::Local) n += "[local]";
  return n;
}

namespace dtypes {

std::span<const DType> all() {
  static const std::array<DType, kScalarCount - 1> table = [] {
    std::array<DType, kScalarCount - 1> t{};
    for (int i = 1; i < kScalarCount; ++i) t[i - 1] = DType{Scalar(i)};
    return t;
  }();
  return table;
}

DType from_name(const std::string& name) {
  static const std::pair<const char*, DType> aliases[] = {
      {"half", float16}, {"float", float32}, {"double", float64}, {"int", int32},
      {"uint", uint32}, {"long", int64}, {"ulong", uint64}, {"char", int8}, {"uchar", uint8},
      {"short", int16}, {"ushort", uint16}};
  for (DType d : all())
    if (d.name() == name) return d;
  for (const auto& [alias, d] : aliases)
    if (name == alias) return d;
  throw Error("unknown dtype '" + name + "'");
}

double min_value(DType d) {
  return visit_dtype(d.base(), [](auto tag) -> double {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, vkg::float16_t>) return -65504.0;
    else if constexpr (std::is_same_v<T, vkg::bfloat16_t>) return -3.3895313892515355e38;
    else return double(std::numeric_limits<T>::lowest());
  });
}

double max_value(DType d) {
  return visit_dtype(d.base(), [](auto tag) -> double {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, vkg::float16_t>) return 65504.0;
    else if constexpr (std::is_same_v<T, vkg::bfloat16_t>) return 3.3895313892515355e38;
    else return double(std::numeric_limits<T>::max());
  });
}

}  // namespace dtypes

DType promote(DType a, DType b) {
  if (a.count != 1 || b.count != 1 || a.is_ptr() || b.is_ptr() || a.scalar == Scalar::Void ||
      b.scalar == Scalar::Void)
    throw Error("cannot promote " + a.name() + " with " + b.name() + ": only scalar dtypes mix");
  const ScalarSet common = upper_set(a.scalar) & upper_set(b.scalar);
  for (int i = 0; i < kScalarCount; ++i)
    if (common.test(size_t(i))) return DType{Scalar(i)};
  throw Error("no common dtype for " + a.name() + " and " + b.name());  // unreachable: float64 tops all
}

DType promote_with_scalar(DType t, ScalarKind s) {
  switch (s) {
    case ScalarKind::Bool: return t;
    case ScalarKind::Int: return t.is_bool() ? dtypes::default_int : t;
    case ScalarKind::Float: return t.is_float() ? t : dtypes::default_float;
  }
  return t;
}

DType sum_acc_dtype(DType d) {
  if (d.is_bool()) return dtypes::int32;
  if (d.is_int()) {
    if (d.scalar_size() >= 4) return d.base();
    return d.is_unsigned() ? dtypes::uint32 : dtypes::int32;
  }
  if (d.scalar == Scalar::Float16 || d.scalar == Scalar::BFloat16) return dtypes::float32;
  return d.base();
}

}  // namespace vkg
