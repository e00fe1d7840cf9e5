// GLSL compute shader -> SPIR-V, through shaderc, with a disk cache.
//
// Every kernel the renderer writes passes through compile_glsl(). A cold compile costs milliseconds
// (glslang front end plus spirv-opt); the cache turns the second run of a program into file reads.
// Cache entries live in cache_dir()/spirv/<16 hex digits>.spv, named by a 64-bit FNV-1a hash (the
// key) of everything that decides their bytes: the source, the caller's device key, the options,
// and the compiler's version. An entry is six little-endian 32-bit words, then the module:
//   0 magic "VKGS"   1 format version (1)   2-3 the key   4 module words   5 CRC-32 of the module
// A read checks all of them (a valid module under the wrong name, or with a flipped constant,
// would compute something else); an entry that fails is compiled again and rewritten. A module
// that passes and still fails on the device is the caller's to replace (read_cache below): running
// SPIRV-Tools' validator on every read would cost 120-230 us a hit against 8 us (bench_codegen
// BM_CompileDiskCacheHit). `tail -c +25 X.spv | spirv-dis -` shows the module.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace vkg {

struct SpirvCompileOptions {
  // Names the device (and anything else outside the source) the code was written for. The
  // compiler does not read it; it only keeps entries for different devices apart in the cache.
  std::string device_key;
  // spirv-opt's performance passes. Off keeps the SPIR-V close to the GLSL, for debugging.
  bool optimize = true;
  // Read and write cache_dir()/spirv. Off compiles every time and leaves the disk alone.
  bool disk_cache = true;
  // With disk_cache: off skips the read, compiles, and replaces the entry (for a module the
  // device rejected although the entry looked right).
  bool read_cache = true;
  // Shown in error messages as the file name: `kernel:12: error: ...`.
  std::string name = "kernel";
};

// Compiles one GLSL compute shader (entry point main) for Vulkan 1.3 / SPIR-V 1.6. Safe to call
// from many threads at once. Throws CompileError whose what() holds shaderc's message and the
// numbered source (`  12| code`), so the failing line can be read off the message.
std::vector<uint32_t> compile_glsl(std::string_view glsl, const SpirvCompileOptions& options = {});

// Where compile_glsl() keeps (or would keep) the SPIR-V of this source under these options.
std::filesystem::path spirv_cache_file(std::string_view glsl, const SpirvCompileOptions& options = {});

// Process-wide counts since start, for tests and DEBUG output.
struct SpirvCompilerStats {
  uint64_t shaderc_compiles = 0;     // real calls into shaderc, retries included
  uint64_t cache_hits = 0;           // modules read back from disk
  uint64_t cache_rejects = 0;        // cache files found unreadable or corrupt (then rewritten)
  uint64_t unoptimized_retries = 0;  // spirv-opt failed on valid code; compiled again without it
};
SpirvCompilerStats spirv_compiler_stats();

}  // namespace vkg
