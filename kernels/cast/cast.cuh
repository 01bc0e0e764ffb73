// cast on the GPU: fp32 sample -> fp16 model input, one copy per image of the batch.
#pragma once
#include "kernels/cast/cast.h"
#include "kernels/common/cuda_context.cuh"

namespace rtvd {

void cast(const CastParams& p, const CudaContext& ctx);

}  // namespace rtvd
