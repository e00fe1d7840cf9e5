// compile_glsl(): GLSL -> SPIR-V through shaderc, its error messages, and its disk cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <vkgrad/codegen/spirv_compiler.hpp>
#include <vkgrad/core/error.hpp>

#include "support/child_process.hpp"
#include "support/spirv_cache_entry.hpp"

namespace fs = std::filesystem;
using vkg::compile_glsl;
using vkg::SpirvCompileOptions;

namespace {

constexpr uint32_t kSpirvMagic = 0x07230203;
constexpr uint32_t kSpirv16 = 0x00010600;
// Set in a child process started by SecondProcessReadsTheCacheWithoutCompiling: where it writes
// how many times it called shaderc.
constexpr const char* kChildReportEnv = "VKG_TEST_SPIRV_CHILD_REPORT";

// The kind of kernel the renderer writes: buffers by device address in push constants. `tag`
// makes each test's source, and so its cache entry, its own.
std::string add_kernel(const std::string& tag) {
  return "#version 460\n"
         "// " +
         tag +
         "\n"
         "#extension GL_EXT_buffer_reference : require\n"
         "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require\n"
         "layout(local_size_x = 64) in;\n"
         "layout(buffer_reference, std430) buffer F32 { float v[]; };\n"
         "layout(push_constant) uniform Args { uint64_t out0, in0, in1; uint n; } args;\n"
         "void main() {\n"
         "  uint i = gl_GlobalInvocationID.x;\n"
         "  if (i < args.n) F32(args.out0).v[i] = F32(args.in0).v[i] + F32(args.in1).v[i];\n"
         "}\n";
}

// A kernel whose code, not only its text, differs with `factor`.
std::string scale_kernel(const std::string& factor) {
  return "#version 460\n"
         "layout(local_size_x = 64) in;\n"
         "layout(std430, binding = 0) buffer Data { float v[]; } data;\n"
         "void main() { data.v[gl_GlobalInvocationID.x] *= " +
         factor + "; }\n";
}

uint64_t shaderc_calls() { return vkg::spirv_compiler_stats().shaderc_compiles; }

void expect_spirv_16(const std::vector<uint32_t>& words) {
  ASSERT_GE(words.size(), 5u);
  EXPECT_EQ(words[0], kSpirvMagic);
  EXPECT_EQ(words[1], kSpirv16);
}

void write_bytes(const fs::path& file, const std::string& bytes) {
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
}

std::string read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Points VKG_CACHE_DIR at a fresh temp folder for the test and restores it afterwards.
class SpirvCompiler : public testing::Test {
 protected:
  void SetUp() override {
    if (const char* old = std::getenv("VKG_CACHE_DIR")) saved_ = old;
    std::string templ = (fs::temp_directory_path() / "vkg-spirv-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    setenv("VKG_CACHE_DIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    if (saved_)
      setenv("VKG_CACHE_DIR", saved_->c_str(), 1);
    else
      unsetenv("VKG_CACHE_DIR");
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
  std::optional<std::string> saved_;
};

TEST_F(SpirvCompiler, ValidShaderCompilesToSpirv16) {
  auto words = compile_glsl(add_kernel("valid"));
  expect_spirv_16(words);
}

TEST_F(SpirvCompiler, SyntaxErrorNamesTheLineAndShowsNumberedSource) {
  std::string src =
      "#version 460\n"
      "layout(local_size_x = 64) in;\n"
      "void main() {\n"
      "  uint i = gl_GlobalInvocationID.x;\n"
      "  float x = 1.0;\n"
      "  float y = x +* 2.0;\n"
      "}\n";
  SpirvCompileOptions opts;
  opts.name = "add_kernel";
  try {
    compile_glsl(src, opts);
    FAIL() << "a syntax error compiled";
  } catch (const vkg::CompileError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("add_kernel:6:"), std::string::npos) << msg;  // shaderc's line
    EXPECT_NE(msg.find("   6|   float y = x +* 2.0;\n"), std::string::npos) << msg;  // the source
    EXPECT_NE(msg.find("   1| #version 460\n"), std::string::npos) << msg;
  }
}

TEST_F(SpirvCompiler, CompileErrorIsAVkgError) {
  EXPECT_THROW(compile_glsl("#version 460\nvoid main() { undeclared = 1; }\n"), vkg::Error);
}

TEST_F(SpirvCompiler, SecondCompileOfTheSameSourceReadsTheDiskCache) {
  auto src = add_kernel("second compile");
  uint64_t before = shaderc_calls();
  auto first = compile_glsl(src);
  EXPECT_EQ(shaderc_calls(), before + 1);
  EXPECT_TRUE(fs::exists(vkg::spirv_cache_file(src)));
  EXPECT_EQ(vkg::spirv_cache_file(src).parent_path(), dir_ / "spirv");

  uint64_t hits = vkg::spirv_compiler_stats().cache_hits;
  auto second = compile_glsl(src);
  EXPECT_EQ(shaderc_calls(), before + 1);
  EXPECT_EQ(vkg::spirv_compiler_stats().cache_hits, hits + 1);
  EXPECT_EQ(first, second);
}

// Runs this test binary again with only the child test below, against the same cache folder.
TEST_F(SpirvCompiler, SecondProcessReadsTheCacheWithoutCompiling) {
  auto src = add_kernel("second process");
  auto words = compile_glsl(src);
  fs::path report = dir_ / "child-report";

  EXPECT_EQ(vkg::test::run_child("SpirvCompilerChild.*",
                                 {std::string(kChildReportEnv) + "=" + report.string()}),
            0)
      << "the child's compile failed";
  EXPECT_EQ(read_bytes(report), "shaderc_compiles=0")
      << "the child compiled instead of reading the cache";
}

// The child half of SecondProcessReadsTheCacheWithoutCompiling; skips itself when run on its own.
TEST(SpirvCompilerChild, CompilesFromTheInheritedCache) {
  const char* report = std::getenv(kChildReportEnv);
  if (!report)
    GTEST_SKIP() << "runs only as the child of SecondProcessReadsTheCacheWithoutCompiling";
  auto words = compile_glsl(add_kernel("second process"));
  expect_spirv_16(words);
  write_bytes(report, "shaderc_compiles=" + std::to_string(shaderc_calls()));
}

TEST_F(SpirvCompiler, CorruptCacheFileIsIgnoredAndRewritten) {
  auto src = add_kernel("corrupt");
  auto good = compile_glsl(src);
  auto file = vkg::spirv_cache_file(src);
  std::string good_bytes = read_bytes(file);
  ASSERT_EQ(good_bytes.size(), vkg::test::kSpirvEntryHeaderBytes + good.size() * 4);

  // Garbage, a size that is no whole number of words, a module cut after a whole instruction.
  for (std::string bad :
       {std::string("not spir-v at all"), good_bytes.substr(0, good_bytes.size() - 2),
        good_bytes.substr(0, good_bytes.size() - 4), std::string()}) {
    write_bytes(file, bad);
    uint64_t before = shaderc_calls(), rejects = vkg::spirv_compiler_stats().cache_rejects;
    EXPECT_EQ(compile_glsl(src), good);
    EXPECT_EQ(shaderc_calls(), before + 1);
    EXPECT_EQ(vkg::spirv_compiler_stats().cache_rejects, rejects + 1);
    EXPECT_EQ(read_bytes(file), good_bytes);
  }
}

// An entry is checked against the name it was asked for and its checksum: a valid module under
// another kernel's name, or one with a flipped constant, used to be handed out as it was.
TEST_F(SpirvCompiler, SwappedEntriesAreRecompiledAndRewritten) {
  auto src_a = scale_kernel("2.0"), src_b = scale_kernel("3.0");
  auto good_a = compile_glsl(src_a), good_b = compile_glsl(src_b);
  ASSERT_NE(good_a, good_b);
  auto file_a = vkg::spirv_cache_file(src_a), file_b = vkg::spirv_cache_file(src_b);
  std::string bytes_a = read_bytes(file_a), bytes_b = read_bytes(file_b);
  write_bytes(file_a, bytes_b);
  write_bytes(file_b, bytes_a);

  uint64_t before = shaderc_calls(), rejects = vkg::spirv_compiler_stats().cache_rejects;
  EXPECT_EQ(compile_glsl(src_a), good_a);
  EXPECT_EQ(compile_glsl(src_b), good_b);
  EXPECT_EQ(shaderc_calls(), before + 2);
  EXPECT_EQ(vkg::spirv_compiler_stats().cache_rejects, rejects + 2);
  EXPECT_EQ(read_bytes(file_a), bytes_a);
  EXPECT_EQ(read_bytes(file_b), bytes_b);
}

TEST_F(SpirvCompiler, FlippedBitsAreRecompiledAndRewritten) {
  auto src = add_kernel("flipped");
  auto good = compile_glsl(src);
  auto file = vkg::spirv_cache_file(src);
  const std::string good_bytes = read_bytes(file);
  // Every bit of one word in the middle of the module, then one bit of the stored checksum.
  for (size_t byte : {good_bytes.size() / 2, size_t(20)}) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = good_bytes;
      bad[byte] = char(bad[byte] ^ (1 << bit));
      write_bytes(file, bad);
      uint64_t before = shaderc_calls();
      EXPECT_EQ(compile_glsl(src), good) << "byte " << byte << " bit " << bit;
      EXPECT_EQ(shaderc_calls(), before + 1);
      EXPECT_EQ(read_bytes(file), good_bytes);
    }
  }
}

// For a module that the device rejected although its entry was right: read_cache off compiles
// again and replaces the entry.
TEST_F(SpirvCompiler, ReadCacheOffRecompilesAndRewritesTheEntry) {
  auto src = add_kernel("read cache off");
  auto good = compile_glsl(src);
  auto file = vkg::spirv_cache_file(src);
  const std::string good_bytes = read_bytes(file);
  std::vector<uint32_t> broken = good;
  broken[3] = 1;  // the header's id bound: a whole module, with a valid entry, that is invalid
  write_bytes(file, vkg::test::spirv_cache_entry(vkg::test::spirv_entry_key(good_bytes), broken));
  ASSERT_EQ(compile_glsl(src), broken) << "the entry is right, so it is read";

  SpirvCompileOptions fresh;
  fresh.read_cache = false;
  uint64_t before = shaderc_calls();
  EXPECT_EQ(compile_glsl(src, fresh), good);
  EXPECT_EQ(shaderc_calls(), before + 1);
  EXPECT_EQ(read_bytes(file), good_bytes);
  EXPECT_EQ(compile_glsl(src), good);
  EXPECT_EQ(shaderc_calls(), before + 1);
}

TEST_F(SpirvCompiler, DiskCacheCanBeBypassed) {
  auto src = add_kernel("bypass");
  SpirvCompileOptions opts;
  opts.disk_cache = false;
  uint64_t before = shaderc_calls();
  expect_spirv_16(compile_glsl(src, opts));
  expect_spirv_16(compile_glsl(src, opts));
  EXPECT_EQ(shaderc_calls(), before + 2);
  EXPECT_FALSE(fs::exists(vkg::spirv_cache_file(src, opts)));
}

TEST_F(SpirvCompiler, DeviceKeyAndOptionsSeparateCacheEntries) {
  auto src = add_kernel("keys");
  SpirvCompileOptions a, b, unoptimized;
  a.device_key = "lavapipe";
  b.device_key = "nvidia 4090";
  unoptimized.device_key = "lavapipe";
  unoptimized.optimize = false;
  EXPECT_NE(vkg::spirv_cache_file(src, a), vkg::spirv_cache_file(src, b));
  EXPECT_NE(vkg::spirv_cache_file(src, a), vkg::spirv_cache_file(src, unoptimized));
  EXPECT_NE(vkg::spirv_cache_file(src, a), vkg::spirv_cache_file(src + " ", a));

  uint64_t before = shaderc_calls();
  compile_glsl(src, a);
  compile_glsl(src, b);
  expect_spirv_16(compile_glsl(src, unoptimized));
  EXPECT_EQ(shaderc_calls(), before + 3);
}

TEST_F(SpirvCompiler, UnwritableCacheCostsACompileNotAnError) {
  write_bytes(dir_ / "a-file", "x");
  setenv("VKG_CACHE_DIR", (dir_ / "a-file" / "cache").c_str(), 1);  // can never be created
  auto src = add_kernel("unwritable");
  uint64_t before = shaderc_calls();
  expect_spirv_16(compile_glsl(src));
  expect_spirv_16(compile_glsl(src));
  EXPECT_EQ(shaderc_calls(), before + 2);
}

TEST_F(SpirvCompiler, ConcurrentCompilesAgree) {
  constexpr int kThreads = 4;
  std::vector<std::vector<uint32_t>> shared(kThreads), own(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      shared[t] = compile_glsl(add_kernel("shared by threads"));
      own[t] = compile_glsl(add_kernel("thread " + std::to_string(t)));
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    expect_spirv_16(own[t]);
    EXPECT_EQ(shared[t], shared[0]);
  }
  EXPECT_EQ(compile_glsl(add_kernel("shared by threads")), shared[0]);
  for (int t = 0; t < kThreads; ++t) {
    auto file = vkg::spirv_cache_file(add_kernel("thread " + std::to_string(t)));
    EXPECT_EQ(read_bytes(file).size(), vkg::test::kSpirvEntryHeaderBytes + own[t].size() * 4);
  }
  // Every rename landed; no temp file is left behind.
  for (auto& entry : fs::directory_iterator(dir_ / "spirv"))
    EXPECT_EQ(entry.path().extension(), ".spv");
}

}  // namespace

// glslang keeps only the last spirv_execution_mode of one mode id; the compiled module still has
// SignedZeroInfNanPreserve (4461) for every width the source declares, each exactly once.
TEST_F(SpirvCompiler, EveryDeclaredExecutionModeIsInTheModule) {
  const std::string src =
      "#version 460\n#extension GL_EXT_spirv_intrinsics : require\n"
      "spirv_execution_mode(capabilities = [4466], 4461, 32);\n"
      "spirv_execution_mode(capabilities = [4466], 4461, 64);\n"
      "layout(local_size_x = 1) in;\n"
      "layout(std430, binding = 0) buffer B { float f[]; double d[]; } b;\n"
      "void main() { b.f[0] = 1.0 / b.f[1]; b.d[0] = 1.0lf / b.d[1]; }\n";
  const std::vector<uint32_t> words = compile_glsl(src);
  std::vector<uint32_t> widths;
  for (size_t i = 5; i < words.size(); i += words[i] >> 16) {
    ASSERT_NE(words[i] >> 16, 0u);
    if ((words[i] & 0xffffu) == 16 && (words[i] >> 16) == 4 && words[i + 2] == 4461)
      widths.push_back(words[i + 3]);
  }
  std::sort(widths.begin(), widths.end());
  EXPECT_EQ(widths, (std::vector<uint32_t>{32, 64}));
}
