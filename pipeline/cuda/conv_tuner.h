// The convolution's side of `--kernels auto` (layer_tuner.h): the choices a conv layer can take, their
// names in the tuning cache, and the custom kernel's candidates.
#pragma once
#include <string>
#include <vector>

#include "kernels/conv2d.cuh"
#include "kernels/conv2d_sm90.cuh"
#include "kernels/cuda_context.cuh"
#include "pipeline/cuda/layer_tuner.h"

namespace rtvd {

struct ConvChoice {
  bool cudnn = false;
  Conv2dConfig config;   // the mma.sync implicit GEMM's, when !cudnn and !is_wgmma()
  Conv2dSm90Tile wgmma;  // the sm_90a kernel's tile (conv2d_sm90), when bm > 0
  bool is_wgmma() const { return wgmma.bm > 0; }
  // "custom igemm128x160" / "custom igemm64x64 split-k 4" / "custom wgmma 128x160" / "cuDNN"
  std::string describe() const;
};

// Our kernels' own choice for p: the wgmma kernel's first tile where it applies, else conv2d_choose_config().
ConvChoice default_custom_conv(const Conv2dParams& p, const CudaContext& ctx);

// Bytes of ctx.workspace a choice that is not cuDNN uses.
size_t custom_conv_workspace_bytes(const Conv2dParams& p, const ConvChoice& c);

// Runs a choice that is not cuDNN. norm: the statistics-only GroupNorm of p's input, computed in the
// choice's pre-pass instead (only for choices that take one: conv_takes_prepass()).
void run_custom_conv(const Conv2dParams& p, const ConvChoice& c, const CudaContext& ctx,
                     const GroupNormParams* norm = nullptr);

// Whether a choice applies p's GroupNorm prologue as a pass of its own (cuDNN, wgmma), which can then
// compute the statistics too.
bool conv_takes_prepass(const Conv2dParams& p, const ConvChoice& c);

// The choice describe() named; throws rtvd::Error for a name it never gives.
ConvChoice conv_choice_named(const std::string& name);

// The shape and fused parts of a conv that decide which implementation is fastest (pointers ignored).
std::string conv_shape_key(const Conv2dParams& p);

// Our kernels' candidates for p, named by ConvChoice::describe(): default_custom_conv() first (the reference
// the others are checked against), then the wgmma kernel's four best-ranked tiles where it applies, else
// every mma.sync tile config and split-K factor that can run p.
std::vector<LayerCandidate> custom_conv_candidates(const Conv2dParams& p, const CudaContext& ctx);

}  // namespace rtvd
