// Kernel opts on kernels over symbolic sizes: LOCAL on a symbolic axis (its last workgroup
// guarded), UPCAST and UNROLL on axes of plain size, alone and together. Each kernel is lowered
// once and run for several values of its variable, on Vulkan and on the CPU interpreter from the
// same inputs, compared element by element and with a closed form.
#include <gtest/gtest.h>

#include <functional>

#include <vkgrad/codegen/get_program.hpp>
#include <vkgrad/codegen/heuristics.hpp>
#include <vkgrad/codegen/kernel.hpp>
#include <vkgrad/codegen/lowerer.hpp>
#include <vkgrad/core/error.hpp>
#include <vkgrad/core/schedule.hpp>
#include <vkgrad/core/tensor.hpp>
#include <vkgrad/core/variable.hpp>

#include "support/kernel_agree.hpp"

namespace vkg::test {
namespace {

using O = OptOp;

const Variable vn("n", 1, 13);

// Small integers as floats: every sum is exact in any order.
std::vector<float> ints(int64_t count, int seed) {
  std::vector<float> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[size_t(i)] = float((i * 5 + seed * 3) % 11 - 5);
  return v;
}

class SymbolicOpts : public Kernels {
 protected:
  // For each n: the single kernel of build(n)'s schedule with `opts` applied runs on both sides
  // and its output equals closed(n). The kernel is the same AST for every n: it is lowered with
  // the first n's buffers and run for all of them, as a compiled symbolic kernel is.
  void check(const std::function<Tensor(int64_t)>& build, const std::vector<Opt>& opts,
             const std::function<std::vector<float>(int64_t)>& closed,
             const std::vector<int64_t>& ns = {1, 3, 4, 5, 8, 13}) {
    std::optional<Program> program;
    UOpPtr ast;  // held: a freed node's address may come back for another
    for (int64_t n : ns) {
      SCOPED_TRACE("n = " + std::to_string(n));
      const Schedule s = create_schedule({build(n).node()});
      ASSERT_EQ(s.items.size(), 1u);
      const ScheduleItem& item = s.items[0];
      if (!program) {
        Kernel k(item.ast);
        ASSERT_TRUE(k.symbolic());
        for (const Opt& o : opts) k.apply(o);
        std::vector<int64_t> counts;
        for (const auto& b : item.buffers) counts.push_back(b->count());
        program = lower(k, counts);
        ast = item.ast;
        describe_ = k.describe();
      }
      SCOPED_TRACE(describe_);
      ASSERT_EQ(item.ast, ast) << "a new binding built another kernel";
      std::vector<Bytes> buffers;
      for (const auto& b : item.buffers)
        buffers.push_back(b->initial_data ? *b->initial_data : Bytes(b->nbytes()));
      const std::vector<Bytes> out = expect_agree(*program, buffers, 0, var_values(*program, item));
      EXPECT_EQ(from_bytes<float>(out[0]), closed(n));
    }
  }
  std::string describe_;
};

// x + 1 over (3, n): LOCAL 4 on n leaves a partial last workgroup for most n.
TEST_F(SymbolicOpts, LocalOnASymbolicAxisGuardsItsLastWorkgroup) {
  auto build = [](int64_t n) {
    return Tensor(ints(3 * n, 0), {3, n}).reshape({3, vn.bind(n)}) + 1;
  };
  auto closed = [](int64_t n) {
    std::vector<float> v = ints(3 * n, 0);
    for (float& x : v) x += 1;
    return v;
  };
  check(build, {{O::LOCAL, 1, 4}}, closed);
  check(build, {{O::LOCAL, 1, 16}}, closed);  // more than the maximum: one partial workgroup
  check(build, {{O::LOCAL, 0, 3}, {O::LOCAL, 1, 2}}, closed);
}

// x * 2 over (n, 8): UPCAST 4 on the plain axis (vector loads and stores), alone and under a
// LOCAL split of the symbolic one.
TEST_F(SymbolicOpts, UpcastOnAPlainAxis) {
  auto build = [](int64_t n) {
    return Tensor(ints(n * 8, 1), {n, 8}).reshape({vn.bind(n), 8}) * 2;
  };
  auto closed = [](int64_t n) {
    std::vector<float> v = ints(n * 8, 1);
    for (float& x : v) x *= 2;
    return v;
  };
  check(build, {{O::UPCAST, 1, 4}}, closed);
  check(build, {{O::UPCAST, 1, 8}}, closed);
  check(build, {{O::LOCAL, 0, 4}, {O::UPCAST, 1, 4}}, closed);
}

// Sums of (n, 8) along the plain axis: UNROLL 4 of the reduce; and sums of (4, n) along the
// symbolic axis (a loop to n) with the plain output axis upcast.
TEST_F(SymbolicOpts, UnrollAPlainReduceAndUpcastOverASymbolicOne) {
  check(
      [](int64_t n) {
        return Tensor(ints(n * 8, 2), {n, 8}).reshape({vn.bind(n), 8}).sum(1);
      },
      {{O::UNROLL, 1, 4}, {O::LOCAL, 0, 2}},
      [](int64_t n) {
        const std::vector<float> x = ints(n * 8, 2);
        std::vector<float> out(size_t(n), 0);
        for (int64_t r = 0; r < n; ++r)
          for (int64_t c = 0; c < 8; ++c) out[size_t(r)] += x[size_t(r * 8 + c)];
        return out;
      });
  check(
      [](int64_t n) {
        return Tensor(ints(4 * n, 3), {4, n}).reshape({4, vn.bind(n)}).sum(1);
      },
      {{O::UPCAST, 0, 4}},
      [](int64_t n) {
        const std::vector<float> x = ints(4 * n, 3);
        std::vector<float> out(4, 0);
        for (int64_t r = 0; r < 4; ++r)
          for (int64_t c = 0; c < n; ++c) out[size_t(r)] += x[size_t(r * n + c)];
        return out;
      });
}

// (n, 8) @ (8, 4): a register tile on the plain axes (UPCAST n by 4, UNROLL k by 4) and LOCAL
// on the symbolic rows.
TEST_F(SymbolicOpts, MatmulTileWithSymbolicRows) {
  const std::vector<float> w = ints(8 * 4, 4);
  check(
      [&](int64_t n) {
        return Tensor(ints(n * 8, 5), {n, 8}).reshape({vn.bind(n), 8}).dot(Tensor(w, {8, 4}));
      },
      {{O::UPCAST, 1, 4}, {O::UNROLL, 2, 4}, {O::LOCAL, 0, 4}},
      [&](int64_t n) {
        const std::vector<float> a = ints(n * 8, 5);
        std::vector<float> c(size_t(n * 4), 0);
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < 4; ++j)
            for (int64_t q = 0; q < 8; ++q)
              c[size_t(i * 4 + j)] += a[size_t(i * 8 + q)] * w[size_t(q * 4 + j)];
        return c;
      });
}

// What a symbolic kernel cannot take is a clear error that leaves it as it was.
TEST_F(SymbolicOpts, OptsThatNeedPlainSizesAreErrors) {
  const Tensor t = Tensor(ints(3 * 5, 0), {3, 5}).reshape({3, vn.bind(5)}) + 1;
  Kernel k(create_schedule({t.node()}).items[0].ast);
  const std::string before = k.describe();
  auto error = [&](const Opt& o) {
    try {
      k.apply(o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error({O::UPCAST, 1, 2}).find("symbolic size"), std::string::npos);
  EXPECT_NE(error({O::UPCAST, 0, 2}).find("does not divide"), std::string::npos);
  EXPECT_NE(error({O::SHUFFLE, 0, 3}).find("LOCAL, UPCAST and UNROLL only"), std::string::npos);
  EXPECT_EQ(k.describe(), before);
}

// The heuristics' choices for symbolic kernels, which the devices compile by default.
TEST_F(SymbolicOpts, HeuristicsUpcastAndUnrollPlainAxes) {
  const Tensor e = Tensor(ints(13 * 1024, 0), {13, 1024}).reshape({vn.bind(13), 1024}) + 1;
  Kernel ke(create_schedule({e.node()}).items[0].ast);
  apply_symbolic_heuristics(ke, DeviceTraits{});
  EXPECT_EQ(ke.applied(), (std::vector<Opt>{{O::UPCAST, 1, 4}})) << ke.describe();
  const Tensor r = Tensor(ints(13 * 16, 0), {13, 16}).reshape({vn.bind(13), 16}).sum(1);
  Kernel kr(create_schedule({r.node()}).items[0].ast);
  apply_symbolic_heuristics(kr, DeviceTraits{});
  EXPECT_EQ(kr.applied(), (std::vector<Opt>{{O::UNROLL, 1, 4}})) << kr.describe();
}

}  // namespace
}  // namespace vkg::test
