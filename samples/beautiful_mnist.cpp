// tinygrad's examples/beautiful_mnist.py in vkgrad: the same model (beautiful_mnist_net.hpp), the
// same protocol, on Fashion-MNIST. Each step draws `batch` random training images (with
// replacement), inputs are pixel / 255, the loss is sparse categorical cross-entropy and Adam
// updates the weights; the test accuracy is over the test images in batchnorm's eval mode, and
// evaluation is not counted as training time. Prints the first step's time (it compiles every
// kernel), the median step time of steps 3..N, images/s, GFLOPS and the test accuracy. The step
// runs through vkg::Jit as tinygrad's does (@TinyJit): step 2 is captured, steps 3..N replay it;
// --no-jit schedules every step anew.
//
//   beautiful_mnist [--steps N] [--batch B] [--lr LR] [--data DIR] [--seed S] [--test-limit N]
//                   [--quick] [--no-jit]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include <vkgrad/vkgrad.hpp>

#include "beautiful_mnist_net.hpp"
#include "image_batches.hpp"

using namespace vkg;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  int64_t steps = 70;  // tinygrad's default
  int64_t batch = 512;
  double lr = 1e-3;
  std::string data = nn::kFashionMnistDir;
  uint64_t seed = 42;
  int64_t test_limit = 0;  // evaluate on the first N test images only (0: all 10000)
  bool jit = true;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(
      stderr,
      "%s\nusage: beautiful_mnist [--steps N] [--batch B] [--lr LR] [--data DIR] [--seed S]\n"
      "                       [--test-limit N] [--quick] [--no-jit]\n",
      why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    try {
      if (a == "--steps")
        o.steps = std::stoll(value());
      else if (a == "--batch")
        o.batch = std::stoll(value());
      else if (a == "--lr")
        o.lr = std::stod(value());
      else if (a == "--data")
        o.data = value();
      else if (a == "--seed")
        o.seed = std::stoull(value());
      else if (a == "--test-limit")
        o.test_limit = std::stoll(value());
      else if (a == "--no-jit")
        o.jit = false;
      else if (a == "--quick")
        o.steps = 5, o.batch = 64, o.test_limit = 1000;  // a smoke run
      else if (a == "--help" || a == "-h")
        usage("Trains tinygrad's beautiful_mnist model on Fashion-MNIST.");
      else
        usage(("unknown option " + a).c_str());
    } catch (const std::logic_error&) {
      usage(("bad value for " + a).c_str());
    }
  }
  if (o.steps < 1 || o.batch <= 0 || o.lr <= 0) usage("steps and batch must be >= 1, lr > 0");
  return o;
}

// Inputs as tinygrad's example has them: the raw pixels over 255.
constexpr samples::PixelScale kScale{0.0f, 1.0f};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  try {
    const nn::ImageDataset data = nn::fashion_mnist(opt.data);
    Tensor::manual_seed(opt.seed);
    samples::BeautifulMnistNet net;
    // The initial weights as buffers, in one schedule: left lazy, the first step's kernels would
    // each recompute the random initialization of every weight they read, once per use.
    std::vector<Tensor> params = net.parameters();
    std::vector<Tensor*> to_realize;
    for (Tensor& p : params) to_realize.push_back(&p);
    realize(to_realize);
    nn::Adam adam(params, opt.lr);
    std::mt19937_64 rng(opt.seed);
    std::uniform_int_distribution<int64_t> pick(0, data.train_images.shape[0] - 1);

    // Forward, backward, the update and the running statistics: one schedule per step.
    auto train_step = [&](const std::vector<Tensor>& in) {
      adam.zero_grad();
      Tensor loss = net(in[0]).sparse_categorical_crossentropy(in[1]);
      loss.backward();
      std::vector<Tensor> extra = net.running_stats();
      extra.push_back(loss);
      adam.step(extra);
      return std::vector<Tensor>{loss};
    };
    Jit jit_step(train_step);

    Tensor::training = true;
    std::vector<double> step_secs;
    // Process CPU time (all threads, Lavapipe's included) per step: on a shared machine it is
    // steadier than wall time for comparing builds.
    std::vector<double> step_cpu_secs;
    float loss_value = 0;
    for (int64_t step = 0; step < opt.steps; ++step) {
      std::vector<int64_t> idx(size_t(opt.batch));
      for (int64_t& i : idx) i = pick(rng);
      const auto start = Clock::now();
      const std::clock_t cpu_start = std::clock();
      Tensor x = samples::image_batch(data.train_images, idx, kScale);
      Tensor y = samples::label_batch(data.train_labels, idx);
      const Tensor loss = (opt.jit ? jit_step({x, y}) : train_step({x, y}))[0];
      loss_value = loss.item<float>();
      step_secs.push_back(std::chrono::duration<double>(Clock::now() - start).count());
      step_cpu_secs.push_back(double(std::clock() - cpu_start) / CLOCKS_PER_SEC);
      std::printf("step %3lld  loss %.4f  %.0f ms\n", (long long)step + 1, loss_value,
                  1e3 * step_secs.back());
      std::fflush(stdout);
    }
    // Steps 3..N: the first compiles every kernel, the second may still fill caches.
    const std::vector<double> steady(
        step_secs.begin() + std::min<ptrdiff_t>(2, ptrdiff_t(step_secs.size()) - 1),
        step_secs.end());
    const double ms = 1e3 * median(steady);
    const double cpu_ms =
        1e3 * median(std::vector<double>(step_cpu_secs.end() - ptrdiff_t(steady.size()),
                                         step_cpu_secs.end()));
    const double images_per_s = double(opt.batch) / (ms / 1e3);
    std::printf("first step (compiles every kernel): %.2f s; steps %s\n", step_secs.front(),
                opt.jit ? "3..N replay step 2's capture (JIT)" : "scheduled anew (--no-jit)");
    if (jit_step.captured()) std::printf("kernels per step: %zu\n", jit_step.kernels());
    std::printf("median step of steps %s..%lld: %.0f ms (batch %lld, %.0f images/s, %.1f GFLOPS)\n",
                step_secs.size() > 2 ? "3" : "1", (long long)opt.steps, ms, (long long)opt.batch,
                images_per_s, images_per_s * samples::BeautifulMnistNet::kFlopsPerImage / 1e9);
    std::printf("median CPU time per step (all threads): %.0f ms\n", cpu_ms);

    const auto eval_start = Clock::now();
    const double acc = samples::test_accuracy(net, data, opt.test_limit, kScale);
    std::printf("test accuracy: %.2f%% (%s test images, %.1f s)\n", 100.0 * acc,
                opt.test_limit > 0 ? std::to_string(opt.test_limit).c_str() : "10000",
                std::chrono::duration<double>(Clock::now() - eval_start).count());
  } catch (const Error& e) {
    std::fprintf(stderr, "beautiful_mnist: %s\n", e.what());
    return 1;
  }
  return 0;
}
