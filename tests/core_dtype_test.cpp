// The dtype table and the promotion lattice, pinned.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <vkgrad/core/dtype.hpp>

using namespace vkg;

TEST(DType, SizesAndNames) {
  struct Row { DType d; int size; const char* name; };
  const Row rows[] = {
      {dtypes::bool_, 1, "bool"},     {dtypes::int8, 1, "int8"},       {dtypes::uint8, 1, "uint8"},
      {dtypes::int16, 2, "int16"},    {dtypes::uint16, 2, "uint16"},   {dtypes::int32, 4, "int32"},
      {dtypes::uint32, 4, "uint32"},  {dtypes::int64, 8, "int64"},     {dtypes::uint64, 8, "uint64"},
      {dtypes::float16, 2, "float16"}, {dtypes::bfloat16, 2, "bfloat16"},
      {dtypes::float32, 4, "float32"}, {dtypes::float64, 8, "float64"},
  };
  ASSERT_EQ(dtypes::all().size(), std::size(rows));
  for (const Row& r : rows) {
    EXPECT_EQ(r.d.itemsize(), r.size) << r.name;
    EXPECT_EQ(r.d.name(), r.name);
    EXPECT_EQ(dtypes::from_name(r.name), r.d);
  }
  EXPECT_EQ(dtypes::float32.vec(4).itemsize(), 16);
  EXPECT_EQ(dtypes::float32.vec(4).name(), "float32x4");
  EXPECT_EQ(dtypes::int32.ptr().name(), "int32*");
  EXPECT_EQ(dtypes::from_name("half"), dtypes::float16);
  EXPECT_THROW(dtypes::from_name("float17"), Error);
}

TEST(DType, Classes) {
  EXPECT_TRUE(dtypes::float16.is_float());
  EXPECT_TRUE(dtypes::bfloat16.is_float());
  EXPECT_FALSE(dtypes::int64.is_float());
  EXPECT_TRUE(dtypes::uint16.is_int() && dtypes::uint16.is_unsigned());
  EXPECT_TRUE(dtypes::int16.is_int() && !dtypes::int16.is_unsigned());
  EXPECT_FALSE(dtypes::bool_.is_int());
}

TEST(DType, CppTypeMapping) {
  static_assert(dtype_of<float>() == dtypes::float32);
  static_assert(dtype_of<int8_t>() == dtypes::int8);
  static_assert(dtype_of<uint64_t>() == dtypes::uint64);
  static_assert(dtype_of<float16_t>() == dtypes::float16);
  static_assert(std::is_same_v<cpp_type<Scalar::BFloat16>, bfloat16_t>);
  static_assert(std::is_same_v<cpp_type<Scalar::UInt16>, uint16_t>);
  for (DType d : dtypes::all())
    visit_dtype(d, [&](auto tag) { EXPECT_EQ(dtype_of<decltype(tag)>(), d); });
}

TEST(DType, PromotionTable) {
  using namespace dtypes;
  struct Row { DType a, b, want; };
  const Row rows[] = {
      {int32, float16, float16},   {int8, uint8, int16},       {uint8, int8, int16},
      {bool_, int8, int8},         {bool_, bool_, bool_},      {bool_, float32, float32},
      {int16, uint16, int32},      {int32, uint32, int64},     {int64, uint64, float16},
      {uint8, uint16, uint16},     {uint8, int32, int32},      {float16, bfloat16, float32},
      {float16, float32, float32}, {bfloat16, float64, float64}, {int64, float32, float32},
      {uint32, uint64, uint64},    {int8, uint64, float16},    {float32, float64, float64},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(promote(r.a, r.b), r.want) << r.a.name() << " + " << r.b.name();
    EXPECT_EQ(promote(r.b, r.a), r.want) << "promotion must be symmetric";
  }
  for (DType d : all()) EXPECT_EQ(promote(d, d), d);
  EXPECT_THROW(promote(float32.vec(4), float32), Error);
}

TEST(DType, ScalarsDoNotUpcastTensors) {
  using namespace dtypes;
  EXPECT_EQ(promote_with_scalar(int8, ScalarKind::Int), int8);
  EXPECT_EQ(promote_with_scalar(float16, ScalarKind::Float), float16);
  EXPECT_EQ(promote_with_scalar(float16, ScalarKind::Int), float16);
  EXPECT_EQ(promote_with_scalar(int32, ScalarKind::Float), float32);
  EXPECT_EQ(promote_with_scalar(uint8, ScalarKind::Bool), uint8);
  EXPECT_EQ(promote_with_scalar(bool_, ScalarKind::Int), int32);
}

TEST(DType, SumAccumulators) {
  using namespace dtypes;
  EXPECT_EQ(sum_acc_dtype(int8), int32);
  EXPECT_EQ(sum_acc_dtype(uint8), uint32);
  EXPECT_EQ(sum_acc_dtype(bool_), int32);
  EXPECT_EQ(sum_acc_dtype(int64), int64);
  EXPECT_EQ(sum_acc_dtype(float16), float32);
  EXPECT_EQ(sum_acc_dtype(float64), float64);
}

TEST(DType, Ranges) {
  EXPECT_EQ(dtypes::min_value(dtypes::int8), -128);
  EXPECT_EQ(dtypes::max_value(dtypes::uint16), 65535);
  EXPECT_EQ(dtypes::max_value(dtypes::float16), 65504);
  EXPECT_EQ(dtypes::max_value(dtypes::bool_), 1);
}

TEST(Float16, RoundTripsAndRounding) {
  EXPECT_EQ(float(float16_t(1.0f)), 1.0f);
  EXPECT_EQ(float16_t(1.0f).bits, 0x3c00);
  EXPECT_EQ(float16_t(-2.0f).bits, 0xc000);
  EXPECT_EQ(float16_t(65504.0f).bits, 0x7bff);
  EXPECT_EQ(float16_t(65520.0f).bits, 0x7c00);           // rounds up to inf
  EXPECT_EQ(float16_t(5.960464477539063e-08f).bits, 1);  // smallest subnormal
  EXPECT_EQ(float16_t(1.0f + 1.0f / 2048).bits, 0x3c00); // tie rounds to even
  EXPECT_EQ(float16_t(1.0f + 3.0f / 2048).bits, 0x3c02);
  EXPECT_TRUE(std::isnan(float(float16_t(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(float(float16_t(std::numeric_limits<float>::infinity()))));
  for (uint32_t b = 0; b < 0x7c00; ++b)  // every finite half survives float and back
    ASSERT_EQ(float16_t(float(float16_t::from_bits(uint16_t(b)))).bits, b);
}

TEST(BFloat16, RoundTripsAndRounding) {
  EXPECT_EQ(bfloat16_t(1.0f).bits, 0x3f80);
  EXPECT_EQ(float(bfloat16_t(3.140625f)), 3.140625f);
  EXPECT_EQ(bfloat16_t(1.0f + 1.0f / 256).bits, 0x3f80);  // tie to even
  EXPECT_TRUE(std::isnan(float(bfloat16_t(std::numeric_limits<float>::quiet_NaN()))));
}
