// Conditioning ops: a few thousand elements each, one thread per output element (per 8 for the table
// lookup when rows are 16-byte aligned). The timestep embedding follows the CPU reference's fp32 order
// of operations (constants folded on the host the same way), with the accurate sinf/cosf: arguments
// reach ~1000 rad, where the fast intrinsics lose all precision.
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <nvtx3/nvtx3.hpp>

#include "kernels/embedding/embedding.cuh"
#include "kernels/common/alignment.h"
#include "kernels/common/launch.cuh"

namespace rtvd {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t items) { return unsigned((items + kThreads - 1) / kThreads); }

// y (n, dim): [sin | cos] (or [cos | sin]) of t * exp(log_max_period * i / denominator), zero-padded
// when dim is odd; t is timestep for every row, or the row's own from timesteps (n) when it is set.
__global__ void __launch_bounds__(kThreads)
    timestep_embedding_kernel(__half* __restrict__ y, int n, int dim, float timestep,
                              const float* __restrict__ timesteps, float neg_log_max_period, float denominator,
                              bool flip_sin_to_cos) {
  start_after_prior_kernels();
  const int i = blockIdx.x * kThreads + threadIdx.x;
  if (i >= n * dim) return;
  const int col = i % dim, half = dim / 2;
  float value = 0.0f;
  if (col < 2 * half) {
    const bool first_half = col < half;
    const int k = first_half ? col : col - half;
    const float t = timesteps ? timesteps[i / dim] : timestep;
    const float arg = t * expf(neg_log_max_period * float(k) / denominator);
    value = (first_half != flip_sin_to_cos) ? sinf(arg) : cosf(arg);
  }
  y[i] = __float2half_rn(value);
}

// y[i] = table[ids[i]] (+ y[i]); one thread per VEC columns of one output row.
template <int VEC>
__global__ void __launch_bounds__(kThreads)
    embedding_kernel(const __half* __restrict__ table, const int32_t* __restrict__ ids, __half* __restrict__ y,
                     int n, int rows, int vectors_per_row, bool accumulate) {
  start_after_prior_kernels();
  const int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= int64_t(n) * vectors_per_row) return;
  const int row = int(i / vectors_per_row), col = int(i % vectors_per_row) * VEC;
  const int64_t dim = int64_t(vectors_per_row) * VEC;
  const int32_t id = ids[row];
  __half* out = y + row * dim + col;
  __half values[VEC];
  if (id < 0 || id >= rows) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) values[k] = __float2half_rn(NAN);
  } else {
    const __half* src = table + id * dim + col;
    if constexpr (VEC == 8) {
      *reinterpret_cast<uint4*>(values) = *reinterpret_cast<const uint4*>(src);
    } else {
      values[0] = *src;
    }
    if (accumulate) {
      __half prior[VEC];
      if constexpr (VEC == 8) {
        *reinterpret_cast<uint4*>(prior) = *reinterpret_cast<const uint4*>(out);
      } else {
        prior[0] = *out;
      }
#pragma unroll
      for (int k = 0; k < VEC; ++k) values[k] = __float2half_rn(__half2float(values[k]) + __half2float(prior[k]));
    }
  }
  if constexpr (VEC == 8) {
    *reinterpret_cast<uint4*>(out) = *reinterpret_cast<const uint4*>(values);
  } else {
    *out = values[0];
  }
}

// Per (image, channel): scale = s (1 + g), bias = t (1 + g) + b with proj = [g | b], or bias = t + b.
__global__ void __launch_bounds__(kThreads)
    film_kernel(const __half* __restrict__ proj, int proj_stride, int proj_offset,
                const float* __restrict__ base_scale, const float* __restrict__ base_bias, float* __restrict__ scale,
                float* __restrict__ bias, int n, int c, bool with_scale) {
  start_after_prior_kernels();
  const int i = blockIdx.x * kThreads + threadIdx.x;
  if (i >= n * c) return;
  const int image = i / c, j = i - image * c;
  const __half* row = proj + int64_t(image) * proj_stride + proj_offset;
  const float t = base_bias ? base_bias[j] : 0.0f;
  if (with_scale) {
    const float g = __half2float(row[j]), b = __half2float(row[c + j]);
    const float s = base_scale ? base_scale[j] : 1.0f;
    scale[i] = s * (1.0f + g);
    bias[i] = t * (1.0f + g) + b;
  } else {
    bias[i] = t + __half2float(row[j]);
  }
}

}  // namespace

void timestep_embedding(const TimestepEmbeddingParams& p, const CudaContext& ctx) {
  nvtx3::scoped_range range{"timestep_embedding"};
  if (p.n < 0 || p.dim < 0 || int64_t(p.n) * p.dim > INT32_MAX)
    fail("timestep_embedding: bad shape n ", p.n, " dim ", p.dim);
  if (p.n * p.dim == 0) return;
  // The CPU reference's constants, rounded to fp32 the same way.
  const int half = p.dim / 2;
  const float neg_log_max_period = -float(std::log(double(p.max_period)));
  const float denominator = float(double(half) - double(p.freq_shift));
  launch_kernel("timestep_embedding", timestep_embedding_kernel, blocks_for(int64_t(p.n) * p.dim), kThreads, 0,
                ctx.stream, static_cast<__half*>(p.y), p.n, p.dim, p.timestep, p.timesteps, neg_log_max_period,
                denominator, p.flip_sin_to_cos);
}

void embedding(const EmbeddingParams& p, const CudaContext& ctx) {
  nvtx3::scoped_range range{"embedding"};
  if (p.n < 0 || p.rows < 0 || p.dim < 0) fail("embedding: negative shape");
  if (p.n == 0 || p.dim == 0) return;
  if (!p.ids) fail("embedding: ids is null");
  const bool vec = p.dim % 8 == 0 && aligned16(p.table) && aligned16(p.y);
  const auto* table = static_cast<const __half*>(p.table);
  auto* y = static_cast<__half*>(p.y);
  if (vec)
    launch_kernel("embedding", embedding_kernel<8>, blocks_for(int64_t(p.n) * (p.dim / 8)), kThreads, 0, ctx.stream,
                  table, p.ids, y, p.n, p.rows, p.dim / 8, p.accumulate);
  else
    launch_kernel("embedding", embedding_kernel<1>, blocks_for(int64_t(p.n) * p.dim), kThreads, 0, ctx.stream, table,
                  p.ids, y, p.n, p.rows, p.dim, p.accumulate);
}

void film(const FilmParams& p, const CudaContext& ctx) {
  nvtx3::scoped_range range{"film"};
  if (p.n < 0 || p.c < 0 || int64_t(p.n) * p.c > INT32_MAX) fail("film: bad shape n ", p.n, " c ", p.c);
  if (p.n * p.c == 0) return;
  if (!p.bias || (p.with_scale && !p.scale)) fail("film: bias (and scale when with_scale) must be set");
  const int width = (p.with_scale ? 2 : 1) * p.c;  // the slice of proj one image reads
  if (p.proj_offset < 0 || (p.n > 1 && p.proj_stride < p.proj_offset + width))
    fail("film: slice [", p.proj_offset, ", +", width, ") does not fit proj_stride ", p.proj_stride);
  launch_kernel("film", film_kernel, blocks_for(int64_t(p.n) * p.c), kThreads, 0, ctx.stream,
                static_cast<const __half*>(p.proj), p.proj_stride, p.proj_offset, p.base_scale, p.base_bias, p.scale,
                p.bias, p.n, p.c, p.with_scale);
}

}  // namespace rtvd
