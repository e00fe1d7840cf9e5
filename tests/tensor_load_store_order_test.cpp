// A kernel that writes a buffer in place reads every old value it needs before it stores
// (codegen/linearizer.cpp), on Vulkan and on the CPU device, with multi-output kernels on and
// off: an assign's update forwarded to another output of the same kernel is applied once.
#include <gtest/gtest.h>

#include <span>
#include <string>
#include <vector>

#include <vkgrad/core/context.hpp>
#include <vkgrad/core/counters.hpp>
#include <vkgrad/vkgrad.hpp>

using namespace vkg;

namespace {

// 5,120 elements: kernels upcast to vectors of 4, and many workgroups.
const std::vector<int64_t> kShape{64, 80};
constexpr size_t kN = 64 * 80;

std::vector<float> pattern(int mod) {
  std::vector<float> v(kN);
  for (size_t i = 0; i < kN; ++i) v[i] = float(int(i) % mod);
  return v;
}

int64_t realize_together(std::vector<Tensor*> tensors) {
  const int64_t before = global_counters().kernels;
  realize(std::span<Tensor* const>(tensors));
  return global_counters().kernels - before;
}

// The values Tensor::rand gives after manual_seed(seed).
std::vector<float> rand_values(uint64_t seed, const std::string& dev) {
  Tensor::manual_seed(seed);
  return Tensor::rand(kShape, dtypes::float32, dev).to_vector<float>();
}

class LoadStoreOrder : public testing::TestWithParam<std::string> {};

}  // namespace

// The reviewer's case: m's in-place update and r, which reads the new m beside a random term,
// are one kernel. r's part of the kernel is computed lane by lane (the random term does not line
// up in vectors) and loaded m again; that load came after m's vector store, so r got the update
// applied twice (4,535 of 5,120 elements wrong).
TEST_P(LoadStoreOrder, AnUpdateForwardedToAnotherOutputIsAppliedOnce) {
  const std::vector<float> m0 = pattern(7), g0 = pattern(5);
  for (const int on : {1, 0}) {
    SCOPED_TRACE(on ? "merged" : "MULTI_OUTPUT=0");
    ScopedSetting setting("MULTI_OUTPUT", on);
    Tensor m = Tensor(m0, kShape, GetParam()).realize();
    const Tensor g = Tensor(g0, kShape, GetParam()).realize();
    m.assign(m * 0.5f + g);
    Tensor r = Tensor::rand(kShape, dtypes::float32, GetParam()) * 0 + m;
    EXPECT_EQ(realize_together({&m, &r}), on ? 1 : 2);
    const std::vector<float> got_m = m.to_vector<float>(), got_r = r.to_vector<float>();
    int wrong = 0;
    for (size_t i = 0; i < kN; ++i) {  // exact: halves of small integers
      const float want = m0[i] * 0.5f + g0[i];
      if (got_m[i] != want || got_r[i] != want) {
        if (++wrong <= 3)
          ADD_FAILURE() << "[" << i << "] m " << got_m[i] << " r " << got_r[i] << " want " << want;
      }
    }
    EXPECT_EQ(wrong, 0);
  }
}

// One output, no merging: an in-place assign whose value mixes the old w with a random term
// (the shape that is computed lane by lane) reads each old element once, before its store.
TEST_P(LoadStoreOrder, AnInPlaceAssignWithARandomTermReadsTheOldValue) {
  const std::vector<float> w0 = pattern(9);
  const std::vector<float> noise = rand_values(11, GetParam());
  Tensor w = Tensor(w0, kShape, GetParam()).realize();
  Tensor::manual_seed(11);
  w.assign(w * 2 + Tensor::rand(kShape, dtypes::float32, GetParam()) + w);
  EXPECT_EQ(realize_together({&w}), 1);
  const std::vector<float> got = w.to_vector<float>();
  int wrong = 0;
  for (size_t i = 0; i < kN; ++i) {
    const float want = w0[i] * 2 + noise[i] + w0[i];
    if (got[i] != want && ++wrong <= 3)
      ADD_FAILURE() << "[" << i << "] " << got[i] << " want " << want;
  }
  EXPECT_EQ(wrong, 0);
}

INSTANTIATE_TEST_SUITE_P(Devices, LoadStoreOrder, testing::Values("VK", "CPU"));
