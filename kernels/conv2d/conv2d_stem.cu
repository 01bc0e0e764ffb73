// conv2d_stem (conv2d_stem.cuh). A block owns kRows x kCols output pixels of one image, a warp one row of them
// (four m16 tiles of 16 pixels), 64 output channels a pass (eight n8 tiles). The block's input tile,
// (kRows + 2) x (kCols + 2) pixels of at most 3 channels, is staged in shared memory once, 4 halves a pixel with
// zeros outside the image and in the fourth. K is tap-major, k = (r * 3 + s) * c_in + c (the OHWI weight's own
// order, so B is w[n][k]), at most 27, padded to 32: two k16 steps. Each lane's four k of a step map to fixed
// offsets in the tile (zero's offset past 9 c_in), so an A fragment is eight half loads from the tile at the
// m16 tile's pixels. The accumulators go through shared memory (a warp's 16 pixels x 64 channels) so that y
// is written in 16-byte chunks, whole 128-byte lines per pixel. A lane always stores the same 8 channels, so
// their scale and bias (per channel or per image: a block has one image) are loaded once a pass: the kernel
// is bound by issuing instructions before it is by writing y (ncu: issue 0.56 per scheduler, DRAM idle, with
// conv2d_traits' per-element epilogue).
#include "kernels/conv2d/conv2d_stem.cuh"

#include <cstdint>

#include "kernels/common/nvtx_range.h"
#include "kernels/common/sm80_ptx.cuh"
#include "kernels/conv2d/conv2d_traits.cuh"
#include "kernels/common/launch.cuh"

namespace rtvd {
namespace {

using namespace conv2d_detail;
using namespace sm80;

constexpr int kRows = 8;    // output rows per block: one per warp
constexpr int kCols = 64;   // output columns per block: four m16 tiles per warp
constexpr int kMTiles = kCols / 16;
constexpr int kThreads = 32 * kRows;
constexpr int kInRows = kRows + 2, kInCols = kCols + 2;  // the 3x3 halo
constexpr int kPixelHalves = 4;                          // c_in <= 3 and a zero
constexpr int kMaxCin = 3;
constexpr int kPassChannels = 64;  // output channels per pass: eight n8 tiles
constexpr int kNTiles = kPassChannels / 8;
// Floats per staged pixel: the 8 rows of one half-warp's float2 writes fall 8 banks apart.
constexpr int kStagePitch = kPassChannels + 8;

__device__ __forceinline__ uint32_t pack(__half lo, __half hi) {
  return uint32_t(__half_as_ushort(lo)) | (uint32_t(__half_as_ushort(hi)) << 16);
}

// Grid (column tiles, row tiles, images).
__global__ void __launch_bounds__(kThreads) conv2d_stem_kernel(const __grid_constant__ Conv2dParams p) {
  start_after_prior_kernels();
  __shared__ __align__(16) __half tile[kInRows * kInCols * kPixelHalves];
  __shared__ __align__(16) float staged[kRows][16 * kStagePitch];
  const auto* x = static_cast<const __half*>(p.x);
  const auto* wt = static_cast<const __half*>(p.weight);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
  const int img = blockIdx.z, oy0 = blockIdx.y * kRows, ox0 = blockIdx.x * kCols;
  const int iy0 = oy0 - p.pad, ix0 = ox0 - p.pad;  // stride 1: the tile's first input row and column

  const __half* x_img = x + int64_t(img) * p.h * p.w * p.c_in;  // an image's pixels fit an int (check_params)
#pragma unroll 4
  for (int e = tid; e < kInRows * kInCols * kPixelHalves; e += kThreads) {
    const int pixel = e / kPixelHalves, c = e % kPixelHalves, r = pixel / kInCols, col = pixel - r * kInCols;
    const int iy = iy0 + r, ix = ix0 + col;
    const bool inside = c < p.c_in && unsigned(iy) < unsigned(p.h) && unsigned(ix) < unsigned(p.w);
    tile[e] = inside ? x_img[int64_t(iy * p.w + ix) * p.c_in + c] : __float2half_rn(0.0f);
  }
  __syncthreads();  // the only block-wide barrier: warps past the last output row may leave after it
  const int oy = oy0 + warp;
  if (oy >= p.h_out) return;

  // This lane's k of each k16 step, as fragments hold them: 2t, 2t + 1, 2t + 8, 2t + 9; as tile offsets
  // from a pixel (tap (r, s) is tile pixel + r rows + s columns), or 3 (the pixel's zero) past K.
  const int taps_k = 9 * p.c_in;
  int off[2][4];
#pragma unroll
  for (int kk = 0; kk < 2; ++kk)
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int k = kk * 16 + 2 * t + (q & 1) + (q >> 1) * 8, tap = k / p.c_in, c = k - tap * p.c_in;
      off[kk][q] = k < taps_k ? ((tap / 3) * kInCols + tap % 3) * kPixelHalves + c : 3;
    }

  const bool vec = ((reinterpret_cast<uintptr_t>(p.y) | reinterpret_cast<uintptr_t>(p.residual)) & 15) == 0;
  const auto* residual = static_cast<const __half*>(p.residual);
  auto* y = static_cast<__half*>(p.y);
  const int64_t row0 = (int64_t(img) * p.h_out + oy) * p.w_out;  // this warp's output row's first pixel
  float* stage = staged[warp];
  for (int c0 = 0; c0 < p.c_out; c0 += kPassChannels) {
    // B of the pass: w[n][k], n = c0 + 8 nt + g, k = 16 kk + 2t (+ 8): zero past c_out and K.
    uint32_t b[kNTiles][2][2];
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
      for (int kk = 0; kk < 2; ++kk)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int n = c0 + nt * 8 + g, k = kk * 16 + 2 * t + h * 8;
          const __half* w = wt + int64_t(n) * taps_k + k;
          const __half zero = __float2half_rn(0.0f);
          b[nt][kk][h] = n < p.c_out ? pack(k < taps_k ? w[0] : zero, k + 1 < taps_k ? w[1] : zero) : 0u;
        }
    // This lane's 8 channels of the pass (it stores pixels lane / 8 + 4 i), and their scale and bias.
    const int c = c0 + (lane % 8) * 8;
    const bool stores = c < p.c_out;  // c_out % 8 == 0: the whole chunk
    float scale[8], bias[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      scale[j] = p.scale && stores ? __ldg(p.scale + int64_t(img) * p.scale_batch_stride + c + j) : 1.0f;
      bias[j] = p.bias && stores ? __ldg(p.bias + int64_t(img) * p.bias_batch_stride + c + j) : 0.0f;
    }
    for (int mt = 0; mt < kMTiles; ++mt) {
      const int px0 = ox0 + mt * 16;
      if (px0 >= p.w_out) break;
      const __half* lo = tile + (warp * kInCols + mt * 16 + g) * kPixelHalves;  // pixel g's taps; g + 8's below
      const __half* hi = lo + 8 * kPixelHalves;
      uint32_t a[2][4];
#pragma unroll
      for (int kk = 0; kk < 2; ++kk) {
        a[kk][0] = pack(lo[off[kk][0]], lo[off[kk][1]]);
        a[kk][1] = pack(hi[off[kk][0]], hi[off[kk][1]]);
        a[kk][2] = pack(lo[off[kk][2]], lo[off[kk][3]]);
        a[kk][3] = pack(hi[off[kk][2]], hi[off[kk][3]]);
      }
      float acc[kNTiles][4] = {};
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) mma_16816(acc[nt], a[kk], b[nt][kk][0], b[nt][kk][1]);

      __syncwarp();  // the previous tile's chunks are read
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) {
        *reinterpret_cast<float2*>(stage + g * kStagePitch + nt * 8 + 2 * t) = make_float2(acc[nt][0], acc[nt][1]);
        *reinterpret_cast<float2*>(stage + (g + 8) * kStagePitch + nt * 8 + 2 * t) =
            make_float2(acc[nt][2], acc[nt][3]);
      }
      __syncwarp();
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int px = lane / 8 + 4 * i, ox = px0 + px;
        if (!stores || ox >= p.w_out) continue;
        const auto* s4 = reinterpret_cast<const float4*>(stage + px * kStagePitch + (lane % 8) * 8);
        const float4 s0 = s4[0], s1 = s4[1];
        const float v[8] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};
        const int64_t offset = (row0 + ox) * p.c_out + c;
        float r[8] = {};  // read before y is written: the residual may be y
        if (residual && vec) load_vec<8>(residual + offset, r);
        else if (residual)
#pragma unroll
          for (int j = 0; j < 8; ++j) r[j] = __half2float(residual[offset + j]);
        float out[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) out[j] = finish_output(p, fmaf(v[j], scale[j], bias[j]), r[j]);
        if (vec) {
          store_vec<8>(y + offset, out);
        } else {
#pragma unroll
          for (int j = 0; j < 8; ++j) y[offset + j] = __float2half_rn(out[j]);
        }
      }
    }
  }
}

}  // namespace

bool conv2d_stem_can_implement(const Conv2dParams& p, const CudaContext& ctx, std::string* why) {
  const char* unmet = nullptr;
  if (ctx.sm_version < 80) unmet = "needs an sm_80 or newer GPU (mma.sync)";
  else if (p.c_in > kMaxCin) unmet = "c_in must be at most 3";
  else if (p.kh != 3 || p.kw != 3 || p.stride != 1) unmet = "needs a 3x3 kernel with stride 1";
  else if (p.c_out % 8 != 0) unmet = "c_out must be a multiple of 8";
  else if (p.gn_stats) unmet = "no GroupNorm prologue";
  if (unmet && why) *why = unmet;
  return unmet == nullptr;
}

void conv2d_stem(const Conv2dParams& p, const CudaContext& ctx) {
  check_params(p, "conv2d");
  std::string why;
  if (!conv2d_stem_can_implement(p, ctx, &why)) fail("conv2d: the stem kernel can't run: ", why);
  const NvtxRange range("conv2d stem");
  const dim3 grid((p.w_out + kCols - 1) / kCols, (p.h_out + kRows - 1) / kRows, p.n);
  launch_kernel("conv2d_stem", conv2d_stem_kernel, grid, kThreads, 0, ctx.stream, p);
}

}  // namespace rtvd
