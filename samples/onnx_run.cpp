// Runs an ONNX model through vkgrad and times it:
//   onnx_run model.onnx [name=input.pb | name=input.raw ...] [--runs N] [--jit]
// Inputs not given are random (normal floats, small integers) of the model's declared shape, free
// dimensions taken as 1; a .raw file holds the input's bytes in its declared shape and dtype. It
// prints each output's shape, dtype and first values, and the time of the first run (which
// compiles the kernels) and of the warm runs. With --jit, runs go through vkg::Jit (replays
// recorded command buffers from the third run on). Times include reading the outputs back.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <vkgrad/vkgrad.hpp>

using namespace vkg;

namespace {

Tensor random_input(const onnx::ValueInfo& info) {
  Shape shape;
  for (int64_t d : info.shape) shape.push_back(d < 0 ? 1 : d);
  const DType d = info.dtype.value_or(dtypes::float32);
  if (d.is_float()) return Tensor::randn(shape).cast(d).realize();
  if (d.is_bool()) return Tensor::randint(0, 2, shape).cast(d).realize();
  return Tensor::randint(0, 4, shape).cast(d).realize();
}

Tensor raw_input(const onnx::ValueInfo& info, const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot open " + path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const DType d = info.dtype.value_or(dtypes::float32);
  Shape shape;
  for (int64_t n : info.shape) shape.push_back(n < 0 ? 1 : n);
  return Tensor(std::as_bytes(std::span(bytes)), bytes.size() / size_t(d.itemsize()), d, shape);
}

std::string first_values(const Tensor& t, size_t n) {
  const Tensor flat = t.flatten().cast(dtypes::float64);
  std::vector<double> v =
      flat.numel()
          ? flat.shrink({{0, std::min<int64_t>(flat.numel(), int64_t(n))}}).to_vector<double>()
          : std::vector<double>{};
  std::string out;
  for (double x : v) out += (out.empty() ? "" : ", ") + std::to_string(x);
  return out + (size_t(t.numel()) > n ? ", ..." : "");
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 2) {
    std::cerr
        << "usage: onnx_run model.onnx [name=input.pb|name=input.raw ...] [--runs N] [--jit]\n";
    return 2;
  }
  int runs = 10;
  bool use_jit = false;
  std::map<std::string, std::string> files;
  for (int a = 2; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--runs" && a + 1 < argc)
      runs = std::atoi(argv[++a]);
    else if (arg == "--jit")
      use_jit = true;
    else if (const size_t eq = arg.find('='); eq != std::string::npos)
      files[arg.substr(0, eq)] = arg.substr(eq + 1);
    else
      throw Error("unknown argument " + arg);
  }
  const auto t_load = std::chrono::steady_clock::now();
  const onnx::Model model = onnx::Model::load(argv[1]);
  std::cout << "loaded " << argv[1] << " (opset " << model.opset() << ") in " << ms_since(t_load)
            << " ms on " << default_device() << "\n";

  std::vector<Tensor> inputs;
  for (const auto& info : model.inputs()) {
    auto it = files.find(info.name);
    Tensor t = it == files.end()              ? random_input(info)
               : it->second.ends_with(".raw") ? raw_input(info, it->second)
                                              : onnx::load_tensor(it->second);
    std::cout << "input  " << info.name << ": " << shape_str(t.shape()) << " " << t.dtype().name()
              << (it == files.end() ? " (random)" : " from " + it->second) << "\n";
    inputs.push_back(t.realize());
  }
  auto call = [&](const std::vector<Tensor>& in) {
    std::map<std::string, Tensor> feed;
    for (size_t i = 0; i < in.size(); ++i) feed.emplace(model.inputs()[i].name, in[i]);
    auto out = model.run(feed);
    std::vector<Tensor> list;
    for (const auto& info : model.outputs()) list.push_back(out.at(info.name));
    return list;
  };
  Jit jit(call);
  auto run_once = [&] {
    std::vector<Tensor> out = use_jit ? jit(inputs) : call(inputs);
    std::vector<Tensor*> ptrs;
    for (auto& t : out) ptrs.push_back(&t);
    realize(ptrs);
    for (auto& t : out) (void)t.bytes();  // the time includes reading the outputs back
    return out;
  };
  auto t0 = std::chrono::steady_clock::now();
  std::vector<Tensor> out = run_once();
  const double first = ms_since(t0);
  std::vector<double> warm;
  for (int r = 0; r < runs; ++r) {
    // Fresh input buffers: the same graph over the same buffers is one hash-consed node that is
    // realized already, and would time nothing.
    for (auto& t : inputs) t = t.clone().realize();
    t0 = std::chrono::steady_clock::now();
    run_once();
    warm.push_back(ms_since(t0));
  }
  for (size_t i = 0; i < out.size(); ++i)
    std::cout << "output " << model.outputs()[i].name << ": " << shape_str(out[i].shape()) << " "
              << out[i].dtype().name() << " [" << first_values(out[i], 8) << "]\n";
  std::sort(warm.begin(), warm.end());
  std::cout << "first run " << first << " ms";
  if (!warm.empty())
    std::cout << ", warm median " << warm[warm.size() / 2] << " ms over " << runs << " runs";
  std::cout << (use_jit ? " (jit)" : "") << "\n";
} catch (const std::exception& e) {
  std::cerr << "onnx_run: " << e.what() << "\n";
  return 1;
}
