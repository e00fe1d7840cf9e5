// Kernel opts end to end: scheduled tensor kernels lowered with forced opts (SHUFFLE tiles, GROUP
// reductions, and the heuristics' own choices), run on Vulkan and on the CPU interpreter from the
// same inputs, compared element by element, and checked against closed forms. Small integer
// inputs keep every order of summation exact, so the closed forms hold to the bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include <vkgrad/codegen/heuristics.hpp>
#include <vkgrad/codegen/kernel.hpp>
#include <vkgrad/codegen/lowerer.hpp>
#include <vkgrad/core/schedule.hpp>
#include <vkgrad/core/tensor.hpp>

#include "support/exact_ints.hpp"
#include "support/kernel_agree.hpp"

namespace vkg::test {
namespace {

// A kernel of a schedule lowered with chosen opts, and its buffers' starting bytes (inputs from
// the uploads, outputs zeros).
struct Lowered {
  Program program;
  std::vector<Bytes> buffers;
  std::string describe;
};

Lowered lowered(const Tensor& t, const std::vector<Opt>& opts,
                const DeviceTraits* traits = nullptr) {
  Schedule s = create_schedule({t.node()});
  EXPECT_EQ(s.items.size(), 1u) << "expected one kernel";
  const ScheduleItem& item = s.items.back();
  Kernel k(item.ast);
  if (traits) apply_heuristics(k, *traits);
  for (const Opt& o : opts) k.apply(o);
  Lowered out;
  std::vector<int64_t> counts;
  for (const auto& b : item.buffers) {
    counts.push_back(b->count());
    out.buffers.push_back(b->initial_data ? *b->initial_data : Bytes(size_t(b->nbytes())));
  }
  out.program = lower(k, counts);
  out.describe = k.describe();
  return out;
}

std::vector<float> matmul_closed_form(const std::vector<float>& a, const std::vector<float>& b,
                                      int64_t m, int64_t k, int64_t n) {
  std::vector<float> c(size_t(m * n), 0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t q = 0; q < k; ++q)
        c[size_t(i * n + j)] += a[size_t(i * k + q)] * b[size_t(q * n + j)];
  return c;
}

using O = OptOp;

class Opts : public Kernels {
 protected:
  // Runs the lowered kernel on both sides and returns the device's output (buffer 0) as floats.
  std::vector<float> agree(const Lowered& l) {
    SCOPED_TRACE(l.describe);
    return from_bytes<float>(expect_agree(l.program, l.buffers)[0]);
  }
  void staged_band(const std::vector<Opt>& opts);
};

// The shuffle tile of the Lavapipe heuristics, by hand: a (G m, G n, R k) matmul as 8 lanes of
// vec4 columns, A's rows loaded one per lane and shuffled, on shapes whose reduce is or is not a
// multiple of the unroll and whose A is or is not contiguous along k.
TEST_F(Opts, ShuffleTileMatmulAgreesWithTheInterpreterAndTheClosedForm) {
  if (!target_.subgroup_shuffle || target_.subgroup_size != 8)
    GTEST_SKIP() << "needs 8-wide subgroups";
  struct Case {
    int64_t m, k, n;
    int64_t rows;  // rows per lane: an upcast of the shuffle axis
    bool unroll;
  };
  for (const Case c :
       {Case{8, 4, 32, 1, true}, Case{16, 12, 32, 2, true}, Case{48, 33, 64, 2, false},
        Case{24, 20, 96, 3, true}, Case{8, 1, 32, 1, false}}) {
    SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.k) + "x" + std::to_string(c.n));
    const std::vector<float> a = ints(c.m * c.k, 7, 11, 5), b = ints(c.k * c.n, 5, 13, 6);
    std::vector<Opt> opts{{O::UPCAST, 1, 4}, {O::LOCAL, 1, 8}, {O::SHUFFLE, 0, 8}};
    if (c.rows > 1) opts.push_back({O::UPCAST, 0, c.rows});
    if (c.unroll) opts.push_back({O::UNROLL, 3, 4});
    const std::vector<float> want = matmul_closed_form(a, b, c.m, c.k, c.n);
    EXPECT_EQ(agree(lowered(Tensor(a, {c.m, c.k}).matmul(Tensor(b, {c.k, c.n})), opts)), want);
    // A stored transposed (k-major): its row elements are not neighbours, so each is loaded and
    // shuffled alone.
    std::vector<float> at(a.size());
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t q = 0; q < c.k; ++q) at[size_t(q * c.m + i)] = a[size_t(i * c.k + q)];
    EXPECT_EQ(
        agree(lowered(Tensor(at, {c.k, c.m}).transpose().matmul(Tensor(b, {c.k, c.n})), opts)),
        want);
  }
}

TEST_F(Opts, ShuffleTileOfBatchedMatmulAndOfMatmulWithBiasAndRelu) {
  if (!target_.subgroup_shuffle || target_.subgroup_size != 8)
    GTEST_SKIP() << "needs 8-wide subgroups";
  const int64_t batch = 3, m = 16, k = 12, n = 32;
  const std::vector<float> a = ints(batch * m * k, 7, 11, 5), b = ints(batch * k * n, 5, 13, 6);
  std::vector<float> want;
  for (int64_t i = 0; i < batch; ++i) {
    const std::vector<float> ai(a.begin() + i * m * k, a.begin() + (i + 1) * m * k);
    const std::vector<float> bi(b.begin() + i * k * n, b.begin() + (i + 1) * k * n);
    const std::vector<float> ci = matmul_closed_form(ai, bi, m, k, n);
    want.insert(want.end(), ci.begin(), ci.end());
  }
  // (G batch, G m, G n, R k): the tile takes n and m; the batch stays a global axis.
  const Tensor y = Tensor(a, {batch, m, k}).matmul(Tensor(b, {batch, k, n}));
  EXPECT_EQ(agree(lowered(
                y, {{O::UPCAST, 2, 4}, {O::LOCAL, 2, 8}, {O::SHUFFLE, 1, 8}, {O::UNROLL, 4, 4}})),
            want);

  const std::vector<float> x = ints(m * k, 3, 7, 3), w = ints(k * n, 5, 9, 4),
                           bias = ints(n, 11, 17, 8);
  std::vector<float> fused = matmul_closed_form(x, w, m, k, n);
  for (int64_t i = 0; i < m * n; ++i)
    fused[size_t(i)] = std::max(0.0f, fused[size_t(i)] + bias[size_t(i % n)]);
  const Tensor z = (Tensor(x, {m, k}).matmul(Tensor(w, {k, n})) + Tensor(bias, {n})).relu();
  EXPECT_EQ(agree(lowered(
                z, {{O::UPCAST, 1, 4}, {O::LOCAL, 1, 8}, {O::SHUFFLE, 0, 8}, {O::UPCAST, 0, 2}})),
            fused);

  // A bias per row (along the shuffled axis, outside the reduce): loaded per lane and shuffled
  // too, then broadcast across each invocation's vec4 of columns.
  const std::vector<float> row_bias = ints(m, 3, 11, 5);
  std::vector<float> by_row = matmul_closed_form(x, w, m, k, n);
  for (int64_t i = 0; i < m * n; ++i) by_row[size_t(i)] += row_bias[size_t(i / n)];
  const Tensor r = Tensor(x, {m, k}).matmul(Tensor(w, {k, n})) + Tensor(row_bias, {m, 1});
  EXPECT_EQ(agree(lowered(
                r, {{O::UPCAST, 1, 4}, {O::LOCAL, 1, 8}, {O::SHUFFLE, 0, 8}, {O::UPCAST, 0, 2}})),
            by_row);

  // A zero-padded along k (a masked load: each lane's mask is its own row's).
  const std::vector<float> narrow = ints(m * (k - 3), 7, 11, 5);
  std::vector<float> padded(size_t(m * k), 0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t q = 0; q < k - 3; ++q)
      padded[size_t(i * k + q + 1)] = narrow[size_t(i * (k - 3) + q)];
  const Tensor p = Tensor(narrow, {m, k - 3}).pad({{0, 0}, {1, 2}}).matmul(Tensor(w, {k, n}));
  EXPECT_EQ(agree(lowered(
                p, {{O::UPCAST, 1, 4}, {O::LOCAL, 1, 8}, {O::SHUFFLE, 0, 8}, {O::UNROLL, 3, 4}})),
            matmul_closed_form(padded, w, m, k, n));
}

// The traits devices/vk_device.cpp gives Lavapipe (8-wide subgroups with shuffles).
DeviceTraits lavapipe_traits() {
  DeviceTraits cpu;
  cpu.tile_rows = 8;
  cpu.shuffle_lanes = 8;
  cpu.group_size = 0;
  cpu.stage_side = 0;
  cpu.reduce_outputs = 16;
  cpu.share_costly_ops = true;
  return cpu;
}

// Lavapipe's traits with the shuffle tile of the device under test, for tests that run what the
// heuristics make: a SHUFFLE tile is one subgroup, and devices/vk_device.cpp gives a device
// shuffle tiles only of its own 4- to 16-wide subgroups (none on a 32-wide GPU), so the kernels
// are ones the device accepts. 8-wide tiles on a 32-wide device are a kernel no device of the
// kind would be given (the renderer refuses it: "SHUFFLE needs a workgroup of one 32-wide
// subgroup").
DeviceTraits lavapipe_traits_on(const GlslTarget& t) {
  DeviceTraits cpu = lavapipe_traits();
  const bool fits = t.subgroup_shuffle && t.subgroup_size >= 4 && t.subgroup_size <= 16;
  cpu.shuffle_lanes = fits ? int64_t(t.subgroup_size) : 0;
  return cpu;
}

// A replicate pad's pieces are masked along the local (column) axis that their stride ignores.
// Loaded one row per lane and shuffled, such a load took the loading lane's mask, not the
// reader's, and read 0 where the reader's piece was valid (op-family fuzzer, seed 10778): it is
// now read per lane. Both sides run the same program, so the closed form decides.
TEST_F(Opts, ShuffledLoadsKeepTheReadersMaskAlongLocalAxes) {
  if (!target_.subgroup_shuffle || target_.subgroup_size != 8)
    GTEST_SKIP() << "needs 8-wide subgroups";
  const int64_t r = 4, c = 4, k = 3;
  const std::vector<float> x = ints(r * c * k, 7, 11, 5), w = ints(k, 5, 13, 6);
  std::vector<float> want;  // rows and columns padded by 2 with their edges, times w
  for (int64_t i = 0; i < r + 4; ++i)
    for (int64_t j = 0; j < c + 4; ++j) {
      const int64_t si = std::clamp<int64_t>(i - 2, 0, r - 1),
                    sj = std::clamp<int64_t>(j - 2, 0, c - 1);
      float acc = 0;
      for (int64_t q = 0; q < k; ++q) acc += x[size_t((si * c + sj) * k + q)] * w[size_t(q)];
      want.push_back(acc);
    }
  const Tensor y =
      Tensor(x, {r, c, k}).pad({{2, 2}, {2, 2}, {0, 0}}, PadMode::Replicate).matmul(Tensor(w, {k}));
  const DeviceTraits lavapipe = lavapipe_traits();
  const Lowered l = lowered(y, {}, &lavapipe);
  EXPECT_NE(l.describe.find("SHUFFLE"), std::string::npos) << l.describe;
  EXPECT_EQ(agree(l), want);
}

// What the heuristics choose for a device like Lavapipe (8-wide shuffles, no GROUP): the tile on
// a 1024 matmul, and on shapes the tile does not divide something else, equally right.
TEST_F(Opts, LavapipeHeuristicsTileMatmulsAndFallBackOnOddShapes) {
  const DeviceTraits cpu = lavapipe_traits();
  {
    Schedule s =
        create_schedule({Tensor::empty({1024, 1024}).matmul(Tensor::empty({1024, 1024})).node()});
    Kernel k(s.items.back().ast);
    apply_heuristics(k, cpu);
    EXPECT_EQ(k.describe(),
              "full_shape=(32, 32, 8, 256, 4, 4, 8, 4) kinds=(G, G, L, R, N, U, S, U) "
              "opts=[UPCAST(axis=1, amount=4), LOCAL(axis=1, amount=8), SHUFFLE(axis=0, amount=8), "
              "UPCAST(axis=0, amount=4), UNROLL(axis=3, amount=4)]");
  }
  if (!target_.subgroup_shuffle || target_.subgroup_size != 8)
    GTEST_SKIP() << "needs 8-wide subgroups";
  for (const auto& [m, k, n] :
       {std::tuple{64, 20, 64}, {40, 36, 64}, {37, 29, 53}, {8, 9, 31}, {64, 16, 33}}) {
    SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n));
    const std::vector<float> a = ints(m * k, 7, 11, 5), b = ints(k * n, 5, 13, 6);
    EXPECT_EQ(agree(lowered(Tensor(a, {m, k}).matmul(Tensor(b, {k, n})), {}, &cpu)),
              matmul_closed_form(a, b, m, k, n));
  }
  // B stored transposed: the lanes still take 4 columns each (n = 64), or one (n = 24), and A's
  // rows are still shuffled.
  for (const auto& [m, k, n, want_opts] :
       {std::tuple{16, 12, 64,
                   "opts=[UPCAST(axis=1, amount=4), LOCAL(axis=1, amount=8), SHUFFLE(axis=0"},
        {16, 12, 24, "opts=[LOCAL(axis=1, amount=8), SHUFFLE(axis=0"}}) {
    SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n));
    const std::vector<float> a = ints(m * k, 7, 11, 5), bt = ints(n * k, 5, 13, 6);
    std::vector<float> b(bt.size());
    for (int q = 0; q < k; ++q)
      for (int j = 0; j < n; ++j) b[size_t(q * n + j)] = bt[size_t(j * k + q)];
    const Lowered l = lowered(Tensor(a, {m, k}).matmul(Tensor(bt, {n, k}).transpose()), {}, &cpu);
    EXPECT_NE(l.describe.find(want_opts), std::string::npos) << l.describe;
    EXPECT_EQ(agree(l), matmul_closed_form(a, b, m, k, n));
  }
  // A reduce over a strided axis with many outputs (a split sum's first step): 16 outputs per
  // invocation, as 4 vec4s.
  const std::vector<float> x = ints(64 * 4096, 13, 31, 15);
  std::vector<float> sums(4096, 0);
  for (size_t i = 0; i < x.size(); ++i) sums[i % 4096] += x[i];
  const Lowered l = lowered(Tensor(x, {64, 4096}).sum(0), {}, &cpu);
  EXPECT_NE(l.describe.find("opts=[UPCAST(axis=0, amount=4), UPCAST(axis=0, amount=4), UNROLL"),
            std::string::npos)
      << l.describe;
  EXPECT_EQ(agree(l), sums);
}

// Every combination of tile-friendly and unfriendly sizes, with A or B transposed: whatever the
// heuristics pick (shuffle tiles of 1, 2 or 4 rows per lane, 4 or 1 columns, register tiles, none),
// the device, the interpreter and the closed form agree.
TEST_F(Opts, LavapipeHeuristicsAreRightOnASweepOfShapes) {
  if (!target_.subgroup_shuffle || target_.subgroup_size != 8)
    GTEST_SKIP() << "needs 8-wide subgroups";
  const DeviceTraits cpu = lavapipe_traits();
  for (const int64_t m : {8, 24, 64})
    for (const int64_t n : {8, 24, 32, 96})
      for (const int64_t k : {7, 16})
        for (const int transposed : {0, 1, 2}) {
          SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n) +
                       " transposed " + std::to_string(transposed));
          const std::vector<float> a = ints(m * k, 7, 11, 5), b = ints(k * n, 5, 13, 6);
          std::vector<float> at(a.size()), bt(b.size());
          for (int64_t i = 0; i < m; ++i)
            for (int64_t q = 0; q < k; ++q) at[size_t(q * m + i)] = a[size_t(i * k + q)];
          for (int64_t q = 0; q < k; ++q)
            for (int64_t j = 0; j < n; ++j) bt[size_t(j * k + q)] = b[size_t(q * n + j)];
          const Tensor ta = transposed == 1 ? Tensor(at, {k, m}).transpose() : Tensor(a, {m, k});
          const Tensor tb = transposed == 2 ? Tensor(bt, {n, k}).transpose() : Tensor(b, {k, n});
          EXPECT_EQ(agree(lowered(ta.matmul(tb), {}, &cpu)), matmul_closed_form(a, b, m, k, n));
        }
}

// A 1-D convolution as the CNN will run it: a reduce over (cin, k) of a windowed view of the
// input (x[b, ci, i + k], built from movement ops the way tinygrad's pool does) times weights
// w[co, ci, k]. The same rule that tiles a matmul tiles it (lanes along the output positions,
// where the windows are contiguous; weights shuffled along co), and its weight gradient (a reduce
// over (b, i) with outputs (co, ci, k)) too.
TEST_F(Opts, LavapipeHeuristicsTileConvolutionsAndTheirWeightGradients) {
  if (!target_.subgroup_shuffle || target_.subgroup_size != 8)
    GTEST_SKIP() << "needs 8-wide subgroups";
  const DeviceTraits cpu = lavapipe_traits();
  const int64_t batch = 2, cin = 8, width = 34, taps = 3, cout = 16, out_w = width - taps + 1;
  const std::vector<float> x = ints(batch * cin * width, 7, 11, 5),
                           w = ints(cout * cin * taps, 5, 13, 6);
  // windows[b, ci, k, i] = x[b, ci, i + k]
  auto windows = [&](const Tensor& t) {
    return t.reshape({batch, cin, 1, width})
        .expand({batch, cin, taps, width})
        .reshape({batch, cin, taps * width})
        .pad({{0, 0}, {0, 0}, {0, taps}})
        .reshape({batch, cin, taps, width + 1})
        .shrink({{0, batch}, {0, cin}, {0, taps}, {0, out_w}});
  };
  std::vector<float> want(size_t(batch * cout * out_w), 0);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t co = 0; co < cout; ++co)
      for (int64_t i = 0; i < out_w; ++i)
        for (int64_t ci = 0; ci < cin; ++ci)
          for (int64_t k = 0; k < taps; ++k)
            want[size_t((b * cout + co) * out_w + i)] +=
                w[size_t((co * cin + ci) * taps + k)] * x[size_t((b * cin + ci) * width + i + k)];
  const Tensor y = (windows(Tensor(x, {batch, cin, width})).reshape({batch, 1, cin, taps, out_w}) *
                    Tensor(w, {cout, cin, taps}).reshape({1, cout, cin, taps, 1}))
                       .sum({2, 3});
  const Lowered fwd = lowered(y, {}, &cpu);
  EXPECT_NE(fwd.describe.find("SHUFFLE"), std::string::npos) << fwd.describe;
  EXPECT_EQ(agree(fwd), want);

  // dw[co, ci, k] = sum over (b, i) of dy[b, co, i] * x[b, ci, i + k]
  const std::vector<float> dy = ints(batch * cout * out_w, 3, 7, 3);
  std::vector<float> dw(size_t(cout * cin * taps), 0);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t co = 0; co < cout; ++co)
      for (int64_t ci = 0; ci < cin; ++ci)
        for (int64_t k = 0; k < taps; ++k)
          for (int64_t i = 0; i < out_w; ++i)
            dw[size_t((co * cin + ci) * taps + k)] +=
                dy[size_t((b * cout + co) * out_w + i)] * x[size_t((b * cin + ci) * width + i + k)];
  const Tensor g = (Tensor(dy, {batch, cout, out_w}).reshape({batch, cout, 1, 1, out_w}) *
                    windows(Tensor(x, {batch, cin, width})).reshape({batch, 1, cin, taps, out_w}))
                       .sum({0, 4});
  const Lowered bwd = lowered(g, {}, &cpu);
  EXPECT_NE(bwd.describe.find("SHUFFLE"), std::string::npos) << bwd.describe;
  EXPECT_EQ(agree(bwd), dw);
}

// The weight gradient of a convolution with one input channel (beautiful_mnist's first layer):
// outputs (co, k) with no axis for a shuffle tile's rows, so the register tile takes the kernel
// taps whole as its rows (UPCAST by 5) next to 4 output channels.
TEST_F(Opts, LavapipeHeuristicsTileASingleChannelWeightGradientByWholeTaps) {
  const DeviceTraits cpu = lavapipe_traits();
  const int64_t batch = 3, width = 37, taps = 5, cout = 16, out_w = width - taps + 1;
  const std::vector<float> x = ints(batch * width, 7, 11, 5),
                           dy = ints(batch * cout * out_w, 3, 7, 3);
  std::vector<float> dw(size_t(cout * taps), 0);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t co = 0; co < cout; ++co)
      for (int64_t k = 0; k < taps; ++k)
        for (int64_t i = 0; i < out_w; ++i)
          dw[size_t(co * taps + k)] +=
              dy[size_t((b * cout + co) * out_w + i)] * x[size_t(b * width + i + k)];
  // windows[b, k, i] = x[b, i + k]
  const Tensor windows = Tensor(x, {batch, 1, width})
                             .expand({batch, taps, width})
                             .reshape({batch, taps * width})
                             .pad({{0, 0}, {0, taps}})
                             .reshape({batch, taps, width + 1})
                             .shrink({{0, batch}, {0, taps}, {0, out_w}});
  const Tensor g =
      (Tensor(dy, {batch, cout, 1, out_w}) * windows.reshape({batch, 1, taps, out_w})).sum({0, 3});
  const Lowered bwd = lowered(g, {}, &cpu);
  EXPECT_NE(bwd.describe.find("amount=5)"), std::string::npos) << bwd.describe;
  EXPECT_EQ(bwd.describe.find("SHUFFLE"), std::string::npos) << bwd.describe;
  EXPECT_EQ(agree(bwd), dw);
}

// A weight gradient dy^T x reduced over the batch whose input axis leaves each lane an odd count
// of rows (112 / 16 = 7 pairs, as a 784-wide first layer leaves 49): the shuffle tile takes 7
// rows (vec2s) per lane, not 2, and agrees with the closed form.
TEST_F(Opts, LavapipeHeuristicsShuffleRowsThatDivideAnAxisOfNoPowerOfTwo) {
  if (!target_.subgroup_shuffle || target_.subgroup_size != 8)
    GTEST_SKIP() << "needs 8-wide subgroups";
  const DeviceTraits cpu = lavapipe_traits();
  const int64_t batch = 16, outs = 32, ins = 112;
  const std::vector<float> dy = ints(batch * outs, 7, 11, 5), x = ints(batch * ins, 5, 13, 6);
  std::vector<float> dyt(dy.size());
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t o = 0; o < outs; ++o) dyt[size_t(o * batch + b)] = dy[size_t(b * outs + o)];
  const Lowered l =
      lowered(Tensor(dy, {batch, outs}).transpose().matmul(Tensor(x, {batch, ins})), {}, &cpu);
  EXPECT_NE(l.describe.find("SHUFFLE(axis=1, amount=8), UPCAST(axis=1, amount=7)"),
            std::string::npos)
      << l.describe;
  EXPECT_EQ(agree(l), matmul_closed_form(dyt, x, outs, batch, ins));
}

// Vector loads of `width` lanes in a lowered program.
int vector_loads(const Program& p, int width) {
  int n = 0;
  for (const UOpPtr& u : p.uops) n += u->op == Ops::LOAD && u->dtype.count == width;
  return n;
}

// dy^T x for a dy of (batch, outs) and an x of (batch, ins), both row-major: a weight gradient.
std::vector<float> weight_gradient(const std::vector<float>& dy, const std::vector<float>& x,
                                   int64_t batch, int64_t outs, int64_t ins) {
  std::vector<float> dyt(dy.size());
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t o = 0; o < outs; ++o) dyt[size_t(o * batch + b)] = dy[size_t(b * outs + o)];
  return matmul_closed_form(dyt, x, outs, batch, ins);
}

// The MLP's first weight gradient, dy^T x reduced over the batch, strided in both operands: x is
// contiguous along the shuffled axis (its inputs), so each lane loads 2 neighbouring inputs as
// one vec2 (112 = 16 * 7, as 784 = 16 * 49: 7 vec2s per lane) or, where the shared operand takes
// 32 rows, 4 as one vec4; and
// the result agrees with the closed form, also where the batch is odd (no unroll by 4).
TEST_F(Opts, LavapipeHeuristicsShuffleVectorsOfAnOperandContiguousAlongTheShuffledAxis) {
  if (!target_.subgroup_shuffle || target_.subgroup_size != 8)
    GTEST_SKIP() << "needs 8-wide subgroups";
  const DeviceTraits cpu = lavapipe_traits();
  struct Case {
    int64_t batch, outs, ins;
    const char* opts;
    int width;
  };
  for (const Case c :
       {Case{8, 32, 112,
             "UPCAST(axis=1, amount=2), SHUFFLE(axis=1, amount=8), "
             "UPCAST(axis=1, amount=7)",
             2},
        // The lanes along the inputs (4 each): dy is the shared one, 4 outputs a lane.
        Case{12, 32, 64,
             "LOCAL(axis=1, amount=8), UPCAST(axis=0, amount=4), "
             "SHUFFLE(axis=0, amount=8)",
             4},
        Case{7, 64, 48,
             "UPCAST(axis=1, amount=2), SHUFFLE(axis=1, amount=8), "
             "UPCAST(axis=1, amount=3)",
             2}}) {
    SCOPED_TRACE(std::to_string(c.batch) + "x" + std::to_string(c.outs) + "x" +
                 std::to_string(c.ins));
    const std::vector<float> dy = ints(c.batch * c.outs, 7, 11, 5),
                             x = ints(c.batch * c.ins, 5, 13, 6);
    const Lowered l = lowered(
        Tensor(dy, {c.batch, c.outs}).transpose().matmul(Tensor(x, {c.batch, c.ins})), {}, &cpu);
    EXPECT_NE(l.describe.find(c.opts), std::string::npos) << l.describe;
    EXPECT_GT(vector_loads(l.program, c.width), 0) << l.describe;
    EXPECT_EQ(agree(l), weight_gradient(dy, x, c.batch, c.outs, c.ins));
  }
  // Where 16 does not divide the inputs (40), the shared rows stay one per lane, as before.
  const std::vector<float> dy = ints(8 * 32, 7, 11, 5), x = ints(8 * 40, 5, 13, 6);
  const Lowered l = lowered(Tensor(dy, {8, 32}).transpose().matmul(Tensor(x, {8, 40})), {}, &cpu);
  EXPECT_NE(l.describe.find("LOCAL(axis=0, amount=8), SHUFFLE(axis=1, amount=8)"),
            std::string::npos)
      << l.describe;
  EXPECT_EQ(agree(l), weight_gradient(dy, x, 8, 32, 40));
}

// Without four columns (48 outputs by 40 inputs: 32 divides neither), no vector load forms along
// the lanes, so the shared operand takes no width either (it would only double the rows per
// lane): the tile is one column a lane, one row a lane shuffled, as before vector widths.
TEST_F(Opts, LavapipeHeuristicsTakeNoWidthWithoutFourColumns) {
  if (!target_.subgroup_shuffle || target_.subgroup_size != 8)
    GTEST_SKIP() << "needs 8-wide subgroups";
  const DeviceTraits cpu = lavapipe_traits();
  const std::vector<float> dy = ints(8 * 48, 7, 11, 5), x = ints(8 * 40, 5, 13, 6);
  const Lowered l = lowered(Tensor(dy, {8, 48}).transpose().matmul(Tensor(x, {8, 40})), {}, &cpu);
  // Before: LOCAL(axis=1, amount=8), UPCAST(axis=0, amount=2), SHUFFLE(axis=0, amount=8), ...
  EXPECT_NE(l.describe.find("opts=[LOCAL(axis=1, amount=8), SHUFFLE(axis=0, amount=8), "
                            "UPCAST(axis=0, amount=6)"),
            std::string::npos)
      << l.describe;
  EXPECT_EQ(agree(l), weight_gradient(dy, x, 8, 48, 40));
}

// The shuffle tiles the Lavapipe heuristics choose for weight gradients keep their accumulators
// (the sizes of the upcast and shuffle axes) within kMaxShuffleOutputs = 512 (heuristics.cpp):
// the MLP's first layer's (784 inputs) is the largest, 4 x 8 x 2 x 7 = 448.
TEST_F(Opts, LavapipeHeuristicsKeepShuffleTilesWithinTheAccumulatorBudget) {
  const DeviceTraits cpu = lavapipe_traits();
  int64_t largest = 0;
  for (const auto& [batch, outs, ins] : {std::tuple{16, 128, 784},
                                         {8, 32, 112},
                                         {8, 128, 896},
                                         {8, 32, 64},
                                         {8, 64, 448},
                                         {8, 48, 40}}) {
    Schedule s = create_schedule(
        {Tensor(std::vector<float>(size_t(batch * outs), 1.0f), {batch, outs})
             .transpose()
             .matmul(Tensor(std::vector<float>(size_t(batch * ins), 1.0f), {batch, ins}))
             .node()});
    Kernel k(s.items.back().ast);
    apply_heuristics(k, cpu);
    int64_t outputs = 1;
    for (size_t a = 0; a < k.kinds().size(); ++a)
      if (k.kinds()[a] == AxisKind::Upcast || k.kinds()[a] == AxisKind::Shuffle)
        outputs *= k.full_shape()[a];
    EXPECT_LE(outputs, 512) << k.describe();
    largest = std::max(largest, outputs);
  }
  if (target_.subgroup_shuffle && target_.subgroup_size == 8) EXPECT_EQ(largest, 448);
}

// x padded along the shuffled axis, the pad's edge inside a vec2 (47 inputs padded to 48): the
// stride along i is 1 but the lanes' masks differ, so the shared rows take no width (before:
// UPCAST 2 on i, every vector then rejected by the lowerer), and no vector load of x forms.
TEST_F(Opts, LavapipeHeuristicsTakeNoWidthAlongAMaskedAxis) {
  if (!target_.subgroup_shuffle || target_.subgroup_size != 8)
    GTEST_SKIP() << "needs 8-wide subgroups";
  const DeviceTraits cpu = lavapipe_traits();
  const int64_t batch = 8, outs = 32, ins = 47;
  const std::vector<float> dy = ints(batch * outs, 7, 11, 5), x = ints(batch * ins, 5, 13, 6);
  std::vector<float> padded(size_t(batch * (ins + 1)), 0.0f);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < ins; ++i) padded[size_t(b * (ins + 1) + i)] = x[size_t(b * ins + i)];
  const Lowered l = lowered(
      Tensor(dy, {batch, outs}).transpose().matmul(Tensor(x, {batch, ins}).pad({{0, 0}, {0, 1}})),
      {}, &cpu);
  EXPECT_NE(l.describe.find("LOCAL(axis=0, amount=8), SHUFFLE(axis=1, amount=8)"),
            std::string::npos)
      << l.describe;
  EXPECT_EQ(vector_loads(l.program, 2), 0) << l.describe;
  EXPECT_EQ(agree(l), weight_gradient(dy, padded, batch, outs, ins + 1));
}

// Vector loads of `width` lanes from global buffer `slot`.
int vector_loads_of(const Program& p, int64_t slot) {
  int n = 0;
  for (const UOpPtr& u : p.uops)
    if (u->op == Ops::LOAD && u->dtype.count > 1 && u->src[0]->src[0]->op == Ops::DEFINE_GLOBAL &&
        u->src[0]->src[0]->arg_as<int64_t>() == slot)
      ++n;
  return n;
}

// Whether the GLSL reads buffer `slot` by aligned `width`-lane vector accesses: one element of its
// aliased vector array (dataNx4.v[i >> 2]) or one texel of its vector texel view.
bool aligned_vector_reads(const std::string& glsl, int64_t slot, int width) {
  const std::string name = "data" + std::to_string(slot) + "x" + std::to_string(width);
  return glsl.find(name + ".v[") != std::string::npos ||
         glsl.find("texelFetch(" + name + ", ") != std::string::npos;
}

// The global buffer of `bytes` bytes (an input told apart by its size).
int64_t slot_of_size(const Lowered& l, size_t bytes) {
  for (size_t j = 0; j < l.buffers.size(); ++j)
    if (l.buffers[j].size() == bytes) return int64_t(j);
  ADD_FAILURE() << "no buffer of " << bytes << " bytes";
  return -1;
}

// The heuristics' vector loads of x along i must not form wrong vectors. x a shrink one element
// in (rows of 65 or 49 elements: no row starts on a vector): it may be read as vectors, but the
// GLSL has no aligned alias access (dataNx4.v[i >> 2]) of it. x padded by one element (its edge
// inside a vector): no vector load of x at all. Values agree with the interpreter and the
// closed form. 64 inputs: x along the lanes' 4 columns; 48: x the shuffled rows' vec2s.
TEST_F(Opts, LavapipeHeuristicsFormNoWrongVectorsOfAShrunkOrPaddedOperand) {
  const DeviceTraits cpu = lavapipe_traits_on(target_);
  for (const auto& [batch, outs, ins] : {std::tuple{6, 32, 64}, {6, 32, 48}}) {
    SCOPED_TRACE(std::to_string(batch) + "x" + std::to_string(outs) + "x" + std::to_string(ins));
    const std::vector<float> dy = ints(batch * outs, 7, 11, 5),
                             big = ints(batch * (ins + 1), 5, 13, 6);
    std::vector<float> x(size_t(batch * ins)), padded(size_t(batch * ins), 0.0f);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < ins; ++i) {
        x[size_t(b * ins + i)] = big[size_t(b * (ins + 1) + i + 1)];
        if (i < ins - 1) padded[size_t(b * ins + i)] = big[size_t(b * (ins + 1) + i)];
      }
    const Lowered shrunk =
        lowered(Tensor(dy, {batch, outs})
                    .transpose()
                    .matmul(Tensor(big, {batch, ins + 1}).shrink({{0, batch}, {1, ins + 1}})),
                {}, &cpu);
    const int64_t slot = slot_of_size(shrunk, big.size() * sizeof(float));
    const std::string glsl = render_glsl(shrunk.program, target_);
    EXPECT_FALSE(aligned_vector_reads(glsl, slot, 4)) << glsl;
    EXPECT_FALSE(aligned_vector_reads(glsl, slot, 2)) << glsl;
    EXPECT_EQ(agree(shrunk), weight_gradient(dy, x, batch, outs, ins));
    // The same x stored on its own is read by aligned vector accesses: what the above looks for.
    const Lowered plain =
        lowered(Tensor(dy, {batch, outs}).transpose().matmul(Tensor(x, {batch, ins})), {}, &cpu);
    const int64_t x_slot = slot_of_size(plain, x.size() * 4);
    const std::string plain_glsl = render_glsl(plain.program, target_);
    EXPECT_TRUE(aligned_vector_reads(plain_glsl, x_slot, 4) ||
                aligned_vector_reads(plain_glsl, x_slot, 2))
        << plain_glsl;
    // x's first ins - 1 columns of `big` (as rows of ins - 1), padded by one zero.
    std::vector<float> narrow;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < ins - 1; ++i) narrow.push_back(big[size_t(b * (ins + 1) + i)]);
    const Lowered pad = lowered(Tensor(dy, {batch, outs})
                                    .transpose()
                                    .matmul(Tensor(narrow, {batch, ins - 1}).pad({{0, 0}, {0, 1}})),
                                {}, &cpu);
    EXPECT_EQ(vector_loads_of(pad.program, slot_of_size(pad, narrow.size() * sizeof(float))), 0)
        << pad.describe;
    EXPECT_EQ(agree(pad), weight_gradient(dy, padded, batch, outs, ins));
  }
}

// The lowerer reads a load as one vector along an upcast axis that is not the innermost (whose
// loads the LaneVectorizer takes with the arithmetic): x's 4 inputs per invocation in a register
// tile of 4 inputs by 4 outputs, where the reduce (the batch) is strided for both operands.
// Without shuffles, with shuffles, and with x's values inf and nan, which propagate as the
// interpreter's scalar loads do.
TEST_F(Opts, LoadsAreVectorsAlongAnUpcastAxisThatIsNotTheInnermost) {
  const int64_t batch = 6, outs = 32, ins = 64;
  const std::vector<float> dy = ints(batch * outs, 7, 11, 5);
  std::vector<float> x = ints(batch * ins, 5, 13, 6);
  const std::vector<Opt> tile{{O::UPCAST, 1, 4}, {O::UPCAST, 0, 4}};
  const Lowered plain =
      lowered(Tensor(dy, {batch, outs}).transpose().matmul(Tensor(x, {batch, ins})), tile);
  EXPECT_GT(vector_loads(plain.program, 4), 1) << plain.describe;
  EXPECT_EQ(agree(plain), weight_gradient(dy, x, batch, outs, ins));
  x[5] = std::numeric_limits<float>::infinity();
  x[size_t(ins + 9)] = -std::numeric_limits<float>::infinity();
  x[size_t(3 * ins + 17)] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> want = weight_gradient(dy, x, batch, outs, ins);
  const std::vector<float> got =
      agree(lowered(Tensor(dy, {batch, outs}).transpose().matmul(Tensor(x, {batch, ins})), tile));
  ASSERT_EQ(got.size(), want.size());
  int nans = 0, infs = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << i;
      ++nans;
    } else {
      EXPECT_EQ(got[i], want[i]) << i;
      infs += std::isinf(want[i]);
    }
  }
  EXPECT_GT(nans, 0);  // 0 * inf where dy is 0, and every output of the nan's column
  EXPECT_GT(infs, 0);
  if (!target_.subgroup_shuffle || target_.subgroup_size != 8) return;
  const Lowered shuffled =
      lowered(Tensor(dy, {batch, outs}).transpose().matmul(Tensor(x, {batch, ins})),
              {{O::UPCAST, 0, 4}, {O::LOCAL, 0, 8}, {O::UPCAST, 1, 4}, {O::SHUFFLE, 1, 8}});
  EXPECT_GT(vector_loads(shuffled.program, 4), 1) << shuffled.describe;
  const std::vector<float> got_shuffled = agree(shuffled);
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(got_shuffled[i] == want[i] || (std::isnan(want[i]) && std::isnan(got_shuffled[i])))
        << i;
}

// dy[B + 1, O]^T x[B, I].pad(((0, 1), (0, 0))): dy's last row is inf and x's padded row reads
// +0 through its mask, so every output is inf * 0 = nan. Lavapipe unrolls the short batch loop,
// where the mask becomes a constant and it folds y * 0 to 0 (see zero_masked_operand in the GLSL
// renderer): a masked load read as one vector must be guarded as a scalar one is, both where the
// product is a vector (the LaneVectorizer's) and where the vector's lanes are taken by GEPs and
// gathered again (unrolled_vector along an upcast axis that is not the innermost). Both forced
// tiles gave finite numbers before the guard saw through them. With the heuristics' opts and with
// vector loads forced along each operand's axis.
TEST_F(Opts, AMaskedVectorLoadTimesInfIsNan) {
  const DeviceTraits cpu = lavapipe_traits_on(target_);
  for (const int64_t batch : {3, 7}) {
    const int64_t outs = 32, ins = 64;
    std::vector<float> dy = ints((batch + 1) * outs, 7, 11, 5);
    for (int64_t o = 0; o < outs; ++o)
      dy[size_t(batch * outs + o)] = std::numeric_limits<float>::infinity();
    const std::vector<float> x = ints(batch * ins, 5, 13, 6);
    auto product = [&] {
      return Tensor(dy, {batch + 1, outs})
          .transpose()
          .matmul(Tensor(x, {batch, ins}).pad({{0, 1}, {0, 0}}));
    };
    std::vector<Lowered> runs;
    runs.push_back(lowered(product(), {}, &cpu));
    runs.push_back(lowered(product(), {{O::UPCAST, 1, 4}, {O::UPCAST, 0, 4}}));
    runs.push_back(lowered(product(), {{O::UPCAST, 0, 4}, {O::UPCAST, 1, 4}}));
    if (target_.subgroup_shuffle && target_.subgroup_size == 8)
      runs.push_back(lowered(
          product(), {{O::UPCAST, 0, 4}, {O::LOCAL, 0, 8}, {O::UPCAST, 1, 4}, {O::SHUFFLE, 1, 8}}));
    int vectors = 0;
    for (const Lowered& l : runs) {
      SCOPED_TRACE(std::to_string(batch) + ": " + l.describe);
      vectors += vector_loads(l.program, 4) + vector_loads(l.program, 2);
      const std::vector<float> got = agree(l);
      ASSERT_EQ(got.size(), size_t(outs * ins));
      int not_nan = 0;
      for (float v : got) not_nan += !std::isnan(v);
      EXPECT_EQ(not_nan, 0);
    }
    EXPECT_GT(vectors, 0);  // the forced tiles read x as vectors
  }
}

// What Opts.AMaskedVectorLoadTimesInfIsNan and LavapipeHeuristicsFormNoWrongVectors... met on an
// H100 (32-wide subgroups): Lavapipe's 8-lane shuffle tile, rendered for a 32-wide device, is a
// kernel the renderer refuses. lavapipe_traits_on(target) gives such a device no shuffle tile, and
// the kernel renders and runs (here on Lavapipe, whose subgroup size then does not matter).
TEST_F(Opts, LavapipeTraitsOnAThirtyTwoWideTargetMakeKernelsItAccepts) {
  target_.subgroup_size = 32;
  const int64_t batch = 3, outs = 32, ins = 64;
  const std::vector<float> dy = ints(batch * outs, 7, 11, 5), x = ints(batch * ins, 5, 13, 6);
  const Tensor product = Tensor(dy, {batch, outs}).transpose().matmul(Tensor(x, {batch, ins}));
  const DeviceTraits eight = lavapipe_traits();
  const Lowered tile = lowered(product, {}, &eight);
  ASSERT_NE(tile.describe.find("SHUFFLE"), std::string::npos) << tile.describe;
  EXPECT_THROW(render_glsl(tile.program, target_), Error);
  const DeviceTraits own = lavapipe_traits_on(target_);
  EXPECT_EQ(own.shuffle_lanes, 0);
  const Lowered l = lowered(product, {}, &own);
  EXPECT_EQ(l.describe.find("SHUFFLE"), std::string::npos) << l.describe;
  EXPECT_EQ(agree(l), weight_gradient(dy, x, batch, outs, ins));
}

// A division fused into a reduce and the same for every output along one axis (a softmax's
// backward inside the next layer's weight gradient, out[c, o] = sum_b (d[b, c] / s[b]) h[b, o]):
// on a device with share_costly_ops (Lavapipe), 16 outputs per invocation along o share each
// quotient, where a plain product of the same shape keeps 4. Divisions by powers of two keep the
// closed form exact.
TEST_F(Opts, LavapipeHeuristicsShareACostlyOpAcrossMoreColumns) {
  const DeviceTraits cpu = lavapipe_traits();
  const int64_t batch = 8, classes = 10, outs = 128;
  const std::vector<float> d = ints(batch * classes, 7, 11, 5), h = ints(batch * outs, 5, 13, 6);
  std::vector<float> s(static_cast<size_t>(batch)), q(static_cast<size_t>(classes * batch));
  for (int64_t b = 0; b < batch; ++b) s[size_t(b)] = float(1 << (b % 3));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t c = 0; c < classes; ++c)
      q[size_t(c * batch + b)] = d[size_t(b * classes + c)] / s[size_t(b)];
  const Tensor dt(d, {batch, classes}), ht(h, {batch, outs});
  const Lowered shared = lowered((dt / Tensor(s, {batch, 1})).transpose().matmul(ht), {}, &cpu);
  EXPECT_NE(shared.describe.find("opts=[UPCAST(axis=1, amount=4), UPCAST(axis=1, amount=4), "),
            std::string::npos)
      << shared.describe;
  EXPECT_EQ(agree(shared), matmul_closed_form(q, h, classes, batch, outs));
  const Lowered plain = lowered(dt.transpose().matmul(ht), {}, &cpu);
  EXPECT_NE(plain.describe.find("opts=[UPCAST(axis=1, amount=4), UNROLL"), std::string::npos)
      << plain.describe;
  // A device without the trait (the GPU defaults; Lavapipe's traits with it off) keeps 4
  // columns, and the same values.
  DeviceTraits without = cpu;
  without.share_costly_ops = false;
  for (const DeviceTraits& traits : {DeviceTraits{}, without}) {
    const Lowered four = lowered((dt / Tensor(s, {batch, 1})).transpose().matmul(ht), {}, &traits);
    EXPECT_NE(four.describe.find("opts=[UPCAST(axis=1, amount=4), UNROLL"), std::string::npos)
        << four.describe;
    EXPECT_EQ(agree(four), matmul_closed_form(q, h, classes, batch, outs));
  }
}

// The same for a shape that takes a shuffle tile (out[b, o] = sum_c (d[b, c] / s[b]) w[c, o], the
// hidden layer's input gradient from a softmax's backward): the quotients depend on b, which the
// tile would shuffle, so every lane would divide for all 8 lanes' rows. With share_costly_ops the
// tile takes 64 columns of one row instead (d / s computed once per row and column group); a
// plain product of the same shape, or one whose costly op does not vary along the rows, keeps
// its shuffle tile.
TEST_F(Opts, LavapipeHeuristicsGiveUpAShuffleTileThatWouldRepeatACostlyOp) {
  const DeviceTraits cpu = lavapipe_traits();
  const int64_t batch = 128, classes = 10, outs = 128;
  const std::vector<float> d = ints(batch * classes, 7, 11, 5), w = ints(classes * outs, 5, 13, 6);
  std::vector<float> s(static_cast<size_t>(batch)), q(static_cast<size_t>(batch * classes));
  for (int64_t b = 0; b < batch; ++b) s[size_t(b)] = float(1 << (b % 3));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t c = 0; c < classes; ++c)
      q[size_t(b * classes + c)] = d[size_t(b * classes + c)] / s[size_t(b)];
  const Tensor dt(d, {batch, classes}), wt(w, {classes, outs});
  const Lowered rows = lowered((dt / Tensor(s, {batch, 1})).matmul(wt), {}, &cpu);
  EXPECT_NE(rows.describe.find("opts=[UPCAST(axis=1, amount=4), UPCAST(axis=1, amount=4), "
                               "UPCAST(axis=1, amount=4)]"),
            std::string::npos)
      << rows.describe;
  EXPECT_EQ(agree(rows), matmul_closed_form(q, w, batch, classes, outs));
  const Lowered plain = lowered(dt.matmul(wt), {}, &cpu);
  EXPECT_NE(plain.describe.find("SHUFFLE"), std::string::npos) << plain.describe;
  // A costly op that does not vary along the shuffled rows (d[b, c] * (1 / s[c])) is computed
  // once per lane: the tile stays.
  std::vector<float> sc(static_cast<size_t>(classes));
  for (int64_t c = 0; c < classes; ++c) sc[size_t(c)] = float(1 << (c % 3));
  const Lowered per_class =
      lowered((dt * Tensor(sc, {1, classes}).reciprocal()).matmul(wt), {}, &cpu);
  EXPECT_NE(per_class.describe.find("SHUFFLE"), std::string::npos) << per_class.describe;
  DeviceTraits without = cpu;
  without.share_costly_ops = false;
  const Lowered shuffled = lowered((dt / Tensor(s, {batch, 1})).matmul(wt), {}, &without);
  EXPECT_NE(shuffled.describe.find("SHUFFLE"), std::string::npos) << shuffled.describe;
  EXPECT_EQ(agree(shuffled), matmul_closed_form(q, w, batch, classes, outs));
}

// A costly op after the reduce (a matmul's rows scaled by 1 / s[b]: a per-row rsqrt or 1 / norm,
// attention's p @ v * (1 / sum)) runs once per output whatever the tile: the kernel keeps the
// plain matmul's shuffle tile and opts (it took 3-5x longer with UPCASTs only), and its values.
TEST_F(Opts, LavapipeHeuristicsKeepTheShuffleTileForACostlyOpAfterTheReduce) {
  const DeviceTraits cpu = lavapipe_traits();
  const int64_t m = 128, k = 256, n = 128;
  const std::vector<float> x = ints(m * k, 7, 11, 5), w = ints(k * n, 5, 13, 6);
  std::vector<float> s(static_cast<size_t>(m));
  for (int64_t b = 0; b < m; ++b) s[size_t(b)] = float(1 << (b % 3));
  std::vector<float> want = matmul_closed_form(x, w, m, k, n);
  for (int64_t b = 0; b < m; ++b)
    for (int64_t j = 0; j < n; ++j) want[size_t(b * n + j)] /= s[size_t(b)];
  const Tensor xt(x, {m, k}), wt(w, {k, n}), st(s, {m, 1});
  const auto opts_of = [](const std::string& describe) {
    const size_t at = describe.find("opts=[");
    return at == std::string::npos ? describe : describe.substr(at, describe.find(']', at) - at);
  };
  const Lowered plain = lowered(xt.matmul(wt), {}, &cpu);
  EXPECT_NE(plain.describe.find("SHUFFLE"), std::string::npos) << plain.describe;
  for (const Tensor& scaled : {xt.matmul(wt) * st.reciprocal(), xt.matmul(wt) / st}) {
    const Lowered l = lowered(scaled, {}, &cpu);
    EXPECT_EQ(opts_of(l.describe), opts_of(plain.describe)) << l.describe;
    EXPECT_EQ(agree(l), want);
  }
}

// The same shared quotient where the register tile's rows are two short axes taken whole
// (out[i, j, o] = sum_b (d[b, i, j] / s[b]) h[b, o], i and j 3 and 5 long, d stored j-major so
// that they do not merge): 4 columns x 15 rows are 60 accumulators, so the 16 columns (240) are
// left out: at most 128 per invocation.
TEST_F(Opts, LavapipeHeuristicsShareACostlyOpOnlyWithinTheAccumulatorLimit) {
  const DeviceTraits cpu = lavapipe_traits();
  const int64_t batch = 8, is = 3, js = 5, outs = 1024;
  const std::vector<float> d = ints(batch * js * is, 7, 11, 5), h = ints(batch * outs, 5, 13, 6);
  std::vector<float> s(static_cast<size_t>(batch)), want(size_t(is * js * outs), 0);
  for (int64_t b = 0; b < batch; ++b) s[size_t(b)] = float(1 << (b % 3));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < is; ++i)
      for (int64_t j = 0; j < js; ++j)
        for (int64_t o = 0; o < outs; ++o)
          want[size_t((i * js + j) * outs + o)] +=
              d[size_t((b * js + j) * is + i)] / s[size_t(b)] * h[size_t(b * outs + o)];
  const Tensor q = Tensor(d, {batch, js, is}).transpose(1, 2) / Tensor(s, {batch, 1, 1});
  const Tensor g = (q.reshape({batch, is, js, 1}) * Tensor(h, {batch, 1, 1, outs})).sum(0);
  const Lowered l = lowered(g, {}, &cpu);
  EXPECT_NE(l.describe.find("opts=[UPCAST(axis=2, amount=4), UPCAST(axis=1, amount=5), "
                            "UPCAST(axis=0, amount=3), UNROLL"),
            std::string::npos)
      << l.describe;
  EXPECT_EQ(agree(l), want);
}

// A stack along a short axis (Adam's two moments in one tensor): the kernel keeps that axis (a
// pad cuts it, so it does not merge with the next) and takes it whole into registers after the
// 4 elements per invocation, so each part's mask is a constant: every invocation computes both
// parts of 4 elements from unmasked vec4 loads, and loads what they share once.
TEST_F(Opts, LavapipeHeuristicsTakeAShortStackedAxisWhole) {
  const DeviceTraits cpu = lavapipe_traits();
  const int64_t n = 4096;
  const std::vector<float> a = ints(n, 7, 11, 5), b = ints(n, 5, 13, 6);
  std::vector<float> want(size_t(2 * n));
  for (int64_t i = 0; i < n; ++i) {
    want[size_t(i)] = a[size_t(i)] * 2 + b[size_t(i)];
    want[size_t(n + i)] = a[size_t(i)] * b[size_t(i)];
  }
  const Tensor ta(a, {n}), tb(b, {n});
  const Lowered l = lowered(Tensor::stack(std::vector<Tensor>{ta * 2 + tb, ta * tb}, 0), {}, &cpu);
  EXPECT_NE(l.describe.find("full_shape=(1, 1024, 2, 4)"), std::string::npos) << l.describe;
  EXPECT_NE(l.describe.find("opts=[UPCAST(axis=1, amount=4), UPCAST(axis=0, amount=2)]"),
            std::string::npos)
      << l.describe;
  EXPECT_EQ(agree(l), want);
  // Every load is unmasked: the masks folded away with each part's constant index.
  EXPECT_EQ(render_glsl(l.program, target_).find("?data"), std::string::npos);
}

// A padded convolution on channels-last operands (what conv2d's convolve makes of one with
// channels in fours): its 5-wide kernel rows take no unroll, so the channels do (UNROLL on an
// outer reduce axis), and each lane reads four channels of a padded window as one masked vec4
// load (the four share the window's mask). Against the direct loop.
TEST_F(Opts, LavapipeHeuristicsUnrollTheChannelsOfAChannelsLastPaddedConv) {
  if (!target_.subgroup_shuffle || target_.subgroup_size != 8)
    GTEST_SKIP() << "needs 8-wide subgroups";
  const DeviceTraits cpu = lavapipe_traits();
  const int64_t batch = 8, cin = 8, side = 6, taps = 5, cout = 8, pad = 2;
  const std::vector<float> x = ints(batch * cin * side * side, 7, 11, 5),
                           w = ints(cout * cin * taps * taps, 5, 13, 6);
  // Channels-last host data (uploads, so that the kernel reads them), viewed as (N, C, H, W) and
  // (Co, Ci, Kh, Kw): convolve's own channels-last copies are then no-ops.
  auto nhwc = [](const std::vector<float>& v, int64_t n, int64_t c, int64_t hw) {
    std::vector<float> out(v.size());
    for (int64_t a = 0; a < n; ++a)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t p = 0; p < hw; ++p)
          out[size_t((a * hw + p) * c + ch)] = v[size_t((a * c + ch) * hw + p)];
    return out;
  };
  const Tensor xs =
      Tensor(nhwc(x, batch, cin, side * side), {batch, side, side, cin}).permute({0, 3, 1, 2});
  const Tensor ws =
      Tensor(nhwc(w, cout, cin, taps * taps), {cout, taps, taps, cin}).permute({0, 3, 1, 2});
  std::vector<float> want(size_t(batch * cout * side * side), 0);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t co = 0; co < cout; ++co)
      for (int64_t y = 0; y < side; ++y)
        for (int64_t i = 0; i < side; ++i)
          for (int64_t ci = 0; ci < cin; ++ci)
            for (int64_t ky = 0; ky < taps; ++ky)
              for (int64_t kx = 0; kx < taps; ++kx) {
                const int64_t iy = y + ky - pad, ix = i + kx - pad;
                if (iy < 0 || iy >= side || ix < 0 || ix >= side) continue;
                want[size_t(((b * cout + co) * side + y) * side + i)] +=
                    w[size_t(((co * cin + ci) * taps + ky) * taps + kx)] *
                    x[size_t(((b * cin + ci) * side + iy) * side + ix)];
              }
  const Lowered conv = lowered(xs.conv2d(ws, {}, {.padding = pad}), {}, &cpu);
  EXPECT_NE(conv.describe.find("UNROLL"), std::string::npos) << conv.describe;
  int masked_vec4_loads = 0;
  for (const UOpPtr& u : conv.program.uops)
    if (u->op == Ops::LOAD && u->dtype.count == 4 && u->src.size() == 2 &&
        u->src[0]->src.size() == 3)
      ++masked_vec4_loads;
  EXPECT_GT(masked_vec4_loads, 0) << conv.describe;
  EXPECT_EQ(agree(conv), want);
}

// Elementwise kernels take 4 elements per invocation when there are enough invocations, though
// the last axis is short: a per-channel term broadcast over 20x20 images (BatchNorm's backward
// shape) is then computed once per 4 elements.
TEST_F(Opts, LavapipeHeuristicsUpcastElementwiseKernelsWithShortRows) {
  const DeviceTraits cpu = lavapipe_traits();
  const int64_t batch = 4, channels = 8, pixels = 400;
  const std::vector<float> x = ints(batch * channels * pixels, 7, 11, 5),
                           v = ints(channels, 3, 7, 0);
  const Tensor y =
      Tensor(x, {batch, channels, pixels}) * (Tensor(v, {1, channels, 1}) + 1).abs().sqrt();
  const Lowered e = lowered(y, {}, &cpu);
  EXPECT_NE(e.describe.find("UPCAST"), std::string::npos) << e.describe;
  agree(e);
}

// An elementwise kernel whose inputs share a layout its output does not have (channels-first
// inputs stored channels-last) runs in the inputs' order, so that its loads are the contiguous
// accesses and its one store the strided one; with one input and one output (a transposing copy)
// it keeps the output's order. Both agree with the interpreter and the closed form.
TEST_F(Opts, ElementwiseKernelsRunInTheOrderMostOfTheirLoadsShare) {
  const DeviceTraits cpu = lavapipe_traits();
  const int64_t n = 2, c = 8, h = 5, w = 6;
  const std::vector<float> a = ints(n * c * h * w, 7, 11, 5), b = ints(n * c * h * w, 5, 13, 6),
                           d = ints(n * c * h * w, 3, 7, 2);
  const Shape nchw{n, c, h, w};
  const Tensor stored =
      (Tensor(a, nchw) * Tensor(b, nchw) + Tensor(d, nchw)).permute({0, 2, 3, 1}).contiguous();
  EXPECT_EQ(Kernel(create_schedule({stored.node()}).items[0].ast).full_shape(),
            (Shape{n, c, h * w}));
  std::vector<float> want(a.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j)
      for (int64_t p = 0; p < h * w; ++p) {
        const size_t from = size_t((i * c + j) * h * w + p);
        want[size_t((i * h * w + p) * c + j)] = a[from] * b[from] + d[from];
      }
  EXPECT_EQ(agree(lowered(stored, {}, &cpu)), want);

  const Tensor copied = Tensor(a, nchw).permute({0, 2, 3, 1}).contiguous();
  EXPECT_EQ(Kernel(create_schedule({copied.node()}).items[0].ast).full_shape(),
            (Shape{n, h * w, c}));
}

// STAGE: classic shared-memory tiling (what GPUs want): a 2-D workgroup of 4x4 invocations, each
// with a 4x4 register tile, copies the A and B tiles of each 8-step of k into shared memory
// together, then computes from there: k of 1, 3 and 8 tile steps, and a fused epilogue.
TEST_F(Opts, StagedTilesAgreeWithTheInterpreterAndTheClosedForm) {
  const std::vector<Opt> opts{{O::UPCAST, 1, 4}, {O::UPCAST, 0, 4}, {O::LOCAL, 1, 4},
                              {O::LOCAL, 0, 4},  {O::UNROLL, 4, 8}, {O::STAGE, 5, 8}};
  for (const auto& [m, k, n] : {std::tuple{16, 8, 16}, {32, 24, 48}, {16, 64, 32}}) {
    SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n));
    const std::vector<float> a = ints(m * k, 7, 11, 5), b = ints(k * n, 5, 13, 6);
    const std::vector<float> want = matmul_closed_form(a, b, m, k, n);
    const Lowered l = lowered(Tensor(a, {m, k}).matmul(Tensor(b, {k, n})), opts);
    int tiles = 0, barriers = 0;
    for (const UOpPtr& u : l.program.uops)
      tiles += u->op == Ops::DEFINE_LOCAL, barriers += u->op == Ops::BARRIER;
    EXPECT_EQ(tiles, 2);     // A's and B's
    EXPECT_EQ(barriers, 2);  // tiles ready; tiles read
    EXPECT_EQ(agree(l), want);
    EXPECT_EQ(agree(lowered((Tensor(a, {m, k}).matmul(Tensor(b, {k, n})) + 1).relu(), opts)), [&] {
      std::vector<float> r = want;
      for (float& x : r) x = std::max(0.0f, x + 1);
      return r;
    }());
  }
  // A one-column tile of B (LOCAL on m only): B's tile is shared, A's is not (each invocation's
  // own rows), so only B is staged.
  const std::vector<float> a = ints(32 * 16, 7, 11, 5), b = ints(16 * 8, 5, 13, 6);
  EXPECT_EQ(
      agree(lowered(Tensor(a, {32, 16}).matmul(Tensor(b, {16, 8})),
                    {{O::LOCAL, 0, 8}, {O::UPCAST, 1, 4}, {O::UNROLL, 3, 4}, {O::STAGE, 4, 4}})),
      matmul_closed_form(a, b, 32, 16, 8));
}

// A staged load that is the same along a local axis (stride 0) but masked along it inside the
// tile (a row expanded to rows 4..11 of 16, zeros around): its validity agrees at the tile's
// first and last invocation but not between, so it is not shared (one copy would hold the
// first invocation's zeros for all). With LOCAL before UPCAST on m the band is along the upcast
// axis instead (row = 4 * local + u: 4 <= row < 12 depends on u only); the tile, copied at u = 0,
// must not stand for the other u either.
TEST_F(Opts, StagedTilesKeepAMaskThatVariesInsideTheWorkgroup) {
  for (const std::vector<Opt>& opts : std::vector<std::vector<Opt>>{{{O::UPCAST, 1, 4},
                                                                     {O::UPCAST, 0, 4},
                                                                     {O::LOCAL, 1, 4},
                                                                     {O::LOCAL, 0, 4},
                                                                     {O::UNROLL, 4, 8},
                                                                     {O::STAGE, 5, 8}},
                                                                    {{O::LOCAL, 0, 4},
                                                                     {O::UPCAST, 0, 4},
                                                                     {O::UPCAST, 1, 4},
                                                                     {O::LOCAL, 1, 4},
                                                                     {O::UNROLL, 4, 8},
                                                                     {O::STAGE, 5, 8}}})
    staged_band(opts);
}

void Opts::staged_band(const std::vector<Opt>& opts) {
  const int64_t m = 16, k = 8, n = 16;
  const std::vector<float> row = ints(k, 7, 11, 5), b = ints(k * n, 5, 13, 6);
  std::vector<float> a(size_t(m * k), 0);
  for (int64_t i = 4; i < 12; ++i)
    for (int64_t q = 0; q < k; ++q) a[size_t(i * k + q)] = row[size_t(q)];
  const Tensor banded = Tensor(row, {1, k}).expand({8, k}).pad({{4, 4}, {0, 0}});
  EXPECT_EQ(agree(lowered(banded.matmul(Tensor(b, {k, n})), opts)),
            matmul_closed_form(a, b, m, k, n));
}

// GROUP: each output's reduce spread over a workgroup, partials combined in shared memory by a
// tree of masked loads and BARRIERs; group sizes that are and are not powers of two.
TEST_F(Opts, GroupReductionsAgreeWithTheInterpreterAndTheClosedForm) {
  const std::vector<float> x = ints(4096, 37, 101, 50);
  double total = 0;
  for (float v : x) total += v;
  for (const std::vector<Opt>& opts :
       std::vector<std::vector<Opt>>{{{O::GROUP, 0, 64}},
                                     {{O::GROUP, 0, 256}, {O::UNROLL, 0, 4}},
                                     {{O::GROUP, 0, 2}},
                                     {{O::GROUP, 0, 512}, {O::UNROLL, 0, 8}}}) {
    EXPECT_EQ(agree(lowered(Tensor(x, {4096}).sum(), opts)), std::vector<float>{float(total)});
  }
  // Rows of 1000: a group of 40 (the tree's last step pairs 32..39 with 0..7), with and without
  // outputs upcast (each invocation's 4 partials go through shared memory side by side).
  const int64_t rows = 8, cols = 1000;
  const std::vector<float> y = ints(rows * cols, 13, 31, 15);
  std::vector<float> sums(static_cast<size_t>(rows), 0),
      maxes(static_cast<size_t>(rows), -std::numeric_limits<float>::infinity());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      sums[size_t(r)] += y[size_t(r * cols + c)];
      maxes[size_t(r)] = std::max(maxes[size_t(r)], y[size_t(r * cols + c)] + float(r));
    }
  const Tensor t(y, {rows, cols});
  EXPECT_EQ(agree(lowered(t.sum(1), {{O::GROUP, 1, 40}})), sums);
  EXPECT_EQ(agree(lowered(t.sum(1), {{O::GROUP, 1, 40}, {O::UPCAST, 0, 4}, {O::UNROLL, 1, 5}})),
            sums);
  const Tensor shift(ints(rows, 1, 100, 0), {rows, 1});
  EXPECT_EQ(agree(lowered((t + shift).max(1), {{O::GROUP, 1, 8}, {O::LOCAL, 0, 2}})), maxes);
  // A matmul with few outputs and a long reduce, grouped, with a 2x4 register tile.
  const std::vector<float> a = ints(8 * 512, 7, 11, 5), b = ints(512 * 8, 5, 13, 6);
  EXPECT_EQ(agree(lowered(Tensor(a, {8, 512}).matmul(Tensor(b, {512, 8})),
                          {{O::GROUP, 2, 32}, {O::UPCAST, 1, 4}, {O::UPCAST, 0, 2}})),
            matmul_closed_form(a, b, 8, 512, 8));
}

TEST_F(Opts, GpuHeuristicsGroupLongReducesWithFewOutputs) {
  const DeviceTraits gpu;  // the defaults: GROUP on, no shuffle tiles
  const std::vector<float> y = ints(16 * 4096, 13, 31, 15);
  const Lowered l = lowered(Tensor(y, {16, 4096}).sum(1), {}, &gpu);
  EXPECT_NE(l.describe.find("GROUP(axis=1, amount=64)"), std::string::npos) << l.describe;
  std::vector<float> sums(16, 0);
  for (size_t i = 0; i < y.size(); ++i) sums[i / 4096] += y[i];
  EXPECT_EQ(agree(l), sums);
}

TEST_F(Opts, GpuHeuristicsStageBigMatmulsInSharedMemory) {
  const DeviceTraits gpu;
  const int64_t m = 128, k = 24, n = 64;
  const std::vector<float> a = ints(m * k, 7, 11, 5), b = ints(k * n, 5, 13, 6);
  const Lowered l = lowered(Tensor(a, {m, k}).matmul(Tensor(b, {k, n})), {}, &gpu);
  EXPECT_EQ(l.describe,
            "full_shape=(2, 1, 16, 16, 3, 8, 4, 4) kinds=(G, G, L, L, R, N, U, U) "
            "opts=[UPCAST(axis=1, amount=4), UPCAST(axis=0, amount=4), LOCAL(axis=1, amount=16), "
            "LOCAL(axis=0, amount=16), UNROLL(axis=4, amount=8), STAGE(axis=5, amount=8)]");
  EXPECT_EQ(agree(l), matmul_closed_form(a, b, m, k, n));
}

TEST_F(Opts, ShuffleAndGroupOptsThatCannotApplyAreClearErrors) {
  Schedule s = create_schedule({Tensor::empty({16, 8}).matmul(Tensor::empty({8, 32})).node()});
  Kernel k(s.items.back().ast);
  EXPECT_THROW(k.apply({O::SHUFFLE, 2, 4}), Error);  // axis 2 is the reduce
  k.apply({O::SHUFFLE, 0, 8});
  EXPECT_THROW(k.apply({O::SHUFFLE, 1, 8}), Error);  // one shuffle axis per kernel
  EXPECT_THROW(k.apply({O::GROUP, 0, 2}), Error);    // GROUP splits a reduce axis
  // The workgroup is not one subgroup of 8: the lowerer refuses.
  EXPECT_THROW(lower(k, {16 * 32, 16 * 8, 8 * 32}), Error);
  Kernel one(s.items.back().ast);
  one.apply({O::SHUFFLE, 0, 1});
  EXPECT_THROW(lower(one, {16 * 32, 16 * 8, 8 * 32}), Error);  // no lanes at all
  // STAGE names an unroll axis by its size, once, and needs invocations that share the tiles.
  Kernel staged(s.items.back().ast);
  EXPECT_THROW(staged.apply({O::STAGE, 2, 8}), Error);  // the reduce, not an unroll axis
  staged.apply({O::UNROLL, 2, 4});
  EXPECT_THROW(staged.apply({O::STAGE, 3, 2}), Error);  // not the axis' size
  staged.apply({O::STAGE, 3, 4});
  EXPECT_THROW(staged.apply({O::STAGE, 3, 4}), Error);
  EXPECT_THROW(lower(staged, {16 * 32, 16 * 8, 8 * 32}), Error);  // no local axes
}

}  // namespace
}  // namespace vkg::test
