// The layout of a SPIR-V disk cache entry (codegen/spirv_compiler.hpp), spelled out independently
// so that tests can forge entries: six little-endian 32-bit words, then the module.
//   0 magic 'VKGS'   1 format version   2-3 the 64-bit key   4 module words   5 CRC-32 of the
//   module
#pragma once
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace vkg::test {

inline constexpr size_t kSpirvEntryHeaderBytes = 24;

// The key stored in an entry's header.
inline uint64_t spirv_entry_key(const std::string& entry) {
  uint64_t key = 0;
  if (entry.size() >= kSpirvEntryHeaderBytes) std::memcpy(&key, entry.data() + 8, 8);
  return key;
}

// An entry that claims to hold `module` under `key`, with a correct checksum.
inline std::string spirv_cache_entry(uint64_t key, const std::vector<uint32_t>& module) {
  const auto* bytes = reinterpret_cast<const Bytef*>(module.data());
  const uint32_t header[6] = {0x53474B56u,
                              1u,
                              uint32_t(key),
                              uint32_t(key >> 32),
                              uint32_t(module.size()),
                              uint32_t(crc32(0L, bytes, uInt(module.size() * 4)))};
  std::string out(reinterpret_cast<const char*>(header), sizeof header);
  out.append(reinterpret_cast<const char*>(module.data()), module.size() * 4);
  return out;
}

}  // namespace vkg::test
