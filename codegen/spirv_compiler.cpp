#include <vkgrad/codegen/spirv_compiler.hpp>

#include <fmt/format.h>
#include <glslang/build_info.h>
// shaderc is private to libvkgrad: keep its inline code (~Compiler) out of our exported symbols.
#pragma GCC visibility push(hidden)
#include <shaderc/shaderc.hpp>
#pragma GCC visibility pop
#include <spirv-tools/libspirv.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <system_error>
#include <thread>

#include <vkgrad/codegen/fnv1a.hpp>
#include <vkgrad/codegen/spirv_execution_modes.hpp>
#include <vkgrad/core/cache_dir.hpp>
#include <vkgrad/core/error.hpp>

namespace vkg {

namespace {

constexpr uint32_t kSpirvMagic = 0x07230203;
constexpr size_t kSpirvHeaderWords = 5;

// Bump when compile_glsl() changes how it turns source into SPIR-V, to orphan old cache entries.
// 3: every declared execution mode; 4: float arithmetic NoContraction
constexpr std::string_view kCacheFormat = "vkg-spirv-4";

// A cache entry's header (spirv_compiler.hpp describes it); the module follows.
constexpr uint32_t kEntryMagic = 0x53474B56;  // "VKGS" read as bytes
constexpr uint32_t kEntryVersion = 1;
constexpr size_t kEntryHeaderWords = 6;

struct Counters {
  std::atomic<uint64_t> shaderc_compiles{0}, cache_hits{0}, cache_rejects{0},
      unoptimized_retries{0};
};
Counters counters;

// Everything besides the source and options that decides the output bytes: a new glslang or
// spirv-opt may emit different code for the same source.
const std::string& compiler_identity() {
  static const std::string id = fmt::format(
      "{} glslang {}.{}.{}{} {}", kCacheFormat, GLSLANG_VERSION_MAJOR, GLSLANG_VERSION_MINOR,
      GLSLANG_VERSION_PATCH, GLSLANG_VERSION_FLAVOR, spvSoftwareVersionDetailsString());
  return id;
}

uint64_t cache_key(std::string_view glsl, const SpirvCompileOptions& o) {
  return Fnv1a64()
      .add(compiler_identity())
      .add("vulkan1.3 spirv1.6 compute main")
      .add(o.optimize ? "O" : "O0")
      .add(o.device_key)
      .add(glsl)
      .value();
}

// One compiler for the process: creating one is cheap, but glslang's first compile in a new
// compiler builds its built-in symbol tables (~70 ms). shaderc documents
// shaderc_compile_into_spv as safe to call from several threads on one compiler at once.
const shaderc::Compiler& compiler() {
  static const shaderc::Compiler c;
  return c;
}

// True if the words look like a whole SPIR-V module: the magic, a header, an instruction stream
// whose word counts end exactly at the last word, and that last instruction an OpFunctionEnd
// (functions close every module, and a compute shader has at least main). A file cut anywhere
// fails one of these.
bool is_whole_module(const std::vector<uint32_t>& w) {
  constexpr uint32_t kOpFunctionEnd = 56;
  if (w.size() < kSpirvHeaderWords || w[0] != kSpirvMagic) return false;
  size_t i = kSpirvHeaderWords, last = 0;
  while (i < w.size()) {
    uint32_t count = w[i] >> 16;
    if (count == 0) return false;
    last = i;
    i += count;
  }
  return i == w.size() && last != 0 && w[last] == ((1u << 16) | kOpFunctionEnd);
}

uint32_t checksum(const std::vector<uint32_t>& words) {
  return uint32_t(crc32(0L, reinterpret_cast<const Bytef*>(words.data()), uInt(words.size() * 4)));
}

// The module of the entry in `file` if the entry is whole, is the one stored under `key`, and its
// checksum holds; else empty. A module under the wrong name or with a flipped bit can be valid
// SPIR-V that computes something else: the name alone must never be trusted.
std::vector<uint32_t> read_entry(const std::filesystem::path& file, uint64_t key) {
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  if (!in) return {};
  auto size = static_cast<std::streamoff>(in.tellg());
  if (size <= std::streamoff(kEntryHeaderWords * 4) || size % 4 != 0) return {};
  std::vector<uint32_t> words(static_cast<size_t>(size) / 4);
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(words.data()), size)) return {};
  uint64_t stored_key;
  std::memcpy(&stored_key, &words[2], sizeof stored_key);
  if (words[0] != kEntryMagic || words[1] != kEntryVersion || stored_key != key ||
      words[4] != words.size() - kEntryHeaderWords)
    return {};
  std::vector<uint32_t> module(words.begin() + kEntryHeaderWords, words.end());
  if (checksum(module) != words[5] || !is_whole_module(module)) return {};
  return module;
}

// Writes to a file private to this process and thread, then renames it into place: rename is
// atomic, so a reader in another process sees either no file or the whole entry. A cache we
// cannot write (read-only home, full disk) only costs the next run a compile.
void write_entry(const std::filesystem::path& file, uint64_t key,
                 const std::vector<uint32_t>& module) {
  static std::atomic<uint64_t> serial{0};
  std::vector<uint32_t> words{kEntryMagic,         kEntryVersion,           uint32_t(key),
                              uint32_t(key >> 32), uint32_t(module.size()), checksum(module)};
  words.insert(words.end(), module.begin(), module.end());
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  auto tmp = file;
  tmp += fmt::format(".tmp.{}.{}.{}", ::getpid(),
                     std::hash<std::thread::id>{}(std::this_thread::get_id()), serial++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(words.data()),
              static_cast<std::streamsize>(words.size() * 4));
    out.close();
    if (out) {
      std::filesystem::rename(tmp, file, ec);
      if (!ec) return;
    }
  }
  std::filesystem::remove(tmp, ec);
}

// The source with 1-based line numbers, the way shaderc's messages count them: `  12| code`.
std::string numbered(std::string_view src) {
  std::string out;
  int line = 0;
  for (size_t start = 0; start < src.size();) {
    size_t end = std::min(src.find('\n', start), src.size());
    out += fmt::format("{:>4}| {}\n", ++line, src.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

shaderc::SpvCompilationResult run_shaderc(std::string_view glsl, const SpirvCompileOptions& o,
                                          bool optimize) {
  shaderc::CompileOptions opts;
  opts.SetTargetEnvironment(shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_3);
  opts.SetTargetSpirv(shaderc_spirv_version_1_6);
  opts.SetOptimizationLevel(optimize ? shaderc_optimization_level_performance
                                     : shaderc_optimization_level_zero);
  counters.shaderc_compiles++;
  return compiler().CompileGlslToSpv(glsl.data(), glsl.size(), shaderc_compute_shader,
                                     o.name.c_str(), "main", opts);
}

std::vector<uint32_t> compile_with_shaderc(std::string_view glsl, const SpirvCompileOptions& o) {
  auto result = run_shaderc(glsl, o, o.optimize);
  // spirv-opt has bugs that reject modules glslang produced from valid code. The unoptimized
  // module is correct, only slower, which beats failing the user's program.
  if (result.GetCompilationStatus() != shaderc_compilation_status_success && o.optimize &&
      result.GetErrorMessage().find("failed to optimize") != std::string::npos) {
    counters.unoptimized_retries++;
    result = run_shaderc(glsl, o, /*optimize=*/false);
  }
  if (result.GetCompilationStatus() != shaderc_compilation_status_success) {
    throw CompileError(fmt::format("GLSL compile of {} failed:\n{}\n{}", o.name,
                                   result.GetErrorMessage(), numbered(glsl)));
  }
  return with_no_contraction(with_declared_execution_modes({result.cbegin(), result.cend()}, glsl));
}

}  // namespace

std::filesystem::path spirv_cache_file(std::string_view glsl, const SpirvCompileOptions& options) {
  return cache_dir() / "spirv" / fmt::format("{:016x}.spv", cache_key(glsl, options));
}

std::vector<uint32_t> compile_glsl(std::string_view glsl, const SpirvCompileOptions& options) {
  if (!options.disk_cache) return compile_with_shaderc(glsl, options);
  const uint64_t key = cache_key(glsl, options);
  auto file = cache_dir() / "spirv" / fmt::format("{:016x}.spv", key);
  std::error_code ec;
  if (options.read_cache && std::filesystem::exists(file, ec)) {
    auto words = read_entry(file, key);
    if (!words.empty()) {
      counters.cache_hits++;
      return words;
    }
    counters.cache_rejects++;  // overwritten below with a good module
  }
  auto words = compile_with_shaderc(glsl, options);
  write_entry(file, key, words);
  return words;
}

SpirvCompilerStats spirv_compiler_stats() {
  return {counters.shaderc_compiles.load(), counters.cache_hits.load(),
          counters.cache_rejects.load(), counters.unoptimized_retries.load()};
}

}  // namespace vkg
