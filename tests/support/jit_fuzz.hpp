// Running a fuzzer's program (support/differential_fuzz.hpp) inside a vkg::Jit: its random inputs
// become the Jit's inputs, and every other step runs in the function (constants made from host
// data there are frozen at the capture, as the Jit documents). Optionally one random input is a
// state instead: a realized tensor outside the function that the program reads (a clone of it)
// and that the function assigns in place at its end, the way an optimizer updates its parameters.
//
// Every call gets fresh random inputs (special values included) and is compared with the same
// function run eagerly on the CPU device from the same inputs and the same state: the first call
// runs the function, the second captures it, the later ones replay the capture.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <vkgrad/vkgrad.hpp>

#include "support/differential_fuzz.hpp"

namespace vkg::fuzz {

// Whether a step reads values on the host (masked_select, whose output size depends on them):
// a Jit cannot capture it (core/jit.hpp: a clear error), and fresh inputs may give it a size
// the steps after it were not generated for.
inline bool reads_on_host(const Program& p) {
  for (const Step& s : p.steps)
    if (s.text.find(".masked_select(") != std::string::npos) return true;
  return false;
}

struct JitPlan {
  std::vector<size_t> inputs;         // the steps that are the Jit's inputs, in order
  std::optional<size_t> state_input;  // the random input step the state stands for
  std::optional<size_t> state_from;   // the value the state's update reads (none: S alone)
};

// The state's next value: S's dtype and shape, from S and `from` (a value that broadcasts to S).
// Floats halve S so that it stays bounded over the calls; integers and bools mix by xor.
inline Tensor next_state(const Tensor& s, const std::optional<Tensor>& from) {
  const DType d = s.dtype();
  Tensor next = d.is_float()  ? (from ? s * 0.5 + from->cast(d) : s * -0.5)
                : d.is_bool() ? (from ? s.logical_xor(from->cast(d)) : s.logical_not())
                              : (from ? s.bitwise_xor(from->cast(d)) : s + 1);
  return next.dtype() == d ? next : next.cast(d);
}

inline std::string next_state_text(DType d, const std::string& from) {
  if (d.is_float()) return from.empty() ? "S * -0.5" : "S * 0.5 + " + from + ".cast(S.dtype())";
  if (d.is_bool())
    return from.empty() ? "S.logical_not()" : "S.logical_xor(" + from + ".cast(dtypes::bool_))";
  return from.empty() ? "S + 1" : "S.bitwise_xor(" + from + ".cast(S.dtype()))";
}

// The function a Jit wraps, on `dev`: p's values with the inputs from `in` (and `state` for the
// state's step), its outputs, then the state assigned its next value and returned last.
inline std::vector<Tensor> jit_body(const Program& p, const JitPlan& plan,
                                    const std::vector<Tensor>& in, const std::string& dev,
                                    Tensor* state) {
  std::vector<Tensor> vals;
  size_t k = 0;
  for (size_t i = 0; i < p.steps.size(); ++i) {
    // A copy: a value that only views S (S itself, or a pad of nothing) would show the assign's
    // result where a copy of it (a shard on VK) shows the value before.
    if (plan.state_input && i == *plan.state_input)
      vals.push_back(state->clone());
    else if (k < plan.inputs.size() && plan.inputs[k] == i)
      vals.push_back(in[k++]);
    else
      vals.push_back(p.steps[i].make(vals, dev));
  }
  std::vector<Tensor> out;
  for (size_t o : p.outputs) out.push_back(vals[o]);
  if (state) {
    const std::optional<Tensor> from =
        plan.state_from ? std::optional<Tensor>(vals[*plan.state_from]) : std::nullopt;
    state->assign(next_state(*state, from));
    out.push_back(*state);
  }
  return out;
}

// Which steps are the Jit's inputs, and (where `with_state`) which one a state stands for and
// which output its update reads: one that broadcasts to it and, for an integer or bool state,
// one computed exactly (a cast to an integer turns an ulp into a unit).
inline JitPlan plan_jit(const Program& p, bool with_state, uint32_t seed) {
  JitPlan plan;
  std::vector<size_t> random;
  for (size_t i = 0; i < p.steps.size(); ++i)
    if (p.steps[i].fresh) random.push_back(i);
  if (with_state && !random.empty()) plan.state_input = random[seed % random.size()];
  for (size_t i : random)
    if (i != plan.state_input) plan.inputs.push_back(i);
  if (!plan.state_input) return plan;
  const std::vector<Tensor> vals = run(p, "CPU", false);  // lazy: shapes and dtypes
  const Tensor& s = vals[*plan.state_input];
  for (size_t o : p.outputs) {
    if (!s.dtype().is_float() && reorders_sums(p, o)) continue;
    try {
      if (next_state(s, vals[o]).shape() == s.shape()) plan.state_from = o;
    } catch (const Error&) {
    }
  }
  return plan;
}

inline std::string jit_plan_cpp(const Program& p, const JitPlan& plan) {
  std::string s = "  // In a Jit: the inputs are";
  for (size_t i : plan.inputs) s += " v" + std::to_string(i);
  s += " (fresh random values each call, seeds in the message)";
  if (plan.state_input) {
    const size_t i = *plan.state_input;
    s += ";\n  // v" + std::to_string(i) + " is a state S outside the function (realized), then " +
         "S.assign(" +
         next_state_text(p.steps[i].make({}, "CPU").dtype(),
                         plan.state_from ? "v" + std::to_string(*plan.state_from) : "") +
         ") at the end, S returned last";
  }
  return s + "\n" + p.cpp();
}

}  // namespace vkg::fuzz
