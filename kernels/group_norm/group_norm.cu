// group_norm, x (n, hw, c) NHWC, groups of cpg = c / groups consecutive channels: one launch.
//
// A group is strided in NHWC (cpg channels out of every c), so one block per (image, group) would read
// 20-80 byte pieces of each row and give only n * groups = 64 blocks at SD shapes. Instead every pass
// reads whole rows, coalesced, VEC channels per thread, with the pixels of an image split in chunks,
// grid (chunks, n):
//   1. per thread, sums of d = x - K and d^2 over its VEC channels and the pixels it visits (kPix loaded
//      together), K the group's shift: the value of its first channel at the image's first pixel, the
//      same in every block. The block adds its rows of threads and the group's channels into one
//      (sum d, sum d^2) per group -> ctx.workspace. Plain sums: a few instructions per element and no
//      division, since at SD sizes the norm is bound by the latency of its instruction chains.
//   2. every block arrives at a counter in ctx.grid_sync; the chunk-0 block of each image waits for the
//      whole grid, merges its image's chunks (staged in shared memory: one round trip to L2) and writes
//      stats. Without y the other blocks leave at once.
//   3. with y, every block waits, merges the statistics of its image the same way and writes
//      y = act(x * rstd gamma + (beta - mean rstd gamma)), reading x a second time (from L2 at SD sizes).
// Waiting blocks need every block of the grid to be resident; with y the launcher keeps the grid within
// what the SMs hold at once (the occupancy calculator), without y only the n chunk-0 blocks wait.
// One launch instead of three (partials, finalise, apply): at SD sizes the norm is bound by latency (DRAM
// and L2 round trips, the fences and the wait), not bytes; ncu puts a launch at 13-27 us on an H100 for
// 0.2-10 MB (docs/perf-notes.md).
// Shifted sums: var = E[d^2] - E[d]^2 cancels only as much as the shift sits away from the mean, in
// standard deviations (a sample of the group is within a few), not as much as the mean sits from zero.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/group_norm/group_norm.cuh"
#include "kernels/group_norm/group_norm_sm90.cuh"
#include "kernels/common/alignment.h"
#include "kernels/common/device_math.cuh"
#include "kernels/common/nvtx_range.h"
#include "kernels/common/vector_io.cuh"
#include "kernels/common/launch.cuh"

namespace rtvd {
namespace {

constexpr int kPix = 4;              // pixels per thread loaded together (independent loads in flight)
constexpr int kTargetThreads = 256;  // threads per block when a row needs fewer
constexpr int kMaxThreads = 512;     // a row of c / VEC threads must fit one block; 128 registers each
constexpr size_t kMergeSmemBytes = 32 << 10;  // one image's partials, staged for the merge

// How a block's threads cover its chunk: `vectors` threads per pixel row (VEC channels each), `rows`
// pixel rows side by side; threads past rows * vectors (padding to whole warps) only join reductions.
struct Layout {
  int hw, c, groups, chunk_pixels, chunks, vectors, rows;
};

struct Args {
  const __half* x;
  __half* y;                  // null: statistics only
  float2* partials;           // (n, chunks, groups) (sum d, sum d^2), d = x - shift
  float* stats;               // (n, groups, 2) mean, rstd
  const float* gamma;
  const float* beta;
  unsigned* grid_sync;        // arrivals: 0 between launches
  float eps;
  bool silu;
  bool apply_only;            // phase 3 alone, from the stats a statistics-only launch wrote (CudaContext::shares_gpu)
};

// Pixels of `chunk`: [first, end).
__device__ __forceinline__ int chunk_end(const Layout& l, int chunk) { return min(l.hw, (chunk + 1) * l.chunk_pixels); }

// The group's shift: its first channel at the image's first pixel.
__device__ __forceinline__ float group_shift(const Args& a, const Layout& l, int image, int g) {
  return __half2float(a.x[int64_t(image) * l.hw * l.c + g * (l.c / l.groups)]);
}

// Phase 1: this block's (sum d, sum d^2) per group -> partials.
template <int VEC>
__device__ void partial_stats(const Args& a, const Layout& l, float* smem) {
  float* row_s1 = smem;                  // (rows, c)
  float* row_s2 = smem + l.rows * l.c;   // (rows, c)
  const int image = blockIdx.y, chunk = blockIdx.x, cpg = l.c / l.groups;
  const int first = chunk * l.chunk_pixels, end = chunk_end(l, chunk);
  const int vec = threadIdx.x % l.vectors, row = threadIdx.x / l.vectors;
  if (row < l.rows) {
    // The shift of each of the thread's channels (consecutive channels cross a group boundary at most
    // once each).
    float shift[VEC];
    int g = vec * VEC / cpg, boundary = (g + 1) * cpg;
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      if (vec * VEC + k >= boundary) ++g, boundary += cpg;
      shift[k] = group_shift(a, l, image, g);
    }
    const __half* xs = a.x + int64_t(image) * l.hw * l.c + vec * VEC;
    float s1[VEC] = {}, s2[VEC] = {};
    for (int p = first + row; p < end; p += l.rows * kPix) {
      float v[kPix][VEC];
#pragma unroll
      for (int i = 0; i < kPix; ++i)
        if (p + i * l.rows < end) load_vec<VEC>(xs + int64_t(p + i * l.rows) * l.c, v[i]);
#pragma unroll
      for (int i = 0; i < kPix; ++i)
        if (p + i * l.rows < end)
#pragma unroll
          for (int k = 0; k < VEC; ++k) {
            const float d = v[i][k] - shift[k];
            s1[k] += d;
            s2[k] = fmaf(d, d, s2[k]);
          }
    }
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      row_s1[row * l.c + vec * VEC + k] = s1[k];
      row_s2[row * l.c + vec * VEC + k] = s2[k];
    }
  }
  __syncthreads();
  // Per channel, add the rows into row 0.
  for (int ch = threadIdx.x; ch < l.c; ch += blockDim.x) {
    float t1 = row_s1[ch], t2 = row_s2[ch];
    for (int r = 1; r < l.rows; ++r) t1 += row_s1[r * l.c + ch], t2 += row_s2[r * l.c + ch];
    row_s1[ch] = t1;
    row_s2[ch] = t2;
  }
  __syncthreads();
  // One warp per group: add its channels.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  for (int g = warp; g < l.groups; g += warps) {
    float t1 = 0.0f, t2 = 0.0f;
    for (int j = lane; j < cpg; j += 32) t1 += row_s1[g * cpg + j], t2 += row_s2[g * cpg + j];
    t1 = warp_sum(t1);
    t2 = warp_sum(t2);
    if (lane == 0) a.partials[(int64_t(image) * l.chunks + chunk) * l.groups + g] = make_float2(t1, t2);
  }
}

// Phase 2: counts this block in; true (in every thread) for the blocks that go on to merge. Those wait
// until the whole grid has arrived; the partials of every block are then visible. The count is the
// signal: the last arrival sets it back to 0, which opens the wait and leaves it ready for the next launch.
// Release/acquire atomics instead of __threadfence(): fences cost each block microseconds here.
__device__ __forceinline__ unsigned add_acq_rel(unsigned* p, unsigned v) {
  unsigned old;
  asm volatile("atom.add.acq_rel.gpu.u32 %0, [%1], %2;\n" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}
__device__ __forceinline__ void store_release(unsigned* p, unsigned v) {
  asm volatile("st.release.gpu.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ bool arrive(const Args& a, bool waits) {
  __syncthreads();  // the block's partials are written (the barrier orders them before thread 0's release)
  if (threadIdx.x == 0) {
    if (add_acq_rel(a.grid_sync, 1u) == gridDim.x * gridDim.y - 1) store_release(a.grid_sync, 0u);
    else if (waits)
      while (load_acquire(a.grid_sync) != 0) __nanosleep(32);
  }
  __syncthreads();
  return waits;
}

// Merges this block's image's partials (staged in shared memory) into (mean, rstd) per group at
// group_stats[2 g]; shifts[g] is the group's shift, read before any block could overwrite x (y may be x).
__device__ void merge_image(const Layout& l, const float2* partials, float eps, const float* shifts, float* smem,
                            float* group_stats) {
  const int image = blockIdx.y;
  // Staged as (chunk, group) rows padded by one: the merge's lanes (over chunks) then hit distinct banks.
  // From L2 (other SMs wrote them), kLoads rows per lane in flight at once: one round trip, not one per row.
  const int stride = l.groups + 1;
  float2* staged = reinterpret_cast<float2*>(smem);
  const float2* part = partials + int64_t(image) * l.chunks * l.groups;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  constexpr int kLoads = 16;
  for (int g0 = 0; g0 < l.groups; g0 += 32) {
    const int g = g0 + lane;
    const bool valid = g < l.groups;
    for (int k0 = warp; k0 < l.chunks; k0 += kLoads * warps) {
      float2 v[kLoads];
#pragma unroll
      for (int j = 0; j < kLoads; ++j)
        if (valid && k0 + j * warps < l.chunks) v[j] = __ldcg(part + (k0 + j * warps) * l.groups + g);
#pragma unroll
      for (int j = 0; j < kLoads; ++j)
        if (valid && k0 + j * warps < l.chunks) staged[(k0 + j * warps) * stride + g] = v[j];
    }
  }
  __syncthreads();
  const float inv_n = 1.0f / (float(l.hw) * float(l.c / l.groups));
  for (int g = warp; g < l.groups; g += warps) {
    float t1 = 0.0f, t2 = 0.0f;
    for (int k = lane; k < l.chunks; k += 32) {
      const float2 s = staged[k * stride + g];
      t1 += s.x, t2 += s.y;
    }
    const float d_mean = warp_sum(t1) * inv_n, d2_mean = warp_sum(t2) * inv_n;
    if (lane == 0) {
      group_stats[2 * g] = shifts[g] + d_mean;
      group_stats[2 * g + 1] = rsqrtf(fmaxf(d2_mean - d_mean * d_mean, 0.0f) + eps);
    }
  }
  __syncthreads();
}

// Phase 3: y = act(x * scale + shift) over this block's chunk, scale = rstd gamma, shift = beta - mean scale.
template <int VEC>
__device__ void apply(const Args& a, const Layout& l, float* smem, const float* group_stats) {
  float* ch_scale = smem;          // (c)
  float* ch_shift = smem + l.c;    // (c)
  const int image = blockIdx.y, chunk = blockIdx.x, cpg = l.c / l.groups;
  for (int ch = threadIdx.x; ch < l.c; ch += blockDim.x) {
    const float mean = group_stats[2 * (ch / cpg)], scale = group_stats[2 * (ch / cpg) + 1] * a.gamma[ch];
    ch_scale[ch] = scale;
    ch_shift[ch] = a.beta[ch] - mean * scale;
  }
  __syncthreads();
  const int vec = threadIdx.x % l.vectors, row = threadIdx.x / l.vectors;
  if (row >= l.rows) return;
  float scale[VEC], shift[VEC];
#pragma unroll
  for (int k = 0; k < VEC; ++k) {
    scale[k] = ch_scale[vec * VEC + k];
    shift[k] = ch_shift[vec * VEC + k];
  }
  const int64_t base = int64_t(image) * l.hw * l.c + vec * VEC;
  const int end = chunk_end(l, chunk);
  for (int p = chunk * l.chunk_pixels + row; p < end; p += l.rows * kPix) {
    float v[kPix][VEC];
#pragma unroll
    for (int i = 0; i < kPix; ++i)
      if (p + i * l.rows < end) load_vec<VEC>(a.x + base + int64_t(p + i * l.rows) * l.c, v[i]);
#pragma unroll
    for (int i = 0; i < kPix; ++i) {
      if (p + i * l.rows >= end) break;
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const float t = fmaf(v[i][k], scale[k], shift[k]);
        v[i][k] = a.silu ? fast_silu(t) : t;
      }
      store_vec<VEC>(a.y + base + int64_t(p + i * l.rows) * l.c, v[i]);
    }
  }
}

template <int VEC>
__global__ void __launch_bounds__(kMaxThreads) group_norm_kernel(const Args a, const Layout l) {
  start_after_prior_kernels();
  extern __shared__ float smem[];
  __shared__ float group_stats[2 * 1024];  // the launcher checks groups <= 1024
  __shared__ float shifts[1024];
  if (a.apply_only) {
    for (int i = threadIdx.x; i < 2 * l.groups; i += blockDim.x) group_stats[i] = a.stats[int64_t(blockIdx.y) * 2 * l.groups + i];
    __syncthreads();
    return apply<VEC>(a, l, smem, group_stats);
  }
  partial_stats<VEC>(a, l, smem);
  for (int g = threadIdx.x; g < l.groups; g += blockDim.x) shifts[g] = group_shift(a, l, blockIdx.y, g);
  const bool first_chunk = blockIdx.x == 0;
  if (!arrive(a, a.y || first_chunk)) return;
  merge_image(l, a.partials, a.eps, shifts, smem, group_stats);
  if (first_chunk)
    for (int i = threadIdx.x; i < 2 * l.groups; i += blockDim.x)
      a.stats[int64_t(blockIdx.y) * 2 * l.groups + i] = group_stats[i];
  if (a.y) apply<VEC>(a, l, smem, group_stats);
}

// apply_only: phase 3 alone (no block waits); else the statistics, and with y the whole grid waits for them.
template <int VEC>
void launch(const GroupNormParams& p, const CudaContext& ctx, Layout l, int threads, size_t phase1_smem,
            bool apply_only) {
  auto kernel = group_norm_kernel<VEC>;
  const int sms = ctx.sm_count > 0 ? ctx.sm_count : 132;
  const size_t smem = std::max({phase1_smem, kMergeSmemBytes, 2 * size_t(p.c) * sizeof(float)});
  int per_sm = 0;
  RTVD_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
  const int64_t resident = int64_t(per_sm) * sms;
  // Waiting blocks must not starve the others of SMs: with y the whole grid is resident; without, the
  // images' chunk-0 blocks leave room for at least one more.
  const bool grid_waits = p.y && !apply_only;
  const int64_t images = apply_only ? std::min<int64_t>(p.n, 65535) : std::min<int64_t>(p.n, grid_waits ? resident : resident - 1);
  if (images < 1) fail("group_norm: a block of ", threads, " threads and ", smem, " bytes of shared memory does not fit");
  // Chunks per image: about two blocks per SM over the batch, no chunk shorter than one pass of the
  // rows, the partials within the workspace and one image's within the merge's shared memory; with y,
  // the whole grid resident at once.
  const size_t chunk_bytes = size_t(images) * p.groups * sizeof(float2);
  int64_t chunks = std::max<int64_t>(1, (2 * sms + images - 1) / images);
  chunks = std::min<int64_t>(chunks, (int64_t(p.hw) + l.rows - 1) / l.rows);
  chunks = std::min<int64_t>(chunks, int64_t(kMergeSmemBytes / ((size_t(p.groups) + 1) * sizeof(float2))));
  if (!apply_only) chunks = std::min<int64_t>(chunks, int64_t(ctx.workspace_bytes / chunk_bytes));
  if (grid_waits) chunks = std::min<int64_t>(chunks, resident / images);
  if ((!ctx.workspace && !apply_only) || chunks < 1)
    fail("group_norm: needs ctx.workspace of at least ", chunk_bytes, " bytes, has ", ctx.workspace_bytes);
  l.chunk_pixels = int((p.hw + chunks - 1) / chunks);
  l.chunks = (p.hw + l.chunk_pixels - 1) / l.chunk_pixels;  // no empty chunk

  Args a{};
  a.partials = static_cast<float2*>(ctx.workspace);
  a.gamma = p.gamma;
  a.beta = p.beta;
  a.grid_sync = ctx.grid_sync;
  a.eps = p.eps;
  a.silu = p.act == Activation::Silu;
  a.apply_only = apply_only;
  // More images than the SMs hold (not at U-Net batch sizes): one launch per slice of them.
  const int64_t image_elems = int64_t(p.hw) * p.c;
  for (int64_t first = 0; first < p.n; first += images) {
    a.x = static_cast<const __half*>(p.x) + first * image_elems;
    a.y = p.y ? static_cast<__half*>(p.y) + first * image_elems : nullptr;
    a.stats = p.stats + first * 2 * p.groups;
    launch_kernel("group_norm", kernel, dim3(l.chunks, unsigned(std::min<int64_t>(images, p.n - first))), threads, smem,
                  ctx.stream, a, l);
  }
}

// The whole norm, or with apply_only its normalise pass alone (group_norm_apply). Beside other streams' kernels
// (CudaContext::shares_gpu) no grid may wait to be resident whole (two such grids, or one and another's waiting
// blocks, could hold every SM and wait for each other): with y, the statistics-only launch (only its images'
// chunk-0 blocks wait) and then the apply pass as a launch of its own.
template <int VEC>
void run(const GroupNormParams& p, const CudaContext& ctx, Layout l, int threads, size_t phase1_smem, bool apply_only) {
  if (apply_only || !p.y || !ctx.shares_gpu) return launch<VEC>(p, ctx, l, threads, phase1_smem, apply_only);
  GroupNormParams stats_only = p;
  stats_only.y = nullptr;
  launch<VEC>(stats_only, ctx, l, threads, phase1_smem, false);
  launch<VEC>(p, ctx, l, threads, phase1_smem, true);
}

// Throws rtvd::Error for params no kernel takes.
void check(const GroupNormParams& p) {
  if (p.n < 0 || p.hw < 0 || p.c <= 0 || p.groups <= 0 || p.c % p.groups != 0)
    fail("group_norm: bad shape n ", p.n, " hw ", p.hw, " c ", p.c, " groups ", p.groups,
         " (c must be a positive multiple of groups)");
  if (p.n == 0) return;
  if (p.hw == 0) fail("group_norm: hw = 0 leaves the statistics undefined");
  if (p.n > 65535) fail("group_norm: n ", p.n, " exceeds the grid's 65535 images");
  if (p.groups > 1024) fail("group_norm: ", p.groups, " groups, max 1024");
  if (!p.x || !p.stats) fail("group_norm: x and stats must be set");
  if (p.y && (!p.gamma || !p.beta)) fail("group_norm: gamma and beta must be set when y is");
  if (p.act != Activation::None && p.act != Activation::Silu)
    fail("group_norm: act must be None or Silu, not ", activation_name(p.act));
}

// The grid kernel over p (run()), its layout for p's channels and alignment.
void run_grid(const GroupNormParams& p, const CudaContext& ctx, bool apply_only) {
  const int vec = p.c % 8 == 0 && aligned(p.x, 16) && aligned(p.y, 16) ? 8
                  : p.c % 2 == 0 && aligned(p.x, 4) && aligned(p.y, 4) ? 2
                                                                         : 1;
  Layout l{};
  l.hw = p.hw;
  l.c = p.c;
  l.groups = p.groups;
  l.vectors = p.c / vec;
  if (l.vectors > kMaxThreads)
    fail("group_norm: c ", p.c, " needs ", l.vectors, " threads per row (", vec, " channels each), max ", kMaxThreads);
  l.rows = std::max(1, kTargetThreads / l.vectors);
  const int threads = (l.rows * l.vectors + 31) / 32 * 32;
  // rows * c <= kMaxThreads * 8 = 4096 floats per array: at most 32 KiB, under the 48 KiB default limit.
  const size_t phase1_smem = 2 * size_t(l.rows) * p.c * sizeof(float);

  switch (vec) {
    case 8: return run<8>(p, ctx, l, threads, phase1_smem, apply_only);
    case 2: return run<2>(p, ctx, l, threads, phase1_smem, apply_only);
    default: return run<1>(p, ctx, l, threads, phase1_smem, apply_only);
  }
}

}  // namespace

size_t group_norm_workspace_bytes(int n) { return size_t(n) * kMergeSmemBytes; }  // chunks * groups * 8 <= it per image

void group_norm(const GroupNormParams& p, const CudaContext& ctx, GroupNormKernel kernel) {
  const NvtxRange range("group_norm");
  check(p);
  if (p.n == 0) return;

  // Normalising a batch of 64x64 latents (SD's 512x512 frames), the grid kernel is faster in the U-Net's graph
  // (SD 2.1 at batch 2: 5.205 -> 5.145 ms; at batch 1 the clusters stay 0.4% faster; docs/perf-notes.md session
  // 21). Larger latents were not measured, and keep the clusters (which read x once where the grid reads it
  // twice); so does a shared GPU (a ControlNet's branch beside the U-Net), where the grid takes two launches.
  const bool grid_first = kernel == GroupNormKernel::Auto && p.y && p.n >= 2 && p.hw == 64 * 64 && ctx.grid_sync &&
                          !ctx.shares_gpu;
  if (kernel != GroupNormKernel::Grid && !grid_first) {
    std::string why;
    if (group_norm_cluster(p, ctx, &why)) return;
    if (kernel == GroupNormKernel::Cluster) fail("group_norm (clusters): ", why);
  }
  if (!ctx.grid_sync) fail("group_norm: ctx.grid_sync must be set (a zeroed word)");
  run_grid(p, ctx, false);
}

void group_norm_apply(const GroupNormParams& p, const CudaContext& ctx) {
  const NvtxRange range("group_norm (apply)");
  check(p);
  if (!p.y) fail("group_norm_apply: y must be set");
  if (p.n > 0) run_grid(p, ctx, true);
}

}  // namespace rtvd
