// Per-element and per-warp math that several CUDA kernels share, written once so that they round alike:
// the fused SiLU of the elementwise, norm, linear and conv epilogues, and the warp sum of the norms.
#pragma once
#include <cuda_runtime.h>

namespace rtvd {

// silu(x) = x / (1 + e^-x) with the fast exp and division: about 2 ulp, far below fp16 resolution, and it
// keeps SiLU under the memory time of the kernels that apply it.
__device__ __forceinline__ float fast_silu(float x) { return __fdividef(x, 1.0f + __expf(-x)); }

// The sum of v over the 32 lanes of a full warp (butterfly: every lane gets it).
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

}  // namespace rtvd
