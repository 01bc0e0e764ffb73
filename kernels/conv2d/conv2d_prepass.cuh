// conv2d.h's GroupNorm+SiLU prologue as a pass of its own, for the convs that can't apply it while they
// load x (cuDNN's, the wgmma kernel's): pre(x) goes to ctx.workspace and the conv reads it as its x.
#pragma once
#include <cuda_fp16.h>

#include <cstddef>

#include "kernels/conv2d/conv2d.h"
#include "kernels/common/cuda_context.cuh"
#include "kernels/group_norm/group_norm.h"

namespace rtvd {

// Where pre(x) starts in ctx.workspace when the caller keeps its own scratch in the first front_bytes (a
// fused norm's partial statistics share that front), and the bytes the pass needs up to pre(x)'s end.
size_t conv2d_prepass_offset(const Conv2dParams& p, size_t front_bytes);
size_t conv2d_prepass_workspace_bytes(const Conv2dParams& p, size_t front_bytes);

// pre(x) of p (which has the prologue: p.gn_stats set) into ctx.workspace at conv2d_prepass_offset();
// returns it. With norm, the statistics-only GroupNorm whose output p.gn_stats is (x = p.x, same groups),
// the statistics are computed and written in the same launch instead of read: the caller skips that op.
// Throws rtvd::Error when ctx.workspace is too small or norm is not that GroupNorm.
const __half* conv2d_prepass(const Conv2dParams& p, const GroupNormParams* norm, size_t front_bytes,
                             const CudaContext& ctx);

}  // namespace rtvd
