// group_norm on the GPU, one launch: statistics per (image, group) in fp32, then, when y is set, the
// normalise + affine + activation pass. With y null only the statistics are written (the pre-pass of a conv
// with a fused GroupNorm prologue). Two kernels (GroupNormKernel): thread-block clusters, one per (image,
// group) (group_norm_sm90.cuh: sm_90, where a group's pixels fit 8 blocks' shared memory: the U-Nets' norms,
// but for batches of 64x64 images, which normalise faster on the grid), else one grid over whole
// rows of x whose blocks meet at a grid-wide counter, from sums shifted by a value of the group
// (group_norm.cu says why that keeps the variance from cancelling). The rest of this comment is the grid
// kernel's.
//
// Scratch: the per-chunk partial statistics at the start of ctx.workspace, at most
// group_norm_workspace_bytes(n) (32 KiB per image); a smaller workspace means fewer chunks, and below
// n * groups * 8 bytes the launcher fails. ctx.grid_sync: a zeroed word, which the kernel leaves zeroed
// (the blocks count their arrivals there), so one launch at a time per ctx.grid_sync. With ctx.shares_gpu the
// normalise pass is a second launch, so that no launch needs its whole grid resident at once.
// Requirements (else rtvd::Error): c % groups == 0; groups <= 1024; c <= 512 * v, where v = 8 when
// c % 8 == 0 and x, y are 16-byte aligned, v = 2 when c is even and they are 4-byte aligned, else 1.
#pragma once
#include <cstddef>

#include "kernels/common/cuda_context.cuh"
#include "kernels/group_norm/group_norm.h"

namespace rtvd {

enum class GroupNormKernel {
  Auto,     // the grid when normalising n >= 2 images of hw == 64 * 64 on an unshared GPU, else clusters where
            // they can run, else the grid
  Grid,     // group_norm.cu
  Cluster,  // group_norm_sm90.cu; rtvd::Error where it can't run
};

void group_norm(const GroupNormParams& p, const CudaContext& ctx, GroupNormKernel kernel = GroupNormKernel::Auto);

// y = act(x scale + shift) from the statistics already in p.stats (written by a statistics-only group_norm: the
// pre-pass of a conv's GroupNorm prologue, conv2d_prepass.cuh), one launch of the grid kernel's normalise pass: no
// block waits, no workspace. Needs y; otherwise as group_norm's requirements.
void group_norm_apply(const GroupNormParams& p, const CudaContext& ctx);

// The most of ctx.workspace that group_norm uses for n images.
size_t group_norm_workspace_bytes(int n);

}  // namespace rtvd
