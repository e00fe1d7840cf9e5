// What a program finds in VKG_CACHE_DIR, seen from fresh processes (this binary run again with
// only DiskCacheChild): SPIR-V entries that are swapped, bit-flipped or rejected by the device
// are compiled again, the results stay right, and the entries are rewritten; the pipeline cache
// is written while the device is still open (devices live until the process exits).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <vkgrad/codegen/spirv_compiler.hpp>
#include <vkgrad/vkgrad.hpp>

#include "support/child_process.hpp"
#include "support/spirv_cache_entry.hpp"

namespace fs = std::filesystem;
using namespace vkg;

namespace {

constexpr const char* kReportEnv = "VKG_TEST_DISK_CACHE_REPORT";

std::string read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void write_bytes(const fs::path& file, const std::string& bytes) {
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
}

// The module words of an entry's bytes.
std::vector<uint32_t> module_of(const std::string& entry) {
  std::vector<uint32_t> words((entry.size() - test::kSpirvEntryHeaderBytes) / 4);
  std::copy_n(entry.data() + test::kSpirvEntryHeaderBytes, words.size() * 4,
              reinterpret_cast<char*>(words.data()));
  return words;
}

// Makes the workgroup's x size `lanes`: in OpExecutionMode LocalSize, or in OpExecutionModeId
// LocalSizeId through a new OpConstant (glslang writes that for SPIR-V 1.6). Returns whether it
// found either.
bool widen_workgroup(std::vector<uint32_t>& words, uint32_t lanes) {
  constexpr uint32_t kOpExecutionMode = 16, kOpConstant = 43, kOpExecutionModeId = 331;
  constexpr uint32_t kLocalSize = 17, kLocalSizeId = 38;
  for (size_t i = 5; i < words.size(); i += std::max<uint32_t>(words[i] >> 16, 1)) {
    const uint32_t op = words[i] & 0xffff;
    if (op == kOpExecutionMode && words[i + 2] == kLocalSize) {
      words[i + 3] = lanes;
      return true;
    }
    if (op == kOpExecutionModeId && words[i + 2] == kLocalSizeId) {
      const uint32_t x = words[i + 3], id = words[3]++;  // a fresh id below the new bound
      words[i + 3] = id;
      for (size_t j = i; j < words.size(); j += std::max<uint32_t>(words[j] >> 16, 1))
        if ((words[j] & 0xffff) == kOpConstant && words[j + 2] == x) {
          const uint32_t type = words[j + 1];
          words.insert(words.begin() + std::ptrdiff_t(j + 4),
                       {(4u << 16) | kOpConstant, type, id, lanes});
          return true;
        }
      return false;
    }
  }
  return false;
}

class DiskCache : public testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "vkg-disk-cache-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // Runs the child against the cache folder; returns its report ("compiles=N rejects=N").
  std::string run() {
    const fs::path report = dir_ / "report", log = dir_ / "log";
    fs::remove(report);
    const int status = test::run_child(
        "DiskCacheChild.*",
        {"VKG_CACHE_DIR=" + dir_.string(), std::string(kReportEnv) + "=" + report.string()},
        log.string());
    EXPECT_EQ(status, 0) << "the child's results were wrong, or it failed:\n" << read_bytes(log);
    return read_bytes(report);
  }
  // The SPIR-V entries and their bytes.
  std::map<fs::path, std::string> entries() const {
    std::map<fs::path, std::string> out;
    for (const auto& e : fs::directory_iterator(dir_ / "spirv"))
      out[e.path()] = read_bytes(e.path());
    return out;
  }
  fs::path dir_;
};

TEST_F(DiskCache, SwappedSpirvEntriesStillComputeRightAndAreRewritten) {
  EXPECT_EQ(run(), "compiles=2 rejects=0");
  const auto good = entries();
  ASSERT_EQ(good.size(), 2u);
  const fs::path a = good.begin()->first, b = std::next(good.begin())->first;
  write_bytes(a, good.at(b));
  write_bytes(b, good.at(a));
  EXPECT_EQ(run(), "compiles=2 rejects=2");
  EXPECT_TRUE(entries() == good) << "the entries were not rewritten as they were";
  EXPECT_EQ(run(), "compiles=0 rejects=0");
}

TEST_F(DiskCache, FlippedBitsStillComputeRightAndAreRewritten) {
  run();
  const auto good = entries();
  ASSERT_EQ(good.size(), 2u);
  for (const auto& [file, bytes] : good) {
    std::string bad = bytes;
    bad[bad.size() / 2] = char(bad[bad.size() / 2] ^ 0x10);
    write_bytes(file, bad);
  }
  EXPECT_EQ(run(), "compiles=2 rejects=2");
  EXPECT_TRUE(entries() == good) << "the entries were not rewritten as they were";
}

// An entry with the right name and checksum whose module the device cannot run (here a workgroup
// of 2^20 lanes, valid SPIR-V beyond every device's limit) is replaced, not failed on forever.
TEST_F(DiskCache, AModuleTheDeviceRejectsIsCompiledAgainAndRewritten) {
  run();
  const auto good = entries();
  ASSERT_EQ(good.size(), 2u);
  for (const auto& [file, bytes] : good) {
    std::vector<uint32_t> words = module_of(bytes);
    const bool changed = widen_workgroup(words, 1u << 20);
    ASSERT_TRUE(changed) << "no LocalSize in " << file;
    write_bytes(file, test::spirv_cache_entry(test::spirv_entry_key(bytes), words));
  }
  EXPECT_EQ(run(), "compiles=2 rejects=0");
  EXPECT_TRUE(entries() == good) << "the entries were not rewritten as they were";
  EXPECT_EQ(run(), "compiles=0 rejects=0");
}

// The child leaves a VkPipelineCache file behind (before, it was written only by a destructor
// that never runs): a header for this device at least, whatever the driver keeps in it.
TEST_F(DiskCache, PipelineCacheIsWrittenWhileTheDeviceIsOpen) {
  run();
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir_))
    if (e.path().filename().string().starts_with("pipeline-")) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u);
  const std::string bytes = read_bytes(files[0]);
  ASSERT_GE(bytes.size(), 32u);
  uint32_t header[2];
  std::copy_n(bytes.data(), sizeof header, reinterpret_cast<char*>(header));
  EXPECT_GE(header[0], 32u);  // headerSize
  EXPECT_EQ(header[1], 1u);   // VK_PIPELINE_CACHE_HEADER_VERSION_ONE
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_NE(e.path().extension(), ".tmp") << e.path();
}

// The child half of the tests above: two kernels, checked, then its compile counts reported.
TEST(DiskCacheChild, ComputesTwoKernels) {
  const char* report = std::getenv(kReportEnv);
  if (!report) GTEST_SKIP() << "runs only as the child of the DiskCache tests";
  const SpirvCompilerStats before = spirv_compiler_stats();
  Tensor x(std::vector<float>{1, 2, 3, 4}, {4}, "VK");
  EXPECT_EQ((x * 2.5f).to_vector<float>(), (std::vector<float>{2.5f, 5, 7.5f, 10}));
  EXPECT_EQ((x - 7.0f).to_vector<float>(), (std::vector<float>{-6, -5, -4, -3}));
  const SpirvCompilerStats after = spirv_compiler_stats();
  write_bytes(report,
              "compiles=" + std::to_string(after.shaderc_compiles - before.shaderc_compiles) +
                  " rejects=" + std::to_string(after.cache_rejects - before.cache_rejects));
}

}  // namespace
