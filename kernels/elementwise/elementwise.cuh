// Memory-bound U-Net and autoencoder ops on the GPU: GEGLU, SiLU, nearest 2x upsampling, channel concat,
// scale-activation-scale.
// Each moves 16 bytes per thread access when every pointer is 16-byte aligned and the channel counts
// are multiples of 8; otherwise a scalar kernel serves any shape.
#pragma once
#include "kernels/common/cuda_context.cuh"
#include "kernels/elementwise/elementwise.h"

namespace rtvd {

void geglu(const GegluParams& p, const CudaContext& ctx);
void silu(const SiluParams& p, const CudaContext& ctx);
void upsample2x(const Upsample2xParams& p, const CudaContext& ctx);
void concat(const ConcatParams& p, const CudaContext& ctx);
void scale_activation(const ScaleActivationParams& p, const CudaContext& ctx);

}  // namespace rtvd
