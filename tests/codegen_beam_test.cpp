// BEAM search: every candidate the search times, on a matmul, a reduce, a convolution, an
// elementwise chain and odd sizes, agrees with the CPU interpreter; the choice is never slower
// than the heuristics' kernel as the search measured both; the choice is cached on disk so that a
// second process uses it without searching, and a corrupt entry is ignored and rewritten.
// Small kernels, width 2 and short time limits: Lavapipe on a small CI machine is slow.
#include <gtest/gtest.h>

#include <unistd.h>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>

#include <vkgrad/codegen/beam.hpp>
#include <vkgrad/codegen/beam_cache.hpp>
#include <vkgrad/codegen/get_program.hpp>
#include <vkgrad/core/context.hpp>
#include <vkgrad/core/schedule.hpp>
#include <vkgrad/core/tensor.hpp>
#include <vkgrad/devices/vk_beam.hpp>

#include "support/device_compare.hpp"
#include "support/exact_ints.hpp"
#include "support/kernel_agree.hpp"

namespace vkg::test {
namespace {

// The one kernel that computes `t` from uploaded data, and its buffers' starting bytes.
struct OneKernel {
  ScheduleItem item;
  std::vector<Bytes> buffers;
};

OneKernel one_kernel(const Tensor& t) {
  Schedule s = create_schedule({t.node()});
  EXPECT_EQ(s.items.size(), 1u) << "expected one kernel";
  OneKernel out{s.items.back(), {}};
  for (const auto& b : out.item.buffers)
    out.buffers.push_back(b->initial_data ? *b->initial_data : Bytes(b->nbytes()));
  return out;
}

// The kernels of the agreement test: shapes that take many opts, and odd ones that take few.
std::vector<std::pair<std::string, Tensor>> sample_kernels() {
  std::vector<std::pair<std::string, Tensor>> out;
  out.emplace_back(
      "matmul 16x32x24",
      Tensor(ints(16 * 32, 7, 11, 5), {16, 32}).matmul(Tensor(ints(32 * 24, 5, 9, 4), {32, 24})));
  out.emplace_back("sum over rows of 32x96", Tensor(ints(32 * 96, 3, 17, 8), {32, 96}).sum(1));
  out.emplace_back("conv2d 2x3x8x8 by 4x3x3x3",
                   Tensor(ints(2 * 3 * 8 * 8, 5, 7, 3), {2, 3, 8, 8})
                       .conv2d(Tensor(ints(4 * 3 * 3 * 3, 3, 5, 2), {4, 3, 3, 3})));
  out.emplace_back("elementwise chain 33x17", (Tensor(ints(33 * 17, 3, 13, 6), {33, 17}) * 2 +
                                               Tensor(ints(33 * 17, 5, 7, 3), {33, 17}))
                                                  .maximum(Tensor(ints(17, 1, 17, 8), {17})));
  out.emplace_back(
      "odd matmul 7x13x5",
      Tensor(ints(7 * 13, 3, 11, 5), {7, 13}).matmul(Tensor(ints(13 * 5, 7, 5, 2), {13, 5})));
  return out;
}

DeviceTraits lavapipe_like_traits(const GlslTarget& target, uint32_t max_invocations) {
  DeviceTraits t;
  t.max_workgroup_invocations = max_invocations;
  if (target.subgroup_shuffle && target.subgroup_size >= 4 && target.subgroup_size <= 16)
    t.shuffle_lanes = target.subgroup_size;
  return t;
}

class Beam : public Kernels {
 protected:
  VkBeamDevice beam_device(const OneKernel& k) {
    std::vector<uint64_t> bytes;
    for (const auto& b : k.item.buffers) bytes.push_back(b->nbytes());
    return VkBeamDevice(rt_, target_, rt_.device.caps().name, bytes);
  }
  DeviceTraits traits() const {
    return lavapipe_like_traits(target_, rt_.device.caps().limits.max_workgroup_invocations);
  }
};

// Wraps the Vulkan beam device: before a candidate is first timed, `check` runs it on Vulkan and
// on the interpreter from the kernel's inputs and compares every output element.
class CheckingDevice final : public BeamDevice {
 public:
  CheckingDevice(BeamDevice& inner, std::function<void(const Program&)> check)
      : inner_(inner), check_(std::move(check)) {}

  std::unique_ptr<BeamCandidate> compile(const Program& p) override {
    auto c = std::make_unique<Checked>();
    c->program = p;
    c->inner = inner_.compile(p);
    return c;
  }
  double run_ns(BeamCandidate& candidate) override {
    auto& c = static_cast<Checked&>(candidate);
    if (!c.checked) {
      c.checked = true;
      ++checked;
      check_(c.program);
    }
    return inner_.run_ns(*c.inner);
  }
  int checked = 0;

 private:
  struct Checked final : BeamCandidate {
    Program program;
    std::unique_ptr<BeamCandidate> inner;
    bool checked = false;
  };
  BeamDevice& inner_;
  std::function<void(const Program&)> check_;
};

BeamOptions quick(double timeout_s) {
  BeamOptions o;
  o.width = 2;
  o.timeout_s = timeout_s;
  o.runs = 2;
  return o;
}

TEST(BeamActions, EveryActionAppliesAndEachOptKindIsTried) {
  const Tensor c =
      Tensor(ints(64 * 64, 7, 11, 5), {64, 64}).matmul(Tensor(ints(64 * 64, 5, 9, 4), {64, 64}));
  const Kernel base(create_schedule({c.node()}).items.back().ast);
  DeviceTraits traits;
  traits.shuffle_lanes = 8;
  std::array<int, 6> kinds{};
  const std::vector<Opt> actions = beam_actions(base, traits);
  for (const Opt& o : actions) {
    Kernel k = base;
    EXPECT_NO_THROW(k.apply(o)) << o.str();
    ++kinds[size_t(o.op)];
  }
  EXPECT_GT(kinds[size_t(OptOp::LOCAL)], 0);
  EXPECT_GT(kinds[size_t(OptOp::UPCAST)], 0);
  EXPECT_GT(kinds[size_t(OptOp::UNROLL)], 0);
  EXPECT_GT(kinds[size_t(OptOp::GROUP)], 0);
  // SHUFFLE needs a workgroup of one subgroup first (below); STAGE an unroll axis and locals.
  Kernel staged = base;
  staged.apply({OptOp::LOCAL, 0, 4});  // (16, 64, 4, 64): G G L R
  staged.apply({OptOp::UNROLL, 3, 8});
  bool has_stage = false;
  for (const Opt& o : beam_actions(staged, traits)) has_stage |= o.op == OptOp::STAGE;
  EXPECT_TRUE(has_stage);
}

// The lowerer takes a SHUFFLE axis only in a workgroup of exactly one subgroup, without GROUP
// axes or STAGE: the actions offer SHUFFLE only there and nothing that breaks it after, so every
// action on the way lowers (a candidate that fails to lower costs a search its compile slot).
TEST(BeamActions, ShuffleIsOfferedOnlyWhereItLowersAndEveryActionLowers) {
  const Tensor c =
      Tensor(ints(64 * 64, 7, 11, 5), {64, 64}).matmul(Tensor(ints(64 * 64, 5, 9, 4), {64, 64}));
  const ScheduleItem item = create_schedule({c.node()}).items.back();
  const Kernel base(item.ast);
  DeviceTraits traits;
  traits.shuffle_lanes = 8;
  traits.max_workgroup_invocations = 256;
  const auto has = [&](const Kernel& k, OptOp op) {
    const std::vector<Opt> actions = beam_actions(k, traits);
    return std::any_of(actions.begin(), actions.end(), [&](const Opt& o) { return o.op == op; });
  };
  Kernel one_subgroup = base;
  one_subgroup.apply({OptOp::LOCAL, 1, 8});  // (64, 8, 8, 64): G G L R
  Kernel shuffled = one_subgroup;
  shuffled.apply({OptOp::SHUFFLE, 0, 8});
  Kernel two_subgroups = one_subgroup;
  two_subgroups.apply({OptOp::LOCAL, 0, 2});
  EXPECT_FALSE(has(base, OptOp::SHUFFLE));
  EXPECT_TRUE(has(one_subgroup, OptOp::SHUFFLE));
  EXPECT_FALSE(has(two_subgroups, OptOp::SHUFFLE));
  for (OptOp op : {OptOp::LOCAL, OptOp::GROUP, OptOp::SHUFFLE}) EXPECT_FALSE(has(shuffled, op));
  EXPECT_TRUE(has(shuffled, OptOp::UPCAST));
  for (const Kernel* k :
       std::array<const Kernel*, 4>{&base, &one_subgroup, &shuffled, &two_subgroups}) {
    SCOPED_TRACE(k->describe());
    for (const Opt& o : beam_actions(*k, traits)) {
      Kernel next = *k;
      next.apply(o);
      EXPECT_NO_THROW(lower_kernel(next, buffer_counts(item), traits)) << o.str();
    }
  }
}

// A machine that was busy while the search timed the heuristics' kernel: its first runs there
// took 100x as long. Every other candidate is truly twice as slow. The side-by-side duel at the
// end sees that, and the heuristics' kernel stays the choice.
TEST(BeamSearch, AWinnerTimedOnABusyMachineMustBeatTheHeuristicsSideBySide) {
  const Tensor c =
      Tensor(ints(64 * 64, 7, 11, 5), {64, 64}).matmul(Tensor(ints(64 * 64, 5, 9, 4), {64, 64}));
  const ScheduleItem item = create_schedule({c.node()}).items.back();
  const Kernel base(item.ast);
  DeviceTraits traits;
  traits.max_workgroup_invocations = 256;
  const std::vector<Opt> heuristic{{OptOp::UPCAST, 0, 4}};
  Kernel h = base;
  h.apply(heuristic[0]);
  struct Fake : BeamDevice {
    struct Candidate : BeamCandidate {
      bool is_heuristic = false;
    };
    std::string heuristic_text;
    int heuristic_runs = 0;
    std::unique_ptr<BeamCandidate> compile(const Program& p) override {
      auto out = std::make_unique<Candidate>();
      out->is_heuristic = to_string(p) == heuristic_text;
      return out;
    }
    double run_ns(BeamCandidate& c) override {
      if (!static_cast<Candidate&>(c).is_heuristic) return 2000;
      return ++heuristic_runs <= 3 ? 100000 : 1000;  // busy for the search's runs
    }
  } fake;
  fake.heuristic_text = to_string(lower_kernel(h, buffer_counts(item), traits));
  BeamOptions options;
  options.width = 2;
  options.timeout_s = 5;
  options.threads = 1;
  const BeamResult r = beam_search(base, heuristic, buffer_counts(item), traits, options, fake);
  EXPECT_EQ(opts_to_text(r.opts), opts_to_text(heuristic));
  EXPECT_EQ(r.ns, 1000);
  EXPECT_EQ(r.heuristic_ns, 1000);
}

TEST(BeamActions, OptsRoundTripThroughTextAndMalformedTextIsRejected) {
  const std::vector<Opt> opts{{OptOp::UPCAST, 0, 4}, {OptOp::LOCAL, 1, 8}, {OptOp::STAGE, 3, 8}};
  std::vector<Opt> back;
  ASSERT_TRUE(opts_from_text(opts_to_text(opts), back));
  EXPECT_EQ(back, opts);
  EXPECT_FALSE(opts_from_text("UPCAST 0\n", back));
  EXPECT_FALSE(opts_from_text("SPLAT 0 4\n", back));
  EXPECT_FALSE(opts_from_text("UPCAST 0 4 9\n", back));
}

TEST_F(Beam, EveryCandidateTheSearchTimesAgreesWithTheInterpreter) {
  for (const auto& [what, tensor] : sample_kernels()) {
    SCOPED_TRACE(what);
    const OneKernel k = one_kernel(tensor);
    const Kernel base(k.item.ast);
    VkBeamDevice vk = beam_device(k);
    CheckingDevice checking(vk, [&](const Program& p) {
      SCOPED_TRACE(p.name);
      expect_agree(p, k.buffers);
    });
    const BeamResult r = beam_search(base, default_opts(base, traits(), RunOptions{}),
                                     buffer_counts(k.item), traits(), quick(3), checking);
    EXPECT_GE(checking.checked, 2) << "the search should time more than the starting kernels";
    // The winner, run through the whole lowering again, agrees too.
    Kernel chosen = base;
    for (const Opt& o : r.opts) chosen.apply(o);
    SCOPED_TRACE(chosen.describe());
    expect_agree(lower_kernel(chosen, buffer_counts(k.item), traits()), k.buffers);
  }
}

TEST_F(Beam, Beam2OnASmallMatmulIsAtLeastAsFastAsTheHeuristics) {
  const OneKernel k = one_kernel(
      Tensor(ints(64 * 64, 7, 11, 5), {64, 64}).matmul(Tensor(ints(64 * 64, 5, 9, 4), {64, 64})));
  const Kernel base(k.item.ast);
  VkBeamDevice vk = beam_device(k);
  const std::vector<Opt> heuristic = default_opts(base, traits(), RunOptions{});
  const BeamResult r = beam_search(base, heuristic, buffer_counts(k.item), traits(), quick(4), vk);
  ASSERT_GT(r.heuristic_ns, 0);
  // The heuristics' kernel is a candidate, so the choice is at most its time, as measured.
  EXPECT_LE(r.ns, r.heuristic_ns) << "chose " << opts_to_text(r.opts);
  EXPECT_GE(r.steps, 1);
  EXPECT_GT(r.candidates, 2);
}

// A kernel the heuristics leave alone lowers to the plain kernel's program: its one timing is
// the heuristics' too. The search used to time whichever of the two its threads lowered first,
// and reported the heuristics' time as infinite when that was the plain one (beautiful_mnist's
// E_2 under BEAM=2; the race is rare in this small test, which guards the contract).
TEST_F(Beam, TheHeuristicsTimeIsMeasuredWhenItIsThePlainKernel) {
  const OneKernel k = one_kernel(Tensor(std::vector<float>{1, 2}, {2}) * 3.0f);
  const Kernel base(k.item.ast);
  VkBeamDevice vk = beam_device(k);
  const std::vector<Opt> heuristic = default_opts(base, traits(), RunOptions{});
  ASSERT_TRUE(heuristic.empty());
  BeamOptions options = quick(1);
  options.threads = 8;
  for (int i = 0; i < 40; ++i) {
    const BeamResult r = beam_search(base, heuristic, buffer_counts(k.item), traits(), options, vk);
    ASSERT_LT(r.heuristic_ns, 1e9) << "search " << i;
    EXPECT_LE(r.ns, r.heuristic_ns);
  }
}

// A fresh cache folder for one test, restored after.
class TempCacheDir {
 public:
  TempCacheDir() {
    if (const char* old = std::getenv("VKG_CACHE_DIR")) old_ = old;
    char name[] = "/tmp/vkg-beam-test-XXXXXX";
    dir_ = ::mkdtemp(name);
    ::setenv("VKG_CACHE_DIR", dir_.c_str(), 1);
  }
  ~TempCacheDir() {
    if (old_)
      ::setenv("VKG_CACHE_DIR", old_->c_str(), 1);
    else
      ::unsetenv("VKG_CACHE_DIR");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const std::filesystem::path& path() const { return dir_; }

 private:
  std::filesystem::path dir_;
  std::optional<std::string> old_;
};

Tensor cached_matmul(const std::string& device) {
  return Tensor(ints(24 * 40, 7, 11, 5), {24, 40}, device)
      .matmul(Tensor(ints(40 * 32, 5, 9, 4), {40, 32}, device));
}

TEST(BeamRealize, ABeamKernelAgreesWithTheInterpreterAndIsCachedInMemory) {
  TempCacheDir cache;
  ScopedSetting beam("BEAM", 2), timeout("BEAM_TIMEOUT", 2);
  const BeamCacheStats before = beam_cache_stats();
  EXPECT_TRUE(cpu_vk_agree(cached_matmul));
  const BeamCacheStats after = beam_cache_stats();
  EXPECT_EQ(after.searches, before.searches + 1);
  // A new tensor of the same kernel: the device's kernel cache has it, so no search either way.
  EXPECT_TRUE(cpu_vk_agree(cached_matmul));
  EXPECT_EQ(beam_cache_stats().searches, after.searches);
}

// Run in a child process by the next test (skipped otherwise): realizes a matmul under the BEAM
// settings of the environment and prints the cache counters.
TEST(BeamCacheHelper, RealizeAndPrintCounters) {
  if (!std::getenv("VKG_BEAM_HELPER")) GTEST_SKIP() << "run by BeamCache.SecondProcess...";
  EXPECT_TRUE(cpu_vk_agree(cached_matmul));
  const BeamCacheStats s = beam_cache_stats();
  std::printf("beam-stats searches=%llu disk_hits=%llu rejects=%llu\n",
              (unsigned long long)s.searches, (unsigned long long)s.disk_hits,
              (unsigned long long)s.rejects);
}

struct HelperStats {
  unsigned long long searches = 99, disk_hits = 99, rejects = 99;
};

HelperStats run_helper(const std::filesystem::path& cache) {
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe");
  const std::string cmd =
      "env -u GTEST_SHARD_INDEX -u GTEST_TOTAL_SHARDS VKG_BEAM_HELPER=1 BEAM=2 BEAM_TIMEOUT=2 "
      "VKG_CACHE_DIR='" +
      cache.string() + "' '" + exe +
      "' --gtest_filter=BeamCacheHelper.RealizeAndPrintCounters 2>&1";
  HelperStats s;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return s;
  std::string out;
  std::array<char, 512> line{};
  while (std::fgets(line.data(), int(line.size()), p)) {
    out += line.data();
    std::sscanf(line.data(), "beam-stats searches=%llu disk_hits=%llu rejects=%llu", &s.searches,
                &s.disk_hits, &s.rejects);
  }
  EXPECT_EQ(::pclose(p), 0) << out;
  return s;
}

std::vector<std::filesystem::path> beam_entries(const std::filesystem::path& cache) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(cache / "beam", ec))
    out.push_back(e.path());
  return out;
}

TEST(BeamCache, SecondProcessUsesTheDiskCacheAndACorruptEntryIsRewritten) {
  TempCacheDir cache;
  const HelperStats first = run_helper(cache.path());
  EXPECT_EQ(first.searches, 1u);
  EXPECT_EQ(first.disk_hits, 0u);
  const std::vector<std::filesystem::path> entries = beam_entries(cache.path());
  ASSERT_EQ(entries.size(), 1u);

  const HelperStats second = run_helper(cache.path());
  EXPECT_EQ(second.searches, 0u) << "the second process searched again";
  EXPECT_EQ(second.disk_hits, 1u);

  // Cut the entry short: it must be ignored, searched again and rewritten whole.
  std::ofstream(entries[0], std::ios::trunc) << "vkg-beam-2\nUPCAST 0";
  const HelperStats third = run_helper(cache.path());
  EXPECT_EQ(third.rejects, 1u);
  EXPECT_EQ(third.searches, 1u);
  const HelperStats fourth = run_helper(cache.path());
  EXPECT_EQ(fourth.rejects, 0u);
  EXPECT_EQ(fourth.disk_hits, 1u);
}

}  // namespace
}  // namespace vkg::test
