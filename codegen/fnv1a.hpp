// FNV-1a, 64 bit: tiny, well known, and ample for naming cache files (SPIR-V, BEAM's choices).
// Each field is hashed with its length first so that ("ab", "c") and ("a", "bc") differ.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace vkg {

class Fnv1a64 {
 public:
  Fnv1a64& add(std::string_view field) {
    uint64_t n = field.size();
    bytes(&n, sizeof n);
    bytes(field.data(), field.size());
    return *this;
  }
  uint64_t value() const { return h_; }

 private:
  void bytes(const void* p, size_t n) {
    for (const auto* b = static_cast<const unsigned char*>(p); n--; ++b)
      h_ = (h_ ^ *b) * 0x100000001b3ull;
  }
  uint64_t h_ = 0xcbf29ce484222325ull;
};

}  // namespace vkg
