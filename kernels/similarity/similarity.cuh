// similarity on the GPU: y in fp16, the sums in fp32.
#pragma once
#include "kernels/common/cuda_context.cuh"
#include "kernels/similarity/similarity.h"

namespace rtvd {

void similarity(const SimilarityParams& p, const CudaContext& ctx);

}  // namespace rtvd
