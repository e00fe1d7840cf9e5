#include <vkgrad/codegen/beam.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <vkgrad/codegen/get_program.hpp>
#include <vkgrad/core/error.hpp>

namespace vkg {

namespace {

using Clock = std::chrono::steady_clock;
constexpr double kUntimed = std::numeric_limits<double>::infinity();

// The amounts tried per opt kind: tinygrad's lists, trimmed to what fits a 2-core CI machine's
// compile budget. A full unroll of a short reduce is added separately.
constexpr std::array<int64_t, 5> kLocalAmounts{2, 4, 8, 16, 32};
constexpr std::array<int64_t, 4> kUpcastAmounts{2, 3, 4, 8};
constexpr std::array<int64_t, 4> kUnrollAmounts{2, 4, 8, 16};
constexpr std::array<int64_t, 4> kGroupAmounts{8, 16, 32, 64};
// Accumulators per invocation (upcast x shuffle elements): past this, shaders spill registers
// (tinygrad's limit too). And copies of the loop body (that times the unroll): past this, they
// compile for seconds.
constexpr int64_t kMaxOutputs = 256;
constexpr int64_t kMaxUnrolled = 2048;

// Beam entries slower than this times the best are kept but not expanded.
constexpr double kExpandWithin = 3;

constexpr const char* kOptNames[] = {"LOCAL", "UPCAST", "UNROLL", "GROUP", "SHUFFLE", "STAGE"};

int64_t product_of(const Kernel& k, std::initializer_list<AxisKind> kinds) {
  int64_t p = 1;
  for (size_t a = 0; a < k.kinds().size(); ++a)
    if (std::find(kinds.begin(), kinds.end(), k.kinds()[a]) != kinds.end()) p *= k.full_shape()[a];
  return p;
}

bool applies(const Kernel& k, const Opt& o) {
  try {
    Kernel copy = k;
    copy.apply(o);
    return true;
  } catch (const Error&) {
    return false;
  }
}

struct Entry {
  std::vector<Opt> opts;
  double ns = kUntimed;
};

double ms(double ns) { return ns * 1e-6; }

std::string opts_str(const std::vector<Opt>& opts) {
  std::string s = "[";
  for (size_t i = 0; i < opts.size(); ++i) s += (i ? ", " : "") + opts[i].str();
  return s + "]";
}

// One search: the candidates seen so far (by their linear program, so that opts that end in the
// same code are compiled and timed once) and the clock.
class Search {
 public:
  Search(const Kernel& base, const std::vector<int64_t>& counts, const DeviceTraits& traits,
         const BeamOptions& options, BeamDevice& device)
      : base_(base),
        counts_(counts),
        traits_(traits),
        options_(options),
        device_(device),
        start_(Clock::now()) {}

  bool past_deadline() const { return seconds() > options_.timeout_s; }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  // Lowers and compiles the candidates in parallel, then times them one by one. Candidates
  // already seen, or that fail, come back untimed; of two in one call that end in the same
  // program the earlier is timed (the heuristics' kernel before the plain one it equals).
  // Past the deadline, only `must` candidates (the starting ones) are compiled and timed.
  std::vector<Entry> evaluate(const std::vector<std::vector<Opt>>& candidates, bool must) {
    std::vector<std::optional<Program>> programs(candidates.size());
    parallel_for(candidates, [&](size_t i) {
      if (!must && past_deadline()) return;
      Kernel k = base_;
      for (const Opt& o : candidates[i]) k.apply(o);
      programs[i] = lower_kernel(k, counts_, traits_);
    });
    for (std::optional<Program>& p : programs)
      if (p && !first_time(*p)) p.reset();
    std::vector<std::unique_ptr<BeamCandidate>> compiled(candidates.size());
    parallel_for(candidates, [&](size_t i) {
      if (programs[i] && (must || !past_deadline())) compiled[i] = device_.compile(*programs[i]);
    });
    std::vector<Entry> out;
    for (size_t i = 0; i < candidates.size(); ++i) {
      Entry e{candidates[i], kUntimed};
      if (compiled[i] && (must || !past_deadline())) e.ns = time(*compiled[i]);
      if (compiled[i]) ++candidates_;
      out.push_back(std::move(e));
    }
    if (!must && past_deadline()) timed_out_ = true;
    return out;
  }

  // The fastest run of each of two candidates timed in turns, `rounds` runs each, so that both
  // see the same machine: the timings of a search are minutes apart, and on a shared machine
  // (Lavapipe runs on the host's cores) a kernel timed while other work ran can look 4x slower
  // than it is, which made a slower candidate win. Throws when either does not compile.
  std::pair<double, double> duel(const std::vector<Opt>& a, const std::vector<Opt>& b, int rounds) {
    auto build = [&](const std::vector<Opt>& opts) {
      Kernel k = base_;
      for (const Opt& o : opts) k.apply(o);
      return device_.compile(lower_kernel(k, counts_, traits_));
    };
    const std::unique_ptr<BeamCandidate> ca = build(a), cb = build(b);
    double ta = kUntimed, tb = kUntimed;
    for (int r = 0; r < rounds; ++r) {
      ta = std::min(ta, device_.run_ns(*ca));
      tb = std::min(tb, device_.run_ns(*cb));
    }
    return {ta, tb};
  }

  int candidates() const { return candidates_; }
  int failed() const { return failed_; }
  bool timed_out() const { return timed_out_; }

 private:
  // fn(i) for each candidate on up to `threads` threads; a throw is a candidate the lowerer,
  // renderer or device rejects, counted as failed and otherwise ignored.
  template <class Fn>
  void parallel_for(const std::vector<std::vector<Opt>>& candidates, Fn&& fn) {
    const size_t n = candidates.size();
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t i; (i = next++) < n;) {
        try {
          fn(i);
        } catch (const std::exception& e) {
          ++failed_;
          if (options_.debug >= 4) {
            std::lock_guard lock(mu_);
            std::printf("beam candidate %s failed: %s\n", opts_str(candidates[i]).c_str(),
                        e.what());
          }
        } catch (...) {
          ++failed_;
        }
      }
    };
    const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    const size_t n_threads =
        std::min(n, size_t(options_.threads > 0 ? unsigned(options_.threads) : hw));
    std::vector<std::thread> threads;
    for (size_t t = 1; t < n_threads; ++t) threads.emplace_back(work);
    work();
    for (std::thread& t : threads) t.join();
  }

  bool first_time(const Program& p) {
    std::string key = to_string(p);
    for (int64_t d : p.global_size) key += " " + std::to_string(d);
    for (int64_t d : p.local_size) key += " " + std::to_string(d);
    std::lock_guard lock(mu_);
    return seen_.insert(std::move(key)).second;
  }

  // The fastest of a few runs. A candidate far slower than the best so far gets one run only:
  // more would not change the outcome and slow ones are what eat the time limit.
  double time(BeamCandidate& c) {
    double best = kUntimed;
    try {
      for (int r = 0; r < std::max(1, options_.runs); ++r) {
        best = std::min(best, device_.run_ns(c));
        if (best > 3 * best_ns_) break;
      }
    } catch (...) {
      ++failed_;
      return kUntimed;
    }
    best_ns_ = std::min(best_ns_, best);
    return best;
  }

  const Kernel& base_;
  const std::vector<int64_t>& counts_;
  const DeviceTraits& traits_;
  const BeamOptions& options_;
  BeamDevice& device_;
  Clock::time_point start_;
  std::mutex mu_;
  std::set<std::string> seen_;
  std::atomic<int> failed_{0};
  int candidates_ = 0;
  double best_ns_ = kUntimed;
  bool timed_out_ = false;
};

// The `width` fastest timed entries, fastest first.
std::vector<Entry> best_of(std::vector<Entry> entries, int width) {
  std::erase_if(entries, [](const Entry& e) { return e.ns == kUntimed; });
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.ns < b.ns; });
  if (entries.size() > size_t(std::max(1, width))) entries.resize(size_t(std::max(1, width)));
  return entries;
}

}  // namespace

std::vector<Opt> beam_actions(const Kernel& k, const DeviceTraits& traits) {
  const int64_t locals = product_of(k, {AxisKind::Local, AxisKind::Group});
  const int64_t outputs = product_of(k, {AxisKind::Upcast, AxisKind::Shuffle});
  const int64_t unrolled = outputs * product_of(k, {AxisKind::Unroll});
  const bool has_local = locals > 1;
  // The lowerer takes a SHUFFLE axis only in a workgroup of exactly one subgroup with no GROUP
  // axes and no STAGE (lower_kernel): offering SHUFFLE elsewhere, or after it LOCAL, GROUP,
  // STAGE or an UPCAST that shrinks the workgroup, would only add candidates that fail to lower.
  const bool shuffled = k.shuffle_axis() >= 0;
  const bool shuffle_fits = !shuffled && !k.staged() && product_of(k, {AxisKind::Group}) == 1 &&
                            locals == traits.shuffle_lanes;
  std::vector<Opt> out;
  auto add = [&](OptOp op, int axis, int64_t amount) {
    if (shuffled && (op == OptOp::LOCAL || op == OptOp::GROUP || op == OptOp::STAGE ||
                     k.kinds()[size_t(axis)] == AxisKind::Local))
      return;
    const Opt o{op, axis, amount};
    if (std::find(out.begin(), out.end(), o) == out.end() && applies(k, o)) out.push_back(o);
  };
  for (int a = 0; a < int(k.kinds().size()); ++a) {
    const int64_t size = k.full_shape()[size_t(a)];
    switch (k.kinds()[size_t(a)]) {
      case AxisKind::Global:
        for (int64_t n : kLocalAmounts)
          if (locals * n <= traits.max_workgroup_invocations) add(OptOp::LOCAL, a, n);
        if (shuffle_fits && outputs * traits.shuffle_lanes <= kMaxOutputs &&
            unrolled * traits.shuffle_lanes <= kMaxUnrolled)
          add(OptOp::SHUFFLE, a, traits.shuffle_lanes);
        [[fallthrough]];
      case AxisKind::Local:
        for (int64_t n : kUpcastAmounts)
          if (outputs * n <= kMaxOutputs && unrolled * n <= kMaxUnrolled && n < size)
            add(OptOp::UPCAST, a, n);
        break;
      case AxisKind::Reduce:
        for (int64_t n : kUnrollAmounts)
          if (unrolled * n <= kMaxUnrolled) add(OptOp::UNROLL, a, n);
        if (size <= 32 && unrolled * size <= kMaxUnrolled) add(OptOp::UNROLL, a, size);
        for (int64_t n : kGroupAmounts)
          if (locals * n <= traits.max_workgroup_invocations) add(OptOp::GROUP, a, n);
        break;
      case AxisKind::Unroll:
        // Staging only pays where a workgroup's invocations share loads.
        if (has_local) add(OptOp::STAGE, a, size);
        break;
      default:
        break;
    }
  }
  return out;
}

BeamResult beam_search(const Kernel& base, const std::vector<Opt>& heuristic,
                       const std::vector<int64_t>& counts, const DeviceTraits& traits,
                       const BeamOptions& options, BeamDevice& device) {
  Search search(base, counts, traits, options, device);
  // The heuristics' kernel first, timed whatever the clock says: when it and the plain kernel
  // lower to the same program, the one timing is the heuristics'. Then the heuristics' choice
  // cut short after each opt, longest first, so that the beam can revise its later choices (the
  // rows of a matmul tile, the unroll) without climbing from the plain kernel, whose neighbours
  // are the slowest runs of all; the plain kernel last. Those are timed within the time limit
  // only: a big convolution's plain kernel runs for seconds on Lavapipe, and timing it first
  // left no time for a single beam step.
  std::vector<Entry> start = search.evaluate({heuristic}, /*must=*/true);
  BeamResult result;
  result.heuristic_ns = start[0].ns;
  // The plain kernel must run when the heuristics' kernel did not. Where the heuristics' kernel
  // alone takes a good part of the limit, the seeds (each slower, most often) would take the
  // rest: the search grows the heuristics' kernel instead. The plain kernel can be 100x slower
  // (beautiful_mnist's conv2: 0.26 s with the heuristics' opts, about 15 s without).
  const bool must = start[0].ns == kUntimed;
  const double heuristic_s = must ? 0 : start[0].ns * 1e-9;
  std::vector<std::vector<Opt>> seeds;
  if (4 * heuristic_s * double(heuristic.size()) < options.timeout_s)
    for (size_t n = heuristic.size(); n-- > 1;)
      seeds.emplace_back(heuristic.begin(), heuristic.begin() + std::ptrdiff_t(n));
  if (100 * heuristic_s < options.timeout_s) seeds.emplace_back();
  if (!seeds.empty())
    for (Entry& e : search.evaluate(seeds, must)) start.push_back(std::move(e));
  std::vector<Entry> beam = best_of(start, options.width);
  if (beam.empty())
    throw Error("BEAM: neither the heuristics' kernel nor the plain one of " + base.name() +
                " compiled and ran");
  while (!search.past_deadline()) {
    std::vector<std::vector<Opt>> next;
    for (const Entry& e : beam) {
      // An entry several times slower than the best rarely overtakes it with one more opt, and
      // its children are the slow runs that eat the time limit (the plain 1024 matmul on
      // Lavapipe: seconds per run against 0.2 s for the heuristics' tile).
      if (e.ns > kExpandWithin * beam[0].ns) continue;
      Kernel k = base;
      for (const Opt& o : e.opts) k.apply(o);
      for (const Opt& action : beam_actions(k, traits)) {
        next.push_back(e.opts);
        next.back().push_back(action);
      }
    }
    if (next.empty()) break;
    std::vector<Entry> timed = search.evaluate(next, /*must=*/false);
    const double before = beam[0].ns;
    timed.insert(timed.end(), beam.begin(), beam.end());
    beam = best_of(std::move(timed), options.width);
    ++result.steps;
    if (options.debug >= 3)
      std::printf("beam %-34s step %d: %zu candidates, best %.3f ms %s\n", base.name().c_str(),
                  result.steps, next.size(), ms(beam[0].ns), opts_str(beam[0].opts).c_str());
    if (!(beam[0].ns < before)) break;  // no candidate of this step beat the best so far
  }
  result.opts = beam[0].opts;
  result.ns = beam[0].ns;
  // The winner must beat the heuristics' kernel timed side by side with it, not only as the
  // search measured them at different moments.
  if (result.opts != heuristic && result.heuristic_ns != kUntimed) {
    try {
      const auto [winner_ns, heuristic_ns] =
          search.duel(result.opts, heuristic, std::max(3, options.runs));
      result.heuristic_ns = heuristic_ns;
      result.ns = winner_ns;
      if (!(winner_ns < heuristic_ns)) {
        result.opts = heuristic;
        result.ns = heuristic_ns;
      }
    } catch (...) {
      // Both compiled and ran during the search; should the duel fail, keep what it measured.
    }
  }
  result.candidates = search.candidates();
  result.failed = search.failed();
  result.seconds = search.seconds();
  result.timed_out = search.timed_out();
  if (options.debug >= 1)
    std::printf(
        "beam %-34s %d wide: %3d candidates (%d failed), %d steps%s, %.2f s: %.3f ms vs "
        "heuristics %.3f ms (%.2fx) %s\n",
        base.name().c_str(), options.width, result.candidates, result.failed, result.steps,
        result.timed_out ? " (time limit)" : "", result.seconds, ms(result.ns),
        ms(result.heuristic_ns), result.heuristic_ns / result.ns, opts_str(result.opts).c_str());
  return result;
}

std::string opts_to_text(const std::vector<Opt>& opts) {
  std::string out;
  for (const Opt& o : opts)
    out += std::string(kOptNames[int(o.op)]) + " " + std::to_string(o.axis) + " " +
           std::to_string(o.amount) + "\n";
  return out;
}

bool opts_from_text(const std::string& text, std::vector<Opt>& opts) {
  std::istringstream in(text);
  std::string line;
  std::vector<Opt> out;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string name, rest;
    Opt o{};
    if (!(fields >> name >> o.axis >> o.amount) || (fields >> rest)) return false;
    const auto* it = std::find_if(std::begin(kOptNames), std::end(kOptNames),
                                  [&](const char* n) { return name == n; });
    if (it == std::end(kOptNames)) return false;
    o.op = OptOp(it - std::begin(kOptNames));
    out.push_back(o);
  }
  opts = std::move(out);
  return true;
}

}  // namespace vkg
