// vkg::Jit over inputs of symbolic size, as tinygrad's test/test_symbolic_jit.py: the second call
// captures, and every later call replays that capture with the variables bound to new values,
// without tracing, scheduling, compiling or recording; each result equals the function run
// eagerly on tensors of plain sizes, and has the shape of the call's binding.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vkgrad/core/counters.hpp>
#include <vkgrad/core/device.hpp>
#include <vkgrad/vkgrad.hpp>

#include "support/error_of.hpp"
#include "support/symbolic_values.hpp"

using namespace vkg;
using vkg::test::error_of;

namespace {

using vkg::test::expect_near;
using vkg::test::values;

const Variable vi("i", 1, 10), vj("j", 1, 10);

using Body = std::function<Tensor(const std::vector<Tensor>&)>;

class SymbolicJit : public testing::TestWithParam<std::string> {
 protected:
  std::string dev() const { return GetParam(); }
  Tensor input(Shape shape, int seed) const {
    return Tensor(values(prod(shape), seed), shape, dev());
  }
  int64_t compiled() const { return device(dev()).compile_counts().compiled; }
  Tensor input_of(int64_t n) const { return input({3, n}, 0); }

  // Calls a Jit of `body` with symbolic(i) for each i of `order` (the first call runs the body,
  // the second captures it, the rest replay with new bindings). Each result has plain(i)'s shape
  // and values, where plain(i) is the body run eagerly on the same data with plain sizes; the
  // body runs twice; a replay schedules and compiles nothing.
  void check(const Body& body, const std::function<std::vector<Tensor>(int64_t)>& symbolic,
             const std::function<std::vector<Tensor>(int64_t)>& plain,
             const std::vector<int64_t>& order = {1, 2, 3, 4, 10, 2}) {
    int runs = 0;
    Jit jit([&](const std::vector<Tensor>& in) {
      ++runs;
      return std::vector<Tensor>{body(in)};
    });
    for (size_t call = 0; call < order.size(); ++call) {
      const int64_t i = order[call];
      const std::string at = "call " + std::to_string(call) + ", i = " + std::to_string(i);
      std::vector<Tensor> in = symbolic(i);
      // Every other replay takes inputs already on the device (copied in there, where host data
      // is uploaded straight into the captured buffers).
      if (call % 2 == 1)
        for (Tensor& t : in) t.realize();
      const GlobalCounters before = global_counters();
      const int64_t compiled_before = compiled();
      const Tensor got = jit(in)[0];
      if (call >= 2) {
        EXPECT_EQ(global_counters().schedules, before.schedules) << at << ": a replay scheduled";
        EXPECT_EQ(global_counters().replays, before.replays + 1) << at;
        EXPECT_EQ(compiled(), compiled_before) << at << ": a replay compiled a kernel";
      }
      const Tensor want = body(plain(i));
      EXPECT_EQ(got.shape(), want.shape()) << at;
      expect_near(got.to_vector<float>(), want.to_vector<float>(), at);
    }
    EXPECT_EQ(runs, 2);
  }
};

TEST_P(SymbolicJit, PlusOne) {
  check([](const std::vector<Tensor>& in) { return in[0] + 1; },
        [&](int64_t i) {
          return std::vector<Tensor>{input({3, i}, 0).reshape({3, vi.bind(i)})};
        },
        [&](int64_t i) {
          return std::vector<Tensor>{input({3, i}, 0)};
        });
}

TEST_P(SymbolicJit, Add) {
  check([](const std::vector<Tensor>& in) { return in[0] + in[1]; },
        [&](int64_t i) {
          const SymInt n = vi.bind(i);
          return std::vector<Tensor>{input({3, i}, 0).reshape({3, n}),
                                     input({3, i}, 1).reshape({3, n})};
        },
        [&](int64_t i) {
          return std::vector<Tensor>{input({3, i}, 0), input({3, i}, 1)};
        });
}

TEST_P(SymbolicJit, MatmulOverASymbolicAxis) {
  check([](const std::vector<Tensor>& in) { return in[0].dot(in[1]); },
        [&](int64_t i) {
          const SymInt n = vi.bind(i);
          return std::vector<Tensor>{input({3, i}, 0).reshape({3, n}),
                                     input({i, 5}, 1).reshape({n, 5})};
        },
        [&](int64_t i) {
          return std::vector<Tensor>{input({3, i}, 0), input({i, 5}, 1)};
        });
}

TEST_P(SymbolicJit, MatmulWithASymbolicOutput) {
  check([](const std::vector<Tensor>& in) { return in[0].dot(in[1]); },
        [&](int64_t i) {
          const SymInt n = vi.bind(i);
          return std::vector<Tensor>{input({i, 3}, 0).reshape({n, 3}),
                                     input({3, i}, 1).reshape({3, n})};
        },
        [&](int64_t i) {
          return std::vector<Tensor>{input({i, 3}, 0), input({3, i}, 1)};
        });
}

TEST_P(SymbolicJit, Attention) {
  // softmax(q k^T) v over i keys.
  check(
      [](const std::vector<Tensor>& in) {
        return in[0].dot(in[1].transpose()).softmax(-1).dot(in[2]);
      },
      [&](int64_t i) {
        const SymInt n = vi.bind(i);
        return std::vector<Tensor>{input({2, 4}, 0), input({i, 4}, 1).reshape({n, 4}),
                                   input({i, 4}, 2).reshape({n, 4})};
      },
      [&](int64_t i) {
        return std::vector<Tensor>{input({2, 4}, 0), input({i, 4}, 1), input({i, 4}, 2)};
      });
}

TEST_P(SymbolicJit, CatAlongEachAxisWithTwoVariables) {
  for (int axis : {0, 1}) {
    auto shape = [&](int64_t n) { return axis == 1 ? Shape{3, n} : Shape{n, 3}; };
    auto sym = [&](const SymInt& n) { return axis == 1 ? SymShape{3, n} : SymShape{n, 3}; };
    // j = i + 1: both sizes change from call to call, and so does their sum.
    check([&](const std::vector<Tensor>& in) { return Tensor::cat(in, axis) * 2; },
          [&](int64_t i) {
            return std::vector<Tensor>{input(shape(i), 0).reshape(sym(vi.bind(i))),
                                       input(shape(i + 1), 1).reshape(sym(vj.bind(i + 1)))};
          },
          [&](int64_t i) {
            return std::vector<Tensor>{input(shape(i), 0), input(shape(i + 1), 1)};
          },
          {1, 2, 3, 4, 9, 2});
  }
}

// The input is a window at a symbolic offset: plain sizes, contents chosen by the binding.
TEST_P(SymbolicJit, ShrinkAtASymbolicOffset) {
  check([](const std::vector<Tensor>& in) { return in[0] * 3; },
        [&](int64_t i) {
          const SymInt n = vi.bind(i);
          // Realized here: the window's copy is the eager kernel, not the replay's.
          return std::vector<Tensor>{input({7, 11}, 0).shrink({{3, 5}, {n, n + 2}}).realize()};
        },
        [&](int64_t i) {
          return std::vector<Tensor>{input({7, 11}, 0).shrink({{3, 5}, {i, i + 2}})};
        },
        {1, 2, 3, 4, 9, 2});
}

// Mean over axis 0 has a symbolic output (i); over axis 1 and over all, plain ones whose values
// divide by the binding.
TEST_P(SymbolicJit, Mean) {
  auto symbolic = [&](int64_t i) {
    return std::vector<Tensor>{input({3, i}, 0).reshape({3, vi.bind(i)})};
  };
  auto plain = [&](int64_t i) { return std::vector<Tensor>{input({3, i}, 0)}; };
  for (int axis : {0, 1})
    check([axis](const std::vector<Tensor>& in) { return in[0].mean(axis); }, symbolic, plain);
  check([](const std::vector<Tensor>& in) { return in[0].mean(); }, symbolic, plain);
}

TEST_P(SymbolicJit, Var) {
  auto symbolic = [&](int64_t i) {
    return std::vector<Tensor>{input({3, i}, 0).reshape({3, vi.bind(i)})};
  };
  auto plain = [&](int64_t i) { return std::vector<Tensor>{input({3, i}, 0)}; };
  for (int axis : {0, 1})
    check([axis](const std::vector<Tensor>& in) { return in[0].var(axis, false, 0); }, symbolic,
          plain);
}

// A variable with a large maximum: the grid of each replay follows its binding (Vulkan reads
// the workgroup counts a replay writes, vkCmdDispatchIndirect), across many workgroups, up to
// the maximum and back down.
TEST_P(SymbolicJit, GridsFollowTheBindingAcrossWorkgroups) {
  const Variable n("n", 1, 70000);
  auto data = [](int64_t len) {
    std::vector<float> v(size_t(len * 2));
    for (size_t k = 0; k < v.size(); ++k) v[k] = float(k % 1000) - 500.0f;
    return v;
  };
  Jit f([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0] * 2 + 1, in[0].sum(1)};
  });
  for (int64_t len : {1000, 257, 70000, 3, 40000, 1}) {
    const std::vector<float> host = data(len);
    const std::vector<Tensor> out = f({Tensor(host, {len, 2}, dev()).reshape({n.bind(len), 2})});
    ASSERT_EQ(out[0].shape(), (Shape{len, 2}));
    const std::vector<float> doubled = out[0].to_vector<float>(), sums = out[1].to_vector<float>();
    for (size_t k = 0; k < host.size(); ++k)
      ASSERT_EQ(doubled[k], host[k] * 2 + 1) << "len " << len << " at " << k;
    for (size_t r = 0; r < size_t(len); ++r)
      ASSERT_EQ(sums[r], host[2 * r] + host[2 * r + 1]) << "len " << len << " at " << r;
  }
}

// Shapes big enough for the heuristics' opts on symbolic kernels (codegen/heuristics.hpp): the
// elementwise kernel upcasts its plain axis by 4, the reduce unrolls it by 4.
TEST_P(SymbolicJit, KernelsWithOptsOnTheirPlainAxes) {
  const Variable rows("rows", 1, 100);
  auto symbolic = [&](int64_t i) {
    return std::vector<Tensor>{input({i, 64}, 0).reshape({rows.bind(i), 64})};
  };
  auto plain = [&](int64_t i) { return std::vector<Tensor>{input({i, 64}, 0)}; };
  const std::vector<int64_t> order{3, 50, 100, 7, 1};
  check([](const std::vector<Tensor>& in) { return in[0] * 2 + 1; }, symbolic, plain, order);
  check([](const std::vector<Tensor>& in) { return (in[0] * 2 + 1).sum(1); }, symbolic, plain,
        order);
}

// A cat along a plain axis pads each part's view along it: the heuristics' upcast of that axis
// does not split a padded symbolic view, and is left out rather than failing the kernel.
TEST_P(SymbolicJit, OptsThatDoNotApplyAreLeftOut) {
  const Variable rows("rows", 1, 1000);
  check([](const std::vector<Tensor>& in) { return Tensor::cat(in, 1) + 1; },
        [&](int64_t i) {
          const SymInt n = rows.bind(i);
          return std::vector<Tensor>{input({i, 2}, 0).reshape({n, 2}),
                                     input({i, 2}, 1).reshape({n, 2})};
        },
        [&](int64_t i) {
          return std::vector<Tensor>{input({i, 2}, 0), input({i, 2}, 1)};
        },
        {3, 700, 1000, 5});
}

// The output of a replay is shaped by its binding: its symbolic size is still the variable, and
// graphs built on it use the replay's values.
TEST_P(SymbolicJit, OutputsCarryTheReplaysBinding) {
  Jit f([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * 2}; });
  for (int64_t i : {2, 3}) (void)f({input({3, i}, 0).reshape({3, vi.bind(i)})})[0].realize();
  const Tensor out = f({input({3, 7}, 1).reshape({3, vi.bind(7)})})[0];
  EXPECT_EQ(out.shape(), (Shape{3, 7}));
  ASSERT_TRUE(out.has_symbolic_shape());
  EXPECT_EQ(out.sym_shape()[1].str(), "i");
  EXPECT_EQ(out.sym_shape()[1].value(), 7);
  expect_near((out + 1).sum(1).to_vector<float>(),
              ((input({3, 7}, 1) * 2 + 1).sum(1)).to_vector<float>(), "a graph over the output");
}

// An output that is a view of the input with a symbolic argument (a shrink to n) has the shape of
// each replay's binding: it kept the captured one ((7,) where n = 10: symbolic fuzzer seed
// 20261314), and before that failed with "expected a BUFFER node, got SHRINK".
TEST_P(SymbolicJit, AnOutputThatIsASymbolicShrinkOfTheInputFollowsTheBinding) {
  Jit f([](const std::vector<Tensor>& in) {
    const SymInt n = in[0].sym_shape()[1];
    return std::vector<Tensor>{in[0].shrink({{0, 3}, {0, n}}), in[0] + 1};
  });
  for (int64_t i : {2, 7, 10, 3}) {
    const std::vector<Tensor> out = f({input({3, i}, 0).reshape({3, vi.bind(i)})});
    ASSERT_EQ(out[0].shape(), (Shape{3, i})) << "i = " << i;
    expect_near(out[0].to_vector<float>(), input({3, i}, 0).to_vector<float>(),
                "i = " + std::to_string(i));
  }
}

// The same for a shrink to n of a value the function computes (a cumsum): at the capture's
// binding n = 4 the shrink is the whole buffer, and the output was that bare buffer, so a replay
// at n = 1 returned all four elements (the binding fuzzer's seed 5400818).
TEST_P(SymbolicJit, AnOutputThatIsASymbolicShrinkOfAComputedValueFollowsTheBinding) {
  const Variable vn("n", 1, 4);
  const Tensor x = Tensor(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}, {2, 4}, dev()).realize();
  Jit f([&](const std::vector<Tensor>& in) {
    const SymInt n = in[0].sym_shape()[0];
    return std::vector<Tensor>{x.sum(0).cumsum(0).shrink({{0, n}}), in[0] + 1};
  });
  const std::vector<float> sums{6, 14, 24, 36};
  for (int64_t i : {4, 4, 4, 1, 2, 4, 3}) {
    const std::vector<Tensor> out =
        f({Tensor(std::vector<float>(size_t(i), 1.0f), {i}, dev()).reshape({vn.bind(i)})});
    ASSERT_EQ(out[0].shape(), (Shape{i})) << "n = " << i;
    EXPECT_EQ(out[0].to_vector<float>(), std::vector<float>(sums.begin(), sums.begin() + i))
        << "n = " << i;
  }
}

// An output with no elements (an empty shrink of a symbolic tensor) has the shape of each
// replay's binding too: it kept the captured one ((3, 0, 3) where n = 8: symbolic fuzzer seed
// 20261349).
TEST_P(SymbolicJit, AnOutputWithNoElementsFollowsTheBinding) {
  Jit f([](const std::vector<Tensor>& in) {
    const SymInt n = in[0].sym_shape()[1];
    return std::vector<Tensor>{in[0].reshape({3, n, 1}).shrink({{0, 3}, {0, n}, {1, 1}}) * 2,
                               in[0].shrink({{1, 1}, {0, n}}), in[0] + 1};
  });
  for (int64_t i : {2, 7, 10, 3}) {
    const std::vector<Tensor> out = f({input({3, i}, 0).reshape({3, vi.bind(i)})});
    EXPECT_EQ(out[0].shape(), (Shape{3, i, 0})) << "i = " << i;
    EXPECT_EQ(out[0].sym_shape()[1].str(), "i") << "i = " << i;
    EXPECT_EQ(out[1].shape(), (Shape{0, i})) << "i = " << i;
    EXPECT_EQ(out[0].to_vector<float>().size(), 0u);
    EXPECT_EQ(out[2].shape(), (Shape{3, i})) << "i = " << i;
  }
}

// A reduce over a plain axis of no elements is a constant of the kept axes' symbolic sizes: a
// Jit's replays gave the captured binding's shape ((9, 3) where n = 11: symbolic fuzzer seed
// 20261415, (n, 0) @ (0, 3)).
TEST_P(SymbolicJit, AReduceOfNoElementsFollowsTheBinding) {
  Jit f([&](const std::vector<Tensor>& in) {
    const Tensor none = in[0].shrink({{1, 1}, {0, in[0].sym_shape()[1]}});  // (0, i)
    return std::vector<Tensor>{
        none.transpose().matmul(Tensor::ones({0, 2}, dtypes::float32, dev())),
        none.prod(0, true) * 3, in[0] + 1};
  });
  for (int64_t i : {2, 7, 10, 3}) {
    const std::vector<Tensor> out = f({input({3, i}, 0).reshape({3, vi.bind(i)})});
    const std::string at = "i = " + std::to_string(i);
    ASSERT_EQ(out[0].shape(), (Shape{i, 2})) << at;
    EXPECT_EQ(out[0].to_vector<float>(), std::vector<float>(size_t(2 * i), 0.0f)) << at;
    ASSERT_EQ(out[1].shape(), (Shape{1, i})) << at;
    EXPECT_EQ(out[1].to_vector<float>(), std::vector<float>(size_t(i), 3.0f)) << at;
  }
}

// A value that depends on the binding but not on the inputs' data, realized by an eager call whose
// graph is still held: the capture computes it again rather than take the eager buffer, which
// holds the captured binding's value only. The replays threw where n grew ((n, 0) @ (0, 3):
// binding fuzzer seed 5401231) and gave the captured n (5) at n = 3 and 7 for the sum over n.
TEST_P(SymbolicJit, AValueAnEagerCallRealizedIsComputedAgainForEachBinding) {
  // (n, 0) @ (0, 3) is zeros of (n, 3) whatever x holds: plus 1, summed over n, it is n.
  auto ones = [&](const Tensor& x) {
    const SymInt n = x.sym_shape()[0];
    return x.shrink({{0, n}, {0, 0}}).matmul(Tensor::ones({0, 3}, dtypes::float32, dev())) + 1;
  };
  Jit f([&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ones(in[0]), ones(in[0]).sum(0)};
  });
  auto x = [&](int64_t n) { return input({n, 2}, 0).reshape({vi.bind(n), 2}); };
  for (int64_t n : {5, 5, 3, 7, 10}) {
    const std::string at = "n = " + std::to_string(n);
    Tensor eager = ones(x(n)), eager_sum = eager.sum(0);
    const Tensor graph = eager + eager_sum;  // holds the nodes the eager call realizes
    std::vector<Tensor*> both{&eager, &eager_sum};
    realize(both);
    const std::vector<Tensor> out = f({x(n)});
    ASSERT_EQ(out[0].shape(), (Shape{n, 3})) << at;
    EXPECT_EQ(out[0].to_vector<float>(), std::vector<float>(size_t(3 * n), 1.0f)) << at;
    EXPECT_EQ(out[1].to_vector<float>(), std::vector<float>(3, float(n))) << at;
  }
}

// The capture's records of values that depend on the binding (its ones(x).sum(0) at n = 5) outlive
// it and each replay writes its own binding's value into their buffers: a lazy tensor of the same
// (hash-consed) graph at the captured binding, built before the calls, read 3 after a replay at
// n = 3 where eager gives 5. The capture drops those records when it ends.
TEST_P(SymbolicJit, AValueTheCaptureRealizedIsNotReadByAnEagerCallAfterAReplay) {
  auto ones = [&](const Tensor& x) {
    const SymInt n = x.sym_shape()[0];
    return x.shrink({{0, n}, {0, 0}}).matmul(Tensor::ones({0, 3}, dtypes::float32, dev())) + 1;
  };
  Jit f([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{ones(in[0]).sum(0)}; });
  auto x = [&](int64_t n) { return input({n, 2}, 0).reshape({vi.bind(n), 2}); };
  const Tensor keep = ones(x(5)).sum(0);  // lazy, held across the calls
  const GlobalCounters before = global_counters();
  for (int64_t n : {5, 5, 3, 7}) {
    const std::vector<Tensor> out = f({x(n)});
    EXPECT_EQ(out[0].to_vector<float>(), std::vector<float>(3, float(n))) << "n = " << n;
  }
  EXPECT_EQ(global_counters().replays, before.replays + 2);  // the calls at 3 and 7
  EXPECT_EQ(keep.to_vector<float>(), std::vector<float>(3, 5.0f));
  EXPECT_EQ(ones(x(5)).sum(0).to_vector<float>(), std::vector<float>(3, 5.0f));
  EXPECT_EQ(ones(x(7)).sum(0).to_vector<float>(), std::vector<float>(3, 7.0f));
  EXPECT_EQ(f({x(3)})[0].to_vector<float>(), std::vector<float>(3, 3.0f));  // replays still run
}

// ones_like, zeros_like, full_like and empty_like of a symbolic tensor keep its symbolic sizes: a
// Jit's replays of a function that reads only x's shape gave the captured (3, 5) at i = 3 (their
// plain sizes froze the binding, with no guard).
TEST_P(SymbolicJit, LikeTensorsOfASymbolicTensorFollowTheBinding) {
  Jit f([](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    return std::vector<Tensor>{Tensor::ones_like(x).sum(0), Tensor::full_like(x, 3.5f),
                               Tensor::zeros_like(x) - 2, Tensor::empty_like(x)};
  });
  for (int64_t i : {5, 5, 3, 10, 1}) {
    const std::string at = "i = " + std::to_string(i);
    const std::vector<Tensor> out = f({input({3, i}, 0).reshape({3, vi.bind(i)})});
    ASSERT_EQ(out[0].shape(), (Shape{i})) << at;
    EXPECT_EQ(out[0].sym_shape()[0].str(), "i") << at;
    EXPECT_EQ(out[0].to_vector<float>(), std::vector<float>(size_t(i), 3.0f)) << at;
    ASSERT_EQ(out[1].shape(), (Shape{3, i})) << at;
    EXPECT_EQ(out[1].to_vector<float>(), std::vector<float>(size_t(3 * i), 3.5f)) << at;
    ASSERT_EQ(out[2].shape(), (Shape{3, i})) << at;
    EXPECT_EQ(out[2].to_vector<float>(), std::vector<float>(size_t(3 * i), -2.0f)) << at;
    ASSERT_EQ(out[3].shape(), (Shape{3, i})) << at;  // empty_like of a symbolic tensor: zeros
    EXPECT_EQ(out[3].to_vector<float>(), std::vector<float>(size_t(3 * i), 0.0f)) << at;
  }
}

// rand_like and randn_like of a symbolic tensor draw at its bound sizes: a replay at another
// binding is the clear error its guard gives (it replayed the captured (3, 5) at i = 3), and the
// captured binding replays.
TEST_P(SymbolicJit, RandomLikeTensorsOfASymbolicTensorReplayOnlyTheirBinding) {
  for (const bool normal : {false, true}) {
    Jit f([&](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{normal ? Tensor::randn_like(in[0]) : Tensor::rand_like(in[0])};
    });
    auto x = [&](int64_t i) { return input({3, i}, 0).reshape({3, vi.bind(i)}); };
    for (int call = 0; call < 3; ++call) EXPECT_EQ(f({x(5)})[0].shape(), (Shape{3, 5}));
    const std::string e = error_of([&] { f({x(3)}); });
    EXPECT_NE(e.find(normal ? "randn_like of a tensor of symbolic shape (3, i)"
                            : "rand_like of a tensor of symbolic shape (3, i)"),
              std::string::npos)
        << e;
    EXPECT_EQ(f({x(5)})[0].shape(), (Shape{3, 5}));
  }
}

// Dropout and attention's dropout draw their keep masks at the bound sizes, as rand_like does:
// a replay at another binding is the same clear error, not the captured mask over other sizes.
TEST_P(SymbolicJit, DropoutOfASymbolicTensorReplaysOnlyItsBinding) {
  const bool was_training = Tensor::training;
  Tensor::training = true;
  for (const bool attention : {false, true}) {
    Jit f([&](const std::vector<Tensor>& in) {
      const Tensor& x = in[0];  // (3, i): attention over i keys of size 1
      if (!attention) return std::vector<Tensor>{(x.dropout(0.5) * 0 + 1).sum(1)};
      const Tensor q = x.shrink({{0, 3}, {0, 1}}).reshape({3, 1, 1});
      const Tensor kv = x.reshape({3, x.sym_shape()[1], 1});
      return std::vector<Tensor>{q.scaled_dot_product_attention(kv, kv, std::nullopt, 0.5)};
    });
    auto x = [&](int64_t i) { return input({3, i}, 0).reshape({3, vi.bind(i)}); };
    for (int call = 0; call < 3; ++call) EXPECT_EQ(f({x(5)})[0].numel(), 3) << attention;
    const std::string e = error_of([&] { f({x(3)}); });
    EXPECT_NE(e.find(attention ? "scaled_dot_product_attention's dropout of a tensor of symbolic"
                               : "dropout of a tensor of symbolic shape (3, i)"),
              std::string::npos)
        << e;
    EXPECT_EQ(f({x(5)})[0].numel(), 3);
  }
  Tensor::training = was_training;
}

// A reduce over a size that is an expression equal to 0 at the capture (i - 1 at i = 1) is a
// kernel for every binding, not the captured constant: it replayed as the identity at every i.
// The mean of no elements is nan at i = 1 on both sides.
TEST_P(SymbolicJit, AReduceOfAnExpressionThatIsZeroAtTheCapture) {
  auto symbolic = [&](int64_t i) {
    return std::vector<Tensor>{input({i, 3}, 0).reshape({vi.bind(i), 3})};
  };
  auto plain = [&](int64_t i) { return std::vector<Tensor>{input({i, 3}, 0)}; };
  auto rest = [](const Tensor& x) {  // rows 1 .. i - 1
    return x.shrink({{1, x.sym_shape()[0]}, {0, 3}});
  };
  const std::vector<int64_t> order = {2, 1, 3, 1, 10, 4};
  check([&](const std::vector<Tensor>& in) { return rest(in[0]).sum(0); }, symbolic, plain, order);
  check([&](const std::vector<Tensor>& in) { return rest(in[0]).prod(0, true) * 2; }, symbolic,
        plain, order);
  check([&](const std::vector<Tensor>& in) { return rest(in[0]).mean(0) + 1; }, symbolic, plain,
        order);
  // An empty float sum is +0, as the plain one: 1 / sum is +inf, not -inf (the kernel's loop
  // starts from -0).
  check(
      [&](const std::vector<Tensor>& in) {
        return (rest(in[0]).sum(0).reciprocal() > 0).cast(dtypes::float32);
      },
      symbolic, plain, order);
}

// A reduce captured where n = 1 keeps n where it was, not at a 1 of the plain axes: the replays
// gave (n, 1) reduced over its last axis the shape (1, n) (symbolic fuzzer seed 20261805), and a
// matmul, which sums its last axis, likewise.
TEST_P(SymbolicJit, ReducesCapturedAtABindingOfOne) {
  auto symbolic = [&](int64_t i) {
    return std::vector<Tensor>{input({i, 1, 4}, 0).reshape({vi.bind(i), 1, 4})};
  };
  auto plain = [&](int64_t i) { return std::vector<Tensor>{input({i, 1, 4}, 0)}; };
  check([](const std::vector<Tensor>& in) { return in[0].sum(-1); }, symbolic, plain, {2, 1, 3, 1});
  check([](const std::vector<Tensor>& in) { return in[0].sum(1); }, symbolic, plain, {2, 1, 3, 1});
  check(
      [&](const std::vector<Tensor>& in) {
        return in[0].matmul(Tensor(values(8, 5), {4, 2}, dev()));
      },
      symbolic, plain, {2, 1, 3, 1});
  const Tensor x = symbolic(1)[0];
  EXPECT_EQ(x.sum(-1).sym_shape()[0].str(), "i");
  EXPECT_EQ(x.sum(-1).sym_shape()[1].str(), "1");
  EXPECT_EQ(x.max(2, true).sym_shape()[0].str(), "i");
}

// A plain size of another value is still a new shape: an error, as for any Jit.
TEST_P(SymbolicJit, AnotherPlainSizeIsStillAnError) {
  Jit f([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] + 1}; });
  for (int64_t i : {2, 3}) (void)f({input({3, i}, 0).reshape({3, vi.bind(i)})})[0].realize();
  const std::string e = error_of([&] { f({input({4, 3}, 0).reshape({4, vi.bind(3)})}); });
  EXPECT_NE(e.find("input 0 is (4, i) float32"), std::string::npos) << e;
  EXPECT_NE(e.find("was (3, i) float32"), std::string::npos) << e;
  // ... and the Jit is still usable.
  expect_near(f({input({3, 5}, 0).reshape({3, vi.bind(5)})})[0].to_vector<float>(),
              (input({3, 5}, 0) + 1).to_vector<float>(), "after the error");
}

// A function that turns a symbolic size into plain numbers has a kernel compiled for the
// captured values: its capture replays that binding only, and another is a clear error, never a
// wrong answer.
TEST_P(SymbolicJit, PlainSizesFromASymbolicOneFixTheBinding) {
  Jit f([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{(in[0] + 1).reshape({in[0].shape()[0] * in[0].shape()[1]}) * 2};
  });
  for (int64_t i : {2, 3, 3})
    expect_near(f({input({3, i}, 0).reshape({3, vi.bind(i)})})[0].to_vector<float>(),
                ((input({3, i}, 0) + 1).reshape({3 * i}) * 2).to_vector<float>(),
                "i = " + std::to_string(i));
  const std::string e = error_of([&] { f({input({3, 4}, 0).reshape({3, vi.bind(4)})}); });
  EXPECT_NE(e.find("replays only its own binding"), std::string::npos) << e;
  EXPECT_NE(e.find("i = 4"), std::string::npos) << e;
}

// A maximum past the range a descriptor binds (128 MiB on Lavapipe): the capture's buffers have
// room for it, and its kernels bind them by address, compiled apart from the eager call's.
TEST_P(SymbolicJit, BuffersPastTheDescriptorRangeAreBoundByAddress) {
  if (dev() != "VK") GTEST_SKIP() << "descriptors are Vulkan's";
  const Variable big("big", 1, int64_t(40) << 20);  // 160 MiB of float32
  Jit f([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * 2}; });
  // 17 Mi elements need more workgroups than one row of the grid holds: the folded grid of
  // that replay covers them in rows (launch_dims), the others in one.
  for (int64_t n : {10, 20, 17000000, 30, 5}) {
    const std::vector<float> host = values(n, 1);
    const std::vector<float> got =
        f({Tensor(host, {n}, dev()).reshape({big.bind(n)})})[0].to_vector<float>();
    ASSERT_EQ(got.size(), host.size());
    size_t wrong = 0;
    for (size_t k = 0; k < host.size(); ++k) wrong += got[k] != host[k] * 2;
    EXPECT_EQ(wrong, 0u) << "n = " << n;
  }
}

// A size bound to 0 at the capture leaves its kernel out (it has nothing to compute): that
// capture replays its own binding only.
TEST_P(SymbolicJit, ACaptureAtSizeZeroKeepsItsBinding) {
  const Variable k("k", 0, 10);
  Jit f([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] + 1}; });
  auto input = [&](int64_t n) { return input_of(n).reshape({3, k.bind(n)}); };
  EXPECT_EQ(f({input(2)})[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(f({input(0)})[0].shape(), (Shape{3, 0}));  // captured
  EXPECT_EQ(f({input(0)})[0].shape(), (Shape{3, 0}));
  const std::string e = error_of([&] { f({input(4)}); });
  EXPECT_NE(e.find("no elements under the captured binding"), std::string::npos) << e;
}

TEST_P(SymbolicJit, APadWithAFillAndALongCumsumFollowALargerBinding) {
  // A pad with a non-zero fill marks its padding with a mask; built with the capture's plain
  // sizes, the rows a replay at a larger binding adds read as padding (-5), and a cumsum of more
  // than 256 elements (blocks padded with the identity) gave 44 for 300 in those rows.
  Jit f([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0].pad({{0, 0}, {1, 0}}, -5.0) + 0.0f, in[1].cumsum(1) * 1.0f};
  });
  for (int64_t i : {2, 2, 2, 3, 4, 1}) {
    std::vector<float> v(size_t(i) * 2, 1.0f), w(size_t(i) * 300, 1.0f);
    auto out = f({Tensor(v, {i, 2}, dev()).reshape({vi.bind(i), 2}),
                  Tensor(w, {i, 300}, dev()).reshape({vi.bind(i), 300})});
    const auto padded = out[0].to_vector<float>();
    const auto sums = out[1].to_vector<float>();
    ASSERT_EQ(padded.size(), size_t(i) * 3);
    for (int64_t r = 0; r < i; ++r) {
      EXPECT_EQ(padded[size_t(r * 3)], -5.0f) << "i=" << i << " row " << r;
      EXPECT_EQ(padded[size_t(r * 3 + 1)], 1.0f) << "i=" << i << " row " << r;
      EXPECT_EQ(padded[size_t(r * 3 + 2)], 1.0f) << "i=" << i << " row " << r;
      EXPECT_EQ(sums[size_t(r * 300 + 299)], 300.0f) << "i=" << i << " row " << r;
      EXPECT_EQ(sums[size_t(r * 300 + 255)], 256.0f) << "i=" << i << " row " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, SymbolicJit, testing::Values("CPU", "VK"));

}  // namespace
