// canny on the GPU: the same edges as canny_cpu, without a host round trip (a fixed sequence of kernels, so it
// can be captured into a CUDA graph).
#pragma once
#include "kernels/canny/canny.h"
#include "kernels/common/cuda_context.cuh"

namespace rtvd {

void canny(const CannyParams& p, const CudaContext& ctx);

}  // namespace rtvd
