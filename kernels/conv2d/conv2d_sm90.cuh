// conv2d on Hopper (sm_90a): implicit GEMM on wgmma with TMA loads and conv2d.h's epilogue fused; the
// GroupNorm+SiLU prologue runs as a pass of its own (conv2d_prepass.cuh). conv2d() runs it where it
// applies; the autotuner times its tile shapes against the other implementations.
#pragma once
#include <string>
#include <vector>

#include "kernels/conv2d/conv2d.h"
#include "kernels/common/cuda_context.cuh"
#include "kernels/group_norm/group_norm.h"

namespace rtvd {

// A block tile of bm output pixels (whole image rows) by bn output channels, computed by two consumer
// warpgroups; with split_k > 1, K is split over that many blocks per tile, whose fp32 partial sums go to
// ctx.workspace and a second pass adds them and runs the epilogue. name: "128x160", "64x128 split-k 2".
struct Conv2dSm90Tile {
  int bm = 0, bn = 0, split_k = 1;
  std::string name;
};

// Whether this build has the sm_90a kernel (RTVD_CUDA_ARCHITECTURES lists 90a) and it handles p on a GPU of
// ctx.sm_version; if not and why is given, *why names the unmet requirement. Needs: an sm_90 GPU, stride 1
// with "same" output size (h_out == h, w_out == w), c_in % 64 == 0, c_out % 8 == 0, x and weight 16-byte
// aligned, y and residual 4-byte aligned, image rows that tile 64 pixels (w divides 64 and 64 / w rows
// divide h). The workspace it needs (conv2d_sm90_workspace_bytes) is the caller's to provide.
bool conv2d_sm90_can_implement(const Conv2dParams& p, const CudaContext& ctx, std::string* why = nullptr);

// The tile a name names ("128x160", "64x128 split-k 2"); throws rtvd::Error for any other string.
Conv2dSm90Tile conv2d_sm90_tile_named(const std::string& name);

// Bytes of ctx.workspace conv2d_sm90 uses with a tile: split-K's partial sums, and with the prologue pre(x)
// and a fused norm's scratch.
size_t conv2d_sm90_workspace_bytes(const Conv2dParams& p, const Conv2dSm90Tile& tile);

// The tiles that fit p on this GPU, whatever the workspace, best-ranked first (the grid that fills the SMs
// best).
std::vector<Conv2dSm90Tile> conv2d_sm90_tiles(const Conv2dParams& p, const CudaContext& ctx);

// y = conv2d.h's function of p on ctx.stream, with the given tile (one of conv2d_sm90_tiles()), or with
// none the best-ranked whose workspace ctx.workspace holds. norm: as conv2d_prepass()'s (the statistics
// computed in the pre-pass). Throws rtvd::Error where conv2d_sm90_can_implement() is false, the tile is
// not one of p's or its workspace does not fit.
void conv2d_sm90(const Conv2dParams& p, const CudaContext& ctx, const Conv2dSm90Tile* tile = nullptr,
                 const GroupNormParams* norm = nullptr);

}  // namespace rtvd
