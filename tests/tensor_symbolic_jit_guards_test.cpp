// A vkg::Jit replayed at a binding its capture's ops did not check (core/binding_guard.hpp): each
// replay gives what an eager call at that binding gives, its values or a vkg::Error, never the
// captured kernels' silent answer for sizes they were not built for. Eager values come from the
// CPU device on plain sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <vkgrad/core/binding_guard.hpp>
#include <vkgrad/core/device.hpp>
#include <vkgrad/vkgrad.hpp>

#include "support/error_of.hpp"
#include "support/symbolic_values.hpp"

using namespace vkg;
using vkg::test::error_of;
using vkg::test::expect_near;
using vkg::test::values;

namespace {

const Variable vn("n", 0, 8);

using Body = std::function<Tensor(const Tensor&)>;

class SymbolicJitGuards : public testing::TestWithParam<std::string> {
 protected:
  std::string dev() const { return GetParam(); }
  // (3, n) on the device, bound to n, with values of `seed`.
  Tensor input(int64_t n, int seed = 0) const {
    return Tensor(values(3 * n, seed), {3, n}, dev()).reshape({3, vn.bind(n)});
  }
  Tensor plain(int64_t n, int seed = 0) const { return Tensor(values(3 * n, seed), {3, n}, "CPU"); }
  // A Jit of `body` called at each n of `order` (the first two: a run and the capture); at each,
  // the eager body on plain sizes on the CPU device either gives the Jit's values or throws, and
  // then the Jit throws too, with `error` in its message. Returns the Jit's errors' messages.
  std::vector<std::string> check(const Body& body, const std::vector<int64_t>& order,
                                 const std::string& error) {
    Jit jit([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{body(in[0])}; });
    std::vector<std::string> errors;
    for (size_t call = 0; call < order.size(); ++call) {
      const int64_t n = order[call];
      const std::string at = "call " + std::to_string(call) + ", n = " + std::to_string(n);
      const int seed = int(call);
      std::optional<Tensor> want;
      const std::string eager = error_of([&] { want = body(plain(n, seed)).realize(); });
      if (!eager.empty()) {
        EXPECT_GE(call, 2u) << at << ": the body must run at the first two calls: " << eager;
        const std::string e = error_of([&] { jit({input(n, seed)}); });
        EXPECT_NE(e, "") << at << ": eager threw (" << eager << "), the Jit did not";
        EXPECT_NE(e.find(error), std::string::npos) << at << ": " << e;
        errors.push_back(e);
        continue;
      }
      const Tensor got = jit({input(n, seed)})[0];
      EXPECT_EQ(got.shape(), want->shape()) << at;
      expect_near(got.to_vector<float>(), want->to_vector<float>(), at);
    }
    return errors;
  }
};

// max and min over a size that is 0 at a replay: eager throws, and so does the replay (it gave the
// identity, -inf or inf). Replays after it at other sizes still compute.
TEST_P(SymbolicJitGuards, MaxAndMinOverASizeThatIsZeroThrowAsEager) {
  for (const char* op : {"max", "min"}) {
    const bool is_max = std::string(op) == "max";
    for (int64_t axis : {0, 1}) {
      const std::vector<std::string> errors =
          check([&](const Tensor& x) { return is_max ? x.max(axis) : x.min(axis); },
                {2, 2, 0, 3, 0, 1}, std::string(op) + ": cannot reduce a tensor with no elements");
      EXPECT_EQ(errors.size(), 2u) << op;
    }
  }
}

// sum and mean of no elements have values: 0 and nan, at a replay as eagerly.
TEST_P(SymbolicJitGuards, SumAndMeanOfNoElementsAtAReplay) {
  EXPECT_TRUE(check([](const Tensor& x) { return x.sum(1); }, {2, 2, 0, 3}, "").empty());
  EXPECT_TRUE(check([](const Tensor& x) { return x.mean(1); }, {2, 2, 0, 3}, "").empty());
  Jit jit([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0].mean(1)}; });
  jit({input(2)}), jit({input(2)});
  const std::vector<float> at0 = jit({input(0)})[0].to_vector<float>();
  ASSERT_EQ(at0.size(), 3u);
  for (float v : at0) EXPECT_TRUE(std::isnan(v)) << v;
}

// A plain 3 broadcast against n = 3 is the same size only at that binding: replays at others
// threw nothing and read the plain operand's 3 elements as n (n = 5 gave a (3, 5) sum).
TEST_P(SymbolicJitGuards, ABroadcastOfAPlainSizeEqualToTheBindingIsChecked) {
  const Tensor three = Tensor(values(9, 7), {3, 3}, dev());
  const Tensor three_cpu = Tensor(values(9, 7), {3, 3}, "CPU");
  auto add = [&](const Tensor& x) { return x + (x.has_symbolic_shape() ? three : three_cpu); };
  check(add, {3, 3, 5, 3, 2, 3}, "the two sizes as equal");
  // An expand of a plain 3 to n; a matmul over a plain 3 and an n, a cat whose other axis is a
  // plain 3 and an n: each checked by its op.
  check(
      [&](const Tensor& x) {
        const Tensor row = Tensor(std::vector<float>{1.f, 2.f, 3.f}, {3}, x.device());
        return row.expand({SymInt(3), x.sym_shape()[1]}) * x;
      },
      {3, 3, 5, 3}, "the two sizes as equal");
  check(
      [&](const Tensor& x) {
        return x.matmul(Tensor(values(6, 3), {3, 2}, x.device()));
      },
      {3, 3, 5, 3}, "dot: inner dimensions differ");
  check(
      [&](const Tensor& x) {
        return Tensor::cat(std::vector<Tensor>{x, Tensor(values(3, 2), {1, 3}, x.device())}, 0);
      },
      {3, 3, 4, 3}, "cat: shapes must match except along axis 0");
}

// n bound to 1 broadcasts against a plain 4. Eagerly the kernel read n = 1 as a size with a
// stride: 4 consecutive elements past the one there is (garbage, different on each run). A Jit
// captured there replays n = 1 only: at n = 4 eager adds elementwise, at 2 it throws.
TEST_P(SymbolicJitGuards, ASizeBoundToOneBroadcasts) {
  const Tensor four = Tensor(values(12, 4), {3, 4}, dev());
  const Tensor four_cpu = Tensor(values(12, 4), {3, 4}, "CPU");
  for (int seed : {0, 1}) {
    const std::vector<float> got = (input(1, seed) + four).to_vector<float>();
    const std::vector<float> want = (plain(1, seed) + four_cpu).to_vector<float>();
    EXPECT_EQ(got, want) << "seed " << seed;
    EXPECT_EQ(input(1, seed).expand({3, 4}).to_vector<float>(),
              plain(1, seed).expand({3, 4}).to_vector<float>());
  }
  Jit jit([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] + four}; });
  for (int seed : {0, 1, 2})
    EXPECT_EQ(jit({input(1, seed)})[0].to_vector<float>(),
              (plain(1, seed) + four_cpu).to_vector<float>())
        << "call " << seed;
  for (int64_t n : {4, 2}) {
    const std::string e = error_of([&] { jit({input(n)}); });
    EXPECT_NE(e.find("broadcasts a size of 1"), std::string::npos) << e;
    EXPECT_NE(e.find("n = " + std::to_string(n)), std::string::npos) << e;
  }
}

// The same where the size bound to 1 is padded first (its view's mask, min(n, 1) for n in
// [0, 8], is not a plain 1: the expand masked everything, giving the pad's zeros), and where it is
// one of a cat's pieces (symbolic binding fuzzer seeds 5100106 and 5100054).
TEST_P(SymbolicJitGuards, ASizeBoundToOneBroadcastsThroughAPadOrACat) {
  const Tensor y = Tensor(values(15, 2), {3, 5, 1}, dev()).expand({3, 5, 7});
  const Tensor y_cpu = Tensor(values(15, 2), {3, 5, 1}, "CPU").expand({3, 5, 7});
  const Tensor x = Tensor(values(15, 1), {1, 3, 5}, dev());
  const Tensor x_cpu = Tensor(values(15, 1), {1, 3, 5}, "CPU");
  const std::vector<std::pair<int64_t, int64_t>> pads{{0, 0}, {2, 0}, {2, 0}};
  EXPECT_EQ((x.reshape({vn.bind(1), 3, 5}).pad(pads) - y).to_vector<float>(),
            (x_cpu.pad(pads) - y_cpu).to_vector<float>());
  const Tensor a = Tensor(values(1, 3), {1, 1}, dev()), b = Tensor(values(1, 4), {1, 1}, dev());
  const Tensor row = Tensor(values(2, 5), {2}, dev());
  const Tensor sym = Tensor::cat(
      std::vector<Tensor>{a.reshape({SymInt(1), vn.bind(1)}), b.reshape({vn.bind(1), vn.bind(1)})},
      0);
  const Tensor plain = Tensor::cat(std::vector<Tensor>{a, b}, 0);
  EXPECT_EQ((sym + row).to_vector<float>(), (plain + row).to_vector<float>());
  EXPECT_EQ(
      (sym + row).to_vector<float>(),
      (std::vector<float>{values(1, 3)[0] + values(2, 5)[0], values(1, 3)[0] + values(2, 5)[1],
                          values(1, 4)[0] + values(2, 5)[0], values(1, 4)[0] + values(2, 5)[1]}));
}

// Eagerly: a plain 2 broadcast with n = 2 in a reduce. The kernel took the axis as plain with n's
// upper bound as its size and unrolled it by 4 (12 = 3 x 4): it read past n = 2 (the CPU device
// threw an out-of-bounds load; symbolic binding fuzzer seed 5100404).
TEST_P(SymbolicJitGuards, APlainSizeEqualToNIsNotSplitByNsUpperBound) {
  const Variable k("k", 0, 12);
  const Tensor c = Tensor(std::vector<float>{1, 0, 0, 1, 1, 1, 0, 0}, {4, 2}, dev()) > 0;
  const Tensor x = Tensor(values(2, 1), {2}, dev()), y = Tensor(values(8, 2), {4, 2}, dev());
  auto f = [&](const Tensor& xs, const Tensor& ys) {
    return c.where(xs.unsqueeze(0).expand({SymInt(4), xs.sym_shape()[0]}), ys).sum({0, 1});
  };
  const float got = f(x.reshape({k.bind(2)}), y.reshape({SymInt(4), k.bind(2)})).item<float>();
  float want = 0;
  const std::vector<float> xv = values(2, 1), yv = values(8, 2);
  const std::vector<bool> cv{1, 0, 0, 1, 1, 1, 0, 0};
  for (size_t i = 0; i < 8; ++i) want += cv[i] ? xv[i % 2] : yv[i];
  EXPECT_EQ(got, want);
  EXPECT_EQ(got, f(x, y).item<float>());
}

// A cat's other axes and a matmul's inner sizes must be equal; a plain 1 and n = 1 are, and they
// also broadcast, which is how cat (a sum of padded pieces) and matmul (a broadcast product)
// compute: at n = 8 their replays gave values where eager throws (symbolic binding fuzzer seeds
// 5100012, 5100097 and 5100033).
TEST_P(SymbolicJitGuards, ACatOrAMatmulOverAPlainOneAndAnNBoundToOneIsChecked) {
  check(
      [&](const Tensor& x) {
        return Tensor::cat(std::vector<Tensor>{x, Tensor(values(4, 6), {4, 1}, x.device())}, 0);
      },
      {1, 1, 8, 1, 0}, "cat: shapes must match except along axis 0");
  check(
      [&](const Tensor& x) {
        return x.matmul(Tensor(values(3, 6), {1, 3}, x.device()));
      },
      {1, 1, 2, 1}, "dot: inner dimensions differ");
}

// A reduce captured over a symbolic count of at most 32768 is one kernel looping over it: on
// Lavapipe a replay at 100000 summed the first 65535 (llvmpipe ends longer loops early), where an
// eager call splits the reduce in two. Counts up to 32768 replay; larger ones are refused on a
// device that ends long loops early (Device::loop_iteration_limit), and computed by the one
// kernel on the others (the CPU device, GPUs).
TEST_P(SymbolicJitGuards, AReduceReplayedPastTheOneKernelLimitIsRefusedWhereLoopsEndEarly) {
  const Variable big("big", 1, 200000);
  Jit jit([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0].sum(1)}; });
  auto in = [&](int64_t n) {
    return Tensor::ones({2, n}, dtypes::float32, dev()).reshape({SymInt(2), big.bind(n)});
  };
  for (int64_t n : {10, 10, 32768, 7})
    EXPECT_EQ(jit({in(n)})[0].to_vector<float>(), std::vector<float>(2, float(n))) << n;
  EXPECT_EQ(in(100000).sum(1).to_vector<float>(), std::vector<float>(2, 100000.0f));
  if (device(dev()).loop_iteration_limit() != 0) {
    EXPECT_EQ(jit.guards(), 1u);
    const std::string e = error_of([&] { jit({in(100000)}); });
    EXPECT_NE(e.find("sum: one kernel reduces at most 32768 elements per output on " + dev()),
              std::string::npos)
        << e;
    return;
  }
  EXPECT_EQ(jit.guards(), 0u);
  const size_t kernels = jit.kernels();
  for (int64_t n : {100000, 200000, 5})
    EXPECT_EQ(jit({in(n)})[0].to_vector<float>(), std::vector<float>(2, float(n))) << n;
  EXPECT_EQ(jit.kernels(), kernels);
}

// A shrink to n of a plain axis of 5: past 5 eager throws, and a replay read past the axis.
TEST_P(SymbolicJitGuards, AShrinkToNOfAPlainAxisIsChecked) {
  const Tensor five = Tensor(values(15, 3), {3, 5}, dev());
  const Tensor five_cpu = Tensor(values(15, 3), {3, 5}, "CPU");
  check(
      [&](const Tensor& x) {
        const Tensor& t = x.has_symbolic_shape() ? five : five_cpu;
        const SymInt end = x.sym_shape()[1];
        return t.shrink({{0, 3}, {0, end}}) + x;
      },
      {3, 3, 5, 7, 2, 8, 4}, "shrink: range [0, n) is outside dimension 1 of size 5");
}

// A reshape whose two sides have the same count at the capture only ((3, n) to (n, n) at n = 3).
TEST_P(SymbolicJitGuards, AReshapeWhoseCountsAgreeAtTheCaptureOnlyIsChecked) {
  check(
      [&](const Tensor& x) {
        const SymInt n = x.sym_shape()[1];  // a plain number for the eager reference
        return x.reshape({n, n}) * 2;
      },
      {3, 3, 4, 3}, "reshape: (3, n) to (n, n)");
}

// A negative pad trims, as torch's F.pad does, eagerly and at a replay: pads of (4 - n, n - 5),
// (-3, 2) at n = 7 and (1, -2) at n = 3, give what plain sizes give at every n in [0, 8], through
// a capture at either sign. Where the trims take more than the axis (n = 0, 1 and 2) eager throws
// and so does the replay. The replays at n = 3 after a capture at 7 threw ("a pad of (n-5) is
// negative") where eager trims.
TEST_P(SymbolicJitGuards, ANegativePadTrimsAtAReplayAsEagerly) {
  auto body = [](const Tensor& x) {
    const SymInt n = x.sym_shape()[1];  // a plain number for the eager reference
    return (x.pad({{SymInt(0), SymInt(0)}, {SymInt(4) - n, n - SymInt(5)}}) + 1) * 2;
  };
  for (int64_t n = 0; n <= 8; ++n) {
    std::optional<Tensor> want, got;
    const std::string plain_error = error_of([&] { want = body(plain(n)).realize(); });
    const std::string error = error_of([&] { got = body(input(n)).realize(); });
    ASSERT_EQ(error.empty(), plain_error.empty()) << "n = " << n << ": " << error << plain_error;
    if (!error.empty()) {
      EXPECT_NE(error.find("trim more than dimension 1"), std::string::npos) << error;
      continue;
    }
    EXPECT_EQ(got->shape(), want->shape()) << n;
    expect_near(got->to_vector<float>(), want->to_vector<float>(), "n = " + std::to_string(n));
  }
  // n = 3: (1, -2) keeps the first element of each row after a zero.
  EXPECT_EQ(body(input(3)).to_vector<float>(),
            (std::vector<float>{2, 2 * (values(9, 0)[0] + 1), 2, 2 * (values(9, 0)[3] + 1), 2,
                                2 * (values(9, 0)[6] + 1)}));
  EXPECT_EQ(check(body, {7, 7, 3, 5, 2, 8, 4, 0, 6, 1, 3}, "trim more than dimension 1").size(),
            3u);
  EXPECT_EQ(check(body, {3, 3, 7, 1, 6, 4}, "trim more than dimension 1").size(), 1u);
}

// A deep model checks the same sizes in every layer (a broadcast of a plain 3 against n, a max
// over n): the capture records each condition once, so a replay at a new binding evaluates
// two guards, not two per layer, and still throws where eager does.
TEST_P(SymbolicJitGuards, ADeepModelRecordsEachConditionOnce) {
  const Tensor w = Tensor(values(9, 5), {3, 3}, dev());
  const Tensor w_cpu = Tensor(values(9, 5), {3, 3}, "CPU");
  auto deep = [&](int layers) {
    return [&, layers](const Tensor& x) {
      Tensor y = x;
      for (int l = 0; l < layers; ++l)
        y = (y + (x.has_symbolic_shape() ? w : w_cpu)) * 0.5f - y.max(1, true);
      return y;
    };
  };
  for (int layers : {1, 8}) {
    const Body body = deep(layers);
    Jit jit([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{body(in[0])}; });
    jit({input(3)}), jit({input(3, 1)});
    EXPECT_EQ(jit.guards(), 2u) << layers << " layers";
    expect_near(jit({input(3, 2)})[0].to_vector<float>(), body(plain(3, 2)).to_vector<float>(),
                std::to_string(layers) + " layers");
    const std::string e = error_of([&] { jit({input(4)}); });
    EXPECT_NE(e.find("the two sizes as equal"), std::string::npos) << e;
  }
  EXPECT_EQ(check(deep(8), {3, 3, 4, 3, 5, 3}, "the two sizes as equal").size(), 2u);
}

// A guard's message is built only when a capture records the guard: not by eager calls (every op
// over symbolic sizes would pay for it), not for a guard that holds at every binding, nor for one
// that a guard already recorded implies.
TEST(SymbolicJitGuardMessages, AreBuiltOnlyForTheGuardsACaptureRecords) {
  int built = 0;
  auto message = [&] {
    ++built;
    return std::string("a test's guard");
  };
  const UOpPtr n = vn.node();
  EXPECT_FALSE(recording_guards());
  guard_same_value(n, 3, message);
  EXPECT_EQ(built, 0);
  bool recording = false;
  Jit jit([&](const std::vector<Tensor>& in) {
    recording = recording_guards();
    guard_same_value(n, 3, message);                              // recorded
    guard_same_value(n, 3, message);                              // the same condition
    guard_binding(n, 0, 5, message);                              // implied by n = 3
    guard_binding(UOp::const_(dtypes::int32, 2), 0, 5, message);  // a constant
    guard_binding(n, 0, 8, message);                              // n's whole range
    guard_binding(n * 2, 1, 100, message);                        // recorded
    return std::vector<Tensor>{in[0] * 2};
  });
  const Tensor x = Tensor(values(9, 1), {3, 3}).reshape({SymInt(3), vn.bind(3)});
  jit({x});
  EXPECT_FALSE(recording);
  EXPECT_EQ(built, 0) << "the first call";
  jit({x});
  EXPECT_TRUE(recording);
  EXPECT_EQ(built, 2) << "the capture";
  EXPECT_EQ(jit.guards(), 2u);
  EXPECT_EQ(jit({x})[0].to_vector<float>(), (x * 2).to_vector<float>());
  const std::string e = error_of([&] {
    jit({Tensor(values(12, 1), {3, 4}).reshape({SymInt(3), vn.bind(4)})});
  });
  EXPECT_NE(e.find("a test's guard (it needs n = 3, here it is 4)"), std::string::npos) << e;
  EXPECT_EQ(built, 2);
}

// Plain widths and bounds on a symbolic axis (a review found both silent): a negative pad trims
// n - 1 elements at every replay (it kept the capture's 3 at n = 6), and a plain shrink [1, 3)
// is refused where the axis is shorter than 3, as eager (it read past the axis at n = 2).
TEST_P(SymbolicJitGuards, PlainPadsAndShrinksOfASymbolicAxisFollowTheBinding) {
  const std::vector<std::pair<int64_t, int64_t>> trim{{0, 0}, {-1, 0}}, keep{{0, 3}, {1, 3}};
  EXPECT_TRUE(check([&](const Tensor& x) { return (x.pad(trim) + 1) * 2; }, {4, 4, 6, 2, 1, 5}, "")
                  .empty());
  EXPECT_EQ(check([&](const Tensor& x) { return (x.shrink(keep) + 1) * 2; }, {4, 4, 6, 2, 3, 1},
                  "shrink: range [1, 3) is outside dimension 1")
                .size(),
            2u);
}

INSTANTIATE_TEST_SUITE_P(Devices, SymbolicJitGuards, testing::Values("VK", "CPU"));

}  // namespace
