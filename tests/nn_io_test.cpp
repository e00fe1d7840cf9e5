// safetensors files and IDX datasets: exact round trips, files written byte by byte as other
// libraries write them, and clear errors for missing, truncated and corrupt files.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <zlib.h>

#include <vkgrad/vkgrad.hpp>

#include "support/error_of.hpp"

using namespace vkg;
using vkg::test::error_of;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("vkgrad_nn_io_" + std::to_string(::getpid()) + "_" + name)).string();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

std::string safetensors_bytes(const std::string& header, const std::string& data) {
  uint64_t n = header.size();
  std::string out(reinterpret_cast<const char*>(&n), 8);
  return out + header + data;
}

}  // namespace

TEST(Safetensors, RoundTripsEveryDtypeExactly) {
  const std::string path = temp_path("round.safetensors");
  nn::StateDict sd{{"w", Tensor(std::vector<float>{1.5f, -0.0f, 3e-38f, INFINITY}, {2, 2})},
                   {"i", Tensor(std::vector<int64_t>{-1, 1LL << 40}, {2})},
                   {"b", Tensor(std::vector<bool>{true, false, true}, {3})},
                   {"h", Tensor(std::vector<float16_t>{float16_t(0.5f)}, {1})},
                   {"u", Tensor(std::vector<uint8_t>{0, 255}, {2})},
                   {"s", Tensor(std::vector<float>{7}, {})},
                   {"lazy", Tensor::arange(4).reshape({2, 2}) * 2}};
  nn::save_safetensors(path, sd, {{"format", "pt"}});
  nn::StateDict back = nn::load_safetensors(path);
  ASSERT_EQ(back.size(), sd.size());
  for (size_t i = 0; i < sd.size(); ++i) {
    EXPECT_EQ(back[i].first, sd[i].first);
    EXPECT_EQ(back[i].second.shape(), sd[i].second.shape()) << sd[i].first;
    EXPECT_EQ(back[i].second.dtype(), sd[i].second.dtype()) << sd[i].first;
    EXPECT_EQ(back[i].second.bytes(), sd[i].second.bytes()) << sd[i].first;
  }
  EXPECT_EQ(nn::safetensors_metadata(path).at("format"), "pt");
  // The data starts 8-byte aligned and the header is JSON.
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ(n % 8, 0u);
  std::string header(n, ' ');
  in.read(header.data(), std::streamsize(n));
  EXPECT_NE(header.find("\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}"), std::string::npos) << header;
  std::filesystem::remove(path);
}

TEST(Safetensors, ReadsAFileWrittenAsTorchWritesIt) {
  // What safetensors.torch.save_file writes for {"a": tensor([1., 2.]), "b": tensor([[3]], dtype=int32)}.
  float a[2] = {1, 2};
  int32_t b = 3;
  std::string data(reinterpret_cast<const char*>(a), 8);
  data += std::string(reinterpret_cast<const char*>(&b), 4);
  const std::string path = temp_path("torch.safetensors");
  write_file(path, safetensors_bytes(R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"I32","shape":[1,1],"data_offsets":[8,12]}})", data));
  nn::StateDict sd = nn::load_safetensors(path);
  ASSERT_EQ(sd.size(), 2u);
  EXPECT_EQ(sd[0].second.to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_EQ(sd[1].second.shape(), (Shape{1, 1}));
  EXPECT_EQ(sd[1].second.item<int32_t>(), 3);
  std::filesystem::remove(path);
}

TEST(Safetensors, BadFilesGiveClearErrors) {
  EXPECT_NE(error_of([] { nn::load_safetensors("/nonexistent/x.safetensors"); }).find("cannot open"), std::string::npos);
  const std::string path = temp_path("bad.safetensors");
  write_file(path, "abc");
  EXPECT_NE(error_of([&] { nn::load_safetensors(path); }).find("too short"), std::string::npos);
  write_file(path, safetensors_bytes("{not json", ""));
  EXPECT_NE(error_of([&] { nn::load_safetensors(path); }).find("not valid JSON"), std::string::npos);
  write_file(path, safetensors_bytes(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", std::string(8, '\0')));
  EXPECT_NE(error_of([&] { nn::load_safetensors(path); }).find("tensor a"), std::string::npos);
  write_file(path, safetensors_bytes(R"({"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", "x"));
  EXPECT_NE(error_of([&] { nn::load_safetensors(path); }).find("Q4"), std::string::npos);
  write_file(path, safetensors_bytes(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})", "xyz"));
  EXPECT_NE(error_of([&] { nn::load_safetensors(path); }).find("overlap"), std::string::npos);
  EXPECT_NE(error_of([&] { nn::save_safetensors(path, {{"a", Tensor({1})}, {"a", Tensor({2})}}); }).find("twice"),
            std::string::npos);
  std::filesystem::remove(path);
}

namespace {

std::string idx_bytes(std::vector<uint32_t> dims, const std::vector<uint8_t>& data) {
  std::string out{0, 0, 8, char(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) out.push_back(char((d >> s) & 0xff));
  out.append(data.begin(), data.end());
  return out;
}

void write_gzip(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), unsigned(bytes.size()));
  gzclose(f);
}

}  // namespace

TEST(Datasets, ReadsIdxPlainAndGzipped) {
  const std::string plain = temp_path("a.idx"), gz = temp_path("a.idx.gz");
  std::vector<uint8_t> data(2 * 3 * 4);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 7);
  write_file(plain, idx_bytes({2, 3, 4}, data));
  write_gzip(gz, idx_bytes({2, 3, 4}, data));
  for (const std::string& p : {plain, gz}) {
    nn::IdxArray a = nn::read_idx(p);
    EXPECT_EQ(a.shape, (Shape{2, 3, 4}));
    EXPECT_EQ(a.data, data);
  }
  write_gzip(gz, idx_bytes({2, 3, 4}, std::vector<uint8_t>(5)));
  EXPECT_NE(error_of([&] { nn::read_idx(gz); }).find("truncated"), std::string::npos);
  write_file(plain, "\x01\x02\x08\x01");
  EXPECT_NE(error_of([&] { nn::read_idx(plain); }).find("magic"), std::string::npos);
  std::string corrupt = "\x1f\x8b\x08\x00" + std::string(40, 'z');
  write_file(gz, corrupt);
  EXPECT_FALSE(error_of([&] { nn::read_idx(gz); }).empty());
  EXPECT_NE(error_of([] { nn::fashion_mnist("/nonexistent"); }).find("dataset-fashion-mnist"), std::string::npos);
  std::filesystem::remove(plain);
  std::filesystem::remove(gz);
}

TEST(Datasets, FashionMnistFromDebianWhenInstalled) {
  if (!std::filesystem::exists(nn::kFashionMnistDir)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  nn::ImageDataset d = nn::fashion_mnist();
  EXPECT_EQ(d.train_images.shape, (Shape{60000, 28, 28}));
  EXPECT_EQ(d.test_labels.shape, (Shape{10000}));
  // The first training label of Fashion-MNIST is 9 (ankle boot), the first test label 9 too.
  EXPECT_EQ(d.train_labels.data[0], 9);
  EXPECT_EQ(d.test_labels.data[0], 9);
}

TEST(Safetensors, ADirectoryIsNamedAsOne) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  EXPECT_NE(error_of([&] { nn::load_safetensors(dir); }).find("is a directory"), std::string::npos);
}

TEST(Safetensors, AHeaderWithAnOverflowingShapeIsRefused) {
  const std::string path = temp_path("huge.safetensors");
  // 2^32 x 2^32 elements wrap to 0 in 64 bits: the file must not load as an empty tensor.
  write_file(
      path,
      safetensors_bytes(
          R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", ""));
  EXPECT_NE(error_of([&] { nn::load_safetensors(path); }).find("too many elements"),
            std::string::npos);
  std::filesystem::remove(path);
}

// Two threads saving different state dicts to one path, while a third reads it: every read and
// the final file are whole and one of the two (the last rename wins), and no temp file is left.
// With one temp name per path, a writer truncated the other's half-written file or found it
// renamed away ("cannot rename").
TEST(Safetensors, ConcurrentSavesToOnePathLeaveOneWholeFile) {
  const std::string path = temp_path("contended.safetensors");
  const nn::StateDict a{{"x", Tensor(std::vector<float>(4096, 1.0f), {4096}, "CPU")}};
  const nn::StateDict b{{"x", Tensor(std::vector<float>(1024, 2.0f), {32, 32}, "CPU")},
                        {"y", Tensor(std::vector<int32_t>{7}, {1}, "CPU")}};
  auto is_a_or_b = [&](const nn::StateDict& sd) {
    if (sd.size() == 1 && sd[0].second.shape() == Shape{4096})
      return sd[0].second.to_vector<float>() == std::vector<float>(4096, 1.0f);
    return sd.size() == 2 && sd[0].second.shape() == Shape{32, 32} &&
           sd[0].second.to_vector<float>() == std::vector<float>(1024, 2.0f) &&
           sd[1].second.to_vector<int32_t>() == std::vector<int32_t>{7};
  };
  std::mutex mu;
  std::vector<std::string> problems;
  auto note = [&](std::string what) {
    std::lock_guard lock(mu);
    problems.push_back(std::move(what));
  };
  std::atomic<bool> writing{true};
  auto writer = [&](const nn::StateDict& sd) {
    for (int i = 0; i < 150; ++i) {
      try {
        nn::save_safetensors(path, sd);
      } catch (const std::exception& e) {
        note(std::string("save: ") + e.what());
      }
    }
  };
  std::thread reader([&] {
    int reads = 0;
    while (writing || reads == 0) {
      if (!std::filesystem::exists(path)) continue;
      try {
        if (!is_a_or_b(nn::load_safetensors(path, "CPU"))) note("a read saw neither state dict");
        ++reads;
      } catch (const std::exception& e) {
        note(std::string("load: ") + e.what());
      }
    }
  });
  std::thread wa(writer, std::cref(a)), wb(writer, std::cref(b));
  wa.join();
  wb.join();
  writing = false;
  reader.join();
  EXPECT_TRUE(problems.empty()) << problems.size() << " problems, the first: " << problems.front();
  EXPECT_TRUE(is_a_or_b(nn::load_safetensors(path, "CPU")));
  const std::string name = std::filesystem::path(path).filename().string();
  for (const auto& e :
       std::filesystem::directory_iterator(std::filesystem::path(path).parent_path()))
    EXPECT_FALSE(e.path().filename().string().starts_with(name + "."))
        << "left behind: " << e.path();
  std::filesystem::remove(path);
}
