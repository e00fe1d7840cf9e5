// Kernels run through the Queue with exact results: elementwise add, a multi-pass sum, dependency
// chains of 10,000 dispatches, a 300 MiB buffer past the storage-buffer binding range, the
// argument-spill path, barrier counts, copies and fills, and timestamps.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include <vkgrad/core/error.hpp>
#include <vkgrad/shaders/embedded.hpp>
#include <vkgrad/vk/args.hpp>
#include <vkgrad/vk/queue.hpp>

#include "support/scoped_env.hpp"
#include "support/vk_fixture.hpp"

namespace vkg::vk {
namespace {

// The helpers take a runtime: most tests share test::vk_runtime(), a few make their own with
// lowered limits (ScopedEnv), so that a GPU's larger limits do not keep them from their case.
Program make_program(const char* name, uint32_t push_bytes, Runtime& rt = test::vk_runtime()) {
  return Program(rt.device, name, shaders::get(name).spirv, push_bytes);
}

template <class T>
Buffer upload_vector(const std::vector<T>& v, Runtime& rt = test::vk_runtime()) {
  Buffer b = rt.allocator.allocate(v.size() * sizeof(T));
  rt.transfer.upload(b, std::as_bytes(std::span(v)));
  return b;
}

template <class T>
std::vector<T> download_vector(const Buffer& b, size_t count, Runtime& rt = test::vk_runtime()) {
  std::vector<T> v(count);
  rt.transfer.download(b, std::as_writable_bytes(std::span(v)));
  return v;
}

Groups cover(uint64_t invocations, uint32_t local, Runtime& rt = test::vk_runtime()) {
  return Groups::cover((invocations + local - 1) / local, rt.device.caps().limits);
}

TEST(VkQueue, AddsTwoFloatBuffersExactly) {
  Runtime& rt = test::vk_runtime();
  Program add = make_program("add_f32", 28);
  const uint32_t n = 1'000'003;  // not a multiple of 4: the last vec4 is partial
  std::vector<float> a(n), b(n);
  for (uint32_t i = 0; i < n; ++i) a[i] = 0.5f * float(i), b[i] = 3.25f - 0.125f * float(i % 1000);
  Buffer da = upload_vector(a), db = upload_vector(b), dc = rt.allocator.allocate(n * 4);
  Queue q(rt.device, rt.allocator);
  q.dispatch(add, cover((n + 3) / 4, 256),
             ArgPack().address(da).address(db).address(dc).u32(n).bytes(),
             {{&da, Access::Read}, {&db, Access::Read}, {&dc, Access::Write}});
  q.finish();
  std::vector<float> c = download_vector<float>(dc, n);
  for (uint32_t i = 0; i < n; ++i)
    ASSERT_EQ(c[i], a[i] + b[i]) << "at " << i;  // one IEEE add: bit-exact on any device
}

TEST(VkQueue, SumsInDependentPassesExactly) {
  Runtime& rt = test::vk_runtime();
  Program sum = make_program("sum_f32", 20);
  const uint32_t n = (1u << 20) + 12345;
  std::vector<float> x(n);
  double expect = 0;
  for (uint32_t i = 0; i < n; ++i) x[i] = float(i % 7), expect += i % 7;
  ASSERT_LT(expect, double(1 << 24));  // every partial sum is an exact float
  Buffer src = upload_vector(x);
  Buffer bufs[2] = {rt.allocator.allocate(((n + 4095) / 4096) * 4), rt.allocator.allocate(4096)};
  Queue q(rt.device, rt.allocator);
  const Buffer* in = &src;
  uint32_t count = n, passes = 0;
  while (count > 1 || passes == 0) {
    const Buffer* out = &bufs[passes % 2];
    const uint32_t groups = (count + 4095) / 4096;
    q.dispatch(sum, cover(groups, 1), ArgPack().address(*in).address(*out).u32(count).bytes(),
               {{in, Access::Read}, {out, Access::Write}});
    in = out;
    count = groups;
    ++passes;
  }
  q.finish();
  EXPECT_EQ(passes, 2u);                      // 1,060,921 -> 260 -> 1
  EXPECT_EQ(q.stats().barriers, passes - 1);  // each pass reads what the last one wrote
  EXPECT_EQ(download_vector<float>(*in, 1)[0], float(expect));
}

TEST(VkQueue, TenThousandChainedDispatchesInOneSubmission) {
  Runtime& rt = test::vk_runtime();
  Program inc = make_program("inc_u32", 12);
  constexpr uint32_t kWords = 1000, kChains = 4, kSteps = 2500;
  std::vector<Buffer> bufs;
  for (uint32_t c = 0; c < kChains; ++c)
    bufs.push_back(upload_vector(std::vector<uint32_t>(kWords, c * 1'000'000)));
  Queue q(rt.device, rt.allocator);
  for (uint32_t s = 0; s < kSteps; ++s)
    for (const Buffer& b : bufs)
      q.dispatch(inc, cover(kWords, 64), ArgPack().address(b).u32(kWords).bytes(),
                 {{&b, Access::ReadWrite}});
  q.finish();
  EXPECT_EQ(q.stats().dispatches, kChains * kSteps);
  EXPECT_EQ(q.stats().submits, 1u);
  // One barrier before each round but the first orders all four chains at once.
  EXPECT_EQ(q.stats().barriers, kSteps - 1);
  for (uint32_t c = 0; c < kChains; ++c) {
    std::vector<uint32_t> out = download_vector<uint32_t>(bufs[c], kWords);
    for (uint32_t i = 0; i < kWords; ++i)
      ASSERT_EQ(out[i], c * 1'000'000 + kSteps) << c << " " << i;
  }
}

TEST(VkQueue, IndependentDispatchesGetNoBarrierAndADependentOneGetsOne) {
  Runtime& rt = test::vk_runtime();
  Program inc = make_program("inc_u32", 12);
  std::vector<Buffer> bufs;
  for (int i = 0; i < 8; ++i) bufs.push_back(upload_vector(std::vector<uint32_t>(64, i)));
  Queue q(rt.device, rt.allocator);
  for (const Buffer& b : bufs)
    q.dispatch(inc, {1}, ArgPack().address(b).u32(64).bytes(), {{&b, Access::ReadWrite}});
  EXPECT_EQ(q.stats().barriers, 0u);
  q.dispatch(inc, {1}, ArgPack().address(bufs[3]).u32(64).bytes(), {{&bufs[3], Access::ReadWrite}});
  EXPECT_EQ(q.stats().barriers, 1u);
  q.finish();
  EXPECT_EQ(download_vector<uint32_t>(bufs[3], 64), std::vector<uint32_t>(64, 5));
  EXPECT_EQ(download_vector<uint32_t>(bufs[4], 64), std::vector<uint32_t>(64, 5));
  EXPECT_EQ(download_vector<uint32_t>(bufs[7], 64), std::vector<uint32_t>(64, 8));
}

// Lavapipe binds at most 128 MiB; a GPU's range (4 GiB on an H100) is past the largest single
// allocation it makes, so no buffer there exceeds it: this runtime's range is lowered to 256 MiB
// (VKG_MAX_STORAGE_BUFFER_RANGE, which only lowers), and the queue holds the kernel to it.
TEST(VkQueue, KernelReadsAndWritesABufferLargerThanTheBindingRange) {
  const test::ScopedEnv range("VKG_MAX_STORAGE_BUFFER_RANGE", std::to_string(256u << 20));
  Runtime rt;
  Program affine = make_program("affine_u32", 20, rt);
  const uint64_t bytes = 300ull << 20;
  EXPECT_GT(bytes, rt.device.caps().limits.max_storage_buffer_range);
  const uint32_t n = static_cast<uint32_t>(bytes / 4);
  std::vector<uint32_t> x(n);
  for (uint32_t i = 0; i < n; ++i) x[i] = i * 2654435761u;
  Buffer b = upload_vector(x, rt);
  Queue q(rt.device, rt.allocator);
  q.dispatch(affine, cover(n, 256, rt), ArgPack().address(b).u32(n).u32(3).u32(7).bytes(),
             {{&b, Access::ReadWrite}});
  q.finish();
  std::vector<uint32_t> y = download_vector<uint32_t>(b, n, rt);
  size_t wrong = 0, first_wrong = n;
  for (uint32_t i = 0; i < n; ++i)
    if (y[i] != x[i] * 3u + 7u) wrong++, first_wrong = std::min<size_t>(first_wrong, i);
  EXPECT_EQ(wrong, 0u) << "first wrong word " << first_wrong;
  EXPECT_EQ(y[n - 1], x[n - 1] * 3u + 7u);
}

// 21 addresses and a count (172 bytes) exceed Lavapipe's 128 bytes of push constants, not a GPU's
// 256: this runtime's limit is lowered to 128 (VKG_MAX_PUSH_CONSTANTS), the Vulkan minimum.
TEST(VkQueue, SpillsArgumentsThatExceedPushConstants) {
  const test::ScopedEnv push("VKG_MAX_PUSH_CONSTANTS", "128");
  Runtime rt;
  Program weighted = make_program("weighted_sum_u32", 8, rt);
  constexpr uint32_t kSources = 20, kWords = 1000;
  std::vector<Buffer> src;
  for (uint32_t k = 0; k < kSources; ++k) {
    std::vector<uint32_t> v(kWords);
    for (uint32_t i = 0; i < kWords; ++i) v[i] = k * 1000 + i;
    src.push_back(upload_vector(v, rt));
  }
  Buffer dst[2] = {rt.allocator.allocate(kWords * 4), rt.allocator.allocate(kWords * 4)};
  Queue q(rt.device, rt.allocator);
  // 1,200 spilled blobs of 172 bytes fill several 64 KiB ring chunks; two submissions reuse them.
  for (int round = 0; round < 2; ++round) {
    for (uint32_t d = 0; d < 1200; ++d) {
      const Buffer& out = dst[d % 2];
      const uint32_t count = d % 2 ? kWords : kWords / 2 + d / 2 % 100;  // distinct per blob
      ArgPack args;
      for (const Buffer& s : src) args.address(s);
      args.address(out).u32(count);
      ASSERT_GT(args.size(), rt.device.caps().limits.max_push_constants_size);
      const uint64_t where = q.spill(args.bytes());
      EXPECT_EQ(where % 64, 0u);
      std::vector<BufferUse> uses;
      for (const Buffer& s : src) uses.push_back({&s, Access::Read});
      uses.push_back({&out, Access::Write});
      q.dispatch(weighted, cover(count, 64, rt), ArgPack().address(where).bytes(), uses);
    }
    q.finish();
  }
  EXPECT_EQ(q.stats().submits, 2u);
  const std::vector<uint32_t> full = download_vector<uint32_t>(dst[1], kWords, rt);
  const std::vector<uint32_t> part = download_vector<uint32_t>(dst[0], kWords, rt);
  const uint32_t last_count = kWords / 2 + 1198 / 2 % 100;  // the last dispatch into dst[0]
  for (uint32_t i = 0; i < kWords; ++i) {
    uint32_t expect = 0;
    for (uint32_t k = 0; k < kSources; ++k) expect += (k + 1) * (k * 1000 + i);
    ASSERT_EQ(full[i], expect) << i;
    if (i < last_count) {
      ASSERT_EQ(part[i], expect) << i;
    }
  }
}

TEST(VkQueue, FillsAndCopies) {
  Runtime& rt = test::vk_runtime();
  Buffer a = rt.allocator.allocate(4000), b = rt.allocator.allocate(4000);
  Queue q(rt.device, rt.allocator);
  q.fill(a, 0xdeadbeef);
  q.fill(b, 7);
  q.copy(a, b, 1000, 0, 2000);  // RAW on a, WAW on b
  q.finish();
  EXPECT_EQ(q.stats().transfers, 3u);
  EXPECT_EQ(q.stats().barriers, 1u);
  std::vector<uint32_t> out = download_vector<uint32_t>(b, 1000);
  for (uint32_t i = 0; i < 1000; ++i)
    ASSERT_EQ(out[i], (i >= 500 && i < 750) ? 0xdeadbeef : 7u) << i;
  EXPECT_THROW(q.copy(a, b, 4001), Error);
  EXPECT_THROW(q.copy(a, a, 100, 0, 50), Error);  // overlapping
  q.copy(a, a, 100, 0, 100);                      // adjacent is fine
  q.finish();
}

TEST(VkQueue, RunsTheFillShaderWithInt64PushConstants) {
  Runtime& rt = test::vk_runtime();
  Program fill = make_program("fill_u32", 16);
  const uint32_t n = 100'000;
  Buffer b = rt.allocator.allocate(n * 4);
  Queue q(rt.device, rt.allocator);
  q.dispatch(fill, cover(n, 256), ArgPack().address(b).u32(n).u32(0x12345678).bytes(),
             {{&b, Access::Write}});
  q.finish();
  EXPECT_EQ(download_vector<uint32_t>(b, n), std::vector<uint32_t>(n, 0x12345678));
}

TEST(VkQueue, WaitsForAnySubmittedPoint) {
  Runtime& rt = test::vk_runtime();
  Program inc = make_program("inc_u32", 12);
  Buffer a = upload_vector(std::vector<uint32_t>(64, 0)),
         b = upload_vector(std::vector<uint32_t>(64, 0));
  Queue q(rt.device, rt.allocator);
  q.dispatch(inc, {1}, ArgPack().address(a).u32(64).bytes(), {{&a, Access::ReadWrite}});
  const uint64_t first = q.submit();
  for (int i = 0; i < 50; ++i)
    q.dispatch(inc, {1}, ArgPack().address(b).u32(64).bytes(), {{&b, Access::ReadWrite}});
  const uint64_t second = q.submit();
  EXPECT_GT(second, first);
  EXPECT_EQ(q.submit(), second);  // nothing recorded: nothing submitted
  q.wait(first);
  EXPECT_TRUE(rt.device.timeline().done(first));
  EXPECT_EQ(download_vector<uint32_t>(a, 64), std::vector<uint32_t>(64, 1));
  q.wait(second);
  EXPECT_EQ(download_vector<uint32_t>(b, 64), std::vector<uint32_t>(64, 50));
}

// A ticket is the point its submission will signal: 0 while recorded, that point once
// submitted; a new batch gets a new ticket, a capture none. What the VK device keeps per buffer
// so that a read waits for its writer, not the whole queue.
TEST(VkQueue, ATicketHoldsItsSubmissionsPointOnceSubmitted) {
  Runtime& rt = test::vk_runtime();
  Buffer a = rt.allocator.allocate(4000), b = rt.allocator.allocate(4000);
  Queue q(rt.device, rt.allocator);
  q.submit();
  EXPECT_EQ(q.ticket(), nullptr);  // nothing recorded
  q.fill(a, 1);
  const Queue::Ticket first = q.ticket();
  ASSERT_NE(first, nullptr);
  q.fill(b, 2);
  EXPECT_EQ(q.ticket(), first);  // one batch, one ticket
  EXPECT_EQ(*first, 0u);
  const uint64_t point = q.submit();
  EXPECT_EQ(*first, point);
  q.fill(a, 3);
  const Queue::Ticket second = q.ticket();
  EXPECT_NE(second, first);
  EXPECT_EQ(*second, 0u);
  q.begin_capture();  // submits what was recorded first
  EXPECT_GT(*second, point);
  q.fill(b, 4);
  EXPECT_EQ(q.ticket(), nullptr);  // a capture's replays have points of their own
  q.cancel_capture();
  q.wait(*second);
  EXPECT_EQ(download_vector<uint32_t>(a, 1000), std::vector<uint32_t>(1000, 3));
}

TEST(VkQueue, RejectsMismatchedArguments) {
  Runtime& rt = test::vk_runtime();
  Program inc = make_program("inc_u32", 12);
  Buffer b = rt.allocator.allocate(256);
  Queue q(rt.device, rt.allocator);
  EXPECT_THROW(q.dispatch(inc, {1}, ArgPack().address(b).bytes(), {{&b, Access::ReadWrite}}),
               Error);
  const uint32_t too_many = rt.device.caps().limits.max_workgroup_count[0] + 1;
  EXPECT_THROW(
      q.dispatch(inc, {too_many}, ArgPack().address(b).u32(1).bytes(), {{&b, Access::Write}}),
      Error);
  Buffer empty;
  EXPECT_THROW(q.dispatch(inc, {1}, ArgPack().address(b).u32(1).bytes(), {{&empty, Access::Write}}),
               Error);
}

TEST(VkQueue, TimestampsGivePositiveDurationsPerLabel) {
  Runtime& rt = test::vk_runtime();
  if (!rt.device.caps().features.timestamps) GTEST_SKIP() << "no timestamps on this queue";
  Program add = make_program("add_f32", 28);
  Program inc = make_program("inc_u32", 12);
  const uint32_t n = 1 << 20;
  Buffer a = rt.allocator.allocate(n * 4), c = rt.allocator.allocate(n * 4);
  Queue q(rt.device, rt.allocator, QueueOptions{.timing = true});
  ASSERT_TRUE(q.timing());
  q.fill(a, 0);
  q.dispatch(add, cover(n / 4, 256), ArgPack().address(a).address(a).address(c).u32(n).bytes(),
             {{&a, Access::Read}, {&c, Access::Write}}, "a+a");
  for (int i = 0; i < 300; ++i)  // more than one query pool's worth
    q.dispatch(inc, {1}, ArgPack().address(c).u32(64).bytes(), {{&c, Access::ReadWrite}});
  q.finish();
  std::vector<KernelTime> t = q.take_timings();
  ASSERT_EQ(t.size(), 302u);
  EXPECT_EQ(t[0].label, "fill");
  EXPECT_EQ(t[1].label, "a+a");
  EXPECT_EQ(t[2].label, "inc_u32");
  EXPECT_EQ(t[301].label, "inc_u32");
  for (const KernelTime& k : t) EXPECT_GT(k.ns, 0.0) << k.label;
  EXPECT_TRUE(q.take_timings().empty());

  q.set_timing(false);
  q.dispatch(inc, {1}, ArgPack().address(c).u32(64).bytes(), {{&c, Access::ReadWrite}});
  q.finish();
  EXPECT_TRUE(q.take_timings().empty());
  EXPECT_EQ(download_vector<uint32_t>(c, 1)[0], 301u);
}

}  // namespace
}  // namespace vkg::vk
