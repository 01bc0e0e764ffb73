#include "kernels/cast/rgb8_to_float.cuh"
#include "kernels/common/launch.cuh"

#include <algorithm>

namespace rtvd {

namespace {

__global__ void rgb8_to_float_kernel(const uint8_t* __restrict__ x, float* __restrict__ y, int64_t count) {
  start_after_prior_kernels();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = __fsub_rn(__fdiv_rn(float(x[i]), 127.5f), 1.0f);
}

}  // namespace

void rgb8_to_float(const Rgb8ToFloatParams& p, cudaStream_t stream) {
  if (p.count <= 0) return;
  const int threads = 256;
  const int blocks = int(std::min<int64_t>((p.count + threads - 1) / threads, 4096));
  launch_kernel("rgb8_to_float", rgb8_to_float_kernel, blocks, threads, 0, stream, p.x, p.y, p.count);
}

}  // namespace rtvd
