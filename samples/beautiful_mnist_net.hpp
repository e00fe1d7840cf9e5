// The model of tinygrad's examples/beautiful_mnist.py, layer for layer: two 5x5 convolutions
// (1->32->32), batchnorm, a 2x2 max pool, two 3x3 convolutions (32->64->64), batchnorm, a max
// pool, and a linear layer from 576 features to 10 classes (87,850 parameters). Trained by
// samples/beautiful_mnist.cpp and timed by bench/nn_training_bench.cpp at batch 512, the
// workload users compare against tinygrad's CPU backend.
#pragma once
#include <vector>

#include <vkgrad/vkgrad.hpp>

namespace vkg::samples {

struct BeautifulMnistNet : nn::Module {
  nn::Conv2d conv1{1, 32, 5};
  nn::Conv2d conv2{32, 32, 5};
  nn::BatchNorm2d bn1{32};
  nn::Conv2d conv3{32, 64, 3};
  nn::Conv2d conv4{64, 64, 3};
  nn::BatchNorm2d bn2{64};
  nn::Linear fc{576, 10};

  Tensor operator()(const Tensor& x) const {
    Tensor h = conv2(conv1(x).relu()).relu();  // 28 -> 24 -> 20
    h = bn1(h).max_pool2d();                   // 20 -> 10
    h = conv4(conv3(h).relu()).relu();         // 10 -> 8 -> 6
    h = bn2(h).max_pool2d();                   // 6 -> 3
    return fc(h.flatten(1));
  }
  nn::StateDict state_dict() const override {
    return nn::named({{"conv1", &conv1},
                      {"conv2", &conv2},
                      {"bn1", &bn1},
                      {"conv3", &conv3},
                      {"conv4", &conv4},
                      {"bn2", &bn2},
                      {"fc", &fc}});
  }
  // BatchNorm's running statistics: realize them with each training step.
  std::vector<Tensor> running_stats() const {
    std::vector<Tensor> out = bn1.buffers();
    for (const Tensor& t : bn2.buffers()) out.push_back(t);
    return out;
  }
  // Floating-point operations (2 per multiply-add) per training image: the forward pass, the
  // weight gradient and the input gradient of each convolution and of the linear layer, less the
  // first convolution's input gradient, which nothing needs.
  static constexpr double kFlopsPerImage = 78.4e6;
};

}  // namespace vkg::samples
