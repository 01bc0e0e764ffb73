// Per-element, per-warp and per-block math that several CUDA kernels share, written once so that they round
// alike: the fused SiLU of the elementwise, norm, linear and conv epilogues, the warp sum of the norms, and the
// block-wide sum or max of the cluster GroupNorm and the fallback attention.
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

// The total (or the max, with is_max) of v over a block of kWarps full warps, the same in every thread, in a fixed
// order: lanes by butterfly, then warps in turn. scratch: kWarps floats of shared memory, which it may overwrite
// once every thread has arrived (a previous call's reads are over).
template <int kWarps>
__device__ __forceinline__ float block_reduce(float v, bool is_max, float* scratch) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, v, offset);
    v = is_max ? fmaxf(v, other) : v + other;
  }
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  v = scratch[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) v = is_max ? fmaxf(v, scratch[w]) : v + scratch[w];
  return v;
}

}  // namespace rtvd
