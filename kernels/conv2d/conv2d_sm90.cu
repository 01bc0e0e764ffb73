// conv2d on Hopper: the implicit GEMM y (pixels, c_out) = A (pixels, kh kw c_in) B (c_out, kh kw c_in)^T on
// wgmma, with both operands loaded by TMA. A block computes BM output pixels (whole rows of one image, or part
// of one row where rows are wider than BM) by BN output channels with two consumer warpgroups (64 x BN or
// BM x BN/2 each) and a producer warpgroup whose first lane loads, per K step of 64 channels of one filter tap
// (r, s), the input box of 64 channels x min(w, BM) x BM/w rows shifted by (r - pad, s - pad) and the matching
// 64 weights of BN filters, into a ring of
// shared-memory stages on mbarriers. TMA reads coordinates outside the image as zeros, which is exactly
// the conv's zero padding, so no im2col exists anywhere and the borders need no code. Both tiles land
// 128-byte swizzled, wgmma's K-major layout (the same as attention_sm90.cu's Q K^T). The consumers keep one
// wgmma group in flight while waiting for the next stage, release each stage when its products are done,
// and at the end apply conv2d.h's epilogue (scale, bias, activation, residual) from registers. With
// split-K (grid z) each block takes a range of the K steps and writes fp32 partial sums, which conv2d.cu's
// reduction adds up before the epilogue. setmaxnreg moves the producer's registers to the consumers'
// accumulators (up to 128 per thread). The GroupNorm+SiLU prologue runs before, as conv2d_prepass().
// Measured against the mma.sync kernel and cuDNN in docs/perf-notes.md (session 5).
#include "kernels/conv2d/conv2d_sm90.cuh"

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/common/alignment.h"
#include "kernels/conv2d/conv2d_prepass.cuh"
#include "kernels/conv2d/conv2d_traits.cuh"
#include "kernels/common/nvtx_range.h"
#if RTVD_HAS_SM90A
#include "kernels/common/sm90_ptx.cuh"
#include "kernels/common/tensor_map.cuh"
#include "kernels/common/launch.cuh"
#endif

namespace rtvd {
namespace {

constexpr int kChunk = 64;  // channels per K step: one 128-byte swizzle row

// Split-K partial sums: whole 8-channel chunks per pixel, as conv2d_detail::splitk_reduce() reads them.
int partial_pitch(const Conv2dParams& p) { return (p.c_out + 7) / 8 * 8; }
size_t partials_bytes(const Conv2dParams& p, int split_k) {
  return split_k > 1 ? sizeof(float) * size_t(split_k) * p.n * p.h * p.w * partial_pitch(p) : 0;
}

#if RTVD_HAS_SM90A  // this file is then compiled for sm_90a alone (kernels/CMakeLists.txt)

using namespace sm90;

// kGroupsM x kGroupsN consumer warpgroups, each 64 pixels x kGroupCols channels.
template <int kGroupsM_, int kGroupsN_, int kGroupCols_>
struct ConvTile {
  static constexpr int kGroupsM = kGroupsM_, kGroupsN = kGroupsN_, kGroupCols = kGroupCols_;
  static constexpr int kConsumers = kGroupsM * kGroupsN;
  static constexpr int kBlockM = 64 * kGroupsM;
  static constexpr int kBlockN = kGroupCols * kGroupsN;
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr int kABytes = kBlockM * 128;
  static constexpr int kBBytes = kBlockN * 128;
  static constexpr int kStageBytes = kABytes + kBBytes;
  static constexpr int kStages = std::min(6, (200 * 1024) / kStageBytes);
  static constexpr int kSmemBytes = 1024 + kStages * kStageBytes + 16 * kStages;  // + alignment, 2 barriers/stage
  static_assert(kConsumers == 2, "two consumer warpgroups");
  static_assert(kStages >= 3, "a ring of at least three stages");
  static_assert(kGroupCols % 8 == 0 && kGroupCols <= 256, "wgmma n");
};

// grid (ceil(c_out / kBlockN), pixels / kBlockM, split_k); kThreads threads, kSmemBytes of dynamic shared
// memory. partials: null, or with split_k > 1 where the fp32 partial sums go.
// x_map views x as (c_in, w, h, n) in boxes of (64, w, rows, 1); w_map the weight as (kh kw c_in, c_out) in
// boxes of (64, kBlockN).
template <class T>
__global__ void __launch_bounds__(T::kThreads, 1)
    conv2d_sm90_kernel(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap w_map,
                       const __grid_constant__ Conv2dParams p, float* partials, int partial_pitch) {
  extern __shared__ unsigned char smem[];
  const uint32_t stages = (smem_address(smem) + 1023) & ~1023u;  // swizzled tiles need 1024-byte alignment
  const uint32_t barriers = stages + T::kStages * T::kStageBytes;
  auto a_tile = [&](int s) { return stages + s * T::kStageBytes; };
  auto b_tile = [&](int s) { return stages + s * T::kStageBytes + T::kABytes; };
  auto full = [&](int s) { return barriers + 8 * s; };
  auto empty = [&](int s) { return barriers + 8 * (T::kStages + s); };

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n0 = blockIdx.x * T::kBlockN, m0 = blockIdx.y * T::kBlockM;
  const int hw = p.h * p.w, image = m0 / hw, row0 = (m0 % hw) / p.w, col0 = (m0 % hw) % p.w;
  // This block's K steps (64 channels of one tap each): all of them, or its part with split-K (grid z).
  const int chunks = p.c_in / kChunk, total_steps = p.kh * p.kw * chunks;
  const int k_begin = int(int64_t(total_steps) * blockIdx.z / gridDim.z);
  const int steps = int(int64_t(total_steps) * (blockIdx.z + 1) / gridDim.z) - k_begin;
  constexpr int kConsumerWarps = 4 * T::kConsumers;

  // Until the PDL wait, only what no kernel ahead writes: the params, the tensor maps, shared memory. So the
  // index math, the barriers and the maps' fetch overlap the kernels ahead.
  if (threadIdx.x == 0) {
    for (int s = 0; s < T::kStages; ++s) {
      mbarrier_init(full(s), 1);
      mbarrier_init(empty(s), kConsumerWarps);
    }
    mbarrier_init_fence();
  } else if (warp == kConsumerWarps && lane == 0) {
    prefetch_tensor_map(x_map);
    prefetch_tensor_map(w_map);
  }
  __syncthreads();
  start_after_prior_kernels();

  if (warp >= kConsumerWarps) {  // the producer warpgroup: its first lane issues every copy
    producer_setmaxnreg();
    if (warp == kConsumerWarps && lane == 0) {
      for (int k = 0, tap = k_begin / chunks, c0 = k_begin % chunks * kChunk; k < steps; ++k) {
        const int s = k % T::kStages;
        if (k >= T::kStages) mbarrier_wait(empty(s), (k / T::kStages - 1) & 1);
        const int r = tap / p.kw, q = tap % p.kw;
        mbarrier_arrive_expect_tx(full(s), T::kStageBytes);
        tma_load_4d(a_tile(s), x_map, full(s), c0, col0 + q - p.pad, row0 + r - p.pad, image);
        tma_load_2d(b_tile(s), w_map, full(s), tap * p.c_in + c0, n0);
        c0 += kChunk;
        if (c0 == p.c_in) c0 = 0, ++tap;
      }
    }
    return;
  }
  consumer_setmaxnreg<T::kConsumers>();

  const int group = warp / 4, group_m = group % T::kGroupsM, group_n = group / T::kGroupsM;
  // The consumer warpgroups alone (the producer has left): named barrier 1.
  auto consumers_sync = [] { asm volatile("bar.sync 1, %0;\n" ::"n"(128 * T::kConsumers) : "memory"); };
  const uint32_t a_offset = group_m * 64 * 128, b_offset = group_n * T::kGroupCols * 128;
  float acc[T::kGroupCols / 8][4];
  auto release = [&](int s) {
    __syncwarp();
    if (lane == 0) mbarrier_arrive(empty(s));
  };
  // K step k: four k16 wgmma on stage k % kStages; the first one overwrites (no branch around a wgmma,
  // which ptxas would serialise).
  auto step = [&](int k, auto first) {
    const int s = k % T::kStages;
    mbarrier_wait(full(s), (k / T::kStages) & 1);
    const uint64_t a_desc = smem_descriptor(a_tile(s) + a_offset), b_desc = smem_descriptor(b_tile(s) + b_offset);
    wgmma_fence();
    if constexpr (decltype(first)::value) wgmma_ss<T::kGroupCols>(acc, a_desc, b_desc, Overwrite{});
    else wgmma_ss<T::kGroupCols>(acc, a_desc, b_desc);
#pragma unroll
    for (int kk = 1; kk < kChunk / 16; ++kk) wgmma_ss<T::kGroupCols>(acc, a_desc + 2 * kk, b_desc + 2 * kk);
    wgmma_commit();
  };
  step(0, std::true_type{});
  for (int k = 1; k < steps; ++k) {
    step(k, std::false_type{});
    wgmma_wait<1>();  // step k - 1 is done: its stage can be refilled
    release((k - 1) % T::kStages);
  }
  wgmma_wait<0>();
  fence_accumulators(acc);

  // Epilogue through shared memory, the ring being drained once both groups' products are in: each group
  // writes its fp32 tile from the fragments (lane: channels 8j + 2 (lane % 4), +1 of pixels lane / 4 and
  // lane / 4 + 8 of its warp's 16; rows padded by 8 floats so that the 4 rows of a half-warp's 8-byte
  // stores hit distinct banks),
  // then each thread takes 8 channels of one pixel at a time: 16-byte residual loads and y stores, or with
  // split-K 32 bytes of fp32 partial sums (split, pixels, partial_pitch) for conv2d_detail::splitk_reduce().
  constexpr int kPitch = T::kGroupCols + 8, kChunks = T::kGroupCols / 8;
  static_assert(T::kConsumers * 64 * kPitch * 4 <= T::kStages * T::kStageBytes, "the epilogue tile fits the ring");
  float* tile = reinterpret_cast<float*>(smem + (stages - smem_address(smem))) + group * 64 * kPitch;
  consumers_sync();  // no wgmma of either group still reads the ring
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = (warp % 4) * 16 + half * 8 + lane / 4;
#pragma unroll
    for (int j = 0; j < T::kGroupCols / 8; ++j)
      *reinterpret_cast<float2*>(tile + row * kPitch + 8 * j + 2 * (lane % 4)) = make_float2(acc[j][2 * half], acc[j][2 * half + 1]);
  }
  consumers_sync();
  float* split_partials = partials ? partials + int64_t(blockIdx.z) * p.n * hw * partial_pitch : nullptr;
  const bool vec = p.c_out % 8 == 0 && reinterpret_cast<uintptr_t>(p.y) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(p.residual) % 16 == 0;
  for (int i = threadIdx.x % 128; i < 64 * kChunks; i += 128) {
    const int row = i / kChunks, c = n0 + group_n * T::kGroupCols + 8 * (i % kChunks);
    if (c >= p.c_out) continue;
    const int m = m0 + group_m * 64 + row;
    const float4 lo = *reinterpret_cast<const float4*>(tile + row * kPitch + 8 * (i % kChunks));
    const float4 hi = *reinterpret_cast<const float4*>(tile + row * kPitch + 8 * (i % kChunks) + 4);
    if (split_partials) {
      float* dst = split_partials + int64_t(m) * partial_pitch + c;
      reinterpret_cast<float4*>(dst)[0] = lo;
      reinterpret_cast<float4*>(dst)[1] = hi;
    } else {
      const float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
      conv2d_detail::store_outputs8(p, hw, m, c, std::min(8, p.c_out - c), v, vec);
    }
  }
}

template <class T>
void launch(const Conv2dParams& p, int split_k, float* partials, const CudaContext& ctx) {
  const auto kernel = conv2d_sm90_kernel<T>;
  RTVD_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes));
  const uint64_t x_dims[4] = {uint64_t(p.c_in), uint64_t(p.w), uint64_t(p.h), uint64_t(p.n)};
  const uint64_t x_strides[3] = {uint64_t(p.c_in) * 2, uint64_t(p.w) * p.c_in * 2, uint64_t(p.h) * p.w * p.c_in * 2};
  const int box_w = std::min(p.w, T::kBlockM);  // whole rows, or BM pixels of one row
  const uint32_t x_box[4] = {uint32_t(kChunk), uint32_t(box_w), uint32_t(T::kBlockM / box_w), 1};
  const CUtensorMap x_map = make_tensor_map_f16("conv2d_sm90 x", p.x, 4, x_dims, x_strides, x_box);
  const uint64_t k_total = uint64_t(p.kh) * p.kw * p.c_in;
  const uint64_t w_dims[2] = {k_total, uint64_t(p.c_out)};
  const uint64_t w_strides[1] = {k_total * 2};
  const uint32_t w_box[2] = {uint32_t(kChunk), uint32_t(T::kBlockN)};
  const CUtensorMap w_map = make_tensor_map_f16("conv2d_sm90 weight", p.weight, 2, w_dims, w_strides, w_box);
  const dim3 grid((p.c_out + T::kBlockN - 1) / T::kBlockN, p.n * p.h * p.w / T::kBlockM, split_k);
  launch_kernel("conv2d_sm90", kernel, grid, T::kThreads, T::kSmemBytes, ctx.stream, x_map, w_map, p,
                split_k > 1 ? partials : nullptr, partial_pitch(p));
  if (split_k > 1) conv2d_detail::splitk_reduce(p, partials, split_k, partial_pitch(p), ctx);
}

#endif  // RTVD_HAS_SM90A

// Every block tile, bm x bn. 128x64 only for layers of at most 64 output channels (TAESD, the default model),
// which the wider tiles run half empty; the wider layers' tiles keep their ranking.
constexpr int kShapes[][2] = {{128, 160}, {64, 160}, {128, 128}, {128, 256}, {64, 128}, {128, 64}};
constexpr int kNarrowBn = 64;
// Up to 16 parts: at batch 1 the 8x8 and 16x16 levels have 64 or 256 output pixels, so their 1280-channel
// convs have 10-20 output tiles, and only a split spreads their 30-60 MB of weights over the SMs.
constexpr int kMaxSplit = 16;
constexpr int kMinStepsPerSplit = 16;  // K steps each part of a split keeps (shorter: the ring barely fills)

Conv2dSm90Tile tile(int bm, int bn, int split) {
  return {bm, bn, split, cat(bm, "x", bn, split > 1 ? cat(" split-k ", split) : std::string())};
}

// Whole image rows per tile (w divides bm, and the rows divide h), or whole tiles per row (bm divides w).
bool tile_fits(const Conv2dParams& p, int bm) {
  return p.w <= bm ? bm % p.w == 0 && p.h % (bm / p.w) == 0 : p.w % bm == 0;
}
bool tile_offered(const Conv2dParams& p, int bm, int bn) { return tile_fits(p, bm) && (bn != kNarrowBn || p.c_out <= kNarrowBn); }

// What p and the GPU must be for any tile, whatever the workspace; null when met.
const char* shape_unmet(const Conv2dParams& p, const CudaContext& ctx) {
  if (!RTVD_HAS_SM90A) return "built without sm_90a (RTVD_CUDA_ARCHITECTURES has no 90a)";
  if (ctx.sm_version != 90) return "needs an sm_90 GPU";
  if (!p.x || !p.weight || !p.y) return "x, weight and y must be set";
  if (p.n <= 0 || p.h <= 0 || p.w <= 0 || p.c_out <= 0 || p.kh <= 0 || p.kw <= 0) return "sizes must be positive";
  if (p.stride != 1 || p.h_out != p.h || p.w_out != p.w) return "stride 1 with h_out == h and w_out == w";
  if (p.c_in <= 0 || p.c_in % kChunk) return "c_in must be a multiple of 64";
  if (p.c_out % 8) return "c_out must be a multiple of 8";
  if (!aligned(p.x, 16) || !aligned(p.weight, 16)) return "x and weight must be 16-byte aligned";
  if (!aligned(p.y, 4) || !aligned(p.residual, 4)) return "y and residual must be 4-byte aligned";
  if (!tile_fits(p, 64)) return "w must divide 64 with 64 / w rows dividing h, or 64 must divide w";
  return nullptr;
}

}  // namespace

bool conv2d_sm90_can_implement(const Conv2dParams& p, const CudaContext& ctx, std::string* why) {
  const char* unmet = shape_unmet(p, ctx);
  if (unmet && why) *why = unmet;
  return unmet == nullptr;
}

Conv2dSm90Tile conv2d_sm90_tile_named(const std::string& name) {
  for (const auto& [bm, bn] : kShapes)
    for (int split = 1; split <= kMaxSplit; ++split) {
      if (tile(bm, bn, split).name == name) return tile(bm, bn, split);
    }
  fail("conv2d_sm90: no tile named '", name, "'");
}

size_t conv2d_sm90_workspace_bytes(const Conv2dParams& p, const Conv2dSm90Tile& tile) {
  const size_t partials = partials_bytes(p, tile.split_k);
  return p.gn_stats ? conv2d_prepass_workspace_bytes(p, partials) : partials;
}

std::vector<Conv2dSm90Tile> conv2d_sm90_tiles(const Conv2dParams& p, const CudaContext& ctx) {
  std::vector<Conv2dSm90Tile> tiles;
  if (shape_unmet(p, ctx)) return tiles;
  const int steps = p.kh * p.kw * p.c_in / kChunk;
  for (const auto& [bm, bn] : kShapes)
    for (int split = 1; split <= kMaxSplit && (split == 1 || steps / split >= kMinStepsPerSplit); ++split)
      if (tile_offered(p, bm, bn)) tiles.push_back(tile(bm, bn, split));
  // First the tile whose grid fills the SMs best (blocks per SM rounded up to whole waves; a split's
  // reduction pass counted as a tenth), then the one of fewer waves (more parts of a split only add
  // partial sums), then the larger.
  const int64_t pixels = int64_t(p.n) * p.h * p.w, sms = std::max(ctx.sm_count, 1);
  auto waves = [&](const Conv2dSm90Tile& t) {
    const int64_t blocks = (pixels / t.bm) * ((p.c_out + t.bn - 1) / t.bn) * t.split_k;
    return (blocks + sms - 1) / sms;
  };
  auto efficiency = [&](const Conv2dSm90Tile& t) {
    return double(pixels) * p.c_out * t.split_k / (double(waves(t)) * sms * t.bm * t.bn) * (t.split_k > 1 ? 0.9 : 1.0);
  };
  std::stable_sort(tiles.begin(), tiles.end(), [&](const Conv2dSm90Tile& a, const Conv2dSm90Tile& b) {
    const double ea = efficiency(a), eb = efficiency(b);
    if (ea != eb) return ea > eb;
    if (waves(a) != waves(b)) return waves(a) < waves(b);
    return a.bm * a.bn > b.bm * b.bn;
  });
  return tiles;
}

void conv2d_sm90(const Conv2dParams& p, const CudaContext& ctx, const Conv2dSm90Tile* tile, const GroupNormParams* norm) {
  conv2d_detail::check_params(p, "conv2d_sm90");
  std::string why;
  if (!conv2d_sm90_can_implement(p, ctx, &why))
    fail("conv2d_sm90: ", why, " (", p.n, "x", p.h, "x", p.w, "x", p.c_in, " -> ", p.c_out, ", ", p.kh, "x", p.kw, ")");
  const std::vector<Conv2dSm90Tile> tiles = conv2d_sm90_tiles(p, ctx);
  const auto fits = [&](const Conv2dSm90Tile& t) { return conv2d_sm90_workspace_bytes(p, t) <= ctx.workspace_bytes; };
  const auto chosen = tile ? std::find_if(tiles.begin(), tiles.end(), [&](const Conv2dSm90Tile& t) { return t.name == tile->name; })
                           : std::find_if(tiles.begin(), tiles.end(), fits);
  if (chosen == tiles.end()) fail("conv2d_sm90: no tile ", tile ? tile->name : "", " for ", p.n, "x", p.h, "x", p.w, "x", p.c_in);
  if (!fits(*chosen))
    fail("conv2d_sm90: tile ", chosen->name, " needs ", conv2d_sm90_workspace_bytes(p, *chosen), " bytes of ctx.workspace, has ",
         ctx.workspace_bytes);
  if (norm && !p.gn_stats) fail("conv2d_sm90: a GroupNorm to fuse, but the conv has no prologue");
#if RTVD_HAS_SM90A
  const NvtxRange range("conv2d_sm90");
  // Split-K partial sums at the start of the workspace; the GroupNorm prologue as a pass of its own after
  // them, whose output the conv reads.
  auto* partials = static_cast<float*>(ctx.workspace);
  Conv2dParams q = p;
  if (p.gn_stats) {
    q.x = conv2d_prepass(p, norm, partials_bytes(p, chosen->split_k), ctx);
    q.gn_stats = q.gn_gamma = q.gn_beta = nullptr;
  }
  const int bm = chosen->bm, bn = chosen->bn, split = chosen->split_k;
  if (bm == 128 && bn == 160) return launch<ConvTile<2, 1, 160>>(q, split, partials, ctx);
  if (bm == 64 && bn == 160) return launch<ConvTile<1, 2, 80>>(q, split, partials, ctx);
  if (bm == 128 && bn == 128) return launch<ConvTile<2, 1, 128>>(q, split, partials, ctx);
  if (bm == 128 && bn == 256) return launch<ConvTile<2, 1, 256>>(q, split, partials, ctx);
  if (bm == 64 && bn == 128) return launch<ConvTile<1, 2, 64>>(q, split, partials, ctx);
  if (bm == 128 && bn == 64) return launch<ConvTile<2, 1, 64>>(q, split, partials, ctx);
#endif
  fail("conv2d_sm90: no kernel instance for tile ", chosen->name);
}

}  // namespace rtvd
