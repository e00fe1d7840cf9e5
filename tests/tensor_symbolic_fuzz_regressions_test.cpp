// Programs the symbolic fuzzer (tests/tensor_symbolic_fuzz_test.cpp) found wrong, pinned as it
// printed them: each runs with n symbolic on Vulkan and on the CPU device and must agree with the
// plain-size program on the CPU device, zero signs and nan included. All three are Lavapipe
// folding a +0 of padded rows that is a constant to its compiler (x * 0 to 0, 0 + x to x,
// whatever x is). They were found while the opaque +0 literals were reverted and pass since
// a1bc13b: seeds 3001737 and 3001988 fail again with codegen/glsl_types.cpp's opaque literal
// alone taken out, 3000172 with the +0 guards of codegen/glsl_alu.cpp taken out as well.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>

#include <vkgrad/vkgrad.hpp>

#include "support/device_compare.hpp"

using namespace vkg;
using vkg::test::random_tensor;

namespace {

const Variable vn("n", 1, 12);

// The size n: bound to `value` where symbolic, else the plain number.
SymInt size(bool symbolic, int64_t value) { return symbolic ? vn.bind(value) : SymInt(value); }

// want against got, float32: within max_ulps, nan equal to nan, and every zero with want's sign.
testing::AssertionResult agree(const Tensor& want, const Tensor& got, uint64_t max_ulps) {
  if (want.shape() != got.shape())
    return testing::AssertionFailure()
           << "shape " << shape_str(got.shape()) << ", want " << shape_str(want.shape());
  const std::vector<float> w = want.to_vector<float>(), g = got.to_vector<float>();
  testing::AssertionResult close =
      vkg::test::same_elements(dtypes::float32, want.bytes(), got.bytes(), max_ulps);
  if (!close) return close;
  for (size_t i = 0; i < w.size(); ++i)
    if (w[i] == 0 && g[i] == 0 && std::signbit(w[i]) != std::signbit(g[i]))
      return testing::AssertionFailure() << "[" << i << "] " << g[i] << ", want " << w[i];
  return testing::AssertionSuccess();
}

// program(symbolic, n, device) symbolic on VK and on CPU against plain on CPU, for each n.
void check(const std::function<Tensor(bool, int64_t, const std::string&)>& program,
           std::initializer_list<int64_t> bindings, uint64_t max_ulps) {
  for (int64_t n : bindings) {
    const Tensor want = program(false, n, "CPU");
    for (const char* dev : {"VK", "CPU"})
      EXPECT_TRUE(agree(want, program(true, n, dev), max_ulps)) << dev << ", n = " << n;
  }
}

// Seed 3000172: the mean over n of sin of padded zeros was -0 on VK, +0 on CPU (n = 9).
TEST(SymbolicFuzzRegressions, MeanOfPaddedSinesKeepsTheSignOfZero) {
  check(
      [](bool sym, int64_t value, const std::string& dev) {
        const SymInt n = size(sym, value);
        const Tensor v0 = random_tensor(dtypes::int32, {value, 3}, dev, 493847308u).reshape({n, 3});
        const Tensor v3 = v0.sign().unsqueeze(1).expand({n, 3, 3}).pad({{0, 0}, {1, 0}, {2, 2}});
        const Tensor v5 = v3.tanh().shrink({{0, n}, {4, 4}, {6, 7}});
        return v5.sin().pad({{0, 0}, {0, 1}, {0, 2}}).mean({0});
      },
      {9, 11, 1, 2}, 4);
}

// Seed 3001737: a padded column times a 2x2 matrix gave nan where CPU gave 6.93 (n = 1).
TEST(SymbolicFuzzRegressions, APaddedColumnTimesAMatrix) {
  check(
      [](bool sym, int64_t value, const std::string& dev) {
        const SymInt n = size(sym, value);
        const Tensor v0 =
            random_tensor(dtypes::int32, {value, 1}, dev, 4130210650u).reshape({n, 1});
        const Tensor v3 = v0.log2().sin().pad({{0, 0}, {1, 0}});
        return v3.matmul(random_tensor(dtypes::float32, {2, 2}, dev, 2554196448u));
      },
      {1, 4, 8, 9, 7}, 4);
}

// Seed 3001988: a padded, truncated, expanded tensor times a matrix gave -0 where CPU gave +0
// (n = 10).
TEST(SymbolicFuzzRegressions, APaddedExpandTimesAMatrixKeepsTheSignOfZero) {
  check(
      [](bool sym, int64_t value, const std::string& dev) {
        const SymInt n = size(sym, value);
        const Tensor v0 =
            random_tensor(dtypes::float32, {value, 1, 3}, dev, 1307703668u).reshape({n, 1, 3});
        const Tensor v3 =
            v0.pad({{0, 0}, {2, 0}, {2, 1}}).trunc().unsqueeze(2).expand({n, 3, 3, 6});
        return v3.matmul(random_tensor(dtypes::float32, {6, 3}, dev, 1319075951u, true));
      },
      {10, 12, 9}, 4);
}

// Seed 7300667: the variance of no elements (a plain axis of size 0 of a symbolic tensor) with
// the default correction of 1 divided by -1 (-0) where the plain one divides by max(0, n - 1) = 0
// (nan, as torch); likewise a correction past a symbolic count (n - 2 at n = 1).
TEST(SymbolicFuzzRegressions, AVarianceWithACorrectionPastTheCountIsNan) {
  check(
      [](bool sym, int64_t value, const std::string& dev) {
        const SymInt n = size(sym, value);
        const Tensor v0 =
            random_tensor(dtypes::float32, {value, 4, 3}, dev, 1336525265u).reshape({n, 4, 3});
        const Tensor none = v0.shrink({{0, n}, {3, 4}, {0, 0}});  // (n, 1, 0)
        return Tensor::cat(std::vector<Tensor>{none.var(2, false).reshape({-1}),
                                               v0.var(0, false, 2).reshape({-1})},
                           0);
      },
      {10, 1, 2, 3}, 4);
}

// Binding fuzzer seeds 8400048 and 8401202: a size n bound to 2 broadcast with a plain 2 takes
// the symbolic size (Tensor::symbolic_broadcast), so a cumsum along that axis, plain for the
// program at n = 1 (the capture), is refused at n = 2 ("cannot scan along a symbolic axis")
// where the plain program computes it. Not a wrong value: a clear vkg::Error. Open.
TEST(SymbolicFuzzRegressions, ACumsumAlongASymbolicSizeBroadcastWithAnEqualPlainOne) {
  check(
      [](bool sym, int64_t value, const std::string& dev) {
        const SymInt n = size(sym, value);
        const Tensor v0 = random_tensor(dtypes::float32, {value}, dev, 2151667821u).reshape({n});
        const Tensor v1 = random_tensor(dtypes::float32, {2}, dev, 1696322739u);
        return v0.add(v1).cumsum(0);
      },
      {2}, 4);
}

}  // namespace
