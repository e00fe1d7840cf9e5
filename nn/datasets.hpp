// Datasets read from files on the host. The arrays stay on the host so that a training loop can
// draw batches there and upload only the batch.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <vkgrad/core/shape.hpp>

namespace vkg::nn {

// An array in the IDX format of MNIST (big-endian header: magic 0x0000 0x08 ndim, then the
// dimensions, then the uint8 data), read from a plain or gzip-compressed file.
struct IdxArray {
  Shape shape;
  std::vector<uint8_t> data;  // row-major
};
IdxArray read_idx(const std::string& path);

// Fashion-MNIST (or MNIST: the same files): 60000 training and 10000 test images of 28x28 and
// their labels 0..9. Reads {train,t10k}-{images-idx3,labels-idx1}-ubyte(.gz) from `dir`.
struct ImageDataset {
  IdxArray train_images, train_labels, test_images, test_labels;
};
// Where Debian's dataset-fashion-mnist package puts the files.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
ImageDataset fashion_mnist(const std::string& dir = kFashionMnistDir);

}  // namespace vkg::nn
