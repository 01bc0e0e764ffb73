// The sampler's ops on the GPU: guidance_step for every step but the last, and denoise_blend: the last
// step (or a decoded image), the temporal blend and the RGBA8 conversion in one pass over the frame. The arithmetic is the CPU
// reference's, operation for operation with no fused multiply-adds, so x, prev and the bytes match it
// exactly.
#pragma once
#include "kernels/common/cuda_context.cuh"
#include "kernels/denoise/denoise.h"

namespace rtvd {

void guidance_step(const GuidanceStepParams& p, const CudaContext& ctx);
void denoise_blend(const DenoiseBlendParams& p, const CudaContext& ctx);

}  // namespace rtvd
