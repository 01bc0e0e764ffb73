// layer_norm: one warp per row. The fast kernel keeps the row in registers (VPL 8-channel vectors per
// lane, 16-byte loads), so x is read once and the variance is taken around the mean (two passes over
// registers, no E[x^2] - E[x]^2 cancellation). The fallback reads the row three times through L1 and
// serves any c and alignment.
#include <cuda_fp16.h>

#include <cstdint>
#include <nvtx3/nvtx3.hpp>

#include "kernels/layer_norm/layer_norm.cuh"
#include "kernels/common/alignment.h"
#include "kernels/common/device_math.cuh"
#include "kernels/common/launch.cuh"

namespace rtvd {
namespace {

constexpr int kWarps = 4;  // rows per block
constexpr int kThreads = 32 * kWarps;
constexpr int kMaxVectorsPerLane = 5;  // c <= 5 * 32 * 8 = 1280 in registers

template <int VPL>
__global__ void __launch_bounds__(kThreads)
    layer_norm_warp_kernel(const __half* __restrict__ x, __half* __restrict__ y, const float* __restrict__ gamma,
                           const float* __restrict__ beta, int rows, int c, float eps) {
  start_after_prior_kernels();
  static_assert(VPL >= 1 && VPL <= kMaxVectorsPerLane);
  const int row = blockIdx.x * kWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int vectors = c / 8;
  const __half* xr = x + int64_t(row) * c;
  float v[VPL][8];
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < VPL; ++j) {
    const int idx = lane + 32 * j;
    if (idx < vectors) {
      const uint4 raw = reinterpret_cast<const uint4*>(xr)[idx];
      const auto* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float2 t = __half22float2(h[k]);
        v[j][2 * k] = t.x, v[j][2 * k + 1] = t.y;
        sum += t.x + t.y;
      }
    }
  }
  const float mean = warp_sum(sum) / float(c);
  float sq = 0.0f;
#pragma unroll
  for (int j = 0; j < VPL; ++j)
    if (lane + 32 * j < vectors)
#pragma unroll
      for (int k = 0; k < 8; ++k) sq += (v[j][k] - mean) * (v[j][k] - mean);
  const float rstd = 1.0f / sqrtf(warp_sum(sq) / float(c) + eps);
  __half* yr = y + int64_t(row) * c;
#pragma unroll
  for (int j = 0; j < VPL; ++j) {
    const int idx = lane + 32 * j;
    if (idx < vectors) {
      const auto* g4 = reinterpret_cast<const float4*>(gamma) + 2 * idx;
      const auto* b4 = reinterpret_cast<const float4*>(beta) + 2 * idx;
      const float4 g0 = g4[0], g1 = g4[1], b0 = b4[0], b1 = b4[1];
      const float g[8] = {g0.x, g0.y, g0.z, g0.w, g1.x, g1.y, g1.z, g1.w};
      const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
      uint4 raw;
      auto* h = reinterpret_cast<__half2*>(&raw);
#pragma unroll
      for (int k = 0; k < 4; ++k)
        h[k] = __floats2half2_rn((v[j][2 * k] - mean) * rstd * g[2 * k] + b[2 * k],
                                 (v[j][2 * k + 1] - mean) * rstd * g[2 * k + 1] + b[2 * k + 1]);
      reinterpret_cast<uint4*>(yr)[idx] = raw;
    }
  }
}

// Any c, any alignment: three strided passes over the row (it stays in L1 between them).
__global__ void __launch_bounds__(kThreads)
    layer_norm_scalar_kernel(const __half* __restrict__ x, __half* __restrict__ y, const float* __restrict__ gamma,
                             const float* __restrict__ beta, int rows, int c, float eps) {
  start_after_prior_kernels();
  const int row = blockIdx.x * kWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  const __half* xr = x + int64_t(row) * c;
  float sum = 0.0f;
  for (int i = lane; i < c; i += 32) sum += __half2float(xr[i]);
  const float mean = warp_sum(sum) / float(c);
  float sq = 0.0f;
  for (int i = lane; i < c; i += 32) {
    const float d = __half2float(xr[i]) - mean;
    sq += d * d;
  }
  const float rstd = 1.0f / sqrtf(warp_sum(sq) / float(c) + eps);
  __half* yr = y + int64_t(row) * c;
  for (int i = lane; i < c; i += 32) yr[i] = __float2half_rn((__half2float(xr[i]) - mean) * rstd * gamma[i] + beta[i]);
}

struct Launch {
  const __half* x;
  __half* y;
  unsigned blocks;
};

template <int VPL>
void launch_warp_kernel(const LayerNormParams& p, const Launch& l, cudaStream_t stream) {
  launch_kernel("layer_norm", layer_norm_warp_kernel<VPL>, l.blocks, kThreads, 0, stream, l.x, l.y, p.gamma, p.beta,
                p.rows, p.c, p.eps);
}

// Indexed by vectors per lane - 1.
constexpr void (*kWarpKernels[kMaxVectorsPerLane])(const LayerNormParams&, const Launch&, cudaStream_t) = {
    launch_warp_kernel<1>, launch_warp_kernel<2>, launch_warp_kernel<3>, launch_warp_kernel<4>,
    launch_warp_kernel<5>};

}  // namespace

void layer_norm(const LayerNormParams& p, const CudaContext& ctx) {
  nvtx3::scoped_range range{"layer_norm"};
  if (p.rows < 0 || p.c < 0) fail("layer_norm: negative shape rows ", p.rows, " c ", p.c);
  if (p.rows == 0 || p.c == 0) return;
  if (!p.gamma || !p.beta) fail("layer_norm: gamma and beta must be set");
  const Launch l{static_cast<const __half*>(p.x), static_cast<__half*>(p.y),
                 unsigned((int64_t(p.rows) + kWarps - 1) / kWarps)};
  const int vectors_per_lane = (p.c / 8 + 31) / 32;
  const bool fast = p.c % 8 == 0 && vectors_per_lane <= kMaxVectorsPerLane && aligned16(p.x) && aligned16(p.y) &&
                    aligned16(p.gamma) && aligned16(p.beta);
  if (fast)
    kWarpKernels[vectors_per_lane - 1](p, l, ctx.stream);
  else
    launch_kernel("layer_norm", layer_norm_scalar_kernel, l.blocks, kThreads, 0, ctx.stream, l.x, l.y, p.gamma, p.beta,
                  p.rows, p.c, p.eps);
}

}  // namespace rtvd
