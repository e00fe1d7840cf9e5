// Differential fuzzing of symbolic shapes (core/variable.hpp): random programs over tensors whose
// leading axis is n = Variable("n", 1, 12).bind(value) (support/symbolic_program_gen.hpp), for
// three to five bindings each:
//   - eagerly: the program with symbolic sizes on Vulkan and on the CPU device agrees with the
//     same program on plain sizes on the CPU device (shapes, and values as the differential
//     fuzzers compare them: support/differential_fuzz.hpp);
//   - in a vkg::Jit called once per binding (the capture at the second, replays rebinding n),
//     with fresh random inputs every call, against the plain program on the CPU device. A capture
//     that documents it replays only its own binding (core/jit.hpp) may say so as its error.
// Reproducible: VKG_FUZZ_SEED picks the first seed, VKG_FUZZ_PROGRAMS how many programs.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include <vkgrad/vkgrad.hpp>

#include "support/differential_fuzz.hpp"
#include "support/symbolic_program_gen.hpp"

namespace vkg {
namespace {

using namespace fuzz;

std::string reproducer(const Program& p, const std::vector<int64_t>& bindings) {
  std::string s =
      "  // N: n.bind(value) with Variable n(\"n\", 1, 12), or the plain value; values:";
  for (int64_t b : bindings) s += " " + std::to_string(b);
  return s + "\n" + p.cpp();
}

std::string check_eager(const Program& p, const std::vector<int64_t>& bindings, SymContext& ctx) {
  for (int64_t b : bindings) {
    ctx.value = b;
    ctx.symbolic = false;
    const std::vector<Tensor> plain = outputs_of(p, run(p, "CPU", false));
    ctx.symbolic = true;
    for (const char* dev : {"VK", "CPU"}) {
      std::vector<Tensor> sym;
      try {
        sym = outputs_of(p, run(p, dev, false));
      } catch (const std::exception& e) {
        return "n = " + std::to_string(b) + ", symbolic on " + dev + " threw: " + e.what() + "\n" +
               reproducer(p, bindings);
      }
      if (std::string e = compare_outputs(p, plain, sym); !e.empty())
        return "n = " + std::to_string(b) + ", symbolic on " + dev + " vs plain on CPU: " + e +
               "\n" + reproducer(p, bindings);
    }
  }
  return "";
}

int fixed_binding_captures = 0;

std::string check_jit(const Program& p, const std::vector<int64_t>& bindings, SymContext& ctx,
                      uint32_t seed, const std::string& dev) {
  const std::vector<size_t> inputs = p.fresh_steps();
  auto body = [&](const std::vector<Tensor>& in, const std::string& on) { return p.run(in, on); };
  Jit jit([&](const std::vector<Tensor>& in) { return body(in, dev); });
  std::vector<int64_t> order = bindings;
  order.push_back(bindings[0]);
  for (size_t call = 0; call < order.size(); ++call) {
    std::vector<Tensor> in, in_plain;
    ctx.value = order[call];
    for (size_t k = 0; k < inputs.size(); ++k) {
      const uint32_t s = seed * 7919u + uint32_t(call) * 104729u + uint32_t(k) * 1299709u;
      ctx.symbolic = true;
      in.push_back(p.steps[inputs[k]].fresh(dev, s));
      ctx.symbolic = false;
      in_plain.push_back(p.steps[inputs[k]].fresh("CPU", s));
    }
    ctx.symbolic = true;  // the function's steps run in calls 0 and 1
    std::vector<Tensor> got;
    try {
      got = jit(in);
    } catch (const Error& e) {
      if (call >= 2 &&
          std::string(e.what()).find("replays only its own binding") != std::string::npos) {
        ++fixed_binding_captures;
        return "";
      }
      throw;
    }
    ctx.symbolic = false;
    std::vector<Tensor> want = body(in_plain, "CPU");
    std::vector<Tensor*> ptrs;
    for (Tensor& t : want) ptrs.push_back(&t);
    realize(ptrs);
    if (std::string e = compare_outputs(p, want, got); !e.empty())
      return "Jit on " + dev + ", call " + std::to_string(call) +
             " (n = " + std::to_string(order[call]) + "), against plain on CPU: " + e + "\n" +
             reproducer(p, bindings);
  }
  return "";
}

// check(), or its exception's message, with the reproducer.
template <class Check>
std::string with_reproducer(const Program& p, const std::vector<int64_t>& bindings, Check check) {
  try {
    return check();
  } catch (const std::exception& e) {
    return std::string("threw: ") + e.what() + "\n" + reproducer(p, bindings);
  }
}

TEST(SymbolicFuzz, SymbolicProgramsAgreeWithPlainOnesForEveryBinding) {
  fuzz_seeds("symbolic fuzz (eager)", 20261301, 80, [](uint32_t seed) {
    auto ctx = std::make_shared<SymContext>();
    SymProgramGen gen(seed, ctx);
    const Program p = gen.next();
    return with_reproducer(p, gen.bindings(), [&] { return check_eager(p, gen.bindings(), *ctx); });
  });
}

TEST(SymbolicFuzz, AJitReplaysSymbolicProgramsAcrossBindings) {
  fixed_binding_captures = 0;
  fuzz_seeds("symbolic fuzz (Jit)", 20261302, 100, [](uint32_t seed) {
    auto ctx = std::make_shared<SymContext>();
    SymProgramGen gen(seed, ctx);
    const Program p = gen.next();
    return with_reproducer(p, gen.bindings(), [&] {
      return check_jit(p, gen.bindings(), *ctx, seed, seed % 4 == 3 ? "CPU" : "VK");
    });
  });
  std::printf("  of which %d captures replay only their own binding (core/jit.hpp)\n",
              fixed_binding_captures);
}

}  // namespace
}  // namespace vkg
