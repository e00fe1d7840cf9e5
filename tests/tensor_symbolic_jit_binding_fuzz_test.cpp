// Differential fuzzing of a vkg::Jit's replays at bindings its capture did not see: random programs
// over n = Variable("n", 0, 12) whose ops the capture's binding accepts and others may not
// (support/symbolic_program_gen.hpp's one-binding form: plain sizes equal to n at the capture,
// shrinks to n, broadcasts of an n bound to 1, max over n). The Jit is called at the capture's
// binding twice (a run, then the capture), then replayed at 0, 1, 12 (the variable's min and max)
// and other values, and at the capture's binding again; each call gets fresh random inputs and is
// compared with the same program run eagerly at that binding:
//   - eagerly on plain sizes on the CPU device (the reference), and with symbolic sizes on the
//   Jit's
//     device: the same vkg::Error or the same values (support/differential_fuzz.hpp's compare);
//   - the Jit: where eager throws, a vkg::Error; else the reference's values, or the documented
//     error of a capture that cannot follow this binding (core/jit.hpp, core/binding_guard.hpp).
// Reproducible: VKG_FUZZ_SEED picks the first seed, VKG_FUZZ_PROGRAMS how many programs.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <vkgrad/vkgrad.hpp>

#include "support/differential_fuzz.hpp"
#include "support/symbolic_program_gen.hpp"

namespace vkg {
namespace {

using namespace fuzz;

// A run's outputs, or the vkg::Error it threw.
struct Outcome {
  std::vector<Tensor> values;
  std::optional<std::string> error;
};

template <class F>
Outcome outcome_of(F f) {
  try {
    return {f(), std::nullopt};
  } catch (const Error& e) {
    return {{}, std::string(e.what())};
  }
}

std::string describe(const Outcome& o) { return o.error ? "threw: " + *o.error : "gave values"; }

// The errors a Jit gives for a binding its capture cannot replay though eager computes it.
bool refuses_binding(const std::string& e) {
  return e.find("replays only its own binding") != std::string::npos ||
         e.find("computes what the capture's kernels do not") != std::string::npos;
}

struct Tally {
  int replays = 0, eager_errors = 0, refused = 0, no_inputs = 0, symbolic_pads = 0;
};
Tally tally;

std::string check(const Program& p, int64_t capture, SymContext& ctx, uint32_t seed,
                  const std::string& dev) {
  const std::vector<size_t> inputs = p.fresh_steps();
  auto body = [&](const std::vector<Tensor>& in, const std::string& on) {
    std::vector<Tensor> out = p.run(in, on);
    std::vector<Tensor*> ptrs;
    for (Tensor& t : out) ptrs.push_back(&t);
    realize(ptrs);
    return out;
  };
  Jit jit([&](const std::vector<Tensor>& in) { return body(in, dev); });
  std::vector<int64_t> order{capture, capture, 0, 1, 12};
  std::mt19937 rng(seed);
  for (int extra = 0; extra < 2; ++extra)
    order.push_back(std::uniform_int_distribution<int64_t>(0, 12)(rng));
  order.push_back(capture + 1 <= 12 ? capture + 1 : capture - 1);
  std::shuffle(order.begin() + 2, order.end(), rng);
  order.push_back(capture);
  std::string calls;
  for (int64_t b : order) calls += " " + std::to_string(b);
  const std::string where =
      "\n  // N: n.bind(value) with Variable n(\"n\", 0, 12), or the plain "
      "value; calls at" +
      calls + " on " + dev + "\n" + p.cpp();
  for (size_t call = 0; call < order.size(); ++call) {
    const int64_t b = order[call];
    ctx.value = b;
    std::vector<Tensor> in, in_eager, in_plain;
    try {
      for (size_t k = 0; k < inputs.size(); ++k) {
        const uint32_t s = seed * 7919u + uint32_t(call) * 104729u + uint32_t(k) * 1299709u;
        ctx.symbolic = true;
        in.push_back(p.steps[inputs[k]].fresh(dev, s));
        in_eager.push_back(p.steps[inputs[k]].fresh(dev, s));
        ctx.symbolic = false;
        in_plain.push_back(p.steps[inputs[k]].fresh("CPU", s));
      }
    } catch (const Error&) {
      if (call < 2) throw;
      ++tally.no_inputs;  // an input of negative size here: no call at this binding
      continue;
    }
    const std::string at = "call " + std::to_string(call) + " (n = " + std::to_string(b) + "): ";
    ctx.symbolic = false;
    const Outcome plain = outcome_of([&] { return body(in_plain, "CPU"); });
    ctx.symbolic = true;
    const Outcome eager = outcome_of([&] { return body(in_eager, dev); });
    const Outcome jitted = outcome_of([&] { return jit(in); });
    if (plain.error.has_value() != eager.error.has_value())
      return at + "plain sizes on CPU " + describe(plain) + ", symbolic on " + dev + " " +
             describe(eager) + where;
    if (!plain.error)
      if (std::string e = compare_outputs(p, plain.values, eager.values); !e.empty())
        return at + "symbolic on " + dev + " vs plain on CPU: " + e + where;
    if (call >= 2) ++tally.replays;
    if (eager.error) {
      ++tally.eager_errors;
      if (!jitted.error)
        return at + "eager threw (" + *eager.error + "), the Jit gave values" + where;
      continue;
    }
    if (jitted.error) {
      if (call >= 2 && refuses_binding(*jitted.error)) {
        ++tally.refused;
        continue;
      }
      return at + "eager gave values, the Jit threw: " + *jitted.error + where;
    }
    if (std::string e = compare_outputs(p, plain.values, jitted.values); !e.empty())
      return at + "Jit vs plain on CPU: " + e + where;
  }
  return "";
}

TEST(SymbolicJitBindingFuzz, ReplaysAtOtherBindingsDoWhatEagerDoes) {
  tally = {};
  fuzz_seeds("symbolic Jit binding fuzz", 20261401, 60, [](uint32_t seed) {
    auto ctx = std::make_shared<SymContext>();
    SymProgramGen gen(seed, ctx, true);
    const Program p = gen.next();
    if (p.cpp().find(".pad({") != std::string::npos && p.cpp().find("N - ") != std::string::npos)
      ++tally.symbolic_pads;
    return check(p, gen.bindings()[0], *ctx, seed, seed % 4 == 3 ? "CPU" : "VK");
  });
  std::printf(
      "  %d replays: %d where eager throws, %d refused (eager computes them); %d bindings where "
      "an input's size is negative; %d programs pad by N - c\n",
      tally.replays, tally.eager_errors, tally.refused, tally.no_inputs, tally.symbolic_pads);
}

}  // namespace
}  // namespace vkg
