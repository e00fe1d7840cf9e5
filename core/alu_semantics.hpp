// What each ALU op computes on one scalar, written once: the CPU device and constant folding both
// evaluate these (through the cpu column of alu_table.hpp), and the GLSL renderer is held to them
// by tests that run the same kernels on Vulkan and the CPU device.
//   - integers wrap at their dtype's width; IDIV and MOD truncate toward zero (C), MIN / -1 is MIN;
//   - x / 0 is 0 and x % 0 is x, for every integer dtype (a == (a / b) * b + a % b still holds).
//     Vulkan leaves both undefined. Lavapipe gives these for signed types and 0xff..ff for
//     unsigned ones, so the renderer guards a division whose divisor may be 0 (idiv_safe,
//     mod_safe in codegen/glsl_helpers.cpp); constant divisors, all of index math, need no guard;
//   - a shift count is taken modulo the width (x << 33 is x << 1 in int32), as NIR and Lavapipe
//     do and as Vulkan leaves undefined; the renderer masks counts it cannot prove in range;
//   - floats are IEEE: MAX propagates nan from either operand, CMPNE is true for nan;
//   - bools: ADD, OR and MAX are or; MUL and AND are and; XOR is !=; a < b is !a && b.
// Constant folding declines the cases C leaves undefined (undefined_in_c): a shape that divides
// by zero is the user's error to report, not a value to make up.
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace vkg::alu {

template <class T>
constexpr bool kIntegral = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// The low bits of a 64-bit pattern as T: wrap-around without undefined behaviour.
template <class T>
T wrap(uint64_t v) {
  return T(v);
}

template <class T>
T add(T x, T y) {
  if constexpr (std::is_same_v<T, bool>)
    return x || y;
  else if constexpr (kIntegral<T>)
    return wrap<T>(uint64_t(x) + uint64_t(y));
  else
    return x + y;
}

template <class T>
T sub(T x, T y) {
  if constexpr (kIntegral<T>)
    return wrap<T>(uint64_t(x) - uint64_t(y));
  else
    return x - y;
}

template <class T>
T mul(T x, T y) {
  if constexpr (std::is_same_v<T, bool>)
    return x && y;
  else if constexpr (kIntegral<T>)
    return wrap<T>(uint64_t(x) * uint64_t(y));
  else
    return x * y;
}

template <class T>
T neg(T x) {
  if constexpr (kIntegral<T>)
    return wrap<T>(0 - uint64_t(x));
  else
    return -x;
}

template <class T>
T idiv(T x, T y) {
  if (y == 0) return 0;
  if constexpr (std::is_signed_v<T>)
    if (y == T(-1)) return neg(x);  // MIN / -1 wraps to MIN, as -MIN does
  return T(x / y);
}

template <class T>
T mod(T x, T y) {
  return wrap<T>(uint64_t(x) - uint64_t(idiv(x, y)) * uint64_t(y));
}

template <class T>
T fdiv(T x, T y) {
  return x / y;
}

template <class T>
T max(T x, T y) {
  if constexpr (std::is_same_v<T, bool>)
    return x || y;
  else if constexpr (kIntegral<T>)
    return std::max(x, y);
  else
    return (x < y || std::isnan(y)) ? y : x;  // nan from either side wins
}

template <class T>
bool cmplt(T x, T y) {
  return x < y;
}

template <class T>
bool cmpne(T x, T y) {
  return x != y;  // IEEE: nan compares unequal to everything
}

template <class T>
T bit_and(T x, T y) {
  return T(x & y);
}
template <class T>
T bit_or(T x, T y) {
  return T(x | y);
}
template <class T>
T bit_xor(T x, T y) {
  return T(x ^ y);
}

template <class T>
constexpr uint64_t shift_mask() {
  return sizeof(T) * 8 - 1;
}
template <class T>
T shl(T x, T y) {
  return wrap<T>(uint64_t(x) << (uint64_t(y) & shift_mask<T>()));
}
template <class T>
T shr(T x, T y) {
  return T(x >> (uint64_t(y) & shift_mask<T>()));  // arithmetic for signed T (C++20)
}

template <class T>
T mulacc(T x, T y, T z) {
  if constexpr (std::is_same_v<T, bool>)
    return (x && y) || z;
  else if constexpr (kIntegral<T>)
    return wrap<T>(uint64_t(x) * uint64_t(y) + uint64_t(z));
  else
    return x * y + z;
}

template <class T>
T exp2(T x) {
  return std::exp2(x);
}
template <class T>
T log2(T x) {
  return std::log2(x);
}
template <class T>
T sin(T x) {
  return std::sin(x);
}
template <class T>
T cos(T x) {
  return std::cos(x);
}
template <class T>
T sqrt(T x) {
  return std::sqrt(x);
}
template <class T>
T trunc(T x) {
  return std::trunc(x);
}
template <class T>
T recip(T x) {
  return T(1) / x;
}

// C's fmod: x - trunc(x / y) * y computed exactly (IEEE fmod is exact), with x's sign; nan for
// y = 0 or an infinite x, x itself for an infinite y.
template <class T>
T fmod(T x, T y) {
  return std::fmod(x, y);
}
// torch.remainder (Python's %) on floats, as torch computes it: fmod, moved by y where the
// remainder is nonzero and its sign differs from y's (that add rounds; a zero keeps x's sign).
template <class T>
T remainder(T x, T y) {
  T r = std::fmod(x, y);
  if (r != 0 && ((y < 0) != (r < 0))) r += y;
  return r;
}

// Threefry-2x32 with 20 rounds: x and key are two 32-bit words each, low word first.
inline uint64_t threefry(uint64_t x, uint64_t key) {
  static constexpr int kRot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  const uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
  const uint32_t ks[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu};
  uint32_t x0 = uint32_t(x) + ks[0], x1 = uint32_t(x >> 32) + ks[1];
  for (int i = 0; i < 5; ++i) {
    for (int r : kRot[i % 2]) {
      x0 += x1;
      x1 = std::rotl(x1, r) ^ x0;
    }
    x0 += ks[(i + 1) % 3];
    x1 += ks[(i + 2) % 3] + uint32_t(i + 1);
  }
  return uint64_t(x1) << 32 | x0;
}

// Whether C (and Vulkan) leave op(x, y) undefined on integers: a zero divisor, a shift count
// outside [0, width). The values above are defined for them; the folder declines them.
template <class T>
bool undefined_in_c(bool div_or_mod, bool shift, T x, T y) {
  (void)x;
  if constexpr (kIntegral<T>) {
    if (div_or_mod) return y == 0;
    if (shift) return int64_t(y) < 0 || uint64_t(y) > shift_mask<T>();
  }
  return false;
}

}  // namespace vkg::alu
