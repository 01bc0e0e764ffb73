// IEEE fp16 <-> fp32 on the host (round to nearest even), for loading weights and reading GPU outputs.
#pragma once
#include <cstdint>
#include <cstring>

namespace rtvd {

inline float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    exp = 113;
    while (!(mant & 0x400)) { mant <<= 1; --exp; }
    bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return sign | (ax > 0x7f800000u ? 0x7e00 : 0x7c00);  // nan / inf
  if (ax >= 0x477ff000u) return sign | 0x7c00;                               // overflow -> inf
  if (ax < 0x38800000u) {                                                    // subnormal or zero
    if (ax < 0x33000000u) return sign;
    const uint32_t e = ax >> 23, m = (ax & 0x7fffff) | 0x800000, shift = 126 - e;
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) ++r;
    return sign | uint16_t(r);
  }
  uint32_t r = ax - 0x38000000u;  // rebias exponent 127 -> 15
  const uint32_t rem = r & 0x1fff;
  r >>= 13;
  if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) ++r;
  return sign | uint16_t(r);
}

}  // namespace rtvd
