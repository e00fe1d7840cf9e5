// float16_t and bfloat16_t, the C++ value types of float16 and bfloat16: storage is the 16 raw
// bits, arithmetic goes through float. Conversions round to nearest even and keep inf and nan, as GPUs do.
#pragma once
#include <bit>
#include <cstdint>

namespace vkg {

struct float16_t {
  uint16_t bits = 0;
  float16_t() = default;
  explicit float16_t(float f) : bits(from_float(f)) {}
  operator float() const { return to_float(bits); }
  static float16_t from_bits(uint16_t b) { float16_t h; h.bits = b; return h; }

  static uint16_t from_float(float f) {
    const uint32_t x = std::bit_cast<uint32_t>(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t exp = (x >> 23) & 0xffu;
    uint32_t mant = x & 0x7fffffu;
    if (exp == 0xff) return uint16_t(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0u));
    const int e = int(exp) - 127 + 15;
    if (e >= 31) return uint16_t(sign | 0x7c00u);  // overflow to inf
    if (e <= 0) {                                  // subnormal float16_t, or zero
      if (e < -10) return uint16_t(sign);
      mant |= 0x800000u;
      const int shift = 14 - e;
      uint32_t h = mant >> shift;
      const uint32_t rest = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
      if (rest > halfway || (rest == halfway && (h & 1u))) ++h;
      return uint16_t(sign | h);
    }
    uint32_t h = (uint32_t(e) << 10) | (mant >> 13);
    const uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // may carry into inf: correct
    return uint16_t(sign | h);
  }
  static float to_float(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
      if (mant == 0) return std::bit_cast<float>(sign);
      const float v = float(mant) * (1.0f / 16777216.0f);  // mant * 2^-24
      return sign ? -v : v;
    }
    return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
  }
};

struct bfloat16_t {
  uint16_t bits = 0;
  bfloat16_t() = default;
  explicit bfloat16_t(float f) : bits(from_float(f)) {}
  operator float() const { return std::bit_cast<float>(uint32_t(bits) << 16); }
  static bfloat16_t from_bits(uint16_t b) { bfloat16_t h; h.bits = b; return h; }

  static uint16_t from_float(float f) {
    const uint32_t x = std::bit_cast<uint32_t>(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);  // quiet nan
    return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);                  // round to even
  }
};

}  // namespace vkg
