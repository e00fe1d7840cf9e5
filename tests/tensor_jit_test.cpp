// vkg::Jit: the first call runs the function, the second captures it, later calls replay the
// capture, with the semantics of tinygrad's test_jit.py and test_jit_footguns.py.
#include <gtest/gtest.h>

#include <optional>

#include <vkgrad/core/counters.hpp>
#include <vkgrad/core/device.hpp>
#include <vkgrad/core/jit_capture.hpp>
#include <vkgrad/vkgrad.hpp>

#include "support/error_of.hpp"

using namespace vkg;
using vkg::test::error_of;

namespace {

std::vector<float> ramp(int n, float start, float step) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = start + step * float(i);
  return v;
}

// out[r] = sum_c (2 x[r, c] + y[c]): one fused reduce.
std::vector<float> expected(const std::vector<float>& x, const std::vector<float>& y) {
  std::vector<float> out(2, 0.0f);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c) out[size_t(r)] += 2 * x[size_t(r * 3 + c)] + y[size_t(c)];
  return out;
}

class Jitted : public testing::TestWithParam<std::string> {
 protected:
  std::string dev() const { return GetParam(); }
  Tensor x(int call) const { return Tensor(ramp(6, float(call), 0.5f), {2, 3}, dev()); }
  Tensor y(int call) const { return Tensor(ramp(3, -float(call), 1.0f), {3}, dev()); }
};

}  // namespace

TEST_P(Jitted, TheFunctionRunsTwiceOverManyCallsAndEveryCallIsRight) {
  int runs = 0;
  Jit f([&](const std::vector<Tensor>& in) {
    ++runs;
    return std::vector<Tensor>{(in[0] * 2 + in[1]).sum(1)};
  });
  for (int call = 0; call < 5; ++call) {
    const std::vector<float> got = f({x(call), y(call)})[0].to_vector<float>();
    EXPECT_EQ(got, expected(ramp(6, float(call), 0.5f), ramp(3, -float(call), 1.0f)))
        << "call " << call;
  }
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(f.calls(), 5);
  EXPECT_TRUE(f.captured());
  EXPECT_EQ(f.kernels(), 1u);
}

// Inputs already on the device (computed, or realized) are copied into the captured buffers.
TEST_P(Jitted, InputsOnTheDeviceAreCopiedIn) {
  Jit f([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{(in[0] * 2 + in[1]).sum(1)};
  });
  for (int call = 0; call < 4; ++call) {
    Tensor xs = (x(call) * 1).realize();
    Tensor ys = y(call) + 0;  // lazy: realized by the call
    EXPECT_EQ(f({xs, ys})[0].to_vector<float>(),
              expected(ramp(6, float(call), 0.5f), ramp(3, -float(call), 1.0f)))
        << "call " << call;
  }
}

// A state outside the function, assigned in place inside it: the optimizer's pattern in small.
TEST_P(Jitted, AnAssignInTheFunctionAccumulatesOnEveryReplay) {
  Tensor total = Tensor::zeros({3}, dtypes::float32, dev()).contiguous().realize();
  Jit f([&](const std::vector<Tensor>& in) {
    total.assign(total + in[0]);
    return std::vector<Tensor>{total * 1};
  });
  std::vector<float> want(3, 0.0f);
  for (int call = 0; call < 5; ++call) {
    for (int i = 0; i < 3; ++i) want[size_t(i)] += float(call) + float(i);
    EXPECT_EQ(f({Tensor(ramp(3, float(call), 1.0f), {3}, dev())})[0].to_vector<float>(), want);
  }
  EXPECT_EQ(total.to_vector<float>(), want);
}

// An assign the function leaves lazy (nothing it returns reads the tensor) still happens on every
// call, as in eager calls: the capture realizes it, so replays run it. Before, it ran at the
// caller's next read, outside the capture, and replays left the tensor as the capture had.
TEST_P(Jitted, AnAssignTheFunctionLeavesUnrealizedRunsOnEveryReplay) {
  Tensor total = Tensor::zeros({3}, dtypes::float32, dev()).contiguous().realize();
  Tensor steps = Tensor::zeros({1}, dtypes::float32, dev()).contiguous().realize();
  Jit f([&](const std::vector<Tensor>& in) {
    total.assign(total + in[0]);
    steps.assign(steps + 1.0f);
    return std::vector<Tensor>{in[0].sum()};
  });
  std::vector<float> want(3, 0.0f);
  for (int call = 0; call < 5; ++call) {
    for (int i = 0; i < 3; ++i) want[size_t(i)] += float(call) + float(i);
    const std::vector<float> x = ramp(3, float(call), 1.0f);
    EXPECT_EQ(f({Tensor(x, {3}, dev())})[0].item<float>(), x[0] + x[1] + x[2]);
    EXPECT_EQ(total.to_vector<float>(), want) << "call " << call;
    EXPECT_EQ(steps.item<float>(), float(call + 1)) << "call " << call;
  }
  EXPECT_EQ(f.kernels(), 2u);  // the sum, and the two assigns as one kernel of two outputs
}

// An assign the CALLER leaves lazy, to a tensor the function reads, happens once and before the
// call reads it, as an eager call's graph would order it. Before, one made before the capture
// ran inside it (each replay doubled w again: 2, 4, 8, ...), and one made before a replay ran
// after it (the replay read the old w), both silently.
TEST_P(Jitted, ACallersLazyAssignToATensorTheFunctionReadsRunsOnceBeforeTheCall) {
  Tensor w = Tensor(std::vector<float>{1, 2, 3}, {3}, dev()).contiguous().realize();
  Jit f([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{(in[0] * w).sum()}; });
  const std::vector<float> ones(3, 1.0f);
  float scale = 1;
  for (int call = 0; call < 6; ++call) {
    if (call == 1 || call == 3) {  // before the capture, and before a replay
      w.assign(w * 2.0f);
      scale *= 2;
    }
    EXPECT_EQ(f({Tensor(ones, {3}, dev())})[0].item<float>(), 6 * scale) << "call " << call;
    EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{scale, 2 * scale, 3 * scale}))
        << "call " << call;
  }
  EXPECT_EQ(f.kernels(), 1u);  // the capture holds the function's sum, not the caller's assign
}

// ... and only those: a lazy assign to a tensor the function does not use stays lazy, so a lazy
// graph over that tensor's old value reads what it reads without the Jit (the review's repro:
// realizing every pending assign at a Jit call gave {0.5, 0.5, 0.5}).
TEST_P(Jitted, ACallersLazyAssignToATensorTheFunctionDoesNotUseStaysLazy) {
  Tensor a = Tensor(std::vector<float>{1, 2, 3}, {3}, dev()).contiguous().realize();
  const Tensor lazy = a + 0.5f;
  a.assign(a * 0.0f);
  Jit f([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * 2.0f}; });
  for (int call = 0; call < 4; ++call)
    EXPECT_EQ(f({Tensor(std::vector<float>(3, 1.0f), {3}, dev())})[0].to_vector<float>(),
              std::vector<float>(3, 2.0f));
  EXPECT_EQ(lazy.to_vector<float>(), (std::vector<float>{1.5f, 2.5f, 3.5f}));
  EXPECT_EQ(a.to_vector<float>(), std::vector<float>(3, 0.0f));
}

// The caller's lazy assign to a tensor the function uses is realized without another pending one
// that reads its old value (b's, here): realizing both in one realize is refused (the review's
// repro threw there, and the list it had emptied left a's assign to the capture: replays gave
// 24, 48, 96).
TEST_P(Jitted, ACallersLazyAssignIsRealizedWithoutAnotherThatReadsItsOldValue) {
  Tensor a = Tensor(std::vector<float>{1, 2, 3}, {3}, dev()).contiguous().realize();
  Tensor b = Tensor(std::vector<float>{0, 0, 0}, {3}, dev()).contiguous().realize();
  Jit f([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{(in[0] * a).sum()}; });
  const Tensor ones(std::vector<float>(3, 1.0f), {3}, dev());
  EXPECT_EQ(f({ones})[0].item<float>(), 6.0f);
  const Tensor t = a + 1.0f;
  a.assign(a * 2.0f + b);
  b.assign(t);
  for (int call = 1; call < 5; ++call) EXPECT_EQ(f({ones})[0].item<float>(), 12.0f) << call;
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{2, 4, 6}));
}

// The capture runs the caller's lazy assigns its function's graphs read, found in the graphs, not
// guessed from what the first call used (the second review's repros, all silent before):
//  - a first call served from the realized-node cache ran no kernel over a (replays gave 24, 48,
//    96: the capture held a's assign);
//  - a function reading another tensor at the capture than at the first call (b's assign was
//    captured: 240, 480);
//  - assigns to the first call's output and input, which the capture does not read, ran before it
//    and changed lazy graphs over their old values ({0.5, 0.5, 0.5}).
TEST_P(Jitted, TheCaptureRunsTheCallersLazyAssignsItsFunctionReadsOnceAndNoOthers) {
  const Tensor ones = Tensor(std::vector<float>(3, 1.0f), {3}, dev()).contiguous().realize();
  {
    Tensor a = Tensor(std::vector<float>{1, 2, 3}, {3}, dev()).contiguous().realize();
    auto fn = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{(in[0] * a).sum()}; };
    Tensor warm = fn({ones})[0];
    const UOpPtr held = warm.node();  // keeps the node's recorded value: call 1 runs no kernel
    warm.realize();
    Jit f(fn);
    EXPECT_EQ(f({ones})[0].item<float>(), 6.0f);
    a.assign(a * 2.0f);
    for (int call = 1; call < 5; ++call) EXPECT_EQ(f({ones})[0].item<float>(), 12.0f) << call;
    EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{2, 4, 6}));
  }
  {
    Tensor a = Tensor(std::vector<float>{1, 2, 3}, {3}, dev()).contiguous().realize();
    Tensor b = Tensor(std::vector<float>{10, 20, 30}, {3}, dev()).contiguous().realize();
    Tensor* read = &a;
    Jit f(
        [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{(in[0] * *read).sum()}; });
    EXPECT_EQ(f({ones})[0].item<float>(), 6.0f);
    read = &b;
    b.assign(b * 2.0f);
    for (int call = 1; call < 4; ++call) EXPECT_EQ(f({ones})[0].item<float>(), 120.0f) << call;
    EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{20, 40, 60}));
  }
  {
    Jit f([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * 2.0f}; });
    Tensor x = Tensor(std::vector<float>{1, 2, 3}, {3}, dev()).contiguous().realize();
    Tensor y = f({x})[0];
    const Tensor lazy_x = x + 0.5f, lazy_y = y + 0.5f;
    x.assign(x * 0.0f);
    y.assign(y * 0.0f);
    f({ones});
    EXPECT_EQ(lazy_x.to_vector<float>(), (std::vector<float>{1.5f, 2.5f, 3.5f}));
    EXPECT_EQ(lazy_y.to_vector<float>(), (std::vector<float>{2.5f, 4.5f, 6.5f}));
  }
}

// The third review's repros, each silent: a caller's assign whose value depends on a Variable's
// binding was scheduled again inside the capture (its recorded value is dropped there for such
// nodes), so each replay added s.sum() once more (30, 42, 54 for 18); the function's own assign
// over a caller's pending one was run outside the capture with it (21, 21, 21 for 21, 24, 27);
// an older assign under a tensor's current one, read through a graph built between the two, was
// captured (replays doubled a again).
TEST_P(Jitted, TheCaptureRunsTheCallersAssignsOnceAndCapturesTheFunctionsOwn) {
  const Tensor ones = Tensor(std::vector<float>(3, 1.0f), {3}, dev()).contiguous().realize();
  {
    const Variable v("rn", 1, 10);
    Tensor a = Tensor(std::vector<float>{1, 2, 3}, {3}, dev()).contiguous().realize();
    const Tensor s =
        Tensor(std::vector<float>(4, 1.0f), {4}, dev()).contiguous().realize().reshape({v.bind(4)});
    Jit f([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{(in[0] * a).sum()}; });
    EXPECT_EQ(f({ones})[0].item<float>(), 6.0f);
    a.assign(a + s.sum());
    for (int call = 1; call < 4; ++call) EXPECT_EQ(f({ones})[0].item<float>(), 18.0f) << call;
    EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{5, 6, 7}));
  }
  {
    Tensor a = Tensor(std::vector<float>{1, 2, 3}, {3}, dev()).contiguous().realize();
    Jit f([&](const std::vector<Tensor>& in) {
      a.assign(a + 1.0f);
      return std::vector<Tensor>{(in[0] * a).sum()};
    });
    EXPECT_EQ(f({ones})[0].item<float>(), 9.0f);
    a.assign(a * 2.0f);  // {4, 6, 8}
    for (int call = 1; call < 4; ++call)
      EXPECT_EQ(f({ones})[0].item<float>(), 18.0f + 3.0f * float(call)) << call;
    EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{7, 9, 11}));
  }
  {
    Tensor a = Tensor(std::vector<float>{1, 2, 3}, {3}, dev()).contiguous().realize();
    Tensor z = Tensor(std::vector<float>{0, 0, 0}, {3}, dev()).contiguous().realize();
    Tensor* read = &z;
    Jit f(
        [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{(in[0] * *read).sum()}; });
    EXPECT_EQ(f({ones})[0].item<float>(), 0.0f);
    a.assign(a * 2.0f);
    Tensor b = a + 0.0f;
    a.assign(a + 1.0f);
    read = &b;
    EXPECT_EQ(f({ones})[0].item<float>(), 12.0f);  // the capture: a * 2 ran once, outside it
    // The replays run a + 1 first (a replay goes by buffer, core/jit.hpp's limits) and read b's
    // buffer, a's: 3 + 5 + 7 each time, never a doubled again.
    for (int call = 2; call < 4; ++call) EXPECT_EQ(f({ones})[0].item<float>(), 15.0f) << call;
    EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{3, 5, 7}));
  }
}

// The fourth review's repros, each silent before: the caller's assigns the function reads run in
// one realize, as the eager call's one schedule runs them (reads of old values first): one by one,
// c.assign(c + y) read a's new value through y, a graph over a's old one ({4, 8, 12} for
// {3, 6, 9}), before the capture and before a replay alike; and an assign realized before the
// capture whose value depends on a binding, read through a graph built on it, was computed again
// inside the capture, so every replay added s.sum() once more (30, 42, 54 for 18).
TEST_P(Jitted, CallersAssignsRunAsOneEagerRealizeAndNeverAgain) {
  const Tensor ones = Tensor(std::vector<float>(3, 1.0f), {3}, dev()).contiguous().realize();
  for (const int before : {1, 2}) {  // before the capture, before a replay
    Tensor a = Tensor(std::vector<float>{1, 2, 3}, {3}, dev()).contiguous().realize();
    Tensor c = Tensor(std::vector<float>{0, 0, 0}, {3}, dev()).contiguous().realize();
    Jit f([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{(a + c) * in[0]}; });
    for (int call = 0; call < before; ++call)
      EXPECT_EQ(f({ones})[0].to_vector<float>(), (std::vector<float>{1, 2, 3}));
    const Tensor y = a + 0.0f;
    a.assign(a * 2.0f);
    c.assign(c + y);
    for (int call = before; call < 4; ++call)
      EXPECT_EQ(f({ones})[0].to_vector<float>(), (std::vector<float>{3, 6, 9}))
          << "call " << call << ", assigns before call " << before;
  }
  const Variable v("kv", 1, 10);
  Tensor a = Tensor(std::vector<float>{1, 2, 3}, {3}, dev()).contiguous().realize();
  const Tensor s =
      Tensor(std::vector<float>(4, 1.0f), {4}, dev()).contiguous().realize().reshape({v.bind(4)});
  a.assign(a + s.sum());
  const Tensor w = a * 1.0f;
  a.realize();  // {5, 6, 7}
  Jit f([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{(in[0] * w).sum()}; });
  for (int call = 0; call < 4; ++call) EXPECT_EQ(f({ones})[0].item<float>(), 18.0f) << call;
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{5, 6, 7}));
}

// The list of lazy assigns a Jit call realizes (core/jit_capture.hpp) does not grow without
// bound in a loop that never calls a Jit: Tensor::assign prunes the realized entries.
TEST(JitPendingAssigns, AnEagerLoopOfAssignsKeepsTheListBounded) {
  Tensor p = Tensor::zeros({4}, dtypes::float32, "CPU").contiguous().realize();
  for (int i = 0; i < 1000; ++i) p.assign(p + 1.0f).realize();
  EXPECT_LE(pending_assigns().size(), 128u);
  EXPECT_EQ(p.to_vector<float>(), std::vector<float>(4, 1000.0f));
}

// A tensor the function makes from host data and assigns to starts every call from that data, as
// in an eager call: a replay uploads it again before the kernels (the JIT fuzzer found replays
// that read what the last call's assign left there).
TEST_P(Jitted, ATensorMadeFromHostDataInTheFunctionStartsEveryReplayFromIt) {
  Jit f([&](const std::vector<Tensor>& in) {
    Tensor t = Tensor(ramp(3, 1, 1), {3}, dev());
    t.realize();
    t.assign(t + in[0]);
    return std::vector<Tensor>{t * 2};
  });
  for (int call = 0; call < 5; ++call) {
    std::vector<float> want(3);
    for (int i = 0; i < 3; ++i) want[size_t(i)] = 2 * (float(1 + i) + float(call) + float(i));
    EXPECT_EQ(f({Tensor(ramp(3, float(call), 1.0f), {3}, dev())})[0].to_vector<float>(), want)
        << "call " << call;
  }
}

// ... while a state made from host data outside the function keeps what each call assigns, even
// where its first upload is the capture's.
TEST_P(Jitted, AStateMadeFromHostDataOutsideTheFunctionKeepsAccumulating) {
  std::optional<Tensor> total;
  Jit f([&](const std::vector<Tensor>& in) {
    total->assign(*total + in[0]);
    return std::vector<Tensor>{*total * 1};
  });
  const Tensor one = Tensor(std::vector<float>{1, 1}, {2}, dev());
  total = Tensor(std::vector<float>{0, 10}, {2}, dev());
  EXPECT_EQ(f({one})[0].to_vector<float>(), (std::vector<float>{1, 11}));
  total = Tensor(std::vector<float>{100, 200}, {2}, dev());  // first realized by the capture
  for (int call = 1; call < 5; ++call)
    EXPECT_EQ(f({one})[0].to_vector<float>(),
              (std::vector<float>{100.0f + float(call), 200.0f + float(call)}))
        << "call " << call;
}

// An output that is a view of an input a realize keeps in the input's order (a flip or transpose
// of size-1 axes): a replay failed with "expected a BUFFER node, got FLIP" (JIT fuzzer).
TEST_P(Jitted, AnOutputThatViewsAnInputInItsOrderReplays) {
  Jit f([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0].flip({0}), in[0].transpose().contiguous(), in[0] + 1};
  });
  for (int call = 0; call < 4; ++call) {
    const std::vector<Tensor> out = f({Tensor(std::vector<float>{float(call)}, {1, 1}, dev())});
    EXPECT_EQ(out[0].to_vector<float>(), std::vector<float>{float(call)}) << "call " << call;
    EXPECT_EQ(out[1].to_vector<float>(), std::vector<float>{float(call)}) << "call " << call;
    EXPECT_EQ((out[0] * 3).to_vector<float>(), std::vector<float>{3.0f * float(call)});
  }
}

TEST_P(Jitted, RandomNumbersAdvanceOnEveryReplayAsEagerOnes) {
  auto body = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{Tensor::rand({8}, dtypes::float32, dev()) + in[0]};
  };
  const Tensor zero = Tensor::zeros({8}, dtypes::float32, dev());
  Tensor::manual_seed(5);
  std::vector<std::vector<float>> eager;
  for (int call = 0; call < 4; ++call) eager.push_back(body({zero})[0].to_vector<float>());
  Tensor::manual_seed(5);
  Jit f(body);
  for (int call = 0; call < 4; ++call) {
    EXPECT_EQ(f({zero})[0].to_vector<float>(), eager[size_t(call)]) << "call " << call;
    if (call > 0) {
      EXPECT_NE(eager[size_t(call)], eager[size_t(call - 1)]);
    }
  }
}

// A C++ value the function reads, or host data it makes, is frozen at the capture.
TEST_P(Jitted, CppValuesReadByTheFunctionAreFrozenAtTheCapture) {
  float scale = 2;
  Jit f([&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0] * scale + Tensor(std::vector<float>{scale}, {1}, dev())};
  });
  const Tensor one(std::vector<float>{1}, {1}, dev());
  EXPECT_EQ(f({one})[0].to_vector<float>(), std::vector<float>{4});
  scale = 3;
  EXPECT_EQ(f({one})[0].to_vector<float>(), std::vector<float>{6});  // captured with 3
  scale = 10;
  EXPECT_EQ(f({one})[0].to_vector<float>(), std::vector<float>{6});  // replayed: still 3
}

// The outputs live in buffers that every replay writes again; clone() keeps one.
TEST_P(Jitted, OutputsAreOverwrittenByTheNextCallAndCloneKeepsOne) {
  Jit f([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{(in[0] * 2 + in[1]).sum(1)};
  });
  f({x(0), y(0)});
  f({x(1), y(1)});
  Tensor third = f({x(2), y(2)})[0];
  Tensor kept = third.clone().realize();
  f({x(3), y(3)});
  EXPECT_EQ(third.to_vector<float>(), expected(ramp(6, 3, 0.5f), ramp(3, -3, 1.0f)));
  EXPECT_EQ(kept.to_vector<float>(), expected(ramp(6, 2, 0.5f), ramp(3, -2, 1.0f)));
}

TEST_P(Jitted, AnInputOfAnotherShapeDtypeDeviceOrCountIsAClearError) {
  Jit f([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{(in[0] * 2 + in[1]).sum(1)};
  });
  f({x(0), y(0)});
  f({x(1), y(1)});
  const Tensor wide(ramp(8, 0, 1), {2, 4}, dev());
  std::string e = error_of([&] { f({wide, y(2)}); });
  EXPECT_NE(
      e.find("input 0 is (2, 4) float32 on " + dev() + ", the captured call's was (2, 3) float32"),
      std::string::npos)
      << e;
  e = error_of([&] { f({x(2), Tensor(std::vector<int32_t>{1, 2, 3}, {3}, dev())}); });
  EXPECT_NE(e.find("input 1 is (3,) int32"), std::string::npos) << e;
  const std::string other = dev() == "VK" ? "CPU" : "VK";
  e = error_of([&] { f({x(2), Tensor(ramp(3, 0, 1), {3}, other)}); });
  EXPECT_NE(e.find("on " + other + ", the captured call's was (3,) float32 on " + dev()),
            std::string::npos)
      << e;
  e = error_of([&] { f({x(2)}); });
  EXPECT_NE(e.find("called with 1 inputs, the captured call had 2"), std::string::npos) << e;
  EXPECT_EQ(f({x(2), y(2)})[0].to_vector<float>(), expected(ramp(6, 2, 0.5f), ramp(3, -2, 1.0f)));
}

TEST_P(Jitted, ReadingAValueWhileCapturingIsAClearError) {
  Jit f([](const std::vector<Tensor>& in) {
    const float s = in[0].sum().item<float>();  // fine in the first call, not in the capture
    return std::vector<Tensor>{in[0] * s};
  });
  const Tensor a(std::vector<float>{1, 2}, {2}, dev());
  EXPECT_EQ(f({a})[0].to_vector<float>(), (std::vector<float>{3, 6}));
  const std::string e = error_of([&] { f({a}); });
  EXPECT_NE(e.find("Jit: reading a tensor's value (item, to_vector, bytes) while the JIT captures"),
            std::string::npos)
      << e;
  EXPECT_FALSE(f.captured());
  EXPECT_EQ((a + 1).to_vector<float>(), (std::vector<float>{2, 3}));  // the library is usable
}

TEST_P(Jitted, ResetCapturesAgain) {
  int runs = 0;
  Jit f([&](const std::vector<Tensor>& in) {
    ++runs;
    return std::vector<Tensor>{in[0] + 1};
  });
  for (int call = 0; call < 3; ++call) f({Tensor(ramp(4, 0, 1), {4}, dev())});
  f.reset();
  for (int call = 0; call < 3; ++call)
    EXPECT_EQ(f({Tensor(ramp(8, 0, 1), {8}, dev())})[0].to_vector<float>(), ramp(8, 1, 1));
  EXPECT_EQ(runs, 4);
}

INSTANTIATE_TEST_SUITE_P(Devices, Jitted, testing::Values("CPU", "VK"));

// A replay submits the recorded command buffer: no schedule, no compile, no recording.
TEST(Jit, AReplaySchedulesAndCompilesNothing) {
  Jit f([](const std::vector<Tensor>& in) { return std::vector<Tensor>{(in[0] * 3).softmax(1)}; });
  const auto input = [](int call) { return Tensor(ramp(12, float(call), 0.25f), {3, 4}); };
  f({input(0)});
  f({input(1)});
  const GlobalCounters before = global_counters();
  const Device::CompileCounts compiled = device("VK").compile_counts();
  const Tensor out = f({input(2)})[0];
  const GlobalCounters after = global_counters();
  EXPECT_EQ(after.schedules, before.schedules);
  EXPECT_EQ(after.replays, before.replays + 1);
  EXPECT_EQ(after.kernels - before.kernels, int64_t(f.kernels()));
  EXPECT_EQ(device("VK").compile_counts().compiled, compiled.compiled);
  EXPECT_EQ(out.to_vector<float>(), (input(2) * 3).softmax(1).to_vector<float>());
}

TEST(Jit, DebugTwoMarksReplayedKernels) {
  Jit f([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0].exp2().sum()}; });
  const Tensor a(ramp(5, 0, 1), {5});
  f({a});
  f({a});
  ScopedSetting debug("DEBUG", 2);
  testing::internal::CaptureStdout();
  const float got = f({a})[0].item<float>();
  const std::string printed = testing::internal::GetCapturedStdout();
  EXPECT_FLOAT_EQ(got, 31.0f);
  EXPECT_NE(printed.find(" (jit)"), std::string::npos) << printed;
}

TEST(Jit, AJitInsideAnotherJitsCaptureIsAClearError) {
  Jit inner([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] + 1}; });
  Jit outer([&](const std::vector<Tensor>& in) { return inner({in[0] * 2}); });
  const Tensor a(std::vector<float>{1}, {1});
  outer({a});
  EXPECT_NE(error_of([&] { outer({a}); }).find("inside another Jit's function"), std::string::npos);
}
