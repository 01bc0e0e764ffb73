// group_norm, x (n, hw, c) NHWC, groups of cpg = c / groups consecutive channels.
//
// A group is strided in NHWC (cpg channels out of every c), so one block per (image, group) would read
// 20-80 byte pieces of each row and give only n * groups = 64 blocks at SD shapes. Instead every pass
// reads whole rows, coalesced, VEC channels per thread, with the pixels of an image split in chunks:
//   1. partial_stats_kernel, grid (chunks, n): per thread, (mean, M2) of its VEC channels over the pixels
//      it visits, in batches of kPix loaded together: exact two-pass statistics inside a batch, Chan's
//      update between batches. The block then merges its rows of threads and the group's channels
//      (parallel-axis theorem) into one (mean, M2) per group -> ctx.workspace.
//   2. finalize_stats_kernel: one warp per (image, group) merges the chunks -> stats (mean, rstd).
//   3. apply_kernel, grid (chunks, n), only when y is set: y = act((x - mean) * rstd * gamma + beta).
// Every sum is of deviations from a mean, never E[x^2] - E[x]^2, so fp32 keeps its digits however far
// the mean is from zero.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <nvtx3/nvtx3.hpp>

#include "kernels/group_norm.cuh"

namespace rtvd {
namespace {

constexpr int kPix = 4;              // pixels per thread loaded together (independent loads in flight)
constexpr int kTargetThreads = 256;  // threads per block when a row needs fewer
constexpr int kMaxThreads = 512;     // a row of c / VEC threads must fit one block; 128 registers each
constexpr int kFinalizeWarps = 8;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float fast_silu(float x) { return __fdividef(x, 1.0f + __expf(-x)); }

// VEC consecutive halves <-> floats: VEC = 8 is one 16-byte access, 2 one 4-byte access.
template <int VEC>
__device__ __forceinline__ void load_vec(const __half* p, float (&f)[VEC]) {
  if constexpr (VEC == 8) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const auto* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 t = __half22float2(h[i]);
      f[2 * i] = t.x, f[2 * i + 1] = t.y;
    }
  } else if constexpr (VEC == 2) {
    const float2 t = __half22float2(*reinterpret_cast<const __half2*>(p));
    f[0] = t.x, f[1] = t.y;
  } else {
    f[0] = __half2float(*p);
  }
}

template <int VEC>
__device__ __forceinline__ void store_vec(__half* p, const float (&f)[VEC]) {
  if constexpr (VEC == 8) {
    uint4 raw;
    auto* h = reinterpret_cast<__half2*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) h[i] = __floats2half2_rn(f[2 * i], f[2 * i + 1]);
    *reinterpret_cast<uint4*>(p) = raw;
  } else if constexpr (VEC == 2) {
    *reinterpret_cast<__half2*>(p) = __floats2half2_rn(f[0], f[1]);
  } else {
    *p = __float2half_rn(f[0]);
  }
}

// How a block's threads cover its chunk: `vectors` threads per pixel row (VEC channels each), `rows`
// pixel rows side by side; threads past rows * vectors (padding to whole warps) only join reductions.
struct Layout {
  int hw, c, groups, chunk_pixels, chunks, vectors, rows;
};

// Pixels of `chunk`: [first, end).
__device__ __forceinline__ int chunk_end(const Layout& l, int chunk) { return min(l.hw, (chunk + 1) * l.chunk_pixels); }

template <int VEC>
__global__ void __launch_bounds__(kMaxThreads)
    partial_stats_kernel(const __half* __restrict__ x, float2* __restrict__ partials, Layout l) {
  extern __shared__ float smem[];
  float* row_mean = smem;                      // (rows, c)
  float* row_m2 = smem + l.rows * l.c;         // (rows, c)
  float* row_count = row_m2 + l.rows * l.c;    // (rows)
  const int image = blockIdx.y, chunk = blockIdx.x;
  const int first = chunk * l.chunk_pixels, end = chunk_end(l, chunk);
  const int vec = threadIdx.x % l.vectors, row = threadIdx.x / l.vectors;
  if (row < l.rows) {
    const __half* xs = x + int64_t(image) * l.hw * l.c + vec * VEC;
    float mean[VEC] = {}, m2[VEC] = {};
    int count = 0;
    for (int p = first + row; p < end; p += l.rows * kPix) {
      const int batch = min(kPix, (end - p + l.rows - 1) / l.rows);  // pixels p + i * rows < end
      float v[kPix][VEC];
#pragma unroll
      for (int i = 0; i < kPix; ++i)
        if (i < batch) load_vec<VEC>(xs + int64_t(p + i * l.rows) * l.c, v[i]);
      const int total = count + batch;
      const float inv_batch = 1.0f / float(batch), w_batch = float(batch) / float(total),
                  w_cross = float(count) * float(batch) / float(total);
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        float sum = 0.0f, sq = 0.0f;
#pragma unroll
        for (int i = 0; i < kPix; ++i)
          if (i < batch) sum += v[i][k];
        const float batch_mean = sum * inv_batch;
#pragma unroll
        for (int i = 0; i < kPix; ++i)
          if (i < batch) sq += (v[i][k] - batch_mean) * (v[i][k] - batch_mean);
        const float delta = batch_mean - mean[k];
        mean[k] += delta * w_batch;
        m2[k] += sq + delta * delta * w_cross;
      }
      count = total;
    }
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      row_mean[row * l.c + vec * VEC + k] = mean[k];
      row_m2[row * l.c + vec * VEC + k] = m2[k];
    }
    if (vec == 0) row_count[row] = float(count);
  }
  __syncthreads();

  // One warp per group: merge rows x channels of the group (each entry holds row_count values).
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const int cpg = l.c / l.groups, entries = l.rows * cpg;
  const float n_group = float(end - first) * float(cpg);
  for (int g = warp; g < l.groups; g += warps) {
    float sum = 0.0f;
    for (int e = lane; e < entries; e += 32) {
      const int r = e / cpg, ch = g * cpg + e % cpg;
      sum += row_count[r] * row_mean[r * l.c + ch];
    }
    const float mean = warp_sum(sum) / n_group;
    float m2 = 0.0f;
    for (int e = lane; e < entries; e += 32) {
      const int r = e / cpg, ch = g * cpg + e % cpg;
      const float d = row_mean[r * l.c + ch] - mean;
      m2 += row_m2[r * l.c + ch] + row_count[r] * d * d;
    }
    m2 = warp_sum(m2);
    if (lane == 0) partials[(int64_t(image) * l.chunks + chunk) * l.groups + g] = make_float2(mean, m2);
  }
}

// One warp per (image, group): merge the chunks' (mean, M2) into mean and rstd.
__global__ void __launch_bounds__(32 * kFinalizeWarps)
    finalize_stats_kernel(const float2* __restrict__ partials, float* __restrict__ stats, Layout l, int n, float eps) {
  const int task = blockIdx.x * kFinalizeWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (task >= n * l.groups) return;
  const int image = task / l.groups, g = task - image * l.groups;
  const float2* part = partials + int64_t(image) * l.chunks * l.groups + g;  // chunk k at part[k * groups]
  const float cpg = float(l.c / l.groups), n_group = float(l.hw) * cpg;
  float sum = 0.0f;
  for (int k = lane; k < l.chunks; k += 32)
    sum += float(chunk_end(l, k) - k * l.chunk_pixels) * cpg * part[int64_t(k) * l.groups].x;
  const float mean = warp_sum(sum) / n_group;
  float m2 = 0.0f;
  for (int k = lane; k < l.chunks; k += 32) {
    const float2 s = part[int64_t(k) * l.groups];
    const float d = s.x - mean;
    m2 += s.y + float(chunk_end(l, k) - k * l.chunk_pixels) * cpg * d * d;
  }
  m2 = warp_sum(m2);
  if (lane == 0) {
    stats[2 * task] = mean;
    stats[2 * task + 1] = 1.0f / sqrtf(m2 / n_group + eps);
  }
}

template <int VEC>
__global__ void __launch_bounds__(kMaxThreads)
    apply_kernel(const __half* __restrict__ x, __half* __restrict__ y, const float* __restrict__ stats,
                 const float* __restrict__ gamma, const float* __restrict__ beta, Layout l, bool silu) {
  extern __shared__ float smem[];
  float* ch_mean = smem;           // (c)
  float* ch_scale = smem + l.c;    // (c) rstd * gamma
  float* ch_shift = smem + 2 * l.c;  // (c) beta
  const int image = blockIdx.y, chunk = blockIdx.x, cpg = l.c / l.groups;
  for (int ch = threadIdx.x; ch < l.c; ch += blockDim.x) {
    const float* s = stats + 2 * (int64_t(image) * l.groups + ch / cpg);
    ch_mean[ch] = s[0];
    ch_scale[ch] = s[1] * gamma[ch];
    ch_shift[ch] = beta[ch];
  }
  __syncthreads();
  const int vec = threadIdx.x % l.vectors, row = threadIdx.x / l.vectors;
  if (row >= l.rows) return;
  float mean[VEC], scale[VEC], shift[VEC];
#pragma unroll
  for (int k = 0; k < VEC; ++k) {
    mean[k] = ch_mean[vec * VEC + k];
    scale[k] = ch_scale[vec * VEC + k];
    shift[k] = ch_shift[vec * VEC + k];
  }
  const int64_t base = int64_t(image) * l.hw * l.c + vec * VEC;
  const int end = chunk_end(l, chunk);
  for (int p = chunk * l.chunk_pixels + row; p < end; p += l.rows * kPix) {
    float v[kPix][VEC];
#pragma unroll
    for (int i = 0; i < kPix; ++i)
      if (p + i * l.rows < end) load_vec<VEC>(x + base + int64_t(p + i * l.rows) * l.c, v[i]);
#pragma unroll
    for (int i = 0; i < kPix; ++i) {
      if (p + i * l.rows >= end) break;
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const float t = (v[i][k] - mean[k]) * scale[k] + shift[k];
        v[i][k] = silu ? fast_silu(t) : t;
      }
      store_vec<VEC>(y + base + int64_t(p + i * l.rows) * l.c, v[i]);
    }
  }
}

bool aligned(const void* p, int bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

template <int VEC>
void launch(const GroupNormParams& p, const CudaContext& ctx, const Layout& l, int threads, size_t partial_smem) {
  const auto* x = static_cast<const __half*>(p.x);
  auto* partials = static_cast<float2*>(ctx.workspace);
  const dim3 grid(l.chunks, p.n);
  partial_stats_kernel<VEC><<<grid, threads, partial_smem, ctx.stream>>>(x, partials, l);
  const unsigned finalize_blocks = unsigned((p.n * p.groups + kFinalizeWarps - 1) / kFinalizeWarps);
  finalize_stats_kernel<<<finalize_blocks, 32 * kFinalizeWarps, 0, ctx.stream>>>(partials, p.stats, l, p.n, p.eps);
  if (p.y)
    apply_kernel<VEC><<<grid, threads, 3 * l.c * sizeof(float), ctx.stream>>>(
        x, static_cast<__half*>(p.y), p.stats, p.gamma, p.beta, l, p.act == Activation::Silu);
}

}  // namespace

void group_norm(const GroupNormParams& p, const CudaContext& ctx) {
  nvtx3::scoped_range range{"group_norm"};
  if (p.n < 0 || p.hw < 0 || p.c <= 0 || p.groups <= 0 || p.c % p.groups != 0)
    fail("group_norm: bad shape n ", p.n, " hw ", p.hw, " c ", p.c, " groups ", p.groups,
         " (c must be a positive multiple of groups)");
  if (p.n == 0) return;
  if (p.hw == 0) fail("group_norm: hw = 0 leaves the statistics undefined");
  if (p.n > 65535) fail("group_norm: n ", p.n, " exceeds the grid's 65535 images");
  if (!p.x || !p.stats) fail("group_norm: x and stats must be set");
  if (p.y && (!p.gamma || !p.beta)) fail("group_norm: gamma and beta must be set when y is");

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
  const size_t partial_smem = (2 * size_t(l.rows) * p.c + l.rows) * sizeof(float);

  // About four blocks per SM over the whole batch (at SD sizes a thread then loads all its pixels at
  // once), no chunk shorter than one pass of the rows, and the partials must fit the workspace.
  const int sms = ctx.sm_count > 0 ? ctx.sm_count : 132;
  const size_t partial_bytes_per_chunk = size_t(p.n) * p.groups * sizeof(float2);
  const int64_t chunks_fit = ctx.workspace ? int64_t(ctx.workspace_bytes / partial_bytes_per_chunk) : 0;
  if (chunks_fit < 1)
    fail("group_norm: needs ctx.workspace of at least ", partial_bytes_per_chunk, " bytes, has ", ctx.workspace_bytes);
  const int64_t wanted = std::max<int64_t>(1, (4 * sms + p.n - 1) / p.n);
  const int64_t max_chunks = (int64_t(p.hw) + l.rows - 1) / l.rows;
  const int64_t chunks = std::min({wanted, max_chunks, chunks_fit});
  l.chunk_pixels = int((p.hw + chunks - 1) / chunks);
  l.chunks = (p.hw + l.chunk_pixels - 1) / l.chunk_pixels;  // no empty chunk

  switch (vec) {
    case 8: launch<8>(p, ctx, l, threads, partial_smem); break;
    case 2: launch<2>(p, ctx, l, threads, partial_smem); break;
    default: launch<1>(p, ctx, l, threads, partial_smem); break;
  }
  RTVD_CHECK_LAUNCH("group_norm");
}

}  // namespace rtvd
