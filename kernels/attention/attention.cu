// Flash attention, FlashAttention-2 scheme on mma.sync (sm_80+). One block per (query tile, head, image).
// Each warp owns 16 or 32 query rows and keeps them in registers as mma A fragments. K/V tiles stream
// through a cp.async ring in shared memory; per tile the warp computes S = Q K^T (m16n8k16, fp32
// accumulators), updates a running row max and row sum (online softmax, exp2 with log2(e) folded into the
// scale), turns the S accumulators into fp16 A fragments in place (the C layout of two n8 tiles is the A
// layout of one k16 step) and accumulates O += P V with V read by ldmatrix.trans. O is normalised once at
// the end. The score matrix never leaves registers.
//
// Tile shapes (attention_traits.cuh). Up to head dim 64 a warp takes 32 rows, so each K/V fragment read
// from shared memory feeds two mma (half the ldmatrix traffic of 16-row warps); key tiles of 32 or 64 keep
// O, S and Q within 168 registers so that 12 warps share an SM. Blocks are 4 warps (128 rows: each K/V tile
// fetched from L2 serves 128 queries; SD2.1 64x64 = 320 blocks, one wave at 3 per SM on 132 SMs) or, when
// that grid would leave SMs with one block (32x32: 160 blocks), 2 warps (64 rows). Past head dim 64, O
// alone takes head_dim / 2 registers per 16-row tile: 16 rows per warp, 4 warps.
// Shapes the kernel takes: any q_len and kv_len (tail rows zero-filled; keys past kv_len masked to -inf
// on the last tile), head_dim any multiple of 8 up to 160 (padded to the instance's; pad columns
// zero-filled on load and never stored).
// Causal: a block stops at the key tile holding its last query's key (the tiles after it are all masked
// for its rows), and masks keys after each row's query to -inf on the tiles that reach past a warp's first
// row.
#include "kernels/attention/attention.cuh"

#include <cstdint>

#include "kernels/attention/attention_softmax.cuh"
#include "kernels/attention/attention_traits.cuh"
#include "kernels/common/alignment.h"
#include "kernels/common/device_math.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/nvtx_range.h"
#include "kernels/common/sm80_ptx.cuh"

namespace rtvd {
namespace {

using attention_detail::AttentionConfig;
using attention_detail::kLog2e;
using attention_detail::mask_causal;
using attention_detail::mask_keys;
using attention_detail::online_softmax;
using attention_detail::pack_half2;
using attention_detail::padded_head_dim;
using namespace sm80;  // cp.async, ldmatrix, mma.sync (kernels/common/sm80_ptx.cuh)

// ---- tile steps ----

// Rows [row0, row0 + kRows) of one head -> a (kRows, kRowPitch) shared tile; rows past len and columns
// past head_dim become zeros (finite, so that masked keys and pad columns contribute exactly 0).
template <class T, int kRows>
__device__ __forceinline__ void load_tile(uint32_t dst, const __half* src, int row0, int len, int stride,
                                          int head_dim) {
  constexpr int kChunks = kRows * T::kChunksPerRow;
#pragma unroll
  for (int i = 0; i < (kChunks + T::kThreads - 1) / T::kThreads; ++i) {
    const int c = i * T::kThreads + int(threadIdx.x);
    if (kChunks % T::kThreads == 0 || c < kChunks) {
      const int r = c / T::kChunksPerRow, col = (c % T::kChunksPerRow) * 8;
      const bool valid = row0 + r < len && col < head_dim;
      const __half* g = valid ? src + int64_t(row0 + r) * stride + col : src;
      cp_async_16(dst + 2 * (r * T::kRowPitch + col), g, valid);
    }
  }
}

// The warp's query rows as A fragments: q[mt][kk] is rows mt*16.., dims kk*16.. of the warp's slice.
template <class T>
__device__ __forceinline__ void load_q_fragments(uint32_t (&q)[T::kMTiles][T::kKSteps][4], uint32_t q_warp,
                                                 int lane) {
  // ldmatrix x4 of a 16x16 A block: lanes 0-15 address rows 0-15 at dim 0, lanes 16-31 the same rows at dim 8.
  const uint32_t lane_addr = q_warp + 2 * ((lane % 16) * T::kRowPitch + (lane / 16) * 8);
#pragma unroll
  for (int mt = 0; mt < T::kMTiles; ++mt)
#pragma unroll
    for (int kk = 0; kk < T::kKSteps; ++kk)
      ldmatrix_x4(q[mt][kk], lane_addr + 2 * (mt * 16 * T::kRowPitch + kk * 16));
}

// s = Q K^T for one K tile: s[mt][n] is the C fragment of rows mt*16.., keys n*8...
template <class T>
__device__ __forceinline__ void compute_scores(float (&s)[T::kMTiles][T::kNTiles][4],
                                               const uint32_t (&q)[T::kMTiles][T::kKSteps][4], uint32_t k_tile,
                                               int lane) {
  // K rows are B's columns. One x4 load = keys np*16 + [0,8) and [8,16), each at dims kk*16 + [0,8), [8,16):
  // lane -> key (lane % 8) + (lane / 16) * 8, dim ((lane / 8) % 2) * 8.
  const uint32_t lane_addr = k_tile + 2 * ((lane % 8 + (lane / 16) * 8) * T::kRowPitch + ((lane / 8) % 2) * 8);
#pragma unroll
  for (int mt = 0; mt < T::kMTiles; ++mt)
#pragma unroll
    for (int n = 0; n < T::kNTiles; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) s[mt][n][i] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < T::kKSteps; ++kk) {
#pragma unroll
    for (int np = 0; np < T::kNTiles / 2; ++np) {
      uint32_t b[4];
      ldmatrix_x4(b, lane_addr + 2 * (np * 16 * T::kRowPitch + kk * 16));
#pragma unroll
      for (int mt = 0; mt < T::kMTiles; ++mt) {
        mma_16816(s[mt][2 * np], q[mt][kk], b[0], b[1]);
        mma_16816(s[mt][2 * np + 1], q[mt][kk], b[2], b[3]);
      }
    }
  }
}

// o += P V for one V tile, P taken from the probability accumulators as fp16 A fragments.
template <class T>
__device__ __forceinline__ void accumulate_pv(float (&o)[T::kMTiles][T::kDTiles][4],
                                              const float (&p)[T::kMTiles][T::kNTiles][4], uint32_t v_tile,
                                              int lane) {
  // V rows (keys) are B's k dimension: ldmatrix.trans, keys kp*16 + lane % 16, dims dp*16 + (lane / 16) * 8,
  // gives b0b1/b2b3 of O's n8 tile 2*dp, then of 2*dp + 1.
  const uint32_t lane_addr = v_tile + 2 * ((lane % 16) * T::kRowPitch + (lane / 16) * 8);
#pragma unroll
  for (int kp = 0; kp < T::kNTiles / 2; ++kp) {
    uint32_t a[T::kMTiles][4];
#pragma unroll
    for (int mt = 0; mt < T::kMTiles; ++mt) {
      a[mt][0] = pack_half2(p[mt][2 * kp][0], p[mt][2 * kp][1]);          // row g,     keys 2t, 2t+1
      a[mt][1] = pack_half2(p[mt][2 * kp][2], p[mt][2 * kp][3]);          // row g + 8, keys 2t, 2t+1
      a[mt][2] = pack_half2(p[mt][2 * kp + 1][0], p[mt][2 * kp + 1][1]);  // row g,     keys 8 + 2t..
      a[mt][3] = pack_half2(p[mt][2 * kp + 1][2], p[mt][2 * kp + 1][3]);  // row g + 8, keys 8 + 2t..
    }
#pragma unroll
    for (int dp = 0; dp < T::kKSteps; ++dp) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, lane_addr + 2 * (kp * 16 * T::kRowPitch + dp * 16));
#pragma unroll
      for (int mt = 0; mt < T::kMTiles; ++mt) {
        mma_16816(o[mt][2 * dp], a[mt], b[0], b[1]);
        mma_16816(o[mt][2 * dp + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// ---- kernel ----

// grid (ceil(q_len / kBlockM), heads, batch), kThreads threads, kSmemBytes of dynamic shared memory.
template <class T>
__global__ void __launch_bounds__(T::kThreads, T::kMinBlocksPerSm)
    flash_attention_kernel(const __grid_constant__ AttentionParams p) {
  start_after_prior_kernels();
  extern __shared__ __align__(16) unsigned char smem[];
  const uint32_t q_smem = smem_address(smem);                           // (kBlockM, kRowPitch)
  const uint32_t k_smem = q_smem + 2 * T::kQTileHalfs;                  // kStages x (kBlockN, kRowPitch)
  const uint32_t v_smem = k_smem + 2 * T::kStages * T::kKVTileHalfs;    // kStages x (kBlockN, kRowPitch)
  constexpr uint32_t kStageBytes = 2 * T::kKVTileHalfs;

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int q0 = blockIdx.x * T::kBlockM, head = blockIdx.y, image = blockIdx.z;
  const int64_t column = int64_t(head) * p.head_dim;
  // This image and head: q (q_len, head_dim), k and v (kv_len, head_dim), rows q_stride/k_stride/v_stride apart.
  const auto* q = static_cast<const __half*>(p.q) + int64_t(image) * p.q_len * p.q_stride + column;
  const auto* k = static_cast<const __half*>(p.k) + int64_t(image) * p.kv_len * p.k_stride + column;
  const auto* v = static_cast<const __half*>(p.v) + int64_t(image) * p.kv_len * p.v_stride + column;
  // Causal: the tiles up to the one holding key q0 + kBlockM - 1 (q_len == kv_len, so at least one).
  const int n_tiles = p.causal ? (min(p.kv_len, q0 + T::kBlockM) + T::kBlockN - 1) / T::kBlockN
                               : (p.kv_len + T::kBlockN - 1) / T::kBlockN;
  const int warp_row0 = q0 + warp * T::kWarpRows;  // the warp's first query

  auto load_kv = [&](int tile) {
    const uint32_t offset = (tile % T::kStages) * kStageBytes;
    load_tile<T, T::kBlockN>(k_smem + offset, k, tile * T::kBlockN, p.kv_len, p.k_stride, p.head_dim);
    load_tile<T, T::kBlockN>(v_smem + offset, v, tile * T::kBlockN, p.kv_len, p.v_stride, p.head_dim);
  };

  // Prologue: group 0 = Q + tile 0, then one group per tile up to kStages - 2 (empty groups keep the count).
  load_tile<T, T::kBlockM>(q_smem, q, q0, p.q_len, p.q_stride, p.head_dim);
  load_kv(0);
  cp_async_commit();
#pragma unroll
  for (int t = 1; t < T::kStages - 1; ++t) {
    if (t < n_tiles) load_kv(t);
    cp_async_commit();
  }

  uint32_t q_frag[T::kMTiles][T::kKSteps][4];
  float o[T::kMTiles][T::kDTiles][4];
  float row_max[T::kMTiles][2], row_sum[T::kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < T::kMTiles; ++mt) {
#pragma unroll
    for (int d = 0; d < T::kDTiles; ++d)
#pragma unroll
      for (int i = 0; i < 4; ++i) o[mt][d][i] = 0.0f;
    row_max[mt][0] = row_max[mt][1] = -INFINITY;
    row_sum[mt][0] = row_sum[mt][1] = 0.0f;
  }
  const float scale_log2 = p.scale * kLog2e;

  for (int j = 0; j < n_tiles; ++j) {
    cp_async_wait<T::kStages - 2>();  // this thread's copies of tile j (and Q) have landed
    __syncthreads();                  // everyone's have, and every warp is done with tile j - 1
    if (j == 0) load_q_fragments<T>(q_frag, q_smem + 2 * warp * T::kWarpRows * T::kRowPitch, lane);
    // Refill the stage tile j - 1 used.
    if (j + T::kStages - 1 < n_tiles) load_kv(j + T::kStages - 1);
    cp_async_commit();

    const uint32_t stage = (j % T::kStages) * kStageBytes;
    float s[T::kMTiles][T::kNTiles][4];
    compute_scores<T>(s, q_frag, k_smem + stage, lane);
    if ((j + 1) * T::kBlockN > p.kv_len) mask_keys<T>(s, p.kv_len - j * T::kBlockN, lane);
    if (p.causal && (j + 1) * T::kBlockN - 1 > warp_row0) mask_causal<T>(s, j * T::kBlockN - warp_row0, lane);
    online_softmax<T>(s, o, row_max, row_sum, scale_log2);
    accumulate_pv<T>(o, s, v_smem + stage, lane);
  }

  // Normalise and store: lane holds columns d*8 + (lane%4)*2, +1 of rows lane/4 and lane/4 + 8.
  auto* out = static_cast<__half*>(p.o) + int64_t(image) * p.q_len * p.o_stride + column;  // (q_len, head_dim)
#pragma unroll
  for (int mt = 0; mt < T::kMTiles; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float sum = row_sum[mt][half];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const float inv = 1.0f / sum;
      const int row = q0 + warp * T::kWarpRows + mt * 16 + half * 8 + lane / 4;
      if (row >= p.q_len) continue;
      __half* dst = out + int64_t(row) * p.o_stride;
#pragma unroll
      for (int d = 0; d < T::kDTiles; ++d) {
        const int col = d * 8 + (lane % 4) * 2;
        if (col < p.head_dim)
          *reinterpret_cast<__half2*>(dst + col) =
              __floats2half2_rn(o[mt][d][2 * half] * inv, o[mt][d][2 * half + 1] * inv);
      }
    }
  }
}

// ---- launcher ----

template <class T>
void launch_instance(const AttentionParams& p, const CudaContext& ctx) {
  const auto kernel = flash_attention_kernel<T>;
  if (T::kSmemBytes > 48 * 1024)
    RTVD_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes));
  const dim3 grid((p.q_len + T::kBlockM - 1) / T::kBlockM, p.heads, p.batch);
  launch_kernel("attention", kernel, grid, T::kThreads, T::kSmemBytes, ctx.stream, p);
}

// Wide blocks while they give every SM at least two; otherwise Narrow ones, twice as many.
template <int kPaddedHeadDim>
void launch(const AttentionParams& p, const CudaContext& ctx) {
  using Wide = typename AttentionConfig<kPaddedHeadDim>::Wide;
  using Narrow = typename AttentionConfig<kPaddedHeadDim>::Narrow;
  const int64_t wide_blocks = int64_t((p.q_len + Wide::kBlockM - 1) / Wide::kBlockM) * p.heads * p.batch;
  if (wide_blocks >= 2 * int64_t(ctx.sm_count)) return launch_instance<Wide>(p, ctx);
  launch_instance<Narrow>(p, ctx);
}

// The named fallback for what the flash kernel can't load (head dims that are not a multiple of 8, e.g.
// the tiny test models; unaligned layouts): one block per (query, head, image), scores in shared memory,
// fp32 throughout. Slow, simple and exact enough to be trusted. Causal: query t reads keys 0..t alone.
constexpr int kFallbackThreads = 128;
constexpr int kFallbackMaxKeys = 12288;  // 48 KiB of fp32 scores

__global__ void __launch_bounds__(kFallbackThreads) attention_fallback_kernel(const AttentionParams p) {
  start_after_prior_kernels();
  extern __shared__ float scores[];  // (kv_len)
  __shared__ float scratch[kFallbackThreads / 32];
  const int t = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const __half* q = static_cast<const __half*>(p.q) + (int64_t(b) * p.q_len + t) * p.q_stride + h * p.head_dim;
  const __half* k = static_cast<const __half*>(p.k) + int64_t(b) * p.kv_len * p.k_stride + h * p.head_dim;
  const __half* v = static_cast<const __half*>(p.v) + int64_t(b) * p.kv_len * p.v_stride + h * p.head_dim;
  __half* o = static_cast<__half*>(p.o) + (int64_t(b) * p.q_len + t) * p.o_stride + h * p.head_dim;
  const int keys = p.causal ? t + 1 : p.kv_len;  // causal: q_len == kv_len, so t < kv_len
  float local_max = -INFINITY;
  for (int j = threadIdx.x; j < keys; j += kFallbackThreads) {
    float dot = 0.0f;
    for (int d = 0; d < p.head_dim; ++d) dot += __half2float(q[d]) * __half2float(k[int64_t(j) * p.k_stride + d]);
    scores[j] = dot * p.scale;
    local_max = fmaxf(local_max, scores[j]);
  }
  const float row_max = block_reduce<kFallbackThreads / 32>(local_max, true, scratch);
  float local_sum = 0.0f;
  for (int j = threadIdx.x; j < keys; j += kFallbackThreads) {
    scores[j] = expf(scores[j] - row_max);
    local_sum += scores[j];
  }
  // block_reduce's barriers publish scores[].
  const float inv_sum = 1.0f / block_reduce<kFallbackThreads / 32>(local_sum, false, scratch);
  for (int d = threadIdx.x; d < p.head_dim; d += kFallbackThreads) {
    float acc = 0.0f;
    for (int j = 0; j < keys; ++j) acc += scores[j] * __half2float(v[int64_t(j) * p.v_stride + d]);
    o[d] = __float2half_rn(acc * inv_sum);
  }
}

bool fallback_ok(const AttentionParams& p) {
  return p.q && p.k && p.v && p.o && p.batch > 0 && p.heads > 0 && p.head_dim > 0 && p.q_len > 0 && p.kv_len > 0 &&
         p.batch <= 65535 && p.heads <= 65535 && p.kv_len <= kFallbackMaxKeys && std::isfinite(p.scale) &&
         attention_causal_ok(p) &&
         p.q_stride >= p.heads * p.head_dim && p.k_stride >= p.heads * p.head_dim &&
         p.v_stride >= p.heads * p.head_dim && p.o_stride >= p.heads * p.head_dim;
}

}  // namespace

bool attention_can_implement(const AttentionParams& p, std::string* why) {
  const char* unmet = nullptr;
  if (!p.q || !p.k || !p.v || !p.o) unmet = "q, k, v and o must be set";
  else if (p.batch <= 0 || p.heads <= 0 || p.q_len <= 0 || p.kv_len <= 0)
    unmet = "batch, heads, q_len, kv_len must be positive";
  else if (p.batch > 65535 || p.heads > 65535) unmet = "batch and heads must be at most 65535 (grid y/z)";
  else if (!attention_causal_ok(p)) unmet = kAttentionCausalUnmet;
  else if (padded_head_dim(p.head_dim) == 0) unmet = "head_dim must be a multiple of 8 in [8, 160]";
  else if (!(p.scale > 0.0f) || !std::isfinite(p.scale)) unmet = "scale must be positive and finite";
  else if (!aligned(p.q, 16) || !aligned(p.k, 16) || !aligned(p.v, 16)) unmet = "q, k, v must be 16-byte aligned";
  else if (p.q_stride % 8 || p.k_stride % 8 || p.v_stride % 8) unmet = "q, k, v strides must be multiples of 8";
  else if (!aligned(p.o, 4) || p.o_stride % 2) unmet = "o must be 4-byte aligned with an even stride";
  else if (p.q_stride < p.heads * p.head_dim || p.k_stride < p.heads * p.head_dim ||
           p.v_stride < p.heads * p.head_dim || p.o_stride < p.heads * p.head_dim)
    unmet = "strides must be at least heads * head_dim";
  if (unmet && why) *why = unmet;
  return unmet == nullptr;
}

void attention_fallback(const AttentionParams& p, const CudaContext& ctx) {
  if (!fallback_ok(p))
    fail("attention fallback: needs positive sizes, set pointers, strides >= heads * head_dim, kv_len <= ",
         kFallbackMaxKeys, " and q_len == kv_len if causal (batch ", p.batch, ", heads ", p.heads, ", head_dim ",
         p.head_dim, ", q_len ", p.q_len, ", kv_len ", p.kv_len, ")");
  const NvtxRange range("attention_fallback");
  // scores[] rounded up to 4 floats: the compiler reads the P V loop's scores 3 at a time (LDS.96), past
  // kv_len when kv_len % 4 != 0 (compute-sanitizer's memcheck flagged kv_len 1).
  const size_t scores_bytes = size_t(p.kv_len + 3) / 4 * 4 * sizeof(float);
  launch_kernel("attention_fallback", attention_fallback_kernel, dim3(p.q_len, p.heads, p.batch), kFallbackThreads,
                scores_bytes, ctx.stream, p);
}

bool attention_fallback_can_implement(const AttentionParams& p, std::string* why) {
  if (fallback_ok(p)) return true;
  if (why)
    *why = !attention_causal_ok(p)
               ? std::string(kAttentionCausalUnmet)
               : cat("needs positive sizes, set pointers, strides >= heads * head_dim and kv_len <= ", kFallbackMaxKeys);
  return false;
}

void attention_mma(const AttentionParams& p, const CudaContext& ctx) {
  std::string why;
  if (!attention_can_implement(p, &why))
    fail("attention: ", why, " (batch ", p.batch, ", heads ", p.heads, ", head_dim ", p.head_dim, ", q_len ",
         p.q_len, ", kv_len ", p.kv_len, ")");
  const NvtxRange range("attention");
  switch (padded_head_dim(p.head_dim)) {
    case 32: return launch<32>(p, ctx);
    case 48: return launch<48>(p, ctx);
    case 64: return launch<64>(p, ctx);
    case 80: return launch<80>(p, ctx);
    case 96: return launch<96>(p, ctx);
    case 128: return launch<128>(p, ctx);
    case 160: return launch<160>(p, ctx);
  }
  fail("attention: no kernel instance for head_dim ", p.head_dim);
}

}  // namespace rtvd
