// The network samples/fashion_mnist.cpp trains (and bench/nn_training_bench.cpp times): tinygrad's
// beautiful MNIST example made smaller for a 2-core CPU device. Two conv blocks (3x3 convolution,
// relu, 2x2 max pool, batchnorm: 28x28 -> 14x14 -> 7x7), then a linear layer to 10 classes.
// Batchnorm after the pool rather than before it normalizes 4x fewer values for the same effect
// on what the next layer sees; on Lavapipe that and the 3x3 kernels make a step ~2x faster than
// tinygrad's order and 5x5 kernels (a 5x5 first convolution's weight gradient alone took 40%).
#pragma once
#include <vector>

#include <vkgrad/vkgrad.hpp>

namespace vkg::samples {

struct FashionNet : nn::Module {
  nn::Conv2d conv1{1, 16, 3, {.padding = 1}};
  nn::BatchNorm2d bn1{16};
  nn::Conv2d conv2{16, 32, 3, {.padding = 1}};
  nn::BatchNorm2d bn2{32};
  nn::Linear fc{32 * 7 * 7, 10};

  Tensor operator()(const Tensor& x) const {
    Tensor h = bn1(conv1(x).relu().max_pool2d());
    h = bn2(conv2(h).relu().max_pool2d());
    return fc(h.flatten(1));
  }
  nn::StateDict state_dict() const override {
    return nn::named({{"conv1", &conv1}, {"bn1", &bn1}, {"conv2", &conv2}, {"bn2", &bn2}, {"fc", &fc}});
  }
  // BatchNorm's running statistics: realize them with each training step.
  std::vector<Tensor> running_stats() const {
    std::vector<Tensor> out = bn1.buffers();
    for (const Tensor& t : bn2.buffers()) out.push_back(t);
    return out;
  }
};

}  // namespace vkg::samples
