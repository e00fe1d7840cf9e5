// The two double forms of float32 division (codegen/glsl_helpers_arithmetic.cpp) give the
// interpreter's (IEEE's) bits where rounding is hardest: subnormal quotients that are exact
// midpoints between two subnormals (ties to even: 5 2^-149 / 2 is 2 2^-149, not 3), quotients a
// hair from such a midpoint, and random bit patterns (zeros, infinities, nan, overflow). The
// rounded-bits form runs on every device with shaderFloat64; float(double(a) / double(b)) only
// where the device is known to divide doubles exactly and round to float as IEEE does
// (GlslTarget::float_of_double_division: Lavapipe), and there it is what the device's kernels use.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <vkgrad/codegen/glsl_renderer.hpp>
#include <vkgrad/devices/vk_target.hpp>

#include "support/kernel_agree.hpp"
#include "support/linear_programs.hpp"

namespace vkg {
namespace {

// Pairs whose quotient is m 2^-150 for odd m (a tie between two subnormals) or 2^(s-150) / B away
// from one (d = +-1): a = (m B + d) 2^(s-150), b = B 2^s for odd B. Then random bit patterns.
std::pair<std::vector<float>, std::vector<float>> hard_subnormal_pairs() {
  std::vector<float> a, b;
  for (int d : {0, 1, -1})
    for (uint32_t B = 1; B < 400; B += 2)
      for (int s = 0; s < 12; s += 3)
        for (uint32_t m = 1; m < 200; m += 6) {
          const double x = std::ldexp(double(m) * B + d, s - 150);
          if (x <= 0 || double(float(x)) != x) continue;  // a must be a float
          a.push_back(float(x));
          b.push_back(std::ldexp(float(B), s));
        }
  std::mt19937 rng(11);
  for (int i = 0; i < 4096; ++i) {
    a.push_back(std::bit_cast<float>(uint32_t(rng())));
    b.push_back(std::bit_cast<float>(uint32_t(rng())));
  }
  for (size_t i = 0; i < a.size(); i += 3) a[i] = -a[i];  // signs on both sides of every case
  return {a, b};
}

test::Bytes bytes_of(const std::vector<float>& v) {
  test::Bytes out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

class DivisionForms : public test::Kernels {
 protected:
  void expect_ieee(bool float_of_double) {
    if (!target_.float64) GTEST_SKIP() << "no shaderFloat64: the float-only helper";
    target_.float_of_double_division = float_of_double;
    const auto [a, b] = hard_subnormal_pairs();
    const int64_t n = int64_t(a.size());
    const Program p = test::binary_op(Ops::FDIV, dtypes::float32, n);
    const std::string glsl = render_glsl(p, target_);
    EXPECT_EQ(glsl.find("precise double q = double(a) / double(b);") != std::string::npos,
              float_of_double)
        << glsl;
    const std::vector<test::Bytes> got =
        expect_agree(p, {test::Bytes(size_t(n) * 4), bytes_of(a), bytes_of(b)});
    // The interpreter is IEEE's division: the device's bits are the host's.
    std::vector<float> q(got[0].size() / 4);
    std::memcpy(q.data(), got[0].data(), got[0].size());
    int wrong = 0;
    for (size_t i = 0; i < q.size() && wrong < 10; ++i) {
      const float want = a[i] / b[i];
      if (std::isnan(want) ? !std::isnan(q[i])
                           : std::bit_cast<uint32_t>(want) != std::bit_cast<uint32_t>(q[i])) {
        ++wrong;
        ADD_FAILURE() << std::hexfloat << a[i] << " / " << b[i] << " = " << q[i] << ", want "
                      << want;
      }
    }
    // A constant divisor, 0 included: the compiler sees it (the double form once folded
    // x / double(0.0) to 0 where the bits did not decide zeros first; a fuzzer found it).
    for (const int64_t c : {0, 1, -3, 7}) {
      SCOPED_TRACE("divisor " + std::to_string(c));
      const Program by = test::binary_op_by(Ops::FDIV, dtypes::float32, n, c);
      const std::vector<test::Bytes> out =
          expect_agree(by, {test::Bytes(size_t(n) * 4), bytes_of(a)});
      if (c != 0) continue;
      int finite = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        float qi;
        std::memcpy(&qi, out[0].data() + 4 * i, 4);
        if (std::isfinite(a[i]) && a[i] != 0 && !std::isinf(qi) && finite++ < 5)
          ADD_FAILURE() << std::hexfloat << a[i] << " / 0 = " << qi;
      }
    }
  }
};

TEST_F(DivisionForms, TheHostRoundsSubnormalTiesToEven) {
  const float unit = std::ldexp(1.0f, -149);
  EXPECT_EQ(std::bit_cast<uint32_t>(5 * unit / 2), 2u);   // 2.5 units: to 2
  EXPECT_EQ(std::bit_cast<uint32_t>(7 * unit / 2), 4u);   // 3.5 units: to 4
  EXPECT_EQ(std::bit_cast<uint32_t>(15 * unit / 6), 2u);  // 2.5 units through a divisor of 3
}

TEST_F(DivisionForms, RoundedBitsFormMatchesIeeeOnSubnormalTies) { expect_ieee(false); }

TEST_F(DivisionForms, FloatOfDoubleFormMatchesIeeeWhereTheDeviceHasIt) {
  if (!glsl_target_of(rt_.device.caps()).float_of_double_division)
    GTEST_SKIP() << "not known to divide doubles exactly: " << rt_.device.caps().driver_name;
  expect_ieee(true);
}

}  // namespace
}  // namespace vkg
