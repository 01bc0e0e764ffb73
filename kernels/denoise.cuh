// The sampler's per-step ops on the GPU, and denoise_blend: the last step, the temporal blend and the
// RGBA8 conversion in one pass over the frame. The arithmetic is the CPU reference's, operation for
// operation with no fused multiply-adds, so x, prev and the bytes match it exactly.
#pragma once
#include "kernels/cuda_context.cuh"
#include "kernels/denoise.h"

namespace rtvd {

void guidance_step(const GuidanceStepParams& p, const CudaContext& ctx);
void temporal_blend(const TemporalBlendParams& p, const CudaContext& ctx);
void to_rgba8(const ToRgba8Params& p, const CudaContext& ctx);
void denoise_blend(const DenoiseBlendParams& p, const CudaContext& ctx);

}  // namespace rtvd
