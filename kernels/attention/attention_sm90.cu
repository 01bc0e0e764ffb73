// Flash attention on Hopper (sm_90a), head dim 64: attention.cu's FlashAttention-2 loop on wgmma and TMA,
// scheduled the way FlashAttention-3 does it for small head dims.
// One block per (192 query rows, head, image): three consumer warpgroups of 64 rows and a producer
// warpgroup. The producer's first lane moves Q once and every K/V tile (128 keys) by TMA into a ring of
// shared-memory stages, each K and each V tile signalled on its own mbarrier with the bytes it expects;
// consumers release K_j once S_j is computed and V_j once P_j V_j is, on two more mbarriers per stage.
// setmaxnreg moves the producer's registers to the consumers, whose S (64), P (32) and O (32) accumulators
// must be live at once. Per tile j a consumer issues S_j = Q K_j^T (wgmma, both operands from shared
// memory) and P_{j-1} V_{j-1} (P in registers, V read transposed) back to back, waits for S_j only, and runs
// the online softmax of attention_softmax.cuh on it while P V runs (the wgmma accumulator is the mma.sync C
// fragment per warp of 16 rows, so the softmax and the P-to-A-fragment conversion are shared); the other
// two warpgroups' products fill the tensor cores meanwhile. O is rescaled after P V lands.
// Why these choices, measured on an H100 at 4096 keys (docs/perf-notes.md): the producer warpgroup with
// setmaxnreg against a producer warp (which caps consumers at 128 registers, too few for the overlap)
// 0.116 against 0.123 ms; three warpgroups against two 0.116 against 0.130 ms; turn-taking between
// warpgroups (FlashAttention-3's ping-pong) and a consumer thread issuing the copies were slower.
//
// Shared layout: TMA writes tiles of 64 fp16 (128-byte rows) with the 128-byte swizzle, which is wgmma's
// canonical K-major layout for Q and K (8-row groups 1024 bytes apart; a k16 step is 32 bytes along the
// row) and its N-major layout for V read transposed (a k16 step is 16 rows, 2048 bytes).
// Shapes: any q_len and kv_len (TMA zero-fills rows past the end; keys past kv_len are masked on the last
// tile). Causal: the producer and the consumers stop at the key tile holding the block's last query's key
// (both count the same tiles, so the barriers' phases agree), and keys after each row's query are masked on
// the tiles that reach past a warp's first row.
#include "kernels/attention/attention_sm90.cuh"

#include <cstdint>
#include <string>

#include "kernels/attention/attention.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/nvtx_range.h"
#if RTVD_HAS_SM90A
#include "kernels/attention/attention_softmax.cuh"
#include "kernels/common/sm90_ptx.cuh"
#include "kernels/common/tensor_map.cuh"
#endif

namespace rtvd {
namespace {

constexpr int kHeadDim = 64;

#if RTVD_HAS_SM90A  // this file is then compiled for sm_90a alone (kernels/CMakeLists.txt)

constexpr int kRowBytes = kHeadDim * 2;  // one 128-byte swizzle row per token
using namespace sm90;
using attention_detail::kLog2e;
using attention_detail::mask_causal;
using attention_detail::mask_keys;
using attention_detail::pack_half2;
using attention_detail::rescale_rows;
using attention_detail::softmax_update;

template <int Consumers>
struct Sm90Tile {
  static constexpr int kConsumers = Consumers;     // warpgroups of 64 query rows
  static constexpr int kBlockM = 64 * kConsumers;  // query rows per block
  static constexpr int kBlockN = 128;              // keys per K/V tile
  static constexpr int kStages = 3;                // K/V tiles in flight
  static constexpr int kThreads = 128 * (kConsumers + 1);  // + the producer warpgroup
  static constexpr int kMTiles = 1, kNTiles = kBlockN / 8, kDTiles = kHeadDim / 8;  // attention_softmax.cuh
  static constexpr int kQBytes = kBlockM * kRowBytes;
  static constexpr int kKVBytes = kBlockN * kRowBytes;
  static constexpr int kBarrierBytes = 8 * (1 + 4 * kStages);  // Q full; K, V full and K, V empty per stage
  static constexpr int kSmemBytes = 1024 + kQBytes + 2 * kStages * kKVBytes + kBarrierBytes;  // + 1024: alignment
  static_assert(kSmemBytes <= 227 * 1024, "shared memory per block");
};

// ---- kernel ----

// S = Q K^T for the warpgroup's 64 rows against one K tile (head_dim 64 = 4 k16 steps of 32 bytes).
template <class T>
__device__ __forceinline__ void compute_scores(float (&s)[T::kNTiles][4], uint32_t q_rows, uint32_t k_tile) {
  const uint64_t q_desc = smem_descriptor(q_rows), k_desc = smem_descriptor(k_tile);
  static_assert(T::kBlockN == 128, "the wgmma n of S");
  wgmma_ss<128>(s, q_desc, k_desc, Overwrite{});
#pragma unroll
  for (int kk = 1; kk < kHeadDim / 16; ++kk) wgmma_ss<128>(s, q_desc + 2 * kk, k_desc + 2 * kk);
}

// P's k16 steps as wgmma A fragments, from the probability accumulators (two n8 tiles each).
template <class T>
__device__ __forceinline__ void probabilities_to_fragments(uint32_t (&a)[T::kNTiles / 2][4],
                                                           const float (&p)[T::kNTiles][4]) {
#pragma unroll
  for (int kp = 0; kp < T::kNTiles / 2; ++kp) {
    a[kp][0] = pack_half2(p[2 * kp][0], p[2 * kp][1]);          // row g,     keys 2t, 2t+1
    a[kp][1] = pack_half2(p[2 * kp][2], p[2 * kp][3]);          // row g + 8, keys 2t, 2t+1
    a[kp][2] = pack_half2(p[2 * kp + 1][0], p[2 * kp + 1][1]);  // row g,     keys 8 + 2t..
    a[kp][3] = pack_half2(p[2 * kp + 1][2], p[2 * kp + 1][3]);  // row g + 8, keys 8 + 2t..
  }
}

// O += P V, V's 16 rows (2048 bytes) per k16 step.
template <class T>
__device__ __forceinline__ void accumulate_pv(float (&o)[T::kDTiles][4], const uint32_t (&a)[T::kNTiles / 2][4],
                                              uint32_t v_tile) {
  const uint64_t v_desc = smem_descriptor(v_tile);
#pragma unroll
  for (int kp = 0; kp < T::kNTiles / 2; ++kp) wgmma_rs_m64n64k16_tnsp_b(o, a[kp], v_desc + (16 * kRowBytes >> 4) * kp);
}

// grid (ceil(q_len / kBlockM), heads, batch), kThreads threads, kSmemBytes of dynamic shared memory. The maps
// view q, k, v as (head_dim, tokens, heads, batch) with boxes of (64, 64 or kBlockN, 1, 1).
template <class T>
__global__ void __launch_bounds__(T::kThreads, 1)
    flash_attention_sm90_kernel(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap k_map,
                                const __grid_constant__ CUtensorMap v_map, const __grid_constant__ AttentionParams p) {
  extern __shared__ unsigned char smem[];
  const uint32_t q_smem = (smem_address(smem) + 1023) & ~1023u;  // swizzled tiles need 1024-byte alignment
  const uint32_t k_smem = q_smem + T::kQBytes;                    // kStages tiles
  const uint32_t v_smem = k_smem + T::kStages * T::kKVBytes;      // kStages tiles
  const uint32_t q_full = v_smem + T::kStages * T::kKVBytes;
  auto k_full = [&](int stage) { return q_full + 8 * (1 + stage); };
  auto v_full = [&](int stage) { return q_full + 8 * (1 + T::kStages + stage); };
  auto k_empty = [&](int stage) { return q_full + 8 * (1 + 2 * T::kStages + stage); };
  auto v_empty = [&](int stage) { return q_full + 8 * (1 + 3 * T::kStages + stage); };

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, group = warp / 4;
  const int q0 = blockIdx.x * T::kBlockM, head = blockIdx.y, image = blockIdx.z;
  // Causal: the tiles up to the one holding key q0 + kBlockM - 1 (q_len == kv_len, so at least one).
  const int n_tiles = p.causal ? (min(p.kv_len, q0 + T::kBlockM) + T::kBlockN - 1) / T::kBlockN
                               : (p.kv_len + T::kBlockN - 1) / T::kBlockN;
  constexpr int kConsumerWarps = 4 * T::kConsumers;

  if (threadIdx.x == 0) {
    mbarrier_init(q_full, 1);
    for (int s = 0; s < T::kStages; ++s) {
      mbarrier_init(k_full(s), 1);
      mbarrier_init(v_full(s), 1);
      mbarrier_init(k_empty(s), kConsumerWarps);
      mbarrier_init(v_empty(s), kConsumerWarps);
    }
    mbarrier_init_fence();
  } else if (warp == kConsumerWarps && lane == 0) {
    prefetch_tensor_map(q_map);
    prefetch_tensor_map(k_map);
    prefetch_tensor_map(v_map);
  }
  // Up to here only the params, the tensor maps and shared memory: the kernels ahead may still be running.
  __syncthreads();
  start_after_prior_kernels();

  if (warp >= kConsumerWarps) {  // the producer warpgroup: its first lane issues every copy
    producer_setmaxnreg();
    if (warp == kConsumerWarps && lane == 0) {
      mbarrier_arrive_expect_tx(q_full, T::kQBytes);
      for (int g = 0; g < T::kConsumers; ++g)
        tma_load_4d(q_smem + g * 64 * kRowBytes, q_map, q_full, 0, q0 + g * 64, head, image);
      for (int t = 0; t < n_tiles; ++t) {  // K/V tile t into stage t % kStages once tile t - kStages is released
        const int s = t % T::kStages;
        const uint32_t released = (t / T::kStages - 1) & 1;
        if (t >= T::kStages) mbarrier_wait(k_empty(s), released);
        mbarrier_arrive_expect_tx(k_full(s), T::kKVBytes);
        tma_load_4d(k_smem + s * T::kKVBytes, k_map, k_full(s), 0, t * T::kBlockN, head, image);
        if (t >= T::kStages) mbarrier_wait(v_empty(s), released);
        mbarrier_arrive_expect_tx(v_full(s), T::kKVBytes);
        tma_load_4d(v_smem + s * T::kKVBytes, v_map, v_full(s), 0, t * T::kBlockN, head, image);
      }
    }
    return;
  }
  consumer_setmaxnreg<T::kConsumers>();

  const uint32_t q_rows = q_smem + group * 64 * kRowBytes;
  const int warp_row0 = q0 + group * 64 + (warp % 4) * 16;  // the warp's first query (16 rows per warp)
  const float scale_log2 = p.scale * kLog2e;
  float o[1][T::kDTiles][4];
#pragma unroll
  for (int d = 0; d < T::kDTiles; ++d)
#pragma unroll
    for (int i = 0; i < 4; ++i) o[0][d][i] = 0.0f;
  float row_max[1][2] = {{-INFINITY, -INFINITY}}, row_sum[1][2] = {{0.0f, 0.0f}}, correction[1][2];
  float scores[1][T::kNTiles][4];
  uint32_t probs[T::kNTiles / 2][4];  // P_j as A fragments
  auto release = [&](uint32_t barrier) {
    __syncwarp();
    if (lane == 0) mbarrier_arrive(barrier);
  };
  auto wait_full = [&](auto full, int j) { mbarrier_wait(full(j % T::kStages), (j / T::kStages) & 1); };
  // Callers wait for the tiles first, then fence: a wait between the fence and the wgmma makes ptxas
  // serialise them.
  auto issue_scores = [&](int j) {
    compute_scores<T>(scores[0], q_rows, k_smem + (j % T::kStages) * T::kKVBytes);
    wgmma_commit();
  };
  auto issue_pv = [&](int j) {
    accumulate_pv<T>(o[0], probs, v_smem + (j % T::kStages) * T::kKVBytes);
    wgmma_commit();
  };
  // Softmax of S_j (masked past kv_len, and after each row's query if causal): P_j in scores, the correction
  // O needs.
  auto softmax = [&](int j) {
    if ((j + 1) * T::kBlockN > p.kv_len) mask_keys<T>(scores, p.kv_len - j * T::kBlockN, lane);
    if (p.causal && (j + 1) * T::kBlockN - 1 > warp_row0) mask_causal<T>(scores, j * T::kBlockN - warp_row0, lane);
    softmax_update<T>(scores, row_max, row_sum, correction, scale_log2);
  };

  mbarrier_wait(q_full, 0);
  // S_j and P_{j-1} V_{j-1} issued together; S_j's softmax runs while P V does.
  wait_full(k_full, 0);
  wgmma_fence();
  issue_scores(0);
  wgmma_wait<0>();
  fence_accumulators(scores[0]);
  release(k_empty(0));
  softmax(0);
  probabilities_to_fragments<T>(probs, scores[0]);
  for (int j = 1; j < n_tiles; ++j) {
    wait_full(k_full, j);
    wait_full(v_full, j - 1);
    wgmma_fence();
    issue_scores(j);
    issue_pv(j - 1);
    wgmma_wait<1>();
    fence_accumulators(scores[0]);
    release(k_empty(j % T::kStages));
    softmax(j);
    wgmma_wait<0>();
    fence_accumulators(o[0]);
    release(v_empty((j - 1) % T::kStages));
    rescale_rows<T>(o, correction);
    probabilities_to_fragments<T>(probs, scores[0]);
  }
  wait_full(v_full, n_tiles - 1);
  wgmma_fence();
  issue_pv(n_tiles - 1);
  wgmma_wait<0>();
  fence_accumulators(o[0]);

  // Normalise and store: lane holds columns d*8 + (lane%4)*2, +1 of rows lane/4 and lane/4 + 8 of its warp's 16.
  const int64_t column = int64_t(head) * kHeadDim;
  auto* out = static_cast<__half*>(p.o) + int64_t(image) * p.q_len * p.o_stride + column;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float sum = row_sum[0][half];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const float inv = 1.0f / sum;
    const int row = q0 + group * 64 + (warp % 4) * 16 + half * 8 + lane / 4;
    if (row >= p.q_len) continue;
    __half* dst = out + int64_t(row) * p.o_stride;
#pragma unroll
    for (int d = 0; d < T::kDTiles; ++d)
      *reinterpret_cast<__half2*>(dst + d * 8 + (lane % 4) * 2) =
          __floats2half2_rn(o[0][d][2 * half] * inv, o[0][d][2 * half + 1] * inv);
  }
}

// ---- launcher ----

// (head_dim, tokens, heads, batch) view of one of q, k, v: token rows `stride` elements apart, heads
// head_dim apart within a row, images tokens * stride apart; boxes of 64 x box_rows, 128-byte swizzled.
CUtensorMap tensor_map(const char* name, const void* base, int tokens, int stride, const AttentionParams& p,
                       int box_rows) {
  const uint64_t dims[4] = {uint64_t(p.head_dim), uint64_t(tokens), uint64_t(p.heads), uint64_t(p.batch)};
  const uint64_t strides[3] = {uint64_t(stride) * 2, uint64_t(p.head_dim) * 2, uint64_t(tokens) * stride * 2};
  const uint32_t box[4] = {uint32_t(kHeadDim), uint32_t(box_rows), 1, 1};
  return make_tensor_map_f16(name, base, 4, dims, strides, box);
}

template <class T>
void launch_instance(const AttentionParams& p, const CudaContext& ctx) {
  const auto kernel = flash_attention_sm90_kernel<T>;
  RTVD_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes));
  const CUtensorMap q_map = tensor_map("q", p.q, p.q_len, p.q_stride, p, 64);
  const CUtensorMap k_map = tensor_map("k", p.k, p.kv_len, p.k_stride, p, T::kBlockN);
  const CUtensorMap v_map = tensor_map("v", p.v, p.kv_len, p.v_stride, p, T::kBlockN);
  const dim3 grid((p.q_len + T::kBlockM - 1) / T::kBlockM, p.heads, p.batch);
  launch_kernel("attention_sm90", kernel, grid, T::kThreads, T::kSmemBytes, ctx.stream, q_map, k_map, v_map, p);
}

#endif  // RTVD_HAS_SM90A

}  // namespace

// The flash kernels' requirements (attention_can_implement) hold for TMA too: 16-byte aligned q, k, v with
// strides a multiple of 16 bytes. On top of them: this build and GPU, and one 128-byte row per head.
bool attention_sm90_can_implement(const AttentionParams& p, const CudaContext& ctx, std::string* why) {
  const char* unmet = nullptr;
  if (!RTVD_HAS_SM90A) unmet = "built without sm_90a (RTVD_CUDA_ARCHITECTURES has no 90a)";
  else if (ctx.sm_version != 90) unmet = "needs an sm_90 GPU";
  else if (p.head_dim != kHeadDim) unmet = "head_dim must be 64";
  else return attention_can_implement(p, why);
  if (why) *why = unmet;
  return false;
}

void attention_sm90(const AttentionParams& p, const CudaContext& ctx, int query_rows) {
  std::string why;
  if (!attention_sm90_can_implement(p, ctx, &why))
    fail("attention_sm90: ", why, " (batch ", p.batch, ", heads ", p.heads, ", head_dim ", p.head_dim, ", q_len ",
         p.q_len, ", kv_len ", p.kv_len, ")");
  if (query_rows != 192 && query_rows != 128 && query_rows != 64)
    fail("attention_sm90: query_rows must be 192, 128 or 64, got ", query_rows);
  const NvtxRange range("attention_sm90");
#if RTVD_HAS_SM90A
  if (query_rows == 192) launch_instance<Sm90Tile<3>>(p, ctx);
  else if (query_rows == 128) launch_instance<Sm90Tile<2>>(p, ctx);
  else launch_instance<Sm90Tile<1>>(p, ctx);
#endif
}

}  // namespace rtvd
