// Trains a small convolutional network on Fashion-MNIST through Vulkan: the main job of vkgrad's
// demo. The network (fashion_mnist_net.hpp) is tinygrad's beautiful MNIST example made smaller for
// a 2-core CPU device; every step is one lazy graph (forward, backward and the Adam update)
// realized as one schedule of fused kernels. The step runs through vkg::Jit: the second step is
// captured and the rest replay its command buffer (--no-jit schedules every step anew).
//
//   fashion_mnist [--steps N] [--batch B] [--lr LR] [--data DIR] [--seed S] [--quick]
//                 [--eval-every N] [--save model.safetensors] [--time-limit SECONDS] [--no-jit]
//
// Data: Debian's dataset-fashion-mnist package (/usr/share/datasets/fashion-mnist), or --data.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <unistd.h>

#include <vkgrad/vkgrad.hpp>

#include "fashion_mnist_net.hpp"
#include "image_batches.hpp"

using namespace vkg;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  int64_t steps = 1200;
  int64_t batch = 128;
  double lr = 3e-3;
  std::string data = nn::kFashionMnistDir;
  uint64_t seed = 42;
  int64_t eval_every = 0;   // evaluate on the test set every N steps (0: only at the end)
  int64_t test_limit = 0;   // evaluate on the first N test images only (0: all 10000)
  double time_limit = 0;    // stop training after this many seconds (0: no limit)
  std::string save;
  bool jit = true;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "%s\nusage: fashion_mnist [--steps N] [--batch B] [--lr LR] [--data DIR] [--seed S] "
               "[--quick]\n"
               "                     [--eval-every N] [--test-limit N] [--time-limit SECONDS] "
               "[--save FILE]\n"
               "                     [--no-jit]\n",
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
      if (a == "--steps") o.steps = std::stoll(value());
      else if (a == "--batch") o.batch = std::stoll(value());
      else if (a == "--lr") o.lr = std::stod(value());
      else if (a == "--data") o.data = value();
      else if (a == "--seed") o.seed = std::stoull(value());
      else if (a == "--eval-every") o.eval_every = std::stoll(value());
      else if (a == "--test-limit") o.test_limit = std::stoll(value());
      else if (a == "--time-limit") o.time_limit = std::stod(value());
      else if (a == "--save") o.save = value();
      else if (a == "--no-jit")
        o.jit = false;
      else if (a == "--quick") o.steps = 30, o.batch = 32, o.test_limit = 1000;  // CI: a minute, no accuracy goal
      else if (a == "--help" || a == "-h") usage("Trains a CNN on Fashion-MNIST.");
      else usage(("unknown option " + a).c_str());
    } catch (const std::logic_error&) {
      usage(("bad value for " + a).c_str());
    }
  }
  if (o.steps < 0 || o.batch <= 0 || o.lr <= 0) usage("steps must be >= 0, batch and lr > 0");
  return o;
}

using Net = samples::FashionNet;

// Fashion-MNIST's pixel mean and standard deviation: inputs centered on the data.
constexpr samples::PixelScale kScale{0.286f, 0.353f};

void progress(int64_t step, int64_t steps, float loss, double steps_per_s, bool tty) {
  const int width = 30;
  const int filled = steps ? int(width * step / steps) : width;
  std::string bar(size_t(filled), '#');
  bar.resize(width, '.');
  std::printf("%s[%s] step %lld/%lld  loss %.4f  %.2f steps/s%s", tty ? "\r" : "", bar.c_str(), (long long)step,
              (long long)steps, loss, steps_per_s, tty ? "" : "\n");
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  try {
    const auto t0 = Clock::now();
    const nn::ImageDataset data = nn::fashion_mnist(opt.data);
    std::printf("Fashion-MNIST: %lld training and %lld test images from %s\n", (long long)data.train_images.shape[0],
                (long long)data.test_images.shape[0], opt.data.c_str());

    Tensor::manual_seed(opt.seed);
    Net net;
    nn::Adam adam(net.parameters(), opt.lr);
    nn::CosineAnnealingLR schedule(adam, std::max<int64_t>(opt.steps, 1), opt.lr * 0.05);
    std::mt19937_64 rng(opt.seed);
    std::uniform_int_distribution<int64_t> pick(0, data.train_images.shape[0] - 1);

    // One training step: forward, backward, the update and the running statistics, one schedule.
    // The learning-rate schedule stays outside: set_lr writes the lr tensor the step reads.
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
    std::printf("training step: %s\n",
                opt.jit ? "JIT (replays a captured command buffer)" : "eager (--no-jit)");

    const bool tty = isatty(STDOUT_FILENO);
    const int64_t report_every = tty ? 1 : 50;
    Tensor::training = true;
    const auto train_start = Clock::now();
    int64_t step = 0;
    float last_loss = 0;
    for (; step < opt.steps; ++step) {
      const double elapsed = std::chrono::duration<double>(Clock::now() - train_start).count();
      if (opt.time_limit > 0 && elapsed > opt.time_limit) {
        std::printf("\nstopping at the time limit of %.0f s\n", opt.time_limit);
        break;
      }
      std::vector<int64_t> idx(size_t(opt.batch));
      for (int64_t& i : idx) i = pick(rng);
      Tensor x = samples::image_batch(data.train_images, idx, kScale);
      Tensor y = samples::label_batch(data.train_labels, idx);

      const Tensor loss = (opt.jit ? jit_step({x, y}) : train_step({x, y}))[0];
      schedule.step();
      last_loss = loss.item<float>();

      const double secs = std::chrono::duration<double>(Clock::now() - train_start).count();
      if ((step + 1) % report_every == 0 || step + 1 == opt.steps)
        progress(step + 1, opt.steps, last_loss, double(step + 1) / secs, tty);
      if (opt.eval_every > 0 && (step + 1) % opt.eval_every == 0 && step + 1 < opt.steps)
        std::printf("%stest accuracy after %lld steps: %.2f%%\n", tty ? "\n" : "", (long long)(step + 1),
                    100.0 * samples::test_accuracy(net, data, opt.test_limit, kScale));
    }
    const double train_secs = std::chrono::duration<double>(Clock::now() - train_start).count();
    std::printf("%strained %lld steps of %lld images in %.1f s (%.1f images/s)\n", tty ? "\n" : "", (long long)step,
                (long long)opt.batch, train_secs, double(step * opt.batch) / std::max(train_secs, 1e-9));

    if (jit_step.captured()) std::printf("kernels per step: %zu\n", jit_step.kernels());
    const double acc = samples::test_accuracy(net, data, opt.test_limit, kScale);
    const double total = std::chrono::duration<double>(Clock::now() - t0).count();
    std::printf("test accuracy: %.2f%% (%s test images)\ntime taken: %.1f s\n", 100.0 * acc,
                opt.test_limit > 0 ? std::to_string(opt.test_limit).c_str() : "10000", total);
    if (!opt.save.empty()) {
      nn::save_safetensors(opt.save, net.state_dict(), {{"accuracy", std::to_string(acc)}});
      std::printf("saved the model to %s\n", opt.save.c_str());
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "fashion_mnist: %s\n", e.what());
    return 1;
  }
  return 0;
}
