// group_norm on the GPU: statistics per (image, group) in fp32 with a cancellation-free scheme (exact
// mean and squared deviations per small batch, merged with Chan's update), then, when y is set, the
// normalise + affine + activation pass. With y null only the statistics are written (the pre-pass of
// a conv with a fused GroupNorm prologue).
//
// Scratch: the per-chunk partial statistics, n * chunks * groups float2 (chunks <= ~4 * SMs / n: about
// 135 KiB at 32 groups on an H100), live at the start of ctx.workspace. A smaller workspace means fewer
// chunks; below n * groups * 8 bytes the launcher fails.
// Requirements (else rtvd::Error): c % groups == 0; c <= 512 * v, where v = 8 when c % 8 == 0
// and x, y are 16-byte aligned, v = 2 when c is even and they are 4-byte aligned, else 1.
#pragma once
#include "kernels/cuda_context.cuh"
#include "kernels/group_norm.h"

namespace rtvd {

void group_norm(const GroupNormParams& p, const CudaContext& ctx);

}  // namespace rtvd
