// BEAM search, as tinygrad's BEAM=n: instead of the heuristics' opts, try many and keep the
// fastest as measured on the device. The beam starts from the heuristics' choice (so the search
// never does worse than the heuristics), that choice cut short after each of its opts (so it can
// revise the heuristics' later choices) and the kernel without opts (those two only where the
// heuristics' kernel is short against the time limit), then grows
// each of its `width` best kernels by every single opt that applies (LOCAL, UPCAST, UNROLL, GROUP,
// SHUFFLE, STAGE and a few amounts each), lowers and compiles the new candidates in parallel
// threads, times them, and keeps the `width` fastest, until no candidate beats the best so far
// or the time limit passes. Candidates that do not apply, lower or compile are skipped. The
// winner then runs in turns with the heuristics' kernel, and replaces it only if faster there:
// on a shared machine, timings taken minutes apart can differ by more than the opts do.
//
// The search knows no device: a BeamDevice compiles a lowered Program and times one run of it.
// The VK adapter (devices/vk_beam.hpp) times with GPU timestamps on scratch buffers.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <vkgrad/codegen/heuristics.hpp>
#include <vkgrad/codegen/kernel.hpp>
#include <vkgrad/codegen/program.hpp>

namespace vkg {

// A compiled candidate, as the device keeps it.
struct BeamCandidate {
  virtual ~BeamCandidate() = default;
};

class BeamDevice {
 public:
  virtual ~BeamDevice() = default;
  // Compiles a lowered program. Called from several threads at once; throws vkg::Error (or any
  // exception) for a program the device cannot build, which the search then skips.
  virtual std::unique_ptr<BeamCandidate> compile(const Program& program) = 0;
  // Runs the candidate once and returns its device time in nanoseconds. Called from one thread.
  virtual double run_ns(BeamCandidate& candidate) = 0;
};

struct BeamOptions {
  int width = 2;
  double timeout_s = 10;  // stop expanding once the search has run this long
  int runs = 3;           // timed runs per candidate; its time is the fastest
  int threads = 0;        // compile threads; 0 for one per hardware thread
  int debug = 0;          // DEBUG: 1 prints one line per search, 3 one per beam step
};

struct BeamResult {
  std::vector<Opt> opts;    // the fastest kernel's opts, applied on top of the base kernel
  double ns = 0;            // its time
  double heuristic_ns = 0;  // the heuristics' kernel's time, measured in the same search
  int candidates = 0;       // distinct candidates compiled
  int failed = 0;           // candidates that did not lower, compile or run
  int steps = 0;            // beam expansions done
  double seconds = 0;       // wall time of the search
  bool timed_out = false;
};

// Searches opts for `base` (a kernel with no opts applied). `heuristic` is the heuristics' choice
// for it; `counts` the buffer sizes by slot, for lowering. Throws vkg::Error only when neither
// the heuristics' kernel nor the plain one compiles and runs.
BeamResult beam_search(const Kernel& base, const std::vector<Opt>& heuristic,
                       const std::vector<int64_t>& counts, const DeviceTraits& traits,
                       const BeamOptions& options, BeamDevice& device);

// Every kernel one more opt makes of `k` that the device could run: each opt kind over each
// axis it takes, with a few amounts each, within the workgroup and register limits.
std::vector<Opt> beam_actions(const Kernel& k, const DeviceTraits& traits);

// "UPCAST 0 4" per line, and back; parse returns false on anything else.
std::string opts_to_text(const std::vector<Opt>& opts);
bool opts_from_text(const std::string& text, std::vector<Opt>& opts);

}  // namespace vkg
