// exp, SiLU and quick GELU for the CPU ops' hot loops, written so that `#pragma omp simd` loops vectorise them.
// glibc's expf is a scalar call the compiler cannot vectorise without -ffast-math, and softmax, SiLU and
// the GroupNorm prologue spend most of their time in it. Relative error below 1e-7 (about 1 ulp).
// No float comparisons: GCC will not if-convert them under the default -ftrapping-math, and one such
// branch keeps the whole loop scalar.
#pragma once
#include <algorithm>
#include <bit>
#include <cstdint>

namespace rtvd::cpu {

inline float exp_fast(float x) {
  // Clamp to [-87, 87] on the bit pattern (for floats of one sign, integer order is numeric order), so
  // that 2^n below stays a normal float; e^-87 ~ 2e-38 stands in for anything smaller. NaN becomes 87.
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t magnitude = std::min(bits & 0x7fffffffu, std::bit_cast<uint32_t>(87.0f));
  x = std::bit_cast<float>((bits & 0x80000000u) | magnitude);
  // e^x = 2^n e^r with n = round(x / ln 2), |r| <= ln(2) / 2.
  constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (x * 1.44269504f + kRoundMagic) - kRoundMagic;
  const float r = (x - n * 0.693145752f) - n * 1.42860677e-6f;  // ln 2 split in two for exactness
  // Taylor series of e^r to degree 7: truncation error below 1e-8 on |r| <= 0.347.
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float two_n = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  return p * two_n;
}

inline float silu_fast(float x) { return x / (1.0f + exp_fast(-x)); }
inline float quick_gelu_fast(float x) { return x / (1.0f + exp_fast(-1.702f * x)); }

}  // namespace rtvd::cpu
