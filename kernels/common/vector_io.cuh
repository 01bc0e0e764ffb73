// Vector loads and stores of the memory-bound kernels: VEC consecutive fp16 (or fp32) values in one
// access, converted to and from fp32 registers. Written once here so that the kernels move data the same
// way (elementwise, group_norm, denoise, conv2d's epilogue). The caller checks alignment: p must be
// aligned to the access (VEC fp16: 2 VEC bytes; fp32: 16 bytes).
#pragma once
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace rtvd {

// The bits of VEC consecutive fp16 values as one access moves them: uint4 (8), uint2 (4), uint32_t (2), __half (1).
template <int VEC>
using HalfBits = std::conditional_t<VEC == 8, uint4, std::conditional_t<VEC == 4, uint2, std::conditional_t<VEC == 2, uint32_t, __half>>>;
static_assert(sizeof(HalfBits<8>) == 16 && sizeof(HalfBits<4>) == 8 && sizeof(HalfBits<2>) == 4);

// VEC fp16 -> fp32: VEC 8 is one 16-byte access, 4 one 8-byte, 2 one 4-byte, 1 a plain load. The 4-wide
// form reads its uint2 as .x and .y, as denoise_blend's loader did: that keeps its SASS as it was (reading
// the uint2 as a __half2 array, like the 8-wide form, did not).
template <int VEC>
__device__ __forceinline__ void load_vec(const __half* p, float (&f)[VEC]) {
  static_assert(VEC == 8 || VEC == 4 || VEC == 2 || VEC == 1, "fp16 vectors of 1, 2, 4 or 8");
  if constexpr (VEC == 8) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const auto* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 t = __half22float2(h[i]);
      f[2 * i] = t.x, f[2 * i + 1] = t.y;
    }
  } else if constexpr (VEC == 4) {
    const uint2 raw = *reinterpret_cast<const uint2*>(p);
    const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&raw.x));
    const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&raw.y));
    f[0] = a.x, f[1] = a.y, f[2] = b.x, f[3] = b.y;
  } else if constexpr (VEC == 2) {
    const float2 t = __half22float2(*reinterpret_cast<const __half2*>(p));
    f[0] = t.x, f[1] = t.y;
  } else {
    f[0] = __half2float(*p);
  }
}

// fp32 -> VEC fp16, rounded to nearest: VEC 8 is one 16-byte access, 4 one 8-byte, 2 one 4-byte, 1 a plain
// store.
template <int VEC>
__device__ __forceinline__ void store_vec(__half* p, const float (&f)[VEC]) {
  static_assert(VEC == 8 || VEC == 4 || VEC == 2 || VEC == 1, "fp16 vectors of 1, 2, 4 or 8");
  if constexpr (VEC == 8 || VEC == 4) {
    HalfBits<VEC> raw;
    auto* h = reinterpret_cast<__half2*>(&raw);
#pragma unroll
    for (int i = 0; i < VEC / 2; ++i) h[i] = __floats2half2_rn(f[2 * i], f[2 * i + 1]);
    *reinterpret_cast<HalfBits<VEC>*>(p) = raw;
  } else if constexpr (VEC == 2) {
    *reinterpret_cast<__half2*>(p) = __floats2half2_rn(f[0], f[1]);
  } else {
    *p = __float2half_rn(f[0]);
  }
}

// VEC fp32 (a multiple of 4) through VEC / 4 16-byte accesses.
template <int VEC>
__device__ __forceinline__ void load_vec(const float* p, float (&f)[VEC]) {
  static_assert(VEC % 4 == 0, "fp32 vectors of whole float4s");
#pragma unroll
  for (int i = 0; i < VEC / 4; ++i) {
    const float4 t = reinterpret_cast<const float4*>(p)[i];
    f[4 * i] = t.x, f[4 * i + 1] = t.y, f[4 * i + 2] = t.z, f[4 * i + 3] = t.w;
  }
}

template <int VEC>
__device__ __forceinline__ void store_vec(float* p, const float (&f)[VEC]) {
  static_assert(VEC % 4 == 0, "fp32 vectors of whole float4s");
#pragma unroll
  for (int i = 0; i < VEC / 4; ++i)
    reinterpret_cast<float4*>(p)[i] = make_float4(f[4 * i], f[4 * i + 1], f[4 * i + 2], f[4 * i + 3]);
}

}  // namespace rtvd
