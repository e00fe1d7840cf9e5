// Differential fuzzing of whole tensor programs: random lazy programs of a few to ~15 ops over
// small odd shapes (0-size and 0-d included, broadcasting) mixing elementwise ops, casts,
// reductions, movement ops, cat, where, cumsum, matmul and assign, on inputs holding the values
// drivers get wrong (inf, nan, -0, subnormals, INT_MIN, the types' extremes). Each program runs
//   - fused on the Vulkan device and fused on the CPU device (the reference interpreter of the same
//     kernels): they must agree bit for bit on integers and bools, within a few ulps on floats
//     (nan equals nan, the sign of a zero counts);
//   - step by step on the CPU device, every value realized as it is made (each op its own
//     kernels): catches a fusion or scheduling bug that both devices share;
//   - where cheap, against float64 loops on the host, op by op on the realized operands
//     (elementwise arithmetic, comparisons, where, sum/max/min): catches a lowering bug shared
//     by every device.
// A mismatch prints the program as C++ to paste into a unit test.
//
// Reproducible: VKG_FUZZ_SEED picks the first seed (default fixed), VKG_FUZZ_PROGRAMS how many
// programs (default sized for CI, ~tens of seconds on 2 cores).
//
// The generator is support/elementwise_program_gen.hpp (and its .cpp files, by op family).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include <vkgrad/vkgrad.hpp>

#include "support/differential_fuzz.hpp"
#include "support/elementwise_program_gen.hpp"
#include "support/fuzz_generators.hpp"

namespace vkg {
namespace {

using namespace fuzz;

// The comparison itself: an element off by 1e20 next to a -1e30 fill is a mismatch unless the
// value comes from a sum (whose error scales with the largest partial), 5 ulps always is.
TEST(TensorDifferentialFuzz, ComparisonScalesByTheOutputOnlyForSums) {
  Program p;
  p.steps.push_back({"Tensor::full({2}, -1e30f)", {}, nullptr});
  p.steps.push_back({"v0.sum(0, true)", {0}, nullptr});
  const float one_ulp = std::nextafter(1.0f, 2.0f) - 1.0f;
  const Tensor want(std::vector<float>{-1e30f, 1.0f}, {2}, "CPU");
  const Tensor off(std::vector<float>{-1e30f, 1e20f}, {2}, "CPU");
  const Tensor ulps4(std::vector<float>{-1e30f, 1.0f + 4 * one_ulp}, {2}, "CPU");
  const Tensor ulps5(std::vector<float>{-1e30f, 1.0f + 5 * one_ulp}, {2}, "CPU");
  EXPECT_NE(compare_output(p, 0, want, off), "");
  EXPECT_EQ(compare_output(p, 0, want, ulps4), "");
  EXPECT_NE(compare_output(p, 0, want, ulps5), "");
  EXPECT_EQ(compare_output(p, 1, want, off), "");  // a sum's: 1e20 <= 1e-6 * 1e30
  const Tensor neg_zero(std::vector<float>{-1e30f, -0.0f}, {2}, "CPU");
  const Tensor pos_zero(std::vector<float>{-1e30f, 0.0f}, {2}, "CPU");
  EXPECT_NE(compare_output(p, 1, neg_zero, pos_zero), "");
}

// A pow's value may differ by the float32 error of exp2(y * log2|x|): 3e-5 of the output's largest
// magnitude, not more (seed 802948: 7440348 on the CPU, 7440338 on Lavapipe).
TEST(TensorDifferentialFuzz, APowIsComparedWithinTheErrorOfItsFloat32Formula) {
  Program p;
  p.steps.push_back({"Tensor::full({2}, 7.83f)", {}, nullptr});
  p.steps.push_back({"v0.pow(v0)", {0}, nullptr});
  p.steps.push_back({"v1.sum(0, true)", {1}, nullptr});
  const Tensor want(std::vector<float>{1.0f, 7440348.0f}, {2}, "CPU");
  const Tensor close(std::vector<float>{1.0f, 7440338.0f}, {2}, "CPU");
  const Tensor far(std::vector<float>{1.0f, 7440048.0f}, {2}, "CPU");  // 4e-5 off
  EXPECT_NE(compare_output(p, 0, want, close), "");
  EXPECT_EQ(compare_output(p, 1, want, close), "");
  EXPECT_EQ(compare_output(p, 2, want, close), "");
  EXPECT_NE(compare_output(p, 1, want, far), "");
}

TEST(TensorDifferentialFuzz, RandomProgramsAgreeAcrossDevicesFusionAndHost) {
  fuzz::fuzz_programs("differential fuzz", 20261127, 300,
                      [](uint32_t seed) { return ElementwiseProgramGen(seed).next(); });
}

}  // namespace

// For the fuzzers of the JIT and of symbolic shapes (support/fuzz_generators.hpp).
fuzz::Program fuzz::elementwise_program(uint32_t seed) {
  return ElementwiseProgramGen(seed).next();
}

}  // namespace vkg
