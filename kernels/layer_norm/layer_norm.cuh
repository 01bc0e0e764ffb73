// layer_norm on the GPU: one warp per row, the row held in registers (c <= 1280, c % 8 == 0, 16-byte
// aligned rows: 16-byte accesses); a scalar warp-per-row kernel serves every other shape.
#pragma once
#include "kernels/common/cuda_context.cuh"
#include "kernels/layer_norm/layer_norm.h"

namespace rtvd {

void layer_norm(const LayerNormParams& p, const CudaContext& ctx);

}  // namespace rtvd
