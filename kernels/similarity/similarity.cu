// similarity: one block per chunk. Each thread sums a strided part of its chunk in fp32, then the block adds
// the threads' sums in a fixed tree: the same inputs give the same bits every run, so the filter's decision
// is deterministic.
#include "kernels/similarity/similarity.cuh"

#include <cuda_fp16.h>

namespace rtvd {

namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
similarity_kernel(const float* __restrict__ x, const __half* __restrict__ y, float* __restrict__ sums, int64_t count,
                  int64_t size) {
  __shared__ float partial[3][kThreads];
  const int64_t begin = blockIdx.x * size, end = min(count, begin + size);
  float xx = 0.0f, yy = 0.0f, dd = 0.0f;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const float a = x[i], b = __half2float(y[i]), d = a - b;
    xx = fmaf(a, a, xx);
    yy = fmaf(b, b, yy);
    dd = fmaf(d, d, dd);
  }
  partial[0][threadIdx.x] = xx;
  partial[1][threadIdx.x] = yy;
  partial[2][threadIdx.x] = dd;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      for (int s = 0; s < 3; ++s) partial[s][threadIdx.x] += partial[s][threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x < 3) sums[3 * blockIdx.x + threadIdx.x] = partial[threadIdx.x][0];
}

}  // namespace

void similarity(const SimilarityParams& p, const CudaContext& ctx) {
  if (p.count <= 0) return;
  similarity_kernel<<<p.chunks, kThreads, 0, ctx.stream>>>(p.x, static_cast<const __half*>(p.y), p.sums, p.count,
                                                          similarity_chunk_size(p));
  RTVD_CHECK_LAUNCH("similarity");
}

}  // namespace rtvd
