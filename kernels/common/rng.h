// Counter-based Gaussian noise, identical on host and device: element i of stream s under seed k is a
// pure function of (k, s, i), so CPU and GPU draw the same noise and any element can be made alone.
#pragma once
#include "kernels/common/activation.h"

namespace rtvd {

RTVD_HD uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Standard normal sample via Box-Muller on two 32-bit uniforms taken from one 64-bit hash.
RTVD_HD float gaussian_noise(uint64_t seed, uint64_t stream, uint64_t index) {
  const uint64_t h = splitmix64(splitmix64(seed ^ splitmix64(stream)) + index);
  const float u1 = (static_cast<uint32_t>(h >> 32) + 1.0f) * (1.0f / 4294967296.0f);  // (0, 1]
  const float u2 = static_cast<uint32_t>(h) * (1.0f / 4294967296.0f);                 // [0, 1)
  return sqrtf(-2.0f * logf(u1)) * cosf(6.283185307179586f * u2);
}

}  // namespace rtvd
