// UOp: hash-consing, freeing, arguments, constants, bounds and the printer.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include <vkgrad/core/uop.hpp>

using namespace vkg;

TEST(UOp, BuildingTheSameNodeTwiceGivesTheSameObject) {
  UOpPtr a = UOp::var("a", 0, 10), b = UOp::var("b", 0, 10);
  EXPECT_EQ(a + b, a + b);
  EXPECT_NE(a + b, b + a);  // sources are ordered
  EXPECT_EQ(UOp::const_(dtypes::int32, 3), UOp::const_(dtypes::int32, 3));
  EXPECT_NE(UOp::const_(dtypes::int32, 3), UOp::const_(dtypes::int64, 3));
  EXPECT_NE(UOp::var("a", 0, 10), UOp::var("a", 0, 11));
  EXPECT_EQ(UOp::make(Ops::REDUCE_AXIS, dtypes::float32, {a->cast(dtypes::float32)}, ReduceArg{Ops::ADD, {0, 1}}),
            UOp::make(Ops::REDUCE_AXIS, dtypes::float32, {a->cast(dtypes::float32)}, ReduceArg{Ops::ADD, {0, 1}}));
}

TEST(UOp, FloatConstantsCompareByBits) {
  EXPECT_NE(UOp::const_(dtypes::float32, 0.0), UOp::const_(dtypes::float32, -0.0));
  const double nan = std::nan("");
  EXPECT_EQ(UOp::const_(dtypes::float32, nan), UOp::const_(dtypes::float32, nan));
}

TEST(UOp, NodesAreFreedWhenUnreferenced) {
  const size_t before = live_uop_count();
  {
    UOpPtr x = UOp::var("freed_x", 0, 5);
    UOpPtr e = (x * 3 + 7) % 4;
    EXPECT_GE(live_uop_count(), before + 6);
  }
  EXPECT_EQ(live_uop_count(), before);
}

TEST(UOp, InterningIsThreadSafe) {
  std::vector<UOpPtr> results(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([t, &results] {
      UOpPtr acc = UOp::var("t", 0, 100);
      for (int i = 0; i < 2000; ++i) acc = acc * 3 + i;
      results[size_t(t)] = acc;
    });
  for (auto& th : threads) th.join();
  for (const UOpPtr& r : results) EXPECT_EQ(r, results[0]);
}

TEST(UOp, ConstantsAreStoredAsTheDeviceWouldStoreThem) {
  EXPECT_EQ(UOp::const_(dtypes::int8, 300)->const_int(), 44);      // wraps to 8 bits
  EXPECT_EQ(UOp::const_(dtypes::uint8, -1)->const_int(), 255);
  EXPECT_EQ(UOp::const_(dtypes::int32, 2.9)->const_int(), 2);      // float -> int truncates
  EXPECT_EQ(UOp::const_(dtypes::int32, -2.9)->const_int(), -2);
  EXPECT_EQ(UOp::const_(dtypes::float32, 0.1)->const_value(), double(0.1f));
  EXPECT_EQ(UOp::const_(dtypes::float16, 0.1)->const_value(), double(float(float16_t(0.1f))));
  EXPECT_EQ(UOp::const_(dtypes::bool_, 5)->arg, Arg(true));
  EXPECT_EQ(UOp::const_(dtypes::uint64, uint64_t(1) << 63)->const_value(), 9223372036854775808.0);
}

TEST(UOp, ComparisonsAreBool) {
  UOpPtr a = UOp::var("a", 0, 10);
  EXPECT_EQ(a->lt(3)->dtype, dtypes::bool_);
  EXPECT_EQ(a->ne(a)->dtype, dtypes::bool_);
  EXPECT_EQ(a->eq(2)->op, Ops::CMPNE);  // eq is (a != 2) != true
  EXPECT_EQ((a / 2)->op, Ops::IDIV);
  EXPECT_EQ((a->cast(dtypes::float32) / 2.0)->op, Ops::FDIV);
}

TEST(UOp, BoundsFollowTheOps) {
  UOpPtr a = UOp::var("a", 0, 10), b = UOp::var("b", -3, 4);
  using B = std::pair<int64_t, int64_t>;
  auto bounds = [](const UOpPtr& u) { return B{u->vmin(), u->vmax()}; };
  EXPECT_EQ(bounds(a + b), B(-3, 14));
  EXPECT_EQ(bounds(a * b), B(-30, 40));
  EXPECT_EQ(bounds(a - b), B(-4, 13));
  EXPECT_EQ(bounds(a / 3), B(0, 3));
  EXPECT_EQ(bounds(b / 2), B(-1, 2));    // truncation toward zero
  EXPECT_EQ(bounds(a % 4), B(0, 3));
  EXPECT_EQ(bounds(b % 3), B(-2, 2));    // sign of the dividend
  EXPECT_EQ(bounds(a->lt(11)), B(1, 1));
  EXPECT_EQ(bounds(a->lt(0)), B(0, 0));
  EXPECT_EQ(bounds(a->lt(5)), B(0, 1));
  EXPECT_EQ(bounds(a->maximum(b)), B(0, 10));
  EXPECT_EQ(bounds(UOp::const_(dtypes::int32, 7)), B(7, 7));
  UOpPtr big = UOp::var("big", 0, int64_t(1) << 40, dtypes::int64);
  EXPECT_EQ((big * big)->vmax(), INT64_MAX);  // saturates instead of wrapping
}

TEST(UOp, ToposortPutsSourcesFirst) {
  UOpPtr a = UOp::var("a", 0, 10);
  UOpPtr s = a * 2;
  UOpPtr root = s + s * 3;
  std::vector<const UOp*> order = toposort(root.get());
  ASSERT_EQ(order.back(), root.get());
  auto pos = [&](const UOpPtr& u) { return std::find(order.begin(), order.end(), u.get()) - order.begin(); };
  for (const UOp* n : order)
    for (const UOpPtr& child : n->src) EXPECT_LT(pos(child), pos(n->ptr()));
  EXPECT_EQ(std::count(order.begin(), order.end(), s.get()), 1);
}

TEST(UOp, PrinterNamesSharedNodesOnce) {
  UOpPtr a = UOp::var("a", 0, 10);
  UOpPtr s = a * 2;
  const std::string text = to_string(s + s);
  EXPECT_EQ(text,
            "UOp(Ops.ADD, dtypes.int32, arg=None, src=(\n"
            "  x1:=UOp(Ops.MUL, dtypes.int32, arg=None, src=(\n"
            "    UOp(Ops.DEFINE_VAR, dtypes.int32, arg=('a', 0, 10), src=()),\n"
            "    UOp(Ops.CONST, dtypes.int32, arg=2, src=()),)),\n"
            "   x1,))");
  EXPECT_EQ(to_string(UOp::const_(dtypes::float32, 1.5)), "UOp(Ops.CONST, dtypes.float32, arg=1.5, src=())");
  EXPECT_EQ(to_string(UOp::const_(dtypes::float32, 2)), "UOp(Ops.CONST, dtypes.float32, arg=2.0, src=())");
}

TEST(Ops, TableKnowsEachOp) {
  EXPECT_EQ(op_name(Ops::ADD), "ADD");
  EXPECT_EQ(op_name(Ops::MULACC), "MULACC");
  EXPECT_EQ(op_family(Ops::EXP2), OpFamily::Unary);
  EXPECT_EQ(op_family(Ops::CMPLT), OpFamily::Binary);
  EXPECT_EQ(op_family(Ops::WHERE), OpFamily::Ternary);
  EXPECT_EQ(op_family(Ops::PERMUTE), OpFamily::Movement);
  EXPECT_TRUE(is_commutative(Ops::MUL));
  EXPECT_FALSE(is_commutative(Ops::SUB));
  EXPECT_TRUE(is_alu(Ops::WHERE));
  EXPECT_FALSE(is_alu(Ops::LOAD));
}
