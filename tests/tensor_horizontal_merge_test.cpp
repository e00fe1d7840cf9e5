// Horizontal merging (core/schedule_horizontal.hpp): small in-place elementwise updates of one
// realize that do not touch each other's buffers run as one kernel over their elements end to
// end, each store masked to its own elements, with the values separate kernels give, on Vulkan
// and on the CPU device. An update that reads another's buffer, or one over 4096 elements, stays
// a kernel of its own.
#include <gtest/gtest.h>

#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <vkgrad/core/context.hpp>
#include <vkgrad/core/counters.hpp>
#include <vkgrad/core/schedule.hpp>
#include <vkgrad/vkgrad.hpp>

using namespace vkg;

namespace {

// Realizes the tensors in one schedule; returns the kernels it ran.
int64_t realize_together(std::vector<Tensor*> tensors) {
  const int64_t before = global_counters().kernels;
  realize(std::span<Tensor* const>(tensors));
  return global_counters().kernels - before;
}

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = (float(i) - float(n) / 2) * scale;
  return v;
}

class HorizontalMerge : public testing::TestWithParam<std::string> {};

}  // namespace

// 5, 2x3 and 13 elements (offsets 0, 8 and 16 in a kernel of 32: none a multiple of 4 long), one
// update read through a transpose and one with a scalar broadcast: each element as the closed form
// says, in one kernel; three with HORIZONTAL=0, the same bits.
TEST_P(HorizontalMerge, SmallInPlaceUpdatesOfDifferentShapesAreOneKernel) {
  const std::string dev = GetParam();
  std::vector<std::vector<float>> results[2];
  for (const int on : {1, 0}) {
    SCOPED_TRACE(on ? "merged" : "HORIZONTAL=0");
    ScopedSetting setting("HORIZONTAL", on);
    Tensor a = Tensor(ramp(5, 0.5f), {5}, dev).realize();
    Tensor b = Tensor(ramp(6, 0.25f), {2, 3}, dev).realize();
    Tensor c = Tensor(ramp(13, 1.0f), {13}, dev).realize();
    const Tensor s = Tensor(std::vector<float>{0.75f}, {}, dev).realize();
    const Tensor t = Tensor(ramp(6, 2.0f), {3, 2}, dev).realize();
    a.assign(a * 2 + 1);
    b.assign(b - t.permute({1, 0}) * s);
    c.assign(c * c);
    EXPECT_EQ(realize_together({&a, &b, &c}), on ? 1 : 3);
    const std::vector<float> ga = a.to_vector<float>(), gb = b.to_vector<float>(),
                             gc = c.to_vector<float>();
    const std::vector<float> a0 = ramp(5, 0.5f), b0 = ramp(6, 0.25f), c0 = ramp(13, 1.0f),
                             t0 = ramp(6, 2.0f);
    for (size_t i = 0; i < 5; ++i) EXPECT_EQ(ga[i], a0[i] * 2 + 1) << i;
    for (size_t r = 0; r < 2; ++r)
      for (size_t k = 0; k < 3; ++k)  // b[r][k] - t[k][r] * 0.75
        EXPECT_EQ(gb[r * 3 + k], b0[r * 3 + k] - t0[k * 2 + r] * 0.75f) << r << " " << k;
    for (size_t i = 0; i < 13; ++i) EXPECT_EQ(gc[i], c0[i] * c0[i]) << i;
    results[on] = {ga, gb, gc};
  }
  EXPECT_EQ(results[0], results[1]);
}

// b's update reads a's buffer (a's new value): the two are not independent, so two kernels, b
// after a. And an update over 4096 elements is not small: a kernel of its own.
TEST_P(HorizontalMerge, DependentOrLargeUpdatesStayApart) {
  const std::string dev = GetParam();
  Tensor a = Tensor(ramp(4, 1.0f), {4}, dev).realize();
  Tensor b = Tensor(ramp(4, 0.5f), {4}, dev).realize();
  a.assign(a + 1);
  b.assign(b + a.flip({0}));
  EXPECT_EQ(realize_together({&a, &b}), 2);
  const std::vector<float> a0 = ramp(4, 1.0f), b0 = ramp(4, 0.5f);
  const std::vector<float> gb = b.to_vector<float>();
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(gb[i], b0[i] + a0[3 - i] + 1) << i;

  Tensor big = Tensor(ramp(5000, 0.01f), {5000}, dev).realize();
  Tensor small = Tensor(ramp(3, 1.0f), {3}, dev).realize();
  big.assign(big * 3);
  small.assign(small * 3);
  EXPECT_EQ(realize_together({&big, &small}), 2);
  EXPECT_EQ(big.to_vector<float>()[4999], ramp(5000, 0.01f)[4999] * 3);
  EXPECT_EQ(small.to_vector<float>()[2], ramp(3, 1.0f)[2] * 3);
}

// The same merged kernel replayed by a Jit: every call updates all three in place.
TEST_P(HorizontalMerge, AJitReplaysTheMergedKernel) {
  const std::string dev = GetParam();
  Tensor a = Tensor(std::vector<float>{1, 2, 3}, {3}, dev).realize();
  Tensor b = Tensor(std::vector<float>{10, 20}, {2}, dev).realize();
  Jit jit([&](const std::vector<Tensor>& in) {
    a.assign(a + in[0]);
    b.assign(b * 2);
    Tensor* both[] = {&a, &b};
    realize(std::span<Tensor* const>(both));
    return std::vector<Tensor>{};
  });
  for (int call = 0; call < 4; ++call) jit({Tensor(std::vector<float>{float(call)}, {}, dev)});
  EXPECT_EQ(jit.kernels(), 1u);
  // a gained 0 + 1 + 2 + 3, b doubled 4 times.
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{7, 8, 9}));
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{160, 320}));
}

// float16 members of 5 and 7 elements (their stores pack two halves a word, so a masked store
// goes by atomicAnd/atomicOr and must not clobber the neighbour half), next to float32, bool and
// int32 members: one kernel, every element as the closed form says (all exact in float16). With
// 16-bit storage and without it (VKG_NO_STORAGE16: the packed stores).
TEST_P(HorizontalMerge, Float16BoolAndIntMembersMixWithFloat32) {
  const std::string dev = GetParam();
  for (const int packed : {0, 1}) {
    SCOPED_TRACE(packed ? "packed float16" : "16-bit storage");
    ScopedSetting storage("VKG_NO_STORAGE16", packed);
    auto halves = [](size_t n, float scale) {
      std::vector<float16_t> v;
      for (float x : ramp(n, scale)) v.push_back(float16_t(x));
      return v;
    };
    Tensor h5 = Tensor(halves(5, 0.5f), {5}, dev).realize();
    Tensor h7 = Tensor(halves(7, 0.25f), {7}, dev).realize();
    Tensor f3 = Tensor(ramp(3, 1.0f), {3}, dev).realize();
    Tensor m6 =
        Tensor(std::vector<bool>{true, false, false, true, true, false}, {6}, dev).realize();
    Tensor i9 = Tensor::arange(0, 9, 1, dev).realize();
    h5.assign(h5 * 2 + 1);
    h7.assign(h7 - 3);
    f3.assign(f3 * f3);
    m6.assign(m6.logical_not());
    i9.assign(i9 * 3 - 1);
    EXPECT_EQ(realize_together({&h5, &h7, &f3, &m6, &i9}), 1);
    const std::vector<float16_t> g5 = h5.to_vector<float16_t>(), g7 = h7.to_vector<float16_t>();
    for (size_t i = 0; i < 5; ++i) EXPECT_EQ(float(g5[i]), ramp(5, 0.5f)[i] * 2 + 1) << i;
    for (size_t i = 0; i < 7; ++i) EXPECT_EQ(float(g7[i]), ramp(7, 0.25f)[i] - 3) << i;
    for (size_t i = 0; i < 3; ++i)
      EXPECT_EQ(f3.to_vector<float>()[i], ramp(3, 1.0f)[i] * ramp(3, 1.0f)[i]);
    EXPECT_EQ(m6.to_vector<bool>(), (std::vector<bool>{false, true, true, false, false, true}));
    EXPECT_EQ(i9.to_vector<int32_t>(), (std::vector<int32_t>{-1, 2, 5, 8, 11, 14, 17, 20, 23}));
  }
}

// Members of 1024 and 2048 elements (a multiple of 4: the kernel is upcast by 4 and their vec4
// loads and stores are masked uniformly) around one of 1027 (offsets 0, 1024 and 2052 of 4100,
// its vectors element-wise): one kernel, every element right.
TEST_P(HorizontalMerge, MultipleOfFourMembersNextToOthers) {
  const std::string dev = GetParam();
  Tensor a = Tensor(ramp(1024, 0.5f), {1024}, dev).realize();
  Tensor b = Tensor(ramp(1027, 1.5f), {1027}, dev).realize();
  Tensor c = Tensor(ramp(2048, 0.25f), {32, 64}, dev).realize();
  a.assign(a * 3 - 1);
  b.assign(b + 7);
  c.assign(c * c + c);
  EXPECT_EQ(realize_together({&a, &b, &c}), 1);
  const std::vector<float> ga = a.to_vector<float>(), gb = b.to_vector<float>(),
                           gc = c.to_vector<float>();
  for (size_t i = 0; i < 1024; ++i) EXPECT_EQ(ga[i], ramp(1024, 0.5f)[i] * 3 - 1) << i;
  for (size_t i = 0; i < 1027; ++i) EXPECT_EQ(gb[i], ramp(1027, 1.5f)[i] + 7) << i;
  for (size_t i = 0; i < 2048; ++i) {
    const float x = ramp(2048, 0.25f)[i];
    EXPECT_EQ(gc[i], x * x + x) << i;
  }
}

// The reverse dependency: a's update reads b's old value and b's later update overwrites b. Not
// independent, so not one kernel; a must still see b before its update.
TEST_P(HorizontalMerge, AnEarlierReaderOfALaterWriteIsNotMerged) {
  const std::string dev = GetParam();
  Tensor a = Tensor(ramp(4, 1.0f), {4}, dev).realize();
  Tensor b = Tensor(ramp(4, 0.5f), {4}, dev).realize();
  a.assign(a + b.flip({0}));
  b.assign(b * 2);
  EXPECT_EQ(realize_together({&a, &b}), 2);
  const std::vector<float> a0 = ramp(4, 1.0f), b0 = ramp(4, 0.5f);
  const std::vector<float> ga = a.to_vector<float>(), gb = b.to_vector<float>();
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(ga[i], a0[i] + b0[3 - i]) << i;
    EXPECT_EQ(gb[i], b0[i] * 2) << i;
  }
}

// Members reading a padded view (masked loads of their own, inside the member's mask) and a
// concatenation (two padded views summed): one kernel, every element as the closed form says.
TEST_P(HorizontalMerge, MembersReadingPaddedAndConcatenatedViews) {
  const std::string dev = GetParam();
  Tensor a = Tensor(ramp(6, 1.0f), {6}, dev).realize();
  Tensor b = Tensor(ramp(5, 0.5f), {5}, dev).realize();
  Tensor c = Tensor(ramp(6, 0.25f), {2, 3}, dev).realize();
  const Tensor x = Tensor(std::vector<float>{10, 20, 30}, {3}, dev).realize();
  const Tensor y = Tensor(std::vector<float>{1, 2}, {2}, dev).realize();
  const Tensor z = Tensor(std::vector<float>{-4, -5, -6}, {3}, dev).realize();
  const Tensor w = Tensor(std::vector<float>{7, 8}, {2, 1}, dev).realize();
  a.assign(a + x.pad({{1, 2}}, 0.5));
  b.assign(b * Tensor::cat(std::vector<Tensor>{y, z}, 0));
  c.assign(c - w.pad({{0, 0}, {1, 1}}, -1));  // [[-1, 7, -1], [-1, 8, -1]]
  EXPECT_EQ(realize_together({&a, &b, &c}), 1);
  const std::vector<float> ga = a.to_vector<float>(), gb = b.to_vector<float>(),
                           gc = c.to_vector<float>();
  const std::vector<float> px{0.5f, 10, 20, 30, 0.5f, 0.5f}, cyz{1, 2, -4, -5, -6},
      pw{-1, 7, -1, -1, 8, -1};
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(ga[i], ramp(6, 1.0f)[i] + px[i]) << i;
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(gb[i], ramp(5, 0.5f)[i] * cyz[i]) << i;
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(gc[i], ramp(6, 0.25f)[i] - pw[i]) << i;
}

INSTANTIATE_TEST_SUITE_P(Devices, HorizontalMerge, testing::Values("VK", "CPU"),
                         [](const auto& info) { return info.param; });
