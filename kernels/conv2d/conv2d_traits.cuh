// conv2d's implicit-GEMM tile configurations and index math (conv2d.cu), and the per-element epilogue and
// GroupNorm math that conv2d.cu and conv2d_cudnn.cu share, so both compute exactly conv2d.h's function.
#pragma once
#include <cuda_fp16.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/conv2d/conv2d.cuh"
#include "kernels/common/device_math.cuh"
#include "kernels/common/vector_io.cuh"

namespace rtvd::conv2d_detail {

// The conv as a GEMM: y (m, n) = A (m, k) B (n, k)^T with A the im2col of pre(x) and B the OHWI weight.
struct GemmShape {
  int m = 0;       // n * h_out * w_out output pixels
  int n = 0;       // c_out
  int k = 0;       // kh * kw * c_in, ordered (r, s, c) like a weight row
  int hw_out = 0;  // output pixels per image
};

// Throws rtvd::Error "<op>: <unmet requirement>" for params no conv2d implementation can run (defined
// in conv2d.cu): null pointers, non-positive sizes, h_out/w_out not matching, bad GroupNorm groups.
void check_params(const Conv2dParams& p, const char* op);

// y = epilogue(the sum over s < split_k of partials[s] (pixels, partial_pitch) fp32, in split order): the
// split-K reduction of conv2d.cu's kernels and conv2d_sm90.cu's (defined in conv2d.cu). partial_pitch is
// c_out rounded up to 8.
void splitk_reduce(const Conv2dParams& p, const float* partials, int split_k, int partial_pitch, const CudaContext& ctx);

inline GemmShape gemm_shape(const Conv2dParams& p) {
  return {p.n * p.h_out * p.w_out, p.c_out, p.kh * p.kw * p.c_in, p.h_out * p.w_out};
}

// Block tile kBM x kBN x 32 (a shared-memory tile row is 32 halfs = 64 bytes = 4 chunks of 16 bytes),
// kWarpsM x kWarpsN warps each owning a (kBM / kWarpsM) x (kBN / kWarpsN) tile of m16n8 accumulators,
// a kStages-deep cp.async ring. Every thread copies one fixed 16-byte column (chunk) of every
// kRowStep-th tile row, so its filter-tap bookkeeping is the same for all rows it loads.
template <int kBM_, int kBN_, int kWarpsM_, int kWarpsN_, int kStages_, int kMinBlocksPerSm_>
struct IgemmTraits {
  static constexpr int kBM = kBM_, kBN = kBN_, kBK = 32;
  static constexpr int kWarpsM = kWarpsM_, kWarpsN = kWarpsN_;
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int kStages = kStages_;
  static constexpr int kMinBlocksPerSm = kMinBlocksPerSm_;

  static constexpr int kWarpM = kBM / kWarpsM, kWarpN = kBN / kWarpsN;
  static constexpr int kMFrags = kWarpM / 16;  // m16 tiles per warp
  static constexpr int kNFrags = kWarpN / 8;   // n8 tiles per warp; odd counts load the last with ldmatrix.x2
  static constexpr int kKSteps = kBK / 16;     // mma k16 steps per k-tile

  static constexpr int kRowBytes = kBK * 2;
  static constexpr int kChunksPerRow = kBK / 8;
  static constexpr int kRowStep = kThreads / kChunksPerRow;  // tile rows between one thread's loads
  static constexpr int kALoads = kBM / kRowStep;
  static constexpr int kBLoads = (kBN + kRowStep - 1) / kRowStep;  // the last may be partial (kBN 160)
  static constexpr int kATileBytes = kBM * kRowBytes;
  static constexpr int kStageBytes = (kBM + kBN) * kRowBytes;
  static constexpr int kPipeBytes = kStages * kStageBytes;
  // Epilogue staging of the fp32 tile, reusing the ring. A pitch of 8 (mod 32) floats puts the float2
  // fragment stores of a half-warp (4 rows x 4 column pairs) on 32 distinct banks.
  static constexpr int kCPitch = kBN + 8;
  static constexpr int kCBytes = kBM * kCPitch * 4;

  static_assert(kWarpM % 16 == 0 && kWarpN % 8 == 0, "warp tile: whole m16n8 fragments");
  static_assert(kRowStep % 8 == 0, "tile_offset's swizzle repeats every 8 rows: one offset per thread");
  static_assert(kBM % kRowStep == 0, "A rows split evenly over the threads");
  static_assert(kStages >= 2, "the ring needs a stage to fill while one is read");
  static_assert(kCPitch % 32 == 8, "conflict-free fragment stores");
  static_assert(kPipeBytes <= 99 * 1024 && kCBytes <= 99 * 1024, "must fit sm_86/sm_89 (99 KiB per block)");
};

// The configurations of Conv2dKernel. 128 x 160 exists for SD's c_out of 320/640/1280 (whole tiles, and
// 128 of them fill 132 SMs at 64x64 x 320); 128 x 128 is capped at 128 registers so that two blocks share
// an SM; 64 x 64 for small GEMMs, where more blocks beat reuse.
using Igemm64x64 = IgemmTraits<64, 64, 2, 2, 4, 3>;
using Igemm128x128 = IgemmTraits<128, 128, 2, 4, 4, 2>;
using Igemm128x160 = IgemmTraits<128, 160, 2, 4, 4, 1>;

// Images that kBM consecutive output rows starting at a multiple of kBM can touch: the GroupNorm table
// holds c_in folded (scale, shift) pairs per image.
inline int gn_images_per_tile(int bm, int hw_out, int n) {
  const int images = hw_out % bm == 0 ? 1 : bm % hw_out == 0 ? bm / hw_out : (bm - 2) / hw_out + 2;
  return std::min(n, images);
}

template <class T>
size_t igemm_smem_bytes(const Conv2dParams& p) {
  const size_t table = p.gn_stats ? sizeof(float) * 2 * p.c_in * gn_images_per_tile(T::kBM, p.h_out * p.w_out, p.n) : 0;
  return std::max<size_t>(T::kPipeBytes + table, T::kCBytes);
}

// Byte offset of 16-byte chunk `chunk` (0..3) of tile row `row`. Two 64-byte rows share one 128-byte bank
// line; XOR-ing the chunk with (row / 2) % 4 puts the 8 rows of one ldmatrix phase (consecutive rows,
// same chunk) in 8 different 16-byte bank groups. Invariant under row += 8.
RTVD_HD int tile_offset(int row, int chunk) { return row * 64 + ((chunk ^ ((row >> 1) & 3)) << 4); }

// ldmatrix.x4 lanes for an m16 x k16 A fragment at k16 step kk: lanes 0-15 address rows 0-15 of the low
// k8 half, lanes 16-31 of the high half, so the four registers are mma's a0..a3.
RTVD_HD int a_frag_row(int lane) { return lane & 15; }
RTVD_HD int a_frag_chunk(int lane, int kk) { return 2 * kk + (lane >> 4); }
// ldmatrix.x4 lanes for two n8 x k16 B fragments (n rows, k contiguous): lanes 0-7 rows 0-7 low k8,
// 8-15 rows 0-7 high k8, 16-31 the same for rows 8-15: registers b0, b1 of the first, b0, b1 of the second.
// ldmatrix.x2 uses lanes 0-15 only: b0, b1 of one fragment.
RTVD_HD int b_frag_row(int lane) { return (lane & 7) + ((lane >> 4) << 3); }
RTVD_HD int b_frag_chunk(int lane, int kk) { return 2 * kk + ((lane >> 3) & 1); }
// Row and column of accumulator element e (0..3) of an m16n8 tile, for one lane.
RTVD_HD int acc_row(int lane, int e) { return (lane >> 2) + ((e >> 1) << 3); }
RTVD_HD int acc_col(int lane, int e) { return ((lane & 3) << 1) + (e & 1); }

// Output pixel m's image and the input coordinates of its filter's top-left tap (may be in the padding).
struct RowOrigin {
  int img, ih0, iw0;
};
RTVD_HD RowOrigin row_origin(const Conv2dParams& p, int hw_out, int m) {
  const int img = m / hw_out, rem = m - img * hw_out;
  const int ho = rem / p.w_out, wo = rem - ho * p.w_out;
  return {img, ho * p.stride - p.pad, wo * p.stride - p.pad};
}

// Filter tap (r, s) and channel c of a K index, advanced a tile at a time without divisions.
// r >= kh means past the end of K.
struct TapCursor {
  int r = 0, s = 0, c = 0;
  RTVD_HD void seek(int k, int c_in, int kw) {
    const int tap = k / c_in;
    c = k - tap * c_in;
    r = tap / kw;
    s = tap - r * kw;
  }
  RTVD_HD void advance(int step, int c_in, int kw) {
    for (c += step; c >= c_in; c -= c_in)
      if (++s == kw) s = 0, ++r;
  }
};

// ---- per-element math shared by conv2d.cu and conv2d_cudnn.cu ----

// GroupNorm+SiLU folded per (image, channel): pre(x) = silu(x * f.x + f.y), f.x = rstd gamma,
// f.y = beta - mean rstd gamma.
__device__ __forceinline__ float2 gn_fold(const Conv2dParams& p, int img, int c) {
  const int group = c / (p.c_in / p.gn_groups);
  const float* stats = p.gn_stats + 2 * (int64_t(img) * p.gn_groups + group);
  const float a = __ldg(stats + 1) * __ldg(p.gn_gamma + c);
  return make_float2(a, __ldg(p.gn_beta + c) - __ldg(stats) * a);
}

// The rest of conv2d.h's epilogue after scale and bias, in fp32: act(a) + residual, or act(a + residual) with
// act_after_residual (residual 0 without one).
__device__ __forceinline__ float finish_output(const Conv2dParams& p, float a, float residual) {
  if (p.act_after_residual) a += residual;
  if (p.act == Activation::Silu) a = fast_silu(a);
  else if (p.act == Activation::Relu) a = fmaxf(a, 0.0f);
  return p.act_after_residual ? a : a + residual;
}

// y's value from the accumulator and the residual (0 without one), in fp32: conv2d.h's epilogue,
// act(acc * scale[img, c] + bias[img, c]) + residual, or act(... + residual) with act_after_residual.
__device__ __forceinline__ float output_value(const Conv2dParams& p, int img, int c, float acc, float residual) {
  if (p.scale) acc *= __ldg(p.scale + int64_t(img) * p.scale_batch_stride + c);
  if (p.bias) acc += __ldg(p.bias + int64_t(img) * p.bias_batch_stride + c);
  return finish_output(p, acc, residual);
}

// y[m, c + j] = output_value(acc[j], residual[m, c + j]) for j < count (<= 8), rounded once to fp16.
// vec: 16-byte residual loads and y stores (c_out % 8 == 0, y and residual 16-byte aligned, count == 8).
// The residual is read before y is written by the same thread: residual may alias y.
__device__ __forceinline__ void store_outputs8(const Conv2dParams& p, int hw_out, int m, int c, int count,
                                               const float (&acc)[8], bool vec) {
  const int img = m / hw_out;
  const int64_t offset = int64_t(m) * p.c_out + c;
  const __half* residual = p.residual ? static_cast<const __half*>(p.residual) + offset : nullptr;
  auto* y = static_cast<__half*>(p.y) + offset;
  if (vec) {
    float r[8] = {};
    if (residual) load_vec<8>(residual, r);
    uint4 out;
    auto* o2 = reinterpret_cast<__half2*>(&out);
#pragma unroll
    for (int j = 0; j < 4; ++j)
      o2[j] = __floats2half2_rn(output_value(p, img, c + 2 * j, acc[2 * j], r[2 * j]),
                                output_value(p, img, c + 2 * j + 1, acc[2 * j + 1], r[2 * j + 1]));
    *reinterpret_cast<uint4*>(y) = out;
    return;
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    if (j < count) {
      const float r = residual ? __half2float(residual[j]) : 0.0f;
      y[j] = __float2half_rn(output_value(p, img, c + j, acc[j], r));
    }
  }
}

}  // namespace rtvd::conv2d_detail
