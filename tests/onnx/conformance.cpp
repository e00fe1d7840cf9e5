// The ONNX backend conformance tests (Debian's libonnx-testdata) run through vkg::onnx: every test
// directory holds model.onnx and test_data_set_*/{input,output}_*.pb. Each test prints one line:
// PASS, FAIL with the largest error or the error message, or SKIP with the missing operator,
// attribute or dtype (vkg::onnx::Unsupported). Totals per directory follow, every failure and
// skip goes to the report file with its reason, and the run fails when a directory passes fewer
// tests than its pin (--min node=N): the pins hold the level reached so it cannot slip.
//
//   onnx_conformance [--data DIR] [--dirs node,simple,/abs/dir] [--report FILE] [--filter SUBSTR]
//                    [--min node=N ...]
// Outputs compare as ONNX's runner does: the same dtype and shape, and |got - want| <= atol +
// rtol |want| with rtol 1e-3 and atol 1e-7 (nan equals nan); integers and bools exactly.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <vkgrad/core/tensor.hpp>
#include <vkgrad/onnx/model.hpp>
#include <vkgrad/vk/instance.hpp>

namespace fs = std::filesystem;
using vkg::Tensor;

namespace {

constexpr double kRtol = 1e-3, kAtol = 1e-7;

enum class Outcome { Pass, Fail, Skip };
struct Result {
  Outcome outcome = Outcome::Pass;
  std::string reason;
};

// The elements as doubles (floats) or exactly as int64 / uint64 (integers and bools).
struct HostValues {
  std::vector<double> f;
  std::vector<int64_t> i;
  std::vector<uint64_t> u;
};

HostValues host_values(const Tensor& t) {
  const std::vector<std::byte> raw = t.bytes();
  const auto d = t.dtype();
  const size_t n = size_t(t.numel());
  HostValues h;
  auto read = [&](auto tag, auto& out) {
    using T = decltype(tag);
    for (size_t k = 0; k < n; ++k) {
      T v;
      std::memcpy(&v, raw.data() + k * sizeof(T), sizeof(T));
      out.push_back(static_cast<std::remove_reference_t<decltype(out[0])>>(v));
    }
  };
  using S = vkg::Scalar;
  switch (d.scalar) {
    case S::Float32:
      read(float{}, h.f);
      break;
    case S::Float64:
      read(double{}, h.f);
      break;
    case S::Float16:
      for (size_t k = 0; k < n; ++k) {
        uint16_t b;
        std::memcpy(&b, raw.data() + 2 * k, 2);
        h.f.push_back(vkg::float16_t::to_float(b));
      }
      break;
    case S::BFloat16:
      for (size_t k = 0; k < n; ++k) {
        uint16_t b;
        std::memcpy(&b, raw.data() + 2 * k, 2);
        uint32_t w = uint32_t(b) << 16;
        float f;
        std::memcpy(&f, &w, 4);
        h.f.push_back(f);
      }
      break;
    case S::Bool:
    case S::UInt8:
      read(uint8_t{}, h.i);
      break;
    case S::Int8:
      read(int8_t{}, h.i);
      break;
    case S::Int16:
      read(int16_t{}, h.i);
      break;
    case S::UInt16:
      read(uint16_t{}, h.i);
      break;
    case S::Int32:
      read(int32_t{}, h.i);
      break;
    case S::UInt32:
      read(uint32_t{}, h.i);
      break;
    case S::Int64:
      read(int64_t{}, h.i);
      break;
    case S::UInt64:
      read(uint64_t{}, h.u);
      break;
    default:
      break;
  }
  return h;
}

// Empty when they agree, else what differs.
std::string compare(const std::string& name, const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype())
    return "output '" + name + "' is " + got.dtype().name() + ", want " + want.dtype().name();
  if (got.shape() != want.shape())
    return "output '" + name + "' has shape " + vkg::shape_str(got.shape()) + ", want " +
           vkg::shape_str(want.shape());
  const HostValues g = host_values(got), w = host_values(want);
  std::ostringstream os;
  if (!w.f.empty()) {
    double worst = 0;
    size_t at = 0, bad = 0;
    for (size_t k = 0; k < w.f.size(); ++k) {
      const double a = g.f[k], b = w.f[k];
      if (std::isnan(a) && std::isnan(b)) continue;
      const double err = std::isinf(a) && a == b ? 0 : std::abs(a - b);
      if (!(err <= kAtol + kRtol * std::abs(b))) {
        if (!bad++ || err > worst || std::isnan(err)) worst = err, at = k;
      }
    }
    if (!bad) return "";
    os << "output '" << name << "': " << bad << " of " << w.f.size()
       << " elements differ, max error " << worst << " at " << at << " (got " << g.f[at]
       << ", want " << w.f[at] << ")";
    return os.str();
  }
  size_t bad = 0, at = 0;
  for (size_t k = 0; k < w.i.size(); ++k)
    if (g.i[k] != w.i[k] && !bad++) at = k;
  for (size_t k = 0; k < w.u.size(); ++k)
    if (g.u[k] != w.u[k] && !bad++) at = k;
  if (!bad) return "";
  os << "output '" << name << "': " << bad << " elements differ, first at " << at;
  if (!w.i.empty()) os << " (got " << g.i[at] << ", want " << w.i[at] << ")";
  return os.str();
}

std::vector<fs::path> sorted_files(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().starts_with(prefix)) out.push_back(e.path());
  // input_10.pb after input_9.pb
  std::sort(out.begin(), out.end(), [&](const fs::path& a, const fs::path& b) {
    auto num = [&](const fs::path& p) {
      return std::atoi(p.stem().string().c_str() + prefix.size());
    };
    return num(a) < num(b);
  });
  return out;
}

// Empty when the values agree: tensors by compare(), sequences element by element, empty
// optionals only with empty ones.
std::string compare_data(const std::string& name, const vkg::onnx::Data& got,
                         const vkg::onnx::Data& want) {
  using vkg::onnx::None;
  using vkg::onnx::Sequence;
  if (got.index() != want.index())
    return "output '" + name + "' is of another kind (tensor, sequence, none, strings)";
  if (const Tensor* w = std::get_if<Tensor>(&want)) {
    Tensor expected = *w;
    const Tensor& g = std::get<Tensor>(got);
    if (g.dtype() == vkg::dtypes::bfloat16 && expected.dtype() == vkg::dtypes::uint16)
      expected = expected.bitcast(vkg::dtypes::bfloat16);
    return compare(name, g, expected);
  }
  if (const auto* w = std::get_if<vkg::onnx::Strings>(&want)) {
    const auto& g = std::get<vkg::onnx::Strings>(got);
    if (g.shape != w->shape)
      return "output '" + name + "' has shape " + vkg::shape_str(g.shape) + ", want " +
             vkg::shape_str(w->shape);
    for (size_t i = 0; i < g.values.size(); ++i)
      if (g.values[i] != w->values[i])
        return "output '" + name + "' element " + std::to_string(i) + " is '" + g.values[i] +
               "', want '" + w->values[i] + "'";
  }
  if (const Sequence* w = std::get_if<Sequence>(&want)) {
    const Sequence& g = std::get<Sequence>(got);
    if (g.size() != w->size())
      return "output '" + name + "' holds " + std::to_string(g.size()) + " tensors, want " +
             std::to_string(w->size());
    for (size_t i = 0; i < g.size(); ++i)
      if (auto d = compare(name + "[" + std::to_string(i) + "]", g[i], (*w)[i]); !d.empty())
        return d;
  }
  return "";
}

Result run_test(const fs::path& dir) {
  try {
    const vkg::onnx::Model model = vkg::onnx::Model::load((dir / "model.onnx").string());
    bool any = false;
    for (const auto& set : fs::directory_iterator(dir)) {
      if (!set.is_directory() || !set.path().filename().string().starts_with("test_data_set_"))
        continue;
      any = true;
      const auto ins = sorted_files(set.path(), "input_"),
                 outs = sorted_files(set.path(), "output_");
      std::map<std::string, vkg::onnx::Data> feed;
      if (ins.size() > model.inputs().size())
        return {Outcome::Fail, std::to_string(ins.size()) + " input files for " +
                                   std::to_string(model.inputs().size()) + " model inputs"};
      for (size_t k = 0; k < ins.size(); ++k) {
        const auto& info = model.inputs()[k];
        vkg::onnx::Data d = vkg::onnx::load_data(ins[k].string(), info.kind);
        // numpy has no bfloat16: the test data holds bfloat16 inputs as their uint16 bits.
        if (Tensor* t = std::get_if<Tensor>(&d);
            t && info.dtype == vkg::dtypes::bfloat16 && t->dtype() == vkg::dtypes::uint16)
          *t = t->bitcast(vkg::dtypes::bfloat16);
        feed.emplace(info.name, d);
      }
      auto got = model.run_data(feed);
      if (outs.size() != model.outputs().size())
        return {Outcome::Fail, std::to_string(outs.size()) + " output files for " +
                                   std::to_string(model.outputs().size()) + " model outputs"};
      std::vector<Tensor*> all;
      for (auto& [_, d] : got) {
        if (Tensor* t = std::get_if<Tensor>(&d)) all.push_back(t);
        if (auto* seq = std::get_if<vkg::onnx::Sequence>(&d))
          for (Tensor& t : *seq) all.push_back(&t);
      }
      vkg::realize(all);
      for (size_t k = 0; k < outs.size(); ++k) {
        const auto& info = model.outputs()[k];
        const vkg::onnx::Data want = vkg::onnx::load_data(outs[k].string(), info.kind, "CPU");
        const std::string diff = compare_data(info.name, got.at(info.name), want);
        if (!diff.empty()) return {Outcome::Fail, set.path().filename().string() + ": " + diff};
      }
    }
    if (!any) return {Outcome::Fail, "no test_data_set_* directory"};
    return {};
  } catch (const vkg::onnx::Unsupported& e) {
    return {Outcome::Skip, e.what()};
  } catch (const std::exception& e) {
    return {Outcome::Fail, std::string("error: ") + e.what()};
  }
}

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  if (s.size() > 400) s = s.substr(0, 400) + "...";
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  setenv("VKG_VALIDATION", "1", /*overwrite=*/0);  // as the gtest suites: validation on
  std::string data = "/usr/share/libonnx-testdata/data", report = "onnx_conformance_report.txt",
              filter;
  std::vector<std::string> dirs{"node", "pytorch-converted", "pytorch-operator", "simple"};
  std::map<std::string, int> pins;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    auto next = [&]() -> std::string {
      if (a + 1 >= argc) {
        std::cerr << arg << " needs a value\n";
        std::exit(2);
      }
      return argv[++a];
    };
    if (arg == "--data")
      data = next();
    else if (arg == "--report")
      report = next();
    else if (arg == "--filter")
      filter = next();
    else if (arg == "--dirs") {
      dirs.clear();
      std::stringstream ss(next());
      for (std::string d; std::getline(ss, d, ',');) dirs.push_back(d);
    } else if (arg == "--min") {
      const std::string v = next();
      const size_t eq = v.find('=');
      if (eq == std::string::npos) {
        std::cerr << "--min wants DIR=COUNT\n";
        return 2;
      }
      pins[v.substr(0, eq)] = std::atoi(v.c_str() + eq + 1);
    } else {
      std::cerr << "unknown argument " << arg << "\n";
      return 2;
    }
  }
  std::ofstream rep(report);
  rep << "# ONNX conformance failures and skips on device " << vkg::default_device() << "\n";
  bool ok = true;
  std::vector<std::string> totals;
  const auto start = std::chrono::steady_clock::now();
  for (const std::string& d : dirs) {
    // A directory named by an absolute path is used as it is (tests/onnx/torch_models).
    const fs::path root = fs::path(d).is_absolute() ? fs::path(d) : fs::path(data) / d;
    if (!fs::is_directory(root)) {
      std::cerr << "no test directory " << root << "\n";
      return 2;
    }
    std::vector<fs::path> tests;
    for (const auto& e : fs::directory_iterator(root))
      if (e.is_directory() && e.path().filename().string().find(filter) != std::string::npos)
        tests.push_back(e.path());
    std::sort(tests.begin(), tests.end());
    int pass = 0, fail = 0, skip = 0;
    for (const auto& t : tests) {
      const auto t0 = std::chrono::steady_clock::now();
      Result r = run_test(t);
      // A validation message during a test fails it (as in the gtest suites).
      for (const std::string& m : vkg::vk::take_validation_messages())
        if (r.outcome != Outcome::Fail) r = {Outcome::Fail, "Vulkan validation: " + m};
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      const std::string shown = fs::path(d).is_absolute() ? fs::path(d).filename().string() : d;
      const std::string name = shown + "/" + t.filename().string();
      const char* tag = r.outcome == Outcome::Pass   ? "PASS"
                        : r.outcome == Outcome::Fail ? "FAIL"
                                                     : "SKIP";
      (r.outcome == Outcome::Pass ? pass : r.outcome == Outcome::Fail ? fail : skip)++;
      std::printf("%s %s (%.0f ms)%s%s\n", tag, name.c_str(), ms, r.reason.empty() ? "" : ": ",
                  one_line(r.reason).c_str());
      std::fflush(stdout);
      if (r.outcome != Outcome::Pass)
        rep << tag << " " << name << ": " << one_line(r.reason) << "\n";
    }
    const int n = int(tests.size());
    char line[256];
    std::snprintf(line, sizeof line, "%-18s %4d of %4d pass (%5.1f%%), %4d fail, %4d skip",
                  (fs::path(d).is_absolute() ? fs::path(d).filename().string() : d).c_str(), pass,
                  n, n ? 100.0 * pass / n : 0.0, fail, skip);
    std::string total = line;
    if (pins.count(d)) {
      total += " (pinned at least " + std::to_string(pins[d]) + ")";
      if (pass < pins[d]) {
        total += " BELOW THE PIN";
        ok = false;
      }
    }
    totals.push_back(total);
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("\n");
  for (const auto& t : totals) {
    std::printf("%s\n", t.c_str());
    rep << "# " << t << "\n";
  }
  std::printf("%.1f s on device %s; failures and skips with reasons: %s\n", secs,
              vkg::default_device().c_str(), report.c_str());
  return ok ? 0 : 1;
}
