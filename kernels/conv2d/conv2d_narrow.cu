// conv2d_narrow (conv2d_narrow.cuh). A block owns kRows x kCols output pixels of one image, a warp one row
// of them (four m16 tiles), all c_out <= 8 channels (one n8 tile). Per 32 input channels the block copies its
// input tile, (kRows + k - 1) x (kCols + k - 1) pixels, into shared memory with cp.async (two stages: the
// next chunk lands while this one computes), applies the GroupNorm+SiLU prologue in place (padding stays
// zero, as conv2d.h pads pre(x)), and each warp runs the k x k taps as shifted reads of that tile: tap (r, s)
// of output pixel (row, col) is tile pixel (row + r, col + s), so an m16 tile of A is 16 consecutive tile
// pixels, one ldmatrix.x4. B (the weights, k x k x 32 per chunk) sits in registers.
#include "kernels/conv2d/conv2d_narrow.cuh"

#include <cstdint>

#include "kernels/common/alignment.h"
#include "kernels/common/nvtx_range.h"
#include "kernels/common/sm80_ptx.cuh"
#include "kernels/conv2d/conv2d_traits.cuh"
#include "kernels/common/launch.cuh"

namespace rtvd {
namespace {

using namespace conv2d_detail;
using namespace sm80;

constexpr int kRows = 8;                    // output rows per block: one per warp
constexpr int kCols = 64;                   // output columns per block: four m16 tiles per warp
constexpr int kMTiles = kCols / 16;
constexpr int kThreads = 32 * kRows;
constexpr int kChunk = 32;                  // input channels per stage
constexpr int kVectors = kChunk / 8;        // 16-byte vectors per pixel and stage
constexpr int kMaxK = 3;
constexpr int kInCols = kCols + kMaxK - 1;  // tile pixels per row (the same layout for 1x1)
constexpr int kInRows = kRows + kMaxK - 1;
// Bytes per tile pixel: 64 of channels and 16 of padding, so that the 8 pixels one ldmatrix phase reads
// (consecutive, 80 bytes apart) fall on 8 distinct 16-byte bank groups.
constexpr int kPitch = kChunk * 2 + 16;
constexpr int kStageBytes = kInRows * kInCols * kPitch;  // 52,800
constexpr int kMaxGnChannels = 4096;                     // the fold table: 8 bytes per channel

size_t smem_bytes(const Conv2dParams& p) { return 2 * size_t(kStageBytes) + (p.gn_stats ? 8 * size_t(p.c_in) : 0); }

// Grid (column tiles, row tiles, images).
template <int K>
__global__ void __launch_bounds__(kThreads, 2) conv2d_narrow_kernel(const __grid_constant__ Conv2dParams p) {
  start_after_prior_kernels();
  extern __shared__ __align__(128) uint8_t smem[];  // two stages, then (with the prologue) the fold table
  const auto* x = static_cast<const __half*>(p.x);
  const auto* wt = static_cast<const __half*>(p.weight);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int img = blockIdx.z, oy0 = blockIdx.y * kRows, ox0 = blockIdx.x * kCols;
  const int iy0 = oy0 - p.pad, ix0 = ox0 - p.pad;  // stride 1: the tile's first input row and column
  constexpr int kTileCols = kCols + K - 1, kTilePixels = (kRows + K - 1) * kTileCols;
  const int chunks = (p.c_in + kChunk - 1) / kChunk;

  auto* fold = reinterpret_cast<float2*>(smem + 2 * kStageBytes);  // (c_in) GroupNorm+SiLU (scale, shift)
  if (p.gn_stats) {
    for (int c = tid; c < p.c_in; c += kThreads) fold[c] = gn_fold(p, img, c);
    __syncthreads();
  }

  // This thread's 16-byte vectors of a stage: tile pixel v / kVectors, channels 8 (v % kVectors) on.
  const auto in_image = [&](int v, int c0, int64_t* offset, uint32_t* dst) {
    const int pixel = v / kVectors, r = pixel / kTileCols, col = pixel - r * kTileCols;
    const int c = c0 + (v % kVectors) * 8, iy = iy0 + r, ix = ix0 + col;
    *dst = (r * kInCols + col) * kPitch + (v % kVectors) * 16;
    *offset = ((int64_t(img) * p.h + iy) * p.w + ix) * p.c_in + c;
    return unsigned(iy) < unsigned(p.h) && unsigned(ix) < unsigned(p.w) && c < p.c_in;
  };
  const uint32_t smem0 = smem_address(smem);
  const auto load_stage = [&](int chunk) {
    const uint32_t stage = smem0 + (chunk & 1) * kStageBytes;
    for (int v = tid; v < kTilePixels * kVectors; v += kThreads) {
      int64_t offset;
      uint32_t dst;
      const bool ok = in_image(v, chunk * kChunk, &offset, &dst);
      cp_async_16<true>(stage + dst, ok ? x + offset : x, ok);
    }
  };
  const auto normalize_stage = [&](int chunk) {
    uint8_t* stage = smem + (chunk & 1) * kStageBytes;
    for (int v = tid; v < kTilePixels * kVectors; v += kThreads) {
      int64_t offset;
      uint32_t dst;
      if (!in_image(v, chunk * kChunk, &offset, &dst)) continue;
      const int c = chunk * kChunk + (v % kVectors) * 8;
      uint4 raw = *reinterpret_cast<const uint4*>(stage + dst);  // one 16-byte access each way
      auto* h2 = reinterpret_cast<__half2*>(&raw);
      const auto* f = reinterpret_cast<const float4*>(fold + c);  // channels c + 2j, c + 2j + 1
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float4 ab = f[j];
        const float2 xv = __half22float2(h2[j]);
        h2[j] = __floats2half2_rn(fast_silu(xv.x * ab.x + ab.y), fast_silu(xv.y * ab.z + ab.w));
      }
      *reinterpret_cast<uint4*>(stage + dst) = raw;
    }
  };

  // B fragments of a chunk: output channel lane / 4, channels 2 (lane % 4) (+ 8) of each k16 half; zero
  // past c_out and c_in.
  uint32_t b[K * K][2][2];
  const int b_n = lane / 4;
  const auto load_weights = [&](int chunk) {
#pragma unroll
    for (int t = 0; t < K * K; ++t)
#pragma unroll
      for (int kk = 0; kk < 2; ++kk)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int c = chunk * kChunk + kk * 16 + h * 8 + 2 * (lane % 4);
          b[t][kk][h] = b_n < p.c_out && c < p.c_in
                            ? *reinterpret_cast<const uint32_t*>(wt + (int64_t(b_n) * K * K + t) * p.c_in + c)
                            : 0u;
        }
  };

  float acc[kMTiles][4] = {};
  load_stage(0);
  cp_async_commit();
  for (int chunk = 0; chunk < chunks; ++chunk) {
    if (chunk + 1 < chunks) load_stage(chunk + 1);  // its stage was last read before the previous barrier
    cp_async_commit();
    cp_async_wait<1>();  // this thread's copies of this chunk have landed
    if (p.gn_stats) normalize_stage(chunk);
    load_weights(chunk);
    __syncthreads();  // everyone's have, normalised
    const uint32_t stage = smem0 + (chunk & 1) * kStageBytes;
#pragma unroll
    for (int t = 0; t < K * K; ++t) {
      const int r = t / K, s = t % K;
#pragma unroll
      for (int kk = 0; kk < 2; ++kk) {
        // The four A fragments first, then the four mma: each mma waits on its load with three more in
        // flight (the loads' shared-memory latency was the kernel's main stall).
        uint32_t a[kMTiles][4];
#pragma unroll
        for (int i = 0; i < kMTiles; ++i) {
          const int pixel = (warp + r) * kInCols + i * 16 + a_frag_row(lane) + s;
          ldmatrix_x4(a[i], stage + pixel * kPitch + a_frag_chunk(lane, kk) * 16);
        }
#pragma unroll
        for (int i = 0; i < kMTiles; ++i) mma_16816(acc[i], a[i], b[t][kk][0], b[t][kk][1]);
      }
    }
    __syncthreads();  // done reading this stage before the load two chunks on refills it
  }

  const int oy = oy0 + warp;
  if (oy >= p.h_out) return;
  const auto* residual = static_cast<const __half*>(p.residual);
  auto* y = static_cast<__half*>(p.y);
#pragma unroll
  for (int i = 0; i < kMTiles; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int ox = ox0 + i * 16 + acc_row(lane, e), c = acc_col(lane, e);
      if (ox >= p.w_out || c >= p.c_out) continue;
      const int64_t offset = ((int64_t(img) * p.h_out + oy) * p.w_out + ox) * p.c_out + c;
      const float r = residual ? __half2float(residual[offset]) : 0.0f;  // read before y: it may alias y
      y[offset] = __float2half_rn(output_value(p, img, c, acc[i][e], r));
    }
}

template <int K>
void launch(const Conv2dParams& p, const CudaContext& ctx) {
  const auto kernel = conv2d_narrow_kernel<K>;
  const size_t smem = smem_bytes(p);
  RTVD_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const dim3 grid((p.w_out + kCols - 1) / kCols, (p.h_out + kRows - 1) / kRows, p.n);
  launch_kernel("conv2d_narrow", kernel, grid, kThreads, smem, ctx.stream, p);
}

}  // namespace

bool conv2d_narrow_can_implement(const Conv2dParams& p, const CudaContext& ctx, std::string* why) {
  const char* unmet = nullptr;
  if (ctx.sm_version < 80) unmet = "needs an sm_80 or newer GPU (mma.sync)";
  else if (p.c_out > 8) unmet = "c_out must be at most 8";
  else if (p.kh != p.kw || (p.kh != 1 && p.kh != 3) || p.stride != 1) unmet = "needs a 1x1 or 3x3 kernel with stride 1";
  else if (p.c_in % 8 != 0) unmet = "c_in must be a multiple of 8";
  else if (p.gn_stats && p.c_in > kMaxGnChannels) unmet = "c_in must be at most 4096 with the GroupNorm prologue";
  else if (!aligned16(p.x) || !aligned16(p.weight)) unmet = "x and weight must be 16-byte aligned";
  if (unmet && why) *why = unmet;
  return unmet == nullptr;
}

void conv2d_narrow(const Conv2dParams& p, const CudaContext& ctx) {
  check_params(p, "conv2d");
  std::string why;
  if (!conv2d_narrow_can_implement(p, ctx, &why)) fail("conv2d: the narrow kernel can't run: ", why);
  const NvtxRange range("conv2d narrow");
  if (p.kh == 3) launch<3>(p, ctx);
  else launch<1>(p, ctx);
}

}  // namespace rtvd
