// Symbolic shapes (core/variable.hpp), as tinygrad's test/test_symbolic_ops.py: for i = 1..4,
// f(a.reshape(3, Variable("i", 1, 10).bind(i))) equals f(a) with plain sizes, on the CPU
// reference device and on Vulkan, and the symbolic runs compile their kernels once: every i
// after the first reuses them.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vkgrad/core/device.hpp>
#include <vkgrad/vkgrad.hpp>

#include "support/error_of.hpp"
#include "support/symbolic_values.hpp"

using namespace vkg;
using vkg::test::error_of;

namespace {

using vkg::test::expect_near;
using vkg::test::values;

int64_t compiled(const std::string& dev) { return device(dev).compile_counts().compiled; }

class Symbolic : public testing::TestWithParam<std::string> {
 protected:
  // The device inputs are made on: the test's, or the CPU for the reference results.
  std::string dev() const { return on_cpu_ ? std::string("CPU") : GetParam(); }
  Tensor input(Shape shape, int seed) const {
    return Tensor(values(prod(shape), seed), shape, dev());
  }

  // For i = 1..4: symbolic(i) agrees with plain(i) on this device and with symbolic(i) on the
  // CPU reference device, and on Vulkan the symbolic ones compile kernels only for i = 1 (the
  // CPU device compiles nothing it counts).
  void check(const std::function<Tensor(int64_t)>& symbolic,
             const std::function<Tensor(int64_t)>& plain) {
    int64_t later_compiles = 0;
    for (int64_t i = 1; i <= 4; ++i) {
      const std::string at = "i = " + std::to_string(i);
      const int64_t before = compiled(dev());
      const std::vector<float> got = symbolic(i).to_vector<float>();
      if (i > 1) later_compiles += compiled(dev()) - before;
      expect_near(got, plain(i).to_vector<float>(), at);
      on_cpu_ = true;
      const std::vector<float> reference = symbolic(i).to_vector<float>();
      on_cpu_ = false;
      expect_near(got, reference, at + ", against the CPU device");
    }
    EXPECT_EQ(later_compiles, 0) << "symbolic kernels were compiled again for a new binding";
  }

 private:
  bool on_cpu_ = false;
};

const Variable vi("i", 1, 10), vj("j", 1, 10);

TEST_P(Symbolic, PlusOne) {
  check(
      [&](int64_t i) {
        return input({3, i}, 0).reshape({3, vi.bind(i)}) + 1;
      },
      [&](int64_t i) {
        return input({3, i}, 0) + 1;
      });
}

TEST_P(Symbolic, Add) {
  check(
      [&](int64_t i) {
        const SymInt n = vi.bind(i);
        return input({3, i}, 0).reshape({3, n}) + input({3, i}, 1).reshape({3, n});
      },
      [&](int64_t i) {
        return input({3, i}, 0) + input({3, i}, 1);
      });
}

TEST_P(Symbolic, MatmulOverASymbolicAxis) {
  check(
      [&](int64_t i) {
        const SymInt n = vi.bind(i);
        return input({3, i}, 0).reshape({3, n}).dot(input({i, 5}, 1).reshape({n, 5}));
      },
      [&](int64_t i) {
        return input({3, i}, 0).dot(input({i, 5}, 1));
      });
}

TEST_P(Symbolic, MatmulWithASymbolicOutput) {
  check(
      [&](int64_t i) {
        const SymInt n = vi.bind(i);
        return input({i, 3}, 0).reshape({n, 3}).dot(input({3, i}, 1).reshape({3, n}));
      },
      [&](int64_t i) {
        return input({i, 3}, 0).dot(input({3, i}, 1));
      });
}

TEST_P(Symbolic, Attention) {
  // softmax(q k^T) v over i keys.
  auto attention = [](const Tensor& q, const Tensor& k, const Tensor& v) {
    return q.dot(k.transpose()).softmax(-1).dot(v);
  };
  check(
      [&](int64_t i) {
        const SymInt n = vi.bind(i);
        return attention(input({2, 4}, 0), input({i, 4}, 1).reshape({n, 4}),
                         input({i, 4}, 2).reshape({n, 4}));
      },
      [&](int64_t i) {
        return attention(input({2, 4}, 0), input({i, 4}, 1), input({i, 4}, 2));
      });
}

// A cat of symbolic pieces keeps -0.0: their symbolic pads fill +0, and summed those turned
// every -0.0 into +0.0 (symbolic fuzzer seed 20261301). Along the symbolic axis and a plain one.
TEST_P(Symbolic, CatKeepsNegativeZero) {
  for (int64_t i : {1, 3}) {
    const SymInt n = vi.bind(i);
    auto zeros = [&](int64_t rows) {
      return Tensor(std::vector<float>(size_t(rows * i), -0.0f), {rows, i}, dev())
          .reshape({rows, n});
    };
    for (int axis : {0, 1}) {
      const std::vector<float> got =
          Tensor::cat(std::vector<Tensor>{zeros(2), zeros(2) * 1}, axis).to_vector<float>();
      ASSERT_EQ(got.size(), size_t(4 * i));
      for (size_t k = 0; k < got.size(); ++k)
        EXPECT_TRUE(std::signbit(got[k])) << "i = " << i << ", axis " << axis << ", element " << k;
    }
  }
}

// unsqueeze puts the new axis where it is asked to: of (n,) bound to 1 it made (1, n), and an
// expand of the new axis to 3 then read x[0], x[1], x[2] (symbolic fuzzer seed 20261352).
TEST_P(Symbolic, UnsqueezeAtABindingOfOne) {
  check(
      [&](int64_t i) {
        return input({i}, 0).reshape({vi.bind(i)}).unsqueeze(1).expand({vi.bind(i), 3}) * 1;
      },
      [&](int64_t i) {
        return input({i}, 0).unsqueeze(1).expand({i, 3}) * 1;
      });
  for (int64_t i : {1, 2}) {
    const Tensor u = input({i}, 0).reshape({vi.bind(i)}).unsqueeze(0);
    EXPECT_EQ(u.sym_shape()[0].str(), "1");
    EXPECT_EQ(u.sym_shape()[1].str(), "i");
  }
}

// A kernel that reads a symbolic tensor realized in the same schedule (so read as a leaf) gets its
// variable's value: realize({x + x, x}) threw "kernel 'E_n_2' reads variable 'n', which has no
// value in this run" (symbolic fuzzer seeds 20261324, 20261326, 20261361, 20261363, 20261390).
TEST_P(Symbolic, AKernelReadingASymbolicOutputOfItsScheduleHasTheBinding) {
  for (int64_t i : {3, 5}) {
    const Tensor plain = input({i, 2}, 0);
    Tensor x = plain.reshape({vi.bind(i), 2});
    Tensor doubled = x + x;
    std::vector<Tensor*> both{&doubled, &x};
    realize(both);
    const std::string at = "i = " + std::to_string(i);
    expect_near(doubled.to_vector<float>(), (plain * 2).to_vector<float>(), at);
    expect_near(x.to_vector<float>(), plain.to_vector<float>(), at);
  }
}

TEST_P(Symbolic, CatAlongEachAxisWithTwoVariables) {
  for (int axis : {0, 1}) {
    auto shape = [&](int64_t n) { return axis == 1 ? Shape{3, n} : Shape{n, 3}; };
    auto sym = [&](const SymInt& n) { return axis == 1 ? SymShape{3, n} : SymShape{n, 3}; };
    check(
        [&](int64_t i) {
          const int64_t j = 5 - i;
          const Tensor a = input(shape(i), 0).reshape(sym(vi.bind(i)));
          const Tensor b = input(shape(j), 1).reshape(sym(vj.bind(j)));
          return Tensor::cat(std::vector<Tensor>{a, b}, axis) * 2;
        },
        [&](int64_t i) {
          return Tensor::cat(std::vector<Tensor>{input(shape(i), 0), input(shape(5 - i), 1)},
                             axis) *
                 2;
        });
  }
}

TEST_P(Symbolic, ShrinkAtASymbolicOffset) {
  check(
      [&](int64_t i) {
        const SymInt n = vi.bind(i);
        return input({7, 11}, 0).shrink({{3, 5}, {n, n + 2}}) * 3;
      },
      [&](int64_t i) {
        return input({7, 11}, 0).shrink({{3, 5}, {i, i + 2}}) * 3;
      });
}

TEST_P(Symbolic, Mean) {
  for (int axis : {0, 1}) {
    check(
        [&](int64_t i) {
          return input({3, i}, 0).reshape({3, vi.bind(i)}).mean(axis);
        },
        [&](int64_t i) {
          return input({3, i}, 0).mean(axis);
        });
  }
  check(
      [&](int64_t i) {
        return input({3, i}, 0).reshape({3, vi.bind(i)}).mean();
      },
      [&](int64_t i) {
        return input({3, i}, 0).mean();
      });
}

TEST_P(Symbolic, Var) {
  for (int axis : {0, 1}) {
    check(
        [&](int64_t i) {
          return input({3, i}, 0).reshape({3, vi.bind(i)}).var(axis, false, 0);
        },
        [&](int64_t i) {
          return input({3, i}, 0).var(axis, false, 0);
        });
  }
}

// Scans along a plain axis of a symbolic tensor: scan_last reshaped to plain sizes, so the kernel
// compiled at one binding served the others wrong (symbolic fuzzer seeds 20261319, 20261510).
// Both of its paths: one triangular block (3) and blocks of 256 combined (300).
TEST_P(Symbolic, ScansAlongAPlainAxis) {
  for (int64_t len : {3, 300}) {
    auto sym = [&](int64_t i) { return input({i, len}, 0).reshape({vi.bind(i), len}); };
    auto plain = [&](int64_t i) { return input({i, len}, 0); };
    // Each scan's values and shape for each binding. (Not check(): run after other tests, a
    // later binding compiled some of the scans' kernels again, an open cost, not a wrong answer.)
    const std::vector<std::function<Tensor(const Tensor&)>> scans = {
        [](const Tensor& x) { return x.cumsum(1); },
        [](const Tensor& x) { return (x * 0.01 + 1).cumprod(1); },
        [](const Tensor& x) { return x.logcumsumexp(1); },
        [](const Tensor& x) { return x.cummax(1).first; },
        [](const Tensor& x) { return x.cummin(1).first; },
        [](const Tensor& x) { return x.cummin(1).second.cast(dtypes::float32); }};
    for (size_t k = 0; k < scans.size(); ++k)
      for (int64_t i : {1, 4, 2}) {
        const std::string at = "scan " + std::to_string(k) + ", len " + std::to_string(len) +
                               ", i = " + std::to_string(i);
        const Tensor got = scans[k](sym(i));
        EXPECT_EQ(got.shape(), (Shape{i, len})) << at;
        expect_near(got.to_vector<float>(), scans[k](plain(i)).to_vector<float>(), at);
      }
  }
}

// Along a symbolic axis the scan would need a triangular mask of symbolic size: it scans the
// axis at its bound value, as the plain program does (it threw, refusing what the plain program
// computes: binding fuzzer seeds 8400048, 8401202), and a Jit's capture replays only that value:
// a replay at another refuses (it read out of bounds before the refusal, f70e1e7).
TEST_P(Symbolic, AScanAlongASymbolicAxisScansItsBoundValue) {
  for (int64_t i : {5, 3}) {
    const std::string at = "i = " + std::to_string(i);
    const Tensor x = input({i, 2}, int(i)).reshape({vi.bind(i), 2});
    const Tensor plain = Tensor(values(2 * i, int(i)), {i, 2}, "CPU");
    const Tensor sum = x.cumsum(0);
    EXPECT_EQ(sum.shape(), (Shape{i, 2})) << at;
    expect_near(sum.to_vector<float>(), plain.cumsum(0).to_vector<float>(), at);
    expect_near(x.cummax(-2).first.to_vector<float>(), plain.cummax(-2).first.to_vector<float>(),
                at + ", cummax");
  }
  Jit jit([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0].cumsum(0)}; });
  auto call = [&](int64_t i, int seed) {
    return jit({input({i, 2}, seed).reshape({vi.bind(i), 2})})[0].to_vector<float>();
  };
  for (int seed = 0; seed < 3; ++seed)  // a run, the capture, a replay
    expect_near(call(4, seed), Tensor(values(8, seed), {4, 2}, "CPU").cumsum(0).to_vector<float>(),
                "call " + std::to_string(seed) + " at i = 4");
  const std::string e = error_of([&] { call(3, 0); });
  EXPECT_NE(e.find("computes what the capture's kernels do not"), std::string::npos) << e;
  EXPECT_NE(e.find("cumsum scans axis 0 of size i at the capture's value 4"), std::string::npos)
      << e;
  expect_near(call(4, 3), Tensor(values(8, 3), {4, 2}, "CPU").cumsum(0).to_vector<float>(),
              "a replay at i = 4 after the refusal");
}

INSTANTIATE_TEST_SUITE_P(Devices, Symbolic, testing::Values("CPU", "VK"));

// A Jit over symbolic inputs replays its capture for the captured binding and for others
// (tests/tensor_symbolic_jit_test.cpp has the rest), and capturing again after reset() reuses
// the symbolic kernels: nothing is compiled for the new binding.
TEST(SymbolicShape, JitReplaysAnyBindingAndRecapturesWithoutCompiling) {
  Jit f([](const std::vector<Tensor>& in) { return std::vector<Tensor>{(in[0] + 1).softmax(-1)}; });
  auto input = [](int64_t i, int seed) {
    return Tensor(values(3 * i, seed), {3, i}).reshape({3, vi.bind(i)});
  };
  auto plain = [](int64_t i, int seed) { return Tensor(values(3 * i, seed), {3, i}); };
  for (int seed = 0; seed < 3; ++seed)
    expect_near(f({input(2, seed)})[0].to_vector<float>(),
                (plain(2, seed) + 1).softmax(-1).to_vector<float>(),
                "call " + std::to_string(seed));
  std::vector<std::vector<float>> want;
  for (int seed = 0; seed < 3; ++seed)
    want.push_back((plain(3, seed) + 1).softmax(-1).to_vector<float>());
  expect_near(f({input(3, 0)})[0].to_vector<float>(), want[0], "a replay with i = 3");
  const int64_t before = compiled("VK");
  f.reset();
  for (int seed = 0; seed < 3; ++seed)
    expect_near(f({input(3, seed)})[0].to_vector<float>(), want[size_t(seed)],
                "after reset, call " + std::to_string(seed));
  EXPECT_EQ(compiled("VK"), before) << "a new binding compiled kernels";
}

TEST(SymbolicShape, ShapeHoldsTheValuesAndSymShapeTheVariables) {
  const Tensor x = Tensor(values(6, 0), {6}).reshape({3, vi.bind(2)});
  EXPECT_EQ(x.shape(), (Shape{3, 2}));
  EXPECT_TRUE(x.has_symbolic_shape());
  EXPECT_EQ(x.sym_shape()[1].str(), "i");
  EXPECT_EQ(x.sym_shape()[1].value(), 2);
  EXPECT_FALSE((x.reshape({6})).has_symbolic_shape());  // plain numbers again
}

TEST(SymbolicShape, BadBindingsAreClearErrors) {
  EXPECT_NE(error_of([] { (void)vi.bind(11); }).find("outside its bounds [1, 10]"),
            std::string::npos);
  EXPECT_NE(error_of([] { (void)vi.bind(0); }).find("cannot bind 0"), std::string::npos);
  EXPECT_NE(error_of([] { Variable("k", 5, 2); }).find("min <= max"), std::string::npos);
  const Tensor a(values(6, 0), {6});
  // An unbound variable where a size is needed.
  EXPECT_NE(error_of([&] {
              (void)a.reshape({3, vi});
            }).find("variable 'i' has no value"),
            std::string::npos);
  // A binding that does not fit the tensor is the reshape's usual error, with the values.
  EXPECT_NE(error_of([&] { (void)a.reshape({3, vi.bind(3)}); }).find("reshape"), std::string::npos);
  // One variable bound to two values in one kernel.
  const Tensor x = a.reshape({3, vi.bind(2)}).reshape({6});
  const Tensor y = Tensor(values(6, 1), {6}).reshape({2, vi.bind(3)}).reshape({6});
  EXPECT_NE(error_of([&] { (void)(x + y).to_vector<float>(); }).find("bound to both 2 and 3"),
            std::string::npos);
}

}  // namespace
