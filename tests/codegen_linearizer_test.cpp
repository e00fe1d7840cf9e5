// linearize() (codegen/linearizer.cpp): within a kernel every LOAD of a global buffer comes before
// any STORE to it, whatever order the stores are given in; a kernel whose loops would break that
// fails instead of computing a wrong answer.
#include <gtest/gtest.h>

#include <algorithm>

#include <vkgrad/codegen/lowerer.hpp>
#include <vkgrad/core/error.hpp>

using namespace vkg;

namespace {

UOpPtr global(int64_t slot) {
  return UOp::make(Ops::DEFINE_GLOBAL, dtypes::float32.ptr(), {}, slot);
}
UOpPtr at(const UOpPtr& buffer, const UOpPtr& index) {
  return UOp::make(Ops::INDEX, buffer->dtype, {buffer, index});
}
UOpPtr int32(int64_t v) { return UOp::const_(dtypes::int32, v); }

// Whether `u` loads (or stores) through buffer slot `slot`.
bool touches(const UOp& u, Ops op, int64_t slot) {
  return u.op == op && u.src[0]->op == Ops::INDEX && u.src[0]->src[0]->arg_as<int64_t>() == slot;
}

}  // namespace

// A multi-output kernel's shape (core/schedule_multi_output.cpp): slot 0 is updated in place
// with a vector store, and a second output reads element 1 of slot 0 again as a scalar (the
// forwarded expression, recomputed lane by lane). Ordered store by store, that scalar load came
// after the vector store and read the new value.
TEST(Linearizer, EveryLoadOfABufferComesBeforeAnyStoreToIt) {
  const UOpPtr g0 = global(0), g1 = global(1);
  const UOpPtr old4 = UOp::make(Ops::LOAD, dtypes::float32.vec(4), {at(g0, int32(0))});
  const UOpPtr two =
      UOp::make(Ops::CONST, dtypes::float32.vec(4), {}, UOp::const_(dtypes::float32, 2.0)->arg);
  const UOpPtr update =
      UOp::make(Ops::STORE, dtypes::void_, {at(g0, int32(0)), old4->alu(Ops::MUL, {two})});
  const UOpPtr old1 = UOp::make(Ops::LOAD, dtypes::float32, {at(g0, int32(1))});
  const UOpPtr copy = UOp::make(Ops::STORE, dtypes::void_, {at(g1, int32(1)), old1});
  const std::vector<UOpPtr> order = linearize({update, copy});
  size_t first_store = order.size(), last_load = 0, loads = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    if (touches(*order[i], Ops::STORE, 0)) first_store = std::min(first_store, i);
    if (touches(*order[i], Ops::LOAD, 0)) last_load = i, ++loads;
  }
  ASSERT_EQ(loads, 2u);
  ASSERT_LT(first_store, order.size());
  EXPECT_LT(last_load, first_store);
}

// A store to slot 0 outside a loop and a load of slot 0 inside it: the loop placement puts the
// load after the store, and linearize says so rather than return that order.
TEST(Linearizer, ALoadPlacedAfterAStoreToItsBufferIsAnError) {
  const UOpPtr g0 = global(0), g1 = global(1);
  const UOpPtr r = UOp::make(Ops::RANGE, dtypes::int32, {int32(4)}, int64_t(0));
  const UOpPtr before =
      UOp::make(Ops::STORE, dtypes::void_, {at(g0, int32(0)), UOp::const_(dtypes::float32, 1.0)});
  const UOpPtr inside = UOp::make(Ops::STORE, dtypes::void_,
                                  {at(g1, r), UOp::make(Ops::LOAD, dtypes::float32, {at(g0, r)})});
  EXPECT_THROW(linearize({before, inside}), Error);
  // Without the store to slot 0 the same loop is fine.
  EXPECT_NO_THROW(linearize({inside}));
}
