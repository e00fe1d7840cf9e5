#include <vkgrad/nn/datasets.hpp>

#include <filesystem>

#include <zlib.h>

#include <vkgrad/core/error.hpp>

namespace vkg::nn {

namespace {

// The whole file, gunzipped when it is gzip (zlib reads plain files through as they are).
std::vector<uint8_t> read_maybe_gzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw Error("read_idx: cannot open " + path);
  std::vector<uint8_t> out;
  uint8_t chunk[1 << 16];
  for (;;) {
    const int n = gzread(f, chunk, sizeof chunk);
    if (n < 0) {
      int code = 0;
      std::string why = gzerror(f, &code);
      gzclose(f);
      throw Error("read_idx: " + path + " is corrupt (" + why + ")");
    }
    if (n == 0) break;
    out.insert(out.end(), chunk, chunk + n);
  }
  gzclose(f);
  return out;
}

uint32_t big_endian_u32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

}  // namespace

IdxArray read_idx(const std::string& path) {
  std::vector<uint8_t> raw = read_maybe_gzip(path);
  if (raw.size() < 4 || raw[0] != 0 || raw[1] != 0)
    throw Error("read_idx: " + path + " is not an IDX file (bad magic number)");
  if (raw[2] != 0x08) throw Error("read_idx: " + path + " holds IDX type " + std::to_string(raw[2]) + ", only unsigned bytes (8) are read");
  const size_t ndim = raw[3];
  if (ndim == 0 || raw.size() < 4 + 4 * ndim) throw Error("read_idx: " + path + " ends inside its header");
  IdxArray a;
  uint64_t count = 1;
  for (size_t i = 0; i < ndim; ++i) {
    a.shape.push_back(int64_t(big_endian_u32(&raw[4 + 4 * i])));
    count *= uint64_t(a.shape.back());
  }
  const size_t header = 4 + 4 * ndim;
  if (raw.size() - header != count)
    throw Error("read_idx: " + path + " should hold " + std::to_string(count) + " bytes for shape " + shape_str(a.shape) +
                " but holds " + std::to_string(raw.size() - header) + " (truncated or corrupt)");
  a.data.assign(raw.begin() + std::ptrdiff_t(header), raw.end());
  return a;
}

ImageDataset fashion_mnist(const std::string& dir) {
  auto find = [&](const std::string& stem) {
    for (const char* ext : {".gz", ""}) {
      const std::filesystem::path p = std::filesystem::path(dir) / (stem + ext);
      if (std::filesystem::exists(p)) return p.string();
    }
    throw Error("fashion_mnist: " + stem + "(.gz) not found in " + dir +
                " (on Debian: apt-get install dataset-fashion-mnist, or pass the folder holding the files)");
  };
  ImageDataset d{read_idx(find("train-images-idx3-ubyte")), read_idx(find("train-labels-idx1-ubyte")),
                 read_idx(find("t10k-images-idx3-ubyte")), read_idx(find("t10k-labels-idx1-ubyte"))};
  auto check = [&](const IdxArray& images, const IdxArray& labels, const char* split) {
    if (images.shape.size() != 3 || labels.shape.size() != 1 || images.shape[0] != labels.shape[0])
      throw Error(std::string("fashion_mnist: ") + split + " images " + shape_str(images.shape) + " and labels " +
                  shape_str(labels.shape) + " do not match");
    for (uint8_t l : labels.data)
      if (l > 9) throw Error(std::string("fashion_mnist: ") + split + " label " + std::to_string(l) + " is not a class 0..9");
  };
  check(d.train_images, d.train_labels, "train");
  check(d.test_images, d.test_labels, "test");
  return d;
}

}  // namespace vkg::nn
