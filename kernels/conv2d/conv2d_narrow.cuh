// conv2d for few output channels (c_out <= 8): the autoencoders' last convs, 128 -> 3 (the SD VAE's conv_out,
// with the GroupNorm+SiLU prologue) and 64 -> 3 (TAESD's) at 512x512. The implicit GEMMs' tiles are 64 to
// 160 channels wide, ~95% empty here, and gather every input pixel once per filter tap; this kernel reads a
// block's input tile (its halo included) into shared memory once per 32 channels, applies the prologue there,
// and runs every tap from it on m16n8k16 tensor-core tiles (mma.sync, sm_80+), the weights in registers.
#pragma once
#include <string>

#include "kernels/conv2d/conv2d.h"
#include "kernels/common/cuda_context.cuh"

namespace rtvd {

// Whether conv2d_narrow can run p; if not and why is given, *why names the unmet requirement. Needs an sm_80+
// GPU, c_out <= 8, a 1x1 or 3x3 kernel with stride 1, c_in % 8 == 0 (at most 4096 with the prologue), x and
// weight 16-byte aligned. Assumes valid params.
bool conv2d_narrow_can_implement(const Conv2dParams& p, const CudaContext& ctx, std::string* why = nullptr);

// y = conv2d.h's function of p, on ctx.stream; no workspace. Throws rtvd::Error for invalid params or where
// conv2d_narrow_can_implement() is false.
void conv2d_narrow(const Conv2dParams& p, const CudaContext& ctx);

}  // namespace rtvd
