// The running and comparing half of the differential fuzzers (tests/tensor_differential_fuzz*
// _test.cpp): a program is a list of steps that make values, replayable on any device; each is run
//   - fused on the Vulkan device and fused on the CPU device (the reference interpreter of the same
//     kernels): they must agree bit for bit on integers and bools, within a few ulps on floats
//     (nan equals nan, the sign of a zero counts);
//   - step by step on the CPU device, every value realized as it is made: catches a fusion or
//     scheduling bug that both devices share;
//   - where a step has one, against a float64 reference on the host from its realized operands.
// A mismatch prints the program as C++ to paste into a unit test. VKG_FUZZ_SEED picks the first
// seed, VKG_FUZZ_PROGRAMS how many programs, VKG_FUZZ_PRINT=1 prints each program.
#pragma once
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <vkgrad/vkgrad.hpp>

#include "support/device_compare.hpp"

namespace vkg::fuzz {

// ---- values on the host, for the float64 reference ----

struct HostArray {
  Shape shape;
  std::vector<double> v;
  DType dtype;
};

inline HostArray host_of(const Tensor& t) { return {t.shape(), test::values(t), t.dtype()}; }

// The bytes of value v as an element of dtype d (v must be one: a float of d, an integer in
// range; the 64-bit integers past 2^53 are not).
inline std::vector<std::byte> element_bytes(DType d, double v) {
  std::vector<std::byte> out(size_t(d.scalar_size()));
  visit_dtype(d, [&](auto tag) {
    using T = decltype(tag);
    T t;
    if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>)
      t = T(float(v));
    else if constexpr (std::is_same_v<T, bool>)
      t = v != 0;
    else
      t = T(v);
    std::memcpy(out.data(), &t, sizeof(T));
  });
  return out;
}

// ---- a program: steps that make values, replayable on any device ----

using HostFn = std::function<std::optional<HostArray>(const std::vector<HostArray>&)>;

struct Step {
  std::string text;  // C++ for the reproducer
  std::vector<size_t> operands;
  std::function<Tensor(const std::vector<Tensor>&, const std::string& device)> make;
  HostFn host;  // the float64 reference from the operands, where cheap
  // How the result may differ from the float64 reference, in ulps of its dtype (0: exact).
  uint64_t host_ulps = 0;
  bool host_relative_sum = false;  // a float sum: within n * eps * sum|x|
  // A random input's dtype and shape with the values of another seed (the JIT fuzzer gives every
  // call fresh inputs); empty for every other step.
  std::function<Tensor(const std::string& device, uint32_t seed)> fresh = {};
};

struct Program {
  std::vector<Step> steps;
  std::vector<size_t> outputs;

  // Every value no later step reads, realized together (several outputs of one schedule); the
  // last value where each is read.
  void choose_outputs() {
    std::vector<bool> read(steps.size(), false);
    for (const Step& s : steps)
      for (size_t o : s.operands) read[o] = true;
    for (size_t i = 0; i < steps.size(); ++i)
      if (!read[i] && !steps[i].operands.empty()) outputs.push_back(i);
    if (outputs.empty() && !steps.empty()) outputs.push_back(steps.size() - 1);
  }

  // The steps whose values a caller gives (`fresh` ones), in order.
  std::vector<size_t> fresh_steps() const {
    std::vector<size_t> out;
    for (size_t i = 0; i < steps.size(); ++i)
      if (steps[i].fresh) out.push_back(i);
    return out;
  }

  // The outputs' values on `device`, the fresh steps (fresh_steps()) taking `in`'s in order.
  std::vector<Tensor> run(const std::vector<Tensor>& in, const std::string& device) const {
    std::vector<Tensor> vals;
    size_t k = 0;
    for (size_t i = 0; i < steps.size(); ++i)
      vals.push_back(steps[i].fresh && k < in.size() ? in[k++] : steps[i].make(vals, device));
    std::vector<Tensor> out;
    for (size_t o : outputs) out.push_back(vals[o]);
    return out;
  }

  std::string cpp() const {
    std::string s;
    for (size_t i = 0; i < steps.size(); ++i)
      s += "  Tensor v" + std::to_string(i) + " = " + steps[i].text + ";\n";
    s += "  // compared:";
    for (size_t o : outputs) s += " v" + std::to_string(o);
    return s + "\n";
  }
};

inline std::string shape_str(const Shape& s) {
  std::string out = "{";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "}";
}

inline std::string dtype_cpp(DType d) {
  return "dtypes::" + std::string(d == dtypes::bool_ ? "bool_" : d.name());
}

inline std::string ints_str(const std::vector<int64_t>& v) {
  std::string out = "{";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "}";
}

// Whether value i comes from an op the devices compute within ulps rather than exactly (exp, log,
// sin, pow, ... on Lavapipe's built-ins or our helpers), through any chain of steps. A cast of such
// a value to an integer turns one ulp into a whole unit (exp then uint32: seeds 27 and 100572), so
// the generators cast only exact values to integers.
inline bool inexact(const Program& p, size_t i) {
  static const char* approximate[] = {
      ".exp(",       ".exp2(",    ".log(",         ".log2(",         ".sin(", ".pow(",
      ".atan2(",     ".sigmoid(", ".tanh(",        ".logcumsumexp(", ".erf(", ".erfc(",
      ".logsumexp(", ".softmax(", ".log_softmax(", ".logaddexp(",    ".lerp("};
  std::vector<bool> in(i + 1, false);  // steps come after their operands
  for (size_t k = 0; k <= i; ++k) {
    const Step& s = p.steps[k];
    for (const char* a : approximate) in[k] = in[k] || s.text.find(a) != std::string::npos;
    for (size_t o : s.operands) in[k] = in[k] || in[o];
  }
  return in[i];
}

// Whether value i may differ between devices by more than a few ulps: an inexact op (above), or
// a sum whose order the devices' kernels choose (reductions, matmul, scans, pools, scatter
// accumulation), through any chain of steps. Cancellation there turns an ulp of a partial sum
// into many of the result; everywhere else the devices agree within a few ulps or bit for bit.
inline bool reorders_sums(const Program& p, size_t i) {
  static const char* sums[] = {".sum(",
                               ".mean(",
                               ".matmul(",
                               ".dot(",
                               ".cumsum(",
                               ".cumprod(",
                               ".prod(",
                               ".avg_pool(",
                               ".adaptive_avg_pool(",
                               ".scatter_reduce(",
                               ".scatter_add(",
                               ".std(",
                               ".var("};
  std::vector<bool> in(i + 1, false);
  for (size_t k = 0; k <= i; ++k) {
    const Step& s = p.steps[k];
    in[k] = s.host_relative_sum;
    for (const char* a : sums) in[k] = in[k] || s.text.find(a) != std::string::npos;
    for (size_t o : s.operands) in[k] = in[k] || in[o];
  }
  return in[i] || inexact(p, i);
}

// ---- running and comparing ----

inline std::vector<Tensor> run(const Program& p, const std::string& dev, bool stepwise) {
  std::vector<Tensor> vals;
  for (const Step& s : p.steps) {
    vals.push_back(s.make(vals, dev));
    if (stepwise) vals.back().realize();
  }
  return vals;
}

inline std::vector<Tensor> outputs_of(const Program& p, std::vector<Tensor> vals) {
  std::vector<Tensor> out;
  for (size_t o : p.outputs) out.push_back(vals[o]);
  std::vector<Tensor*> ptrs;
  for (auto& t : out) ptrs.push_back(&t);
  realize(ptrs);
  return out;
}

// Floats: within max_ulps, or within `rel` of the output's largest finite magnitude (for values
// that reorder sums or go through inexact ops, reorders_sums; 0 elsewhere); nan equals nan; +0
// and -0 differ.
inline std::string compare(const Tensor& want, const Tensor& got, uint64_t max_ulps, double rel) {
  if (want.dtype() != got.dtype() || want.shape() != got.shape())
    return "dtype/shape: " + want.dtype().name() + shape_str(want.shape()) + " vs " +
           got.dtype().name() + shape_str(got.shape());
  const DType d = want.dtype();
  const auto a = want.bytes(), b = got.bytes();
  const size_t size = size_t(d.scalar_size()), n = a.size() / size;
  double scale = 0;
  if (d.is_float())
    for (size_t i = 0; i < n; ++i) {
      const double x = test::element(d, a.data() + i * size);
      if (std::isfinite(x)) scale = std::max(scale, std::fabs(x));
    }
  std::string bad;
  size_t count = 0;
  for (size_t i = 0; i < n; ++i) {
    const std::byte *x = a.data() + i * size, *y = b.data() + i * size;
    bool ok;
    if (d.is_float()) {
      const double fx = test::element(d, x), fy = test::element(d, y);
      ok = test::ulps(d, x, y) <= max_ulps ||
           (std::isfinite(fx) && std::isfinite(fy) && std::fabs(fx - fy) <= rel * scale);
      if (fx == 0 && fy == 0 && std::signbit(fx) != std::signbit(fy)) ok = false;
    } else if (d.is_bool()) {
      ok = (x[0] != std::byte{0}) == (y[0] != std::byte{0});
    } else {
      ok = std::memcmp(x, y, size) == 0;
    }
    if (ok) continue;
    if (count++ < 6)
      bad += "\n    [" + std::to_string(i) + "] " + test::element_str(d, x) + " vs " +
             test::element_str(d, y);
  }
  if (!count) return "";
  return std::to_string(count) + " of " + std::to_string(n) + " " + d.name() +
         " elements differ:" + bad;
}

// Whether value i comes from a step whose text holds `op` (".pow("), through any chain of steps.
inline bool from_op(const Program& p, size_t i, const char* op) {
  std::vector<bool> in(i + 1, false);
  for (size_t k = 0; k <= i; ++k) {
    in[k] = p.steps[k].text.find(op) != std::string::npos;
    for (size_t o : p.steps[k].operands) in[k] = in[k] || in[o];
  }
  return in[i];
}
inline bool from_pow(const Program& p, size_t i) { return from_op(p, i, ".pow("); }

// Two devices' value i of p: within 4 ulps (8 from an erfc, whose tail is up to 6 ulps off libm's
// on Lavapipe: codegen_kernels_test's ErfcKeepsItsDigitsInItsTail), or within 1e-6 of the output's
// largest finite magnitude where i reorders sums or is inexact. A pow, x^y = exp2(y * log2|x|)
// in float32 on both devices, within 3e-5: t = y * log2|x| is off by up to an ulp of t (the
// rounding of log2 and of the product), so 2^t by ln2 * |t| * 2^-23 relative, and |t| < 150
// for a finite nonzero float32 result: up to 1.2e-5 on each device. 7.83^7.69 (elementwise
// fuzzer seed 802948) is 7440345.1; the CPU gave 7440348, Lavapipe 7440338, 1.3e-6 apart.
inline std::string compare_output(const Program& p, size_t i, const Tensor& want,
                                  const Tensor& got) {
  return compare(want, got, from_op(p, i, ".erfc(") ? 8 : 4,
                 from_pow(p, i)        ? 3e-5
                 : reorders_sums(p, i) ? 1e-6
                                       : 0);
}

// A program's outputs run two ways, `want` (plain sizes, say) against `got` (symbolic sizes, a
// Jit's replay): the same shapes, and each output's values as compare_output compares them.
inline std::string compare_outputs(const Program& p, const std::vector<Tensor>& want,
                                   const std::vector<Tensor>& got) {
  for (size_t k = 0; k < want.size(); ++k) {
    if (want[k].shape() != got[k].shape())
      return "v" + std::to_string(p.outputs[k]) + ": shape " + shape_str(got[k].shape()) +
             ", plain " + shape_str(want[k].shape());
    if (std::string e = compare_output(p, p.outputs[k], want[k], got[k]); !e.empty())
      return "v" + std::to_string(p.outputs[k]) + ": " + e;
  }
  return "";
}

// The float64 reference of each step that has one, from its operands as realized.
inline std::string check_host(const Program& p, const std::vector<Tensor>& stepwise) {
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const Step& s = p.steps[i];
    if (!s.host) continue;
    std::vector<HostArray> in;
    for (size_t o : s.operands) in.push_back(host_of(stepwise[o]));
    const std::optional<HostArray> want = s.host(in);
    if (!want) continue;
    const Tensor& got = stepwise[i];
    const std::vector<double> g = test::values(got);
    if (got.shape() != want->shape && prod(got.shape()) != prod(want->shape))
      return "v" + std::to_string(i) + ": shape " + shape_str(got.shape()) + " vs host " +
             shape_str(want->shape);
    // A float sum may differ from float64's by n ulps of the sum of |x| of its elements.
    std::vector<double> abs_sum(g.size(), 0.0);
    if (s.host_relative_sum) {
      std::vector<HostArray> abs_in = in;
      for (double& x : abs_in[0].v) x = std::fabs(x);
      abs_sum = s.host(abs_in)->v;
    }
    for (size_t k = 0; k < g.size(); ++k) {
      const double w = want->v[k], x = g[k];
      bool ok = (std::isnan(w) && std::isnan(x)) || w == x;
      if (w == 0 && x == 0 && !s.host_relative_sum) ok = std::signbit(w) == std::signbit(x);
      if (!ok && s.host_relative_sum && std::isfinite(w))
        ok = std::fabs(w - x) <= 1.2e-7 * double(in[0].v.size() + 1) * abs_sum[k];
      if (!ok && s.host_relative_sum && !std::isfinite(w) && !std::isnan(w))
        ok = true;  // a float32 sum can overflow where float64's does not, and the reverse
      if (!ok && s.host_relative_sum && std::isnan(w)) ok = std::isnan(x);
      if (!ok && s.host_relative_sum && std::isinf(x) && abs_sum[k] >= 3.4e38)
        ok = true;  // float32 partial sums overflow where float64's stay finite
      if (!ok && s.host_ulps && got.dtype().is_float() && !std::isnan(w) && !std::isnan(x)) {
        // w rounded to the result's dtype first: the reference is float64's value.
        const DType d = got.dtype();
        const auto wb = element_bytes(d, w), xb = element_bytes(d, x);
        ok = test::ulps(d, wb.data(), xb.data()) <= s.host_ulps &&
             (w != 0 || x != 0 || std::signbit(w) == std::signbit(x));
      }
      if (!ok)
        return "v" + std::to_string(i) + "[" + std::to_string(k) + "] = " + std::to_string(x) +
               ", float64 host " + std::to_string(w) + " (" + s.text + ")";
    }
  }
  return "";
}

inline uint32_t env_u32(const char* name, uint32_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? uint32_t(std::strtoul(v, nullptr, 10)) : fallback;
}

// Runs `count` programs from seed `first` (env VKG_FUZZ_SEED / VKG_FUZZ_PROGRAMS override them),
// each made by make_program(seed), and fails the test with a reproducer for each mismatch (at most
// five). `name` heads the summary line.
inline void fuzz_programs(const char* name, uint32_t default_first, uint32_t default_count,
                          const std::function<Program(uint32_t)>& make_program) {
  const uint32_t first = env_u32("VKG_FUZZ_SEED", default_first),
                 count = env_u32("VKG_FUZZ_PROGRAMS", default_count);
  const auto start = std::chrono::steady_clock::now();
  int failures = 0, built = 0;
  size_t steps = 0;
  for (uint32_t seed = first; seed < first + count && failures < 5; ++seed) {
    const Program p = make_program(seed);
    if (std::getenv("VKG_FUZZ_PRINT")) std::printf("seed %u:\n%s", seed, p.cpp().c_str());
    steps += p.steps.size();
    std::string why;
    try {
      const auto vk = outputs_of(p, run(p, "VK", false));
      const auto cpu = outputs_of(p, run(p, "CPU", false));
      const auto stepwise_vals = run(p, "CPU", true);
      const auto stepwise = outputs_of(p, stepwise_vals);
      for (size_t k = 0; k < p.outputs.size() && why.empty(); ++k) {
        if (std::string e = compare_output(p, p.outputs[k], cpu[k], vk[k]); !e.empty())
          why = "v" + std::to_string(p.outputs[k]) + " CPU vs VK: " + e;
        else if (std::string e2 = compare_output(p, p.outputs[k], stepwise[k], cpu[k]); !e2.empty())
          why = "v" + std::to_string(p.outputs[k]) + " stepwise CPU vs fused CPU: " + e2;
      }
      if (why.empty()) why = check_host(p, stepwise_vals);
      ++built;
    } catch (const std::exception& e) {
      why = std::string("threw: ") + e.what();
    }
    if (why.empty()) continue;
    ++failures;
    ADD_FAILURE() << "seed " << seed << " (VKG_FUZZ_SEED=" << seed
                  << " VKG_FUZZ_PROGRAMS=1): " << why << "\n  auto dev = \"VK\";  // and \"CPU\"\n"
                  << p.cpp();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: %d programs (%zu steps) from seed %u in %.1f s\n", name, built, steps, first, s);
}

}  // namespace vkg::fuzz

namespace vkg::fuzz {

// Runs check(seed) for `count` seeds from `first` (VKG_FUZZ_SEED / VKG_FUZZ_PROGRAMS override
// them, VKG_FUZZ_PRINT=1 prints each seed); each answer that is not empty fails the test with the
// seed (at most five). A check that throws fails with the exception's message.
inline void fuzz_seeds(const char* name, uint32_t default_first, uint32_t default_count,
                       const std::function<std::string(uint32_t)>& check) {
  const uint32_t first = env_u32("VKG_FUZZ_SEED", default_first),
                 count = env_u32("VKG_FUZZ_PROGRAMS", default_count);
  const auto start = std::chrono::steady_clock::now();
  int failures = 0;
  uint32_t ran = 0;
  for (uint32_t seed = first; seed < first + count && failures < 5; ++seed, ++ran) {
    if (std::getenv("VKG_FUZZ_PRINT")) std::printf("seed %u\n", seed);
    std::string why;
    try {
      why = check(seed);
    } catch (const std::exception& e) {
      why = std::string("threw: ") + e.what();
    }
    if (why.empty()) continue;
    ++failures;
    ADD_FAILURE() << "seed " << seed << " (VKG_FUZZ_SEED=" << seed
                  << " VKG_FUZZ_PROGRAMS=1): " << why;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: %u programs from seed %u in %.1f s\n", name, ran, first, s);
}

}  // namespace vkg::fuzz
