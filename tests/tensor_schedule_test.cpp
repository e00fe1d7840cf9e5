// The scheduler: how many kernels a computation becomes (fusion), and what their ASTs read.
#include <gtest/gtest.h>

#include <cmath>

#include <vkgrad/core/schedule.hpp>
#include <vkgrad/core/shape_tracker.hpp>
#include <vkgrad/core/tensor.hpp>

using namespace vkg;

namespace {
size_t kernels(const Tensor& t) { return create_schedule({t.node()}).items.size(); }

Tensor data(Shape shape) {
  std::vector<float> v(size_t(prod(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i % 7) - 3.0f;
  return Tensor(v, std::move(shape));
}

int count(const UOpPtr& ast, Ops op) {
  int n = 0;
  for (const UOp* u : toposort(ast.get())) n += u->op == op;
  return n;
}
}  // namespace

TEST(ScheduleFusion, KernelCountsArePinned) {
  Tensor a = data({16}), b = data({16}), c = data({16});
  EXPECT_EQ(kernels(a + b), 1u);
  EXPECT_EQ(kernels((a + b) * c), 1u);
  EXPECT_EQ(kernels(a.dot(b)), 1u);
  EXPECT_EQ(kernels((a * b).sum() + 1), 1u);
  EXPECT_EQ(kernels(a.var()), 2u);  // the mean is broadcast back over the reduced axis

  Tensor x = data({4, 8});
  Tensor m = x.max(-1, true);
  Tensor e = (x - m).exp();
  Tensor softmax = e / e.sum(-1, true);
  EXPECT_EQ(kernels(softmax), 3u);  // max; sum of exp; the normalizing divide

  Tensor w = data({8, 5}), bias = data({5});
  EXPECT_EQ(kernels((x.matmul(w) + bias).relu()), 1u);
  EXPECT_EQ(kernels(x.permute({1, 0}).contiguous()), 1u);
}

TEST(ScheduleFusion, ViewsOfWholeBuffersNeedNoKernel) {
  Tensor a = data({2, 3});
  EXPECT_EQ(kernels(a), 0u);
  EXPECT_EQ(kernels(a.reshape({3, 2})), 0u);
  EXPECT_EQ(kernels(a.contiguous()), 0u);
  EXPECT_EQ(kernels(a.permute({1, 0})), 1u);  // an output is row-major in its own shape
  EXPECT_EQ(kernels(Tensor::full({3}, 2.0f)), 1u);
  Schedule s = create_schedule({a.node()});
  ASSERT_EQ(s.uploads.size(), 1u);
}

TEST(ScheduleFusion, SharedReduceIsRealizedOnce) {
  Tensor a = data({8});
  Tensor s = a.sum();
  Tensor out1 = s * 2, out2 = s + 1;
  Schedule sched = create_schedule({out1.node(), out2.node()});
  int reduces = 0;
  for (const ScheduleItem& item : sched.items) reduces += count(item.ast, Ops::REDUCE_AXIS);
  EXPECT_EQ(reduces, 1) << "the reduce must not be computed twice";
  // The reduce, then one kernel of two outputs (core/schedule_multi_output.hpp): both read s.
  EXPECT_EQ(sched.items.size(), 2u);
}

TEST(ScheduleFusion, PaddingAnOpThatMovesZeroRealizesIt) {
  Tensor a = data({4});
  EXPECT_EQ(kernels((a * 2).pad({{1, 1}})), 1u);       // 0*2 == 0: fuses
  EXPECT_EQ(kernels(a.exp2().pad({{1, 1}})), 2u);      // exp2(0) == 1: the pad must read 0
}

TEST(ScheduleAst, DotProductIsOneStoreOfAReduceOfAProduct) {
  Tensor a = Tensor({1, 2}), b = Tensor({3, 4});
  Schedule s = create_schedule({a.dot(b).node()});
  ASSERT_EQ(s.items.size(), 1u);
  const UOpPtr& ast = s.items[0].ast;
  ASSERT_EQ(ast->op, Ops::SINK);
  const UOpPtr& store = ast->src[0];
  ASSERT_EQ(store->op, Ops::STORE);
  EXPECT_EQ(store->src[0]->arg_as<int64_t>(), 0);
  const UOpPtr& red = store->src[2];
  ASSERT_EQ(red->op, Ops::REDUCE_AXIS);
  EXPECT_EQ(red->arg_as<ReduceArg>().op, Ops::ADD);
  EXPECT_EQ(red->src[0]->op, Ops::MUL);
  EXPECT_EQ(count(ast, Ops::LOAD), 2);
  EXPECT_EQ(s.items[0].buffers.size(), 3u);  // output, a, b
  EXPECT_EQ(s.items[0].buffers[0]->count(), 1);
  // The store's view is the reduce's output shape, the loads' the full shape.
  EXPECT_EQ(ShapeTracker::from_arg(store->src[1]->arg)->shape(), Shape{1});
  for (const UOp* u : toposort(ast.get())) {
    if (u->op == Ops::LOAD) {
      EXPECT_EQ(ShapeTracker::from_arg(u->src[1]->arg)->shape(), Shape{2});
    }
  }
}

TEST(ScheduleAst, PermutedCopyLoadsThroughAPermutedView) {
  Tensor x = data({2, 3});
  Schedule s = create_schedule({x.permute({1, 0}).contiguous().node()});
  ASSERT_EQ(s.items.size(), 1u);
  const UOp* load = nullptr;
  for (const UOp* u : toposort(s.items[0].ast.get()))
    if (u->op == Ops::LOAD) load = u;
  ASSERT_NE(load, nullptr);
  const ShapeTracker* st = ShapeTracker::from_arg(load->src[1]->arg);
  EXPECT_EQ(st->shape(), (Shape{3, 2}));
  EXPECT_EQ(st->real_strides()[0], 1);
  EXPECT_EQ(st->real_strides()[1], 3);
}

TEST(ScheduleAst, RealizedTensorsAreReusedByLaterSchedules) {
  Tensor a = data({4});
  Tensor b = (a * 3).contiguous();
  Schedule first = create_schedule({b.node()});
  ASSERT_EQ(first.items.size(), 1u);
  EXPECT_EQ(create_schedule({(b + 1).node()}).items.size(), 2u)
      << "until a schedule has run, its nodes are not realized";
  commit_realized(first);
  Schedule second = create_schedule({(b + 1).node()});
  ASSERT_EQ(second.items.size(), 1u);
  EXPECT_EQ(count(second.items[0].ast, Ops::MUL), 0) << "b was realized: its kernel must not run again";
}
