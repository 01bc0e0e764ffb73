// group_norm on thread-block clusters (sm_90): no grid-wide wait, x read once.
//
// grid (S, groups, n), clusters of (S, 1, 1): the S blocks of a cluster share one (image, group), each a
// range of its pixels (hw / S), all of the group's cpg channels. A block loads its slab (pixels x cpg,
// VEC channels per access, kLoads accesses in flight per thread) into shared memory, and takes its mean and
// then the sum of squared deviations from it over the slab there (two passes: exact, nothing cancels). The
// cluster's blocks exchange these through distributed shared memory once, at the cluster's hardware barrier,
// and every warp merges them rank by rank (Chan et al.'s pairwise update) into the group's mean and variance,
// in the same order everywhere: the result is deterministic. Each block then normalises its own slab, from
// shared memory, into y.
// Why: group_norm.cu's single launch crosses the whole grid twice through global memory (partial sums and an
// arrival counter, then every block merging every chunk's partials), 11-19 us a call at SD's sizes of which
// an empty launch is 3 (bench kernels, H200); its 61 calls were 0.88 ms of the 3.93 ms batch-1 SD 2.1 U-Net
// (the forward with them left out, docs/perf-notes.md session 20). Here the grid is crossed by the cluster's
// barrier alone. S is the largest cluster (at most 8, the portable size) whose grid has at most one block per
// SM; it runs where a slab fits a block's shared memory: the U-Nets' norms at every level; the autoencoders'
// larger ones take group_norm.cu's.
#include "kernels/group_norm/group_norm_sm90.cuh"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "kernels/common/alignment.h"
#include "kernels/common/launch.cuh"
#if RTVD_HAS_SM90A
#include <cooperative_groups.h>

#include "kernels/common/device_math.cuh"
#include "kernels/common/vector_io.cuh"
#endif

namespace rtvd {
namespace {

struct Plan {
  int cluster = 0;     // S blocks per (image, group); 0: no slab fits
  int vec = 1;         // channels per access
  size_t table = 0;    // bytes of shared memory before the group's (scale, shift) table: the largest slab
  size_t smem = 0;     // the slab, then the table
};

int vector_width(const GroupNormParams& p) {
  const int cpg = p.c / p.groups;
  for (const int v : {8, 4, 2})
    if (cpg % v == 0 && aligned(p.x, 2 * v) && aligned(p.y, 2 * v)) return v;
  return 1;
}

#if RTVD_HAS_SM90A  // the kernel, and what only its plan and launch use

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kLoads = 8;                       // accesses in flight per thread
constexpr int kMaxCluster = 8;                  // the portable cluster size
constexpr size_t kMaxSlabBytes = 160 << 10;     // a block's pixels x cpg fp16, in shared memory
constexpr size_t kMinSlabBytes = 4 << 10;       // below it, another block per group costs more than it saves

size_t slab_bytes(const GroupNormParams& p, int cluster) {
  return sizeof(__half) * size_t((p.hw + cluster - 1) / cluster) * (p.c / p.groups);
}

namespace cg = cooperative_groups;

struct Args {
  const __half* x;
  __half* y;  // null: statistics only
  float* stats;
  const float* gamma;
  const float* beta;
  int hw, c, groups;
  int table;  // Plan::table
  float eps;
  bool silu;
};

template <int VEC>
__device__ __forceinline__ void to_floats(HalfBits<VEC> raw, float (&f)[VEC]) {
  load_vec<VEC>(reinterpret_cast<const __half*>(&raw), f);
}

// Pixels [x, y) of block `rank` of `clusters` (hw * clusters fits an int: group_norm_cluster_can_run).
__device__ __forceinline__ int2 pixel_range(int hw, int rank, int clusters) {
  return make_int2(hw * rank / clusters, hw * (rank + 1) / clusters);
}

template <int VEC>
__global__ void __launch_bounds__(kThreads) group_norm_cluster_kernel(const Args a) {
  start_after_prior_kernels();
  using RawT = HalfBits<VEC>;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ float warp_totals[kWarps];
  __shared__ float2 block_moments;  // (mean, sum of squared deviations) of the slab: read by the whole cluster
  const cg::cluster_group cluster = cg::this_cluster();
  const int rank = blockIdx.x, clusters = gridDim.x, g = blockIdx.y, image = blockIdx.z;
  const int cpg = a.c / a.groups, vectors = cpg / VEC;
  const int2 pixels = pixel_range(a.hw, rank, clusters);
  const int count = (pixels.y - pixels.x) * vectors;  // this block's accesses
  auto* slab = reinterpret_cast<RawT*>(smem);
  float* ch_scale = reinterpret_cast<float*>(smem + a.table);
  float* ch_shift = ch_scale + cpg;
  const int64_t base = (int64_t(image) * a.hw + pixels.x) * a.c + g * cpg;  // element (first pixel, channel 0)
  auto offset = [&](int e) { return base + int64_t(e / vectors) * a.c + (e % vectors) * VEC; };

  // The slab into shared memory, and its sum.
  float s = 0.0f;
  for (int e0 = threadIdx.x; e0 < count; e0 += kLoads * kThreads) {
    RawT raw[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u)
      if (e0 + u * kThreads < count) raw[u] = *reinterpret_cast<const RawT*>(a.x + offset(e0 + u * kThreads));
#pragma unroll
    for (int u = 0; u < kLoads; ++u)
      if (e0 + u * kThreads < count) {
        slab[e0 + u * kThreads] = raw[u];
        float f[VEC];
        to_floats<VEC>(raw[u], f);
#pragma unroll
        for (int k = 0; k < VEC; ++k) s += f[k];
      }
  }
  const float block_count = float(count) * VEC;  // elements
  s = block_reduce<kWarps>(s, false, warp_totals);
  const float block_mean = count > 0 ? s / block_count : 0.0f;
  // The squared deviations from the slab's mean, from what each thread staged itself.
  float q = 0.0f;
  for (int e = threadIdx.x; e < count; e += kThreads) {
    float f[VEC];
    to_floats<VEC>(slab[e], f);
#pragma unroll
    for (int k = 0; k < VEC; ++k) q = fmaf(f[k] - block_mean, f[k] - block_mean, q);
  }
  q = block_reduce<kWarps>(q, false, warp_totals);
  if (threadIdx.x == 0) block_moments = make_float2(block_mean, q);
  cluster.sync();

  // Every warp merges the cluster's moments rank by rank; lane r reads rank r's and counts its elements.
  const int lane = threadIdx.x % 32;
  const float2 theirs = lane < clusters ? *cluster.map_shared_rank(&block_moments, lane) : make_float2(0.0f, 0.0f);
  auto arrived = cluster.barrier_arrive();  // no block may leave while another still reads its moments
  const int2 their_pixels = pixel_range(a.hw, lane, clusters);
  const float their_count = float(their_pixels.y - their_pixels.x) * float(cpg);
  float n = 0.0f, mean = 0.0f, m2 = 0.0f;
  for (int r = 0; r < clusters; ++r) {
    const float nr = __shfl_sync(0xffffffffu, their_count, r);
    const float mr = __shfl_sync(0xffffffffu, theirs.x, r), m2r = __shfl_sync(0xffffffffu, theirs.y, r);
    if (nr == 0.0f) continue;
    const float total = n + nr, delta = mr - mean;
    mean += delta * (nr / total);
    m2 += m2r + delta * delta * (n * nr / total);
    n = total;
  }
  const float rstd = rsqrtf(m2 / n + a.eps);
  if (rank == 0 && threadIdx.x == 0) {
    a.stats[(int64_t(image) * a.groups + g) * 2] = mean;
    a.stats[(int64_t(image) * a.groups + g) * 2 + 1] = rstd;
  }

  // Normalise: y = act(x scale + shift), scale = rstd gamma, shift = beta - mean scale.
  if (a.y) {
    for (int ch = threadIdx.x; ch < cpg; ch += kThreads) {
      const float scale = rstd * a.gamma[g * cpg + ch];
      ch_scale[ch] = scale;
      ch_shift[ch] = a.beta[g * cpg + ch] - mean * scale;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < count; e += kThreads) {
      float f[VEC];
      to_floats<VEC>(slab[e], f);
      const int ch0 = (e % vectors) * VEC;
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const float t = fmaf(f[k], ch_scale[ch0 + k], ch_shift[ch0 + k]);
        f[k] = a.silu ? fast_silu(t) : t;
      }
      store_vec<VEC>(a.y + offset(e), f);
    }
  }
  cluster.barrier_wait(std::move(arrived));
}

template <int VEC>
void launch(const GroupNormParams& p, const Plan& pl, const CudaContext& ctx) {
  const auto kernel = group_norm_cluster_kernel<VEC>;
  RTVD_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(pl.smem)));
  Args a{static_cast<const __half*>(p.x), static_cast<__half*>(p.y), p.stats, p.gamma, p.beta, p.hw, p.c, p.groups,
         int(pl.table), p.eps, p.act == Activation::Silu};
  launch_cluster_kernel("group_norm (clusters)", kernel, dim3(pl.cluster, p.groups, p.n), dim3(pl.cluster, 1, 1),
                        kThreads, pl.smem, ctx.stream, a);
}

#endif  // RTVD_HAS_SM90A

// S: the largest cluster whose grid has at most one block per SM (more blocks, each with less to load) and whose
// blocks each hold at least 4 KB of their group, else the smallest whose slab fits; 0 when none does. Not the
// largest whose grid is one wave (256 blocks at batch 1): inside the U-Net's graph, where each norm's blocks start
// as the conv ahead of it retires (PDL), one block per SM was 3.4% faster at batch 1 (S 8 -> 4) and 1.9% at batch
// 2 (4 -> 2) (docs/perf-notes.md, session 25). The 4 KB floor, measured and not profiled: with it the default
// model's frame (8 channels a group at 32x32: S 8 -> 4, at 16x16 4 -> 1) was 2.7% faster and the SD 2.1 U-Net 0.6%
// at batch 1 (8x8: S 4 -> 1); 8 KB measured the same (session 27). Likely cause: so small a block spends more on
// its launch and its cluster's exchange than it saves in loads.
Plan plan(const GroupNormParams& p, const CudaContext& ctx) {
  Plan pl;
  pl.vec = vector_width(p);
#if RTVD_HAS_SM90A
  const int64_t pairs = int64_t(p.n) * p.groups;
  for (int s = 1; s <= kMaxCluster && (s == 1 || s <= p.hw); s *= 2) {
    if (slab_bytes(p, s) > kMaxSlabBytes) continue;
    if (pl.cluster != 0 && pairs * s > std::max(ctx.sm_count, 1)) break;
    if (pl.cluster != 0 && slab_bytes(p, s) < kMinSlabBytes) break;
    const size_t table = align_up(slab_bytes(p, s), 16), smem = table + 2 * sizeof(float) * (p.c / p.groups);
    pl.cluster = s;
    pl.table = table;
    pl.smem = smem;
  }
#else
  (void)ctx;
#endif
  return pl;
}

// The plan for p, or cluster 0 and *why.
Plan checked_plan(const GroupNormParams& p, const CudaContext& ctx, std::string* why) {
  const char* unmet = nullptr;
  Plan pl;
  if (!RTVD_HAS_SM90A || ctx.sm_version != 90) unmet = "needs sm_90a kernels and an sm_90 GPU";
  else if (p.groups > 65535 || p.n > 65535) unmet = "groups and n must fit the grid (65535)";
  else if (p.hw > (1 << 27)) unmet = "hw must be at most 2^27 (its pixel ranges in 32 bits)";
  else if ((pl = plan(p, ctx)).cluster == 0) unmet = "one group's pixels over 8 blocks must fit 160 KiB of shared memory each";
  if (unmet && why) *why = unmet;
  return pl;
}

}  // namespace

bool group_norm_cluster_can_run(const GroupNormParams& p, const CudaContext& ctx, std::string* why) {
  return checked_plan(p, ctx, why).cluster != 0;
}

bool group_norm_cluster(const GroupNormParams& p, const CudaContext& ctx, std::string* why) {
  const Plan pl = checked_plan(p, ctx, why);
  if (pl.cluster == 0) return false;
#if RTVD_HAS_SM90A
  switch (pl.vec) {
    case 8: launch<8>(p, pl, ctx); break;
    case 4: launch<4>(p, pl, ctx); break;
    case 2: launch<2>(p, pl, ctx); break;
    default: launch<1>(p, pl, ctx); break;
  }
#endif
  return true;
}

}  // namespace rtvd
