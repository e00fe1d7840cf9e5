// Differential fuzzing of vkg::Jit (core/jit.hpp): the differential fuzzers' random programs
// (support/fuzz_generators.hpp) inside a Jit called five times, every call with fresh random inputs
// (inf, nan, -0, subnormals, the types' extremes) and compared with the same function run eagerly
// on the CPU device from the same inputs (support/jit_fuzz.hpp). The first call runs the function,
// the second captures it and the later ones replay the capture: a replay that reads a stale
// buffer, misses a copy of an input, or overwrites a buffer a later kernel still reads shows as a
// mismatch. Every other program also carries a state the function assigns in place (an
// optimizer's parameters), and every fourth Jit runs on the CPU device instead of Vulkan.
//
// Reproducible: VKG_FUZZ_SEED picks the first seed, VKG_FUZZ_PROGRAMS how many programs;
// VKG_FUZZ_SHOW=1 prints each program before it runs (for one that never returns).
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include <vkgrad/vkgrad.hpp>

#include "support/differential_fuzz.hpp"
#include "support/fuzz_generators.hpp"
#include "support/jit_fuzz.hpp"

namespace vkg {
namespace {

using namespace fuzz;

constexpr int kCalls = 5;

// The seed of input k's values in call `call` (call -1: the state's first value).
uint32_t input_seed(uint32_t seed, int call, size_t k) {
  return seed * 7919u + uint32_t(call + 1) * 104729u + uint32_t(k) * 1299709u + 17u;
}

// t's elements in a new realized tensor on `dev`.
Tensor copy_to(const Tensor& t, const std::string& dev) {
  return Tensor(t.bytes(), size_t(prod(t.shape())), t.dtype(), t.shape(), dev).realize();
}

std::vector<Tensor> realized(std::vector<Tensor> ts) {
  std::vector<Tensor*> ptrs;
  for (Tensor& t : ts) ptrs.push_back(&t);
  realize(ptrs);
  return ts;
}

// Output k of the function (the state after the program's outputs) compared as the fuzzers do.
std::string compare_jit_output(const Program& p, const JitPlan& plan, size_t k, const Tensor& want,
                               const Tensor& got) {
  if (k < p.outputs.size()) return compare_output(p, p.outputs[k], want, got);
  const bool sums = plan.state_from && reorders_sums(p, *plan.state_from);
  return compare(want, got, 4, sums ? 1e-6 : 0);
}

std::string output_name(const Program& p, size_t k) {
  return k < p.outputs.size() ? "v" + std::to_string(p.outputs[k]) : std::string("S");
}

// A program that reads values on the host (masked_select's output size) in a Jit: its first call
// runs as eagerly and agrees with the CPU device; its capture is the documented error, after
// which the library is still usable. Its inputs keep the generator's values (fresh ones may give
// the op after masked_select another size than it was generated for).
std::string check_host_read(const Program& p, const std::string& dev) {
  Jit jit([&](const std::vector<Tensor>&) { return outputs_of(p, run(p, dev, false)); });
  const std::vector<Tensor> got = jit({});
  const std::vector<Tensor> want = outputs_of(p, run(p, "CPU", false));
  for (size_t k = 0; k < got.size(); ++k)
    if (std::string e = compare_output(p, p.outputs[k], want[k], got[k]); !e.empty())
      return "call 0 (eager in the Jit), output " + output_name(p, k) + ": " + e + "\n" + p.cpp();
  try {
    jit({});
    return "the capture of a function that reads a value on the host did not throw\n" + p.cpp();
  } catch (const Error& e) {
    if (std::string(e.what()).find("while the JIT captures") == std::string::npos)
      return std::string("the capture threw another error: ") + e.what() + "\n" + p.cpp();
  }
  const std::vector<Tensor> again = outputs_of(p, run(p, dev, false));
  for (size_t k = 0; k < again.size(); ++k)
    if (std::string e = compare_output(p, p.outputs[k], want[k], again[k]); !e.empty())
      return "eager after the failed capture, output " + output_name(p, k) + ": " + e + "\n" +
             p.cpp();
  return "";
}

// The program in a Jit on `dev`, five calls, each against the eager CPU run of its inputs.
std::string check_jit(const Program& p, uint32_t seed, const std::string& dev, bool with_state) {
  if (reads_on_host(p)) return check_host_read(p, dev);
  const JitPlan plan = plan_jit(p, with_state, seed);
  std::optional<Tensor> state;
  if (plan.state_input)
    state = p.steps[*plan.state_input].fresh(dev, input_seed(seed, -1, 0)).realize();
  int runs = 0;
  Jit jit([&](const std::vector<Tensor>& in) {
    ++runs;
    return jit_body(p, plan, in, dev, state ? &*state : nullptr);
  });
  const std::string where = "Jit on " + dev + ", seeds input_seed(" + std::to_string(seed) +
                            ", call, k) of tensor_jit_fuzz_test.cpp\n" + jit_plan_cpp(p, plan);
  for (int call = 0; call < kCalls; ++call) {
    std::vector<Tensor> in, in_cpu;
    for (size_t k = 0; k < plan.inputs.size(); ++k) {
      const Step& s = p.steps[plan.inputs[k]];
      in.push_back(s.fresh(dev, input_seed(seed, call, k)));
      in_cpu.push_back(s.fresh("CPU", input_seed(seed, call, k)));
      if (call % 2 == 1) in.back().realize();  // already on the device: copied in by a replay
    }
    std::optional<Tensor> state_cpu, state_before;
    if (state) state_cpu = copy_to(*state, "CPU"), state_before = copy_to(*state, "CPU");
    const std::vector<Tensor> got = jit(in);
    const std::vector<Tensor> want =
        realized(jit_body(p, plan, in_cpu, "CPU", state_cpu ? &*state_cpu : nullptr));
    if (got.size() != want.size())
      return "call " + std::to_string(call) + ": " + std::to_string(got.size()) +
             " outputs, want " + std::to_string(want.size()) + "\n" + where;
    for (size_t k = 0; k < got.size(); ++k) {
      const std::string e = compare_jit_output(p, plan, k, want[k], got[k]);
      if (e.empty()) continue;
      // Whether the device itself differs (the other fuzzers' finding) or only its Jit does.
      std::string eager = "?";
      try {
        std::vector<Tensor> in_dev;
        for (const Tensor& t : in_cpu) in_dev.push_back(copy_to(t, dev));
        std::optional<Tensor> state_dev;
        if (state_before) state_dev = copy_to(*state_before, dev);
        const std::vector<Tensor> e_dev =
            realized(jit_body(p, plan, in_dev, dev, state_dev ? &*state_dev : nullptr));
        eager = compare_jit_output(p, plan, k, want[k], e_dev[k]).empty()
                    ? "eager " + dev + " agrees with CPU: the Jit's fault"
                    : "eager " + dev + " differs too: the device's fault";
      } catch (const std::exception& x) {
        eager = std::string("eager run threw: ") + x.what();
      }
      return "call " + std::to_string(call) +
             (call == 1  ? " (the capture)"
              : call > 1 ? " (a replay)"
                         : "") +
             ", output " + output_name(p, k) + " CPU eager vs Jit: " + e + "\n  (" + eager + ")\n" +
             where;
    }
  }
  if (runs != 2)
    return "the function ran " + std::to_string(runs) + " times in " + std::to_string(kCalls) +
           " calls, not 2\n" + where;
  return "";
}

std::string check_seed(Program (*make)(uint32_t), uint32_t seed) {
  const std::string dev = seed % 4 == 3 ? "CPU" : "VK";
  if (std::getenv("VKG_FUZZ_SHOW")) {
    const Program p = make(seed);
    std::printf("%s\n%s\n", dev.c_str(), jit_plan_cpp(p, plan_jit(p, seed % 2 == 0, seed)).c_str());
    std::fflush(stdout);
  }
  return check_jit(make(seed), seed, dev, seed % 2 == 0);
}

TEST(JitFuzz, ElementwiseProgramsReplayAsTheyRunEagerly) {
  fuzz_seeds("jit fuzz (elementwise programs)", 20261201, 120,
             [](uint32_t seed) { return check_seed(&elementwise_program, seed); });
}

TEST(JitFuzz, OpFamilyProgramsReplayAsTheyRunEagerly) {
  fuzz_seeds("jit fuzz (op family programs)", 20261202, 90,
             [](uint32_t seed) { return check_seed(&op_family_program, seed); });
}

}  // namespace
}  // namespace vkg
