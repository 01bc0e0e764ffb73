#include "kernels/cast/cast.cuh"
#include "kernels/common/launch.cuh"

#include <algorithm>

namespace rtvd {

namespace {

__global__ void cast_kernel(const float* __restrict__ x, __half* __restrict__ y, int64_t count, int copies) {
  start_after_prior_kernels();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    const __half v = __float2half_rn(x[i]);
    for (int b = 0; b < copies; ++b) y[b * count + i] = v;
  }
}

}  // namespace

void cast(const CastParams& p, const CudaContext& ctx) {
  if (p.count <= 0) return;
  const int threads = 256;
  const int blocks = int(std::min<int64_t>((p.count + threads - 1) / threads, 4096));
  launch_kernel("cast", cast_kernel, blocks, threads, 0, ctx.stream, p.x, static_cast<__half*>(p.y), p.count, p.copies);
}

}  // namespace rtvd
