// Dispatch groups (codegen/program_merge.hpp): programs merged into one compute, on the CPU
// interpreter and on the Vulkan device, exactly what each computes alone. The members cover the
// mappings: the merged workgroup size, re-tiled members (other sizes, guarded invocations), a
// member that shares workgroup memory (BARRIER) or subgroup lanes (SHUFFLE), loops and
// accumulators of equal ids in two members, and a load two members make alike.
#include <gtest/gtest.h>

#include <numeric>

#include <vkgrad/codegen/program_merge.hpp>
#include <vkgrad/core/error.hpp>

#include "support/kernel_agree.hpp"
#include "support/linear_programs.hpp"

namespace vkg::test {
namespace {

using ProgramMerge = Kernels;

// A member: its program, its buffers' contents (outputs too), and the merged slot of each.
struct Member {
  Program program;
  std::vector<Bytes> buffers;
  std::vector<int64_t> slots;
};

// Members with buffers of their own: slots numbered on from `first`.
std::vector<int64_t> own_slots(const Program& p, int64_t first) {
  std::vector<int64_t> s(p.buffers.size());
  std::iota(s.begin(), s.end(), first);
  return s;
}

Bytes floats(int64_t n, float scale, float offset) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(i) * scale + offset;
  return to_bytes(v);
}

class Merged : public ProgramMerge {
 protected:
  // Merges the members, runs the merged program on the interpreter and the device (expect_agree)
  // and checks that every buffer a member writes holds what the member computes alone.
  void expect_members_agree(std::vector<Member> members) {
    std::vector<BufferParam> params;
    std::vector<Bytes> merged;
    std::vector<MergeMember> mm;
    for (Member& m : members) {
      for (size_t s = 0; s < m.slots.size(); ++s) {
        const size_t slot = size_t(m.slots[s]);
        if (slot >= params.size()) {
          params.resize(slot + 1);
          merged.resize(slot + 1);
        }
        const BufferParam& own = m.program.buffers[s];
        params[slot] = {int(slot), own.dtype, std::max(params[slot].count, own.count),
                        params[slot].written || own.written};
        merged[slot] = m.buffers[s];
      }
      mm.push_back({&m.program, m.slots});
    }
    ASSERT_EQ(merge_refusal(mm), "");
    const Program p = merge_programs(mm, params);
    const std::vector<Bytes> got = expect_agree(p, merged);
    for (Member& m : members) {
      std::vector<Bytes> alone = m.buffers;
      for (size_t s = 0; s < alone.size(); ++s)
        if (m.program.buffers[s].written)
          std::fill(alone[s].begin(), alone[s].end(), std::byte{0xcd});
      run_on_cpu(m.program, alone);
      for (size_t s = 0; s < alone.size(); ++s)
        if (m.program.buffers[s].written)
          EXPECT_EQ(got[size_t(m.slots[s])], alone[s])
              << m.program.name << " slot " << s << " in " << p.name;
    }
    merged_ = p;
  }
  Program merged_;
};

TEST_F(Merged, MembersOfOtherWorkgroupSizesAreRetiled) {
  // E_100 runs 4 workgroups of 32 (the last one guarded at 100): the merged size. The dot
  // product and the padded load (1 invocation per workgroup) are laid over it.
  Program add = elementwise_add(dtypes::float32, 100), dot = dot_product(), pad = padded_load();
  expect_members_agree({
      {add, {Bytes(400), floats(100, 0.5f, -3), floats(100, -0.25f, 7)}, own_slots(add, 0)},
      {dot,
       {Bytes(4), to_bytes(std::vector<int32_t>{3, -4}), to_bytes(std::vector<int32_t>{5, 6})},
       own_slots(dot, 3)},
      {pad, {Bytes(40), floats(5, 1.0f, 1.0f)}, own_slots(pad, 6)},
  });
  EXPECT_EQ(merged_.local_size, (std::array<int64_t, 3>{32, 1, 1}));
  EXPECT_EQ(merged_.global_size, (std::array<int64_t, 3>{4 + 1 + 1, 1, 1}));  // 10 lanes fit one
}

TEST_F(Merged, AMemberSharingWorkgroupMemoryKeepsItsWorkgroups) {
  // r_5_16 sums rows through local memory and a BARRIER: the merged workgroups are its 16 wide;
  // E_40 (32 wide) and the dot product are re-tiled to 16.
  Program sum = workgroup_sum(5), add = elementwise_add(dtypes::int32, 40), dot = dot_product();
  std::vector<int32_t> a(40), b(40);
  for (int i = 0; i < 40; ++i) a[size_t(i)] = i * 7 - 50, b[size_t(i)] = 1000 - i * i;
  expect_members_agree({
      {add, {Bytes(160), to_bytes(a), to_bytes(b)}, own_slots(add, 0)},
      {sum, {Bytes(20), floats(80, 0.125f, -2)}, own_slots(sum, 3)},
      {dot,
       {Bytes(4), to_bytes(std::vector<int32_t>{1, 2}), to_bytes(std::vector<int32_t>{3, 4})},
       own_slots(dot, 5)},
  });
  EXPECT_EQ(merged_.local_size, (std::array<int64_t, 3>{16, 1, 1}));
  EXPECT_EQ(merged_.global_size, (std::array<int64_t, 3>{5 + 4 + 1, 1, 1}));  // E_40: 2 x 32 lanes
}

TEST_F(Merged, AMemberSharingSubgroupLanesKeepsItsWorkgroups) {
  if (!target_.subgroup_shuffle) GTEST_SKIP() << "no subgroupShuffle on this device";
  Program shuffle = subgroup_shuffle(3), pad = padded_load();
  expect_members_agree({
      {pad, {Bytes(40), floats(5, -2.0f, 0.5f)}, own_slots(pad, 0)},
      {shuffle, {Bytes(96), floats(24, 1.5f, -4)}, own_slots(shuffle, 2)},
  });
  EXPECT_EQ(merged_.local_size, (std::array<int64_t, 3>{8, 1, 1}));
}

TEST_F(Merged, LoopsAndAccumulatorsOfEqualIdsStayApart) {
  // Two dot products with RANGE 0 and DEFINE_ACC 0 each: one loop would sum both.
  Program dot = dot_product();
  expect_members_agree({
      {dot,
       {Bytes(4), to_bytes(std::vector<int32_t>{1, 2}), to_bytes(std::vector<int32_t>{3, 4})},
       own_slots(dot, 0)},
      {dot,
       {Bytes(4), to_bytes(std::vector<int32_t>{-5, 9}), to_bytes(std::vector<int32_t>{2, 10})},
       own_slots(dot, 3)},
  });
}

// out[i] = in[i] * scale[0]: two of them share `scale` (a load at a fixed index, computed once
// before the members' blocks) and `in`.
Program scaled(const std::string& name, int64_t n, int64_t local) {
  using B = ProgramBuilder;
  B b(name);
  auto out = b.global(dtypes::float32, n, true), in = b.global(dtypes::float32, n),
       scale = b.global(dtypes::float32, 1);
  auto i = b.special("idx0", n);
  b.store(out, i, b.load(in, i) * b.load(scale, B::i32(0)));
  return b.build({(n + local - 1) / local, 1, 1}, {local, 1, 1});
}

TEST_F(Merged, BuffersAndLoadsTwoMembersShareAreReadOnce) {
  Program a = scaled("E_a", 50, 8), b = scaled("E_b", 50, 16);
  const Bytes in = floats(50, 0.75f, -9), scale = to_bytes(std::vector<float>{-3.5f});
  expect_members_agree({
      {a, {Bytes(200), in, scale}, {0, 2, 3}},
      {b, {Bytes(200), in, scale}, {1, 2, 3}},
  });
  int loads_of_scale = 0;
  for (const UOpPtr& u : merged_.uops)
    if (u->op == Ops::LOAD && u->src[0]->src[0]->arg_as<int64_t>() == 3) ++loads_of_scale;
  EXPECT_EQ(loads_of_scale, 1);
}

TEST_F(Merged, MembersSharingMemoryAtDifferentSizesAreRefused) {
  Program sum = workgroup_sum(2), shuffle = subgroup_shuffle(2);
  std::vector<MergeMember> mm{{&sum, own_slots(sum, 0)}, {&shuffle, own_slots(shuffle, 2)}};
  EXPECT_NE(merge_refusal(mm).find("different workgroup sizes"), std::string::npos)
      << merge_refusal(mm);
  std::vector<BufferParam> params;
  for (const auto* p : {&sum, &shuffle})
    for (const BufferParam& b : p->buffers)
      params.push_back({int(params.size()), b.dtype, b.count, b.written});
  EXPECT_THROW(merge_programs(mm, params), Error);
}

TEST_F(Merged, ProgramsWithVariablesAreRefused) {
  ProgramBuilder b("E_n");
  auto out = b.global(dtypes::int32, 8, true);
  auto n = b.var("n", 1, 8);
  auto i = b.special("gidx0", 8);
  b.store(out, i, n, i->lt(n));
  Program p = b.build({8, 1, 1}, {1, 1, 1});
  Program dot = dot_product();
  EXPECT_NE(merge_refusal({{&p, {0}}, {&dot, {1, 2, 3}}}).find("variables"), std::string::npos);
}

}  // namespace
}  // namespace vkg::test
