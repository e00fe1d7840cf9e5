// Batches of an IDX image dataset as tensors, and test-set accuracy: what the training samples
// share. Images become (n, 1, rows, cols) float32 as (pixel / 255 - mean) / std.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include <vkgrad/vkgrad.hpp>

namespace vkg::samples {

struct PixelScale {
  float mean = 0, std = 1;
};

inline Tensor image_batch(const nn::IdxArray& images, const std::vector<int64_t>& idx,
                          PixelScale scale) {
  const int64_t pixels = images.shape[1] * images.shape[2];
  std::vector<float> out(idx.size() * size_t(pixels));
  for (size_t i = 0; i < idx.size(); ++i) {
    const uint8_t* src = images.data.data() + idx[i] * pixels;
    for (int64_t p = 0; p < pixels; ++p)
      out[i * size_t(pixels) + size_t(p)] = (float(src[p]) / 255.0f - scale.mean) / scale.std;
  }
  return Tensor(out, {int64_t(idx.size()), 1, images.shape[1], images.shape[2]});
}

inline Tensor label_batch(const nn::IdxArray& labels, const std::vector<int64_t>& idx) {
  std::vector<int32_t> out(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) out[i] = labels.data[size_t(idx[i])];
  return Tensor(out, {int64_t(idx.size())});
}

// The share of the first `limit` test images (all for 0) that `net` classifies right, in eval
// mode (batchnorm uses its running statistics) and without gradients, 1000 images at a time.
template <class Net>
double test_accuracy(const Net& net, const nn::ImageDataset& d, int64_t limit, PixelScale scale) {
  const bool was_training = Tensor::training;
  Tensor::training = false;
  NoGrad no_grad;
  const int64_t total = d.test_images.shape[0];
  const int64_t n = limit > 0 ? std::min(limit, total) : total;
  int64_t correct = 0;
  for (int64_t start = 0; start < n; start += 1000) {
    std::vector<int64_t> idx;
    for (int64_t i = start; i < std::min(n, start + 1000); ++i) idx.push_back(i);
    Tensor pred = net(image_batch(d.test_images, idx, scale)).argmax(1);
    correct += pred.eq(label_batch(d.test_labels, idx)).cast(dtypes::int32).sum().item<int32_t>();
  }
  Tensor::training = was_training;
  return double(correct) / double(n);
}

}  // namespace vkg::samples
