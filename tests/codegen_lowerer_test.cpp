// Lowering scheduled kernels to linear programs, checked by running them on the CPU interpreter
// against closed forms.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include <vkgrad/codegen/cpu_interpreter.hpp>
#include <vkgrad/codegen/glsl_launch.hpp>
#include <vkgrad/codegen/kernel.hpp>
#include <vkgrad/codegen/lowerer.hpp>
#include <vkgrad/core/schedule.hpp>
#include <vkgrad/core/tensor.hpp>
#include <vkgrad/core/variable.hpp>

using namespace vkg;

namespace {

// Runs every kernel of `t`'s schedule on the interpreter (no devices involved: the buffers live
// in this map) and returns t's elements.
template <class T>
std::vector<T> run(const Tensor& t, const std::vector<Opt>& opts = {}, bool print = false) {
  Schedule s = create_schedule({t.node()});
  std::map<int64_t, std::vector<std::byte>> mem;
  for (const auto& b : s.uploads) mem[b->id()] = *b->initial_data;
  for (const ScheduleItem& item : s.items) {
    Kernel k(item.ast);
    for (const Opt& o : opts) k.apply(o);
    std::vector<int64_t> counts;
    std::vector<HostBuffer> bufs;
    for (const auto& b : item.buffers) {
      counts.push_back(b->count());
      auto& bytes = mem[b->id()];
      bytes.resize(b->nbytes());
      bufs.push_back(HostBuffer(bytes));
    }
    Program p = lower(k, counts);
    if (print) {
      std::cout << k.describe() << "\n";
      for (const UOpPtr& u : p.uops) std::cout << "  " << op_name(u->op) << " " << u->dtype.name() << " " << arg_repr(u->arg) << "\n";
    }
    run_program(p, bufs);
  }
  const UOpPtr& view = s.realized.at(t.node().get());
  const UOp* buf = view.get();
  while (buf->op != Ops::BUFFER) buf = buf->src[0].get();
  const auto& bytes = mem.at(buffer_of(*buf).id());
  std::vector<T> out(size_t(t.numel()));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

std::vector<float> iota_f(size_t n, float start = 0) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

}  // namespace

TEST(Lowerer, SeedDotProductPrints11) {
  EXPECT_EQ(run<int32_t>(Tensor({1, 2}).dot(Tensor({3, 4}))), std::vector<int32_t>{11});
}

TEST(Lowerer, ElementwiseChainWithBroadcast) {
  Tensor a(iota_f(6), {2, 3}), b(std::vector<float>{10, 20, 30}, {3});
  EXPECT_EQ(run<float>((a + b) * 2), (std::vector<float>{20, 42, 64, 26, 48, 70}));
}

TEST(Lowerer, SumOverEachAxis) {
  Tensor a(iota_f(6), {2, 3});
  EXPECT_EQ(run<float>(a.sum(0)), (std::vector<float>{3, 5, 7}));
  EXPECT_EQ(run<float>(a.sum(1)), (std::vector<float>{3, 12}));
  EXPECT_EQ(run<float>(a.max(1)), (std::vector<float>{2, 5}));
  EXPECT_EQ(run<float>(a.sum()), (std::vector<float>{15}));
}

TEST(Lowerer, VarianceIsTwoKernelsAndRight) {
  Tensor a(std::vector<float>{1, 2, 3, 4}, {4});
  const float v = run<float>(a.var())[0];
  EXPECT_NEAR(v, 1.6666666f, 1e-6);
}

TEST(Lowerer, PermutedPaddedAndFlippedInputs) {
  Tensor a(iota_f(6), {2, 3});
  EXPECT_EQ(run<float>(a.permute({1, 0}).contiguous()), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(run<float>(a.pad({{0, 0}, {1, 0}})), (std::vector<float>{0, 0, 1, 2, 0, 3, 4, 5}));
  EXPECT_EQ(run<float>(a.pad({{0, 0}, {1, 0}}, -1.0)), (std::vector<float>{-1, 0, 1, 2, -1, 3, 4, 5}));
  EXPECT_EQ(run<float>(a.flip({1})), (std::vector<float>{2, 1, 0, 5, 4, 3}));
  EXPECT_EQ(run<float>(a.shrink({{1, 2}, {1, 3}})), (std::vector<float>{4, 5}));
}

TEST(Lowerer, MatmulBiasReluWithAndWithoutOpts) {
  const int64_t m = 4, k = 8, n = 4;
  Tensor x(iota_f(size_t(m * k), -10), {m, k}), w(iota_f(size_t(k * n), -7), {k, n}), b(std::vector<float>{1, -100, 2, 0}, {n});
  std::vector<float> want(size_t(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0;
      for (int64_t q = 0; q < k; ++q) acc += float(i * k + q - 10) * float(q * n + j - 7);
      want[size_t(i * n + j)] = std::max(0.0f, acc + (std::vector<float>{1, -100, 2, 0})[size_t(j)]);
    }
  Tensor y = (x.matmul(w) + b).relu();
  EXPECT_EQ(run<float>(y), want);
  // (G4, G4, R8) -> upcast both outputs by 2 and unroll the reduce by 4: a 2x2 register tile.
  EXPECT_EQ(run<float>(y, {{OptOp::UPCAST, 0, 2}, {OptOp::UPCAST, 1, 2}, {OptOp::UNROLL, 2, 4}}), want);
  EXPECT_EQ(run<float>(y, {{OptOp::LOCAL, 0, 2}, {OptOp::UPCAST, 1, 4}}), want);
}

TEST(Lowerer, KernelNamesAndOptErrors) {
  Schedule s = create_schedule({Tensor({1, 2}).dot(Tensor({3, 4})).node()});
  Kernel kern(s.items[0].ast);
  EXPECT_EQ(kern.name(), "r_2");
  EXPECT_THROW(kern.apply({OptOp::UPCAST, 0, 2}), Error);  // axis 0 is the reduce
  EXPECT_THROW(kern.apply({OptOp::UNROLL, 0, 3}), Error);  // 3 does not divide 2
  kern.apply({OptOp::UNROLL, 0, 2});
  EXPECT_EQ(kern.applied().size(), 1u);
  Schedule e = create_schedule({(Tensor::ones({4, 4}) + Tensor::ones({4, 4})).node()});
  EXPECT_EQ(Kernel(e.items[0].ast).name(), "E_16");  // contiguous axes merge
}

TEST(Lowerer, ReduceOfALoopInvariantValueAccumulatesEveryIteration) {
  EXPECT_EQ(run<float>(Tensor::full({5}, 2.0f).sum()), (std::vector<float>{10}));
  EXPECT_EQ(run<float>(Tensor::full({3, 4}, 1.0f).sum(1)), (std::vector<float>{4, 4, 4}));
}

TEST(Lowerer, EmptyReduceGivesTheIdentity) {
  EXPECT_EQ(run<float>(Tensor::zeros({0}).sum()), (std::vector<float>{0}));
  EXPECT_EQ(run<float>(Tensor::zeros({2, 0}).sum(1)), (std::vector<float>{0, 0}));
}

// A kernel over a symbolic size has a grid for the variable's maximum and says how many
// workgroups a binding needs: a launch at n = 300 of n <= 100000 covers 300 elements, not 100000.
TEST(Lowerer, SymbolicGridNeedsOnlyTheBindingsWorkgroups) {
  const Variable n("n", 1, 100000);
  const Tensor x = Tensor(iota_f(300), {300}).reshape({n.bind(300)}) * 2;
  Schedule s = create_schedule({x.node()});
  ASSERT_EQ(s.items.size(), 1u);
  Kernel k(s.items[0].ast);
  ASSERT_TRUE(k.symbolic());
  const Program p = lower(k, {300, 300});
  ASSERT_TRUE(p.groups_needed);
  const GlslTarget t = GlslTarget::everything();
  const int64_t wg = p.local_size[0];
  EXPECT_EQ(launch_dims(p, t)[0], uint32_t((100000 + wg - 1) / wg));
  EXPECT_TRUE(grid_follows_vars(p));
  for (int64_t v : {1, 300, 99999, 100000})
    EXPECT_EQ(launch_dims(p, t, std::vector<int64_t>{v})[0], uint32_t((v + wg - 1) / wg))
        << "n = " << v;
  // A grid past the device's workgroup counts is folded into lines of x, and covers the
  // binding's workgroups the same way.
  GlslTarget small = t;
  small.max_workgroup_count = {16, 16, 16};
  const uint32_t groups_at_max = uint32_t((100000 + wg - 1) / wg);
  ASSERT_GT(groups_at_max, 16u);
  EXPECT_EQ(launch_dims(p, small, std::vector<int64_t>{1}), (std::array<uint32_t, 3>{1, 1, 1}));
  EXPECT_EQ(launch_dims(p, small, std::vector<int64_t>{17 * wg}),
            (std::array<uint32_t, 3>{16, 2, 1}));
  const uint32_t rows = (groups_at_max + 15) / 16, lines = std::min(rows, 16u);
  EXPECT_EQ(launch_dims(p, small, std::vector<int64_t>{100000}),
            (std::array<uint32_t, 3>{16, lines, (rows + lines - 1) / lines}));
  // A plain kernel's grid is its own.
  const Tensor y = Tensor(iota_f(300), {300}) * 2;
  Kernel plain(create_schedule({y.node()}).items[0].ast);
  const Program q = lower(plain, {300, 300});
  EXPECT_FALSE(q.groups_needed);
  EXPECT_FALSE(grid_follows_vars(q));
}
