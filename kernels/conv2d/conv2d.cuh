// conv2d on the GPU: implicit GEMM on tensor cores (fp16 in, fp32 accumulate) with conv2d.h's epilogue and
// GroupNorm+SiLU prologue fused, and a direct-convolution fallback for what the implicit GEMM can't load.
#pragma once
#include <cstddef>
#include <string>

#include "kernels/conv2d/conv2d.h"
#include "kernels/common/cuda_context.cuh"

namespace rtvd {

// The kernels conv2d() chooses from. IgemmBMxBN: implicit GEMM with a block tile of BM output pixels by
// BN output channels. Direct: one thread per output, any c_in and alignment (the named fallback).
enum class Conv2dKernel { Direct, Igemm64x64, Igemm128x128, Igemm128x160 };

struct Conv2dConfig {
  Conv2dKernel kernel = Conv2dKernel::Direct;
  // > 1: K is split over that many blocks per output tile; fp32 partial sums go to ctx.workspace
  // (conv2d_workspace_bytes) and a second kernel adds them and runs the epilogue. Igemm kernels only.
  int split_k = 1;
};

const char* conv2d_kernel_name(Conv2dKernel k);

// Whether the implicit GEMM can run p on the current device; if not and why is given, *why names the unmet
// requirement. Needs c_in % 8 == 0 (a 16-byte chunk of channels never straddles two filter taps), x and
// weight 16-byte aligned, and with the prologue its GroupNorm table in shared memory. Assumes valid params.
bool conv2d_fast_path_ok(const Conv2dParams& p, std::string* why = nullptr);

// The config conv2d() runs: tile size per shape, split-K when the output tiles alone leave SMs idle.
Conv2dConfig conv2d_choose_config(const Conv2dParams& p, const CudaContext& ctx);

// Bytes of ctx.workspace a config uses: split_k * M * round_up(c_out, 8) floats with split-K, else 0.
size_t conv2d_workspace_bytes(const Conv2dParams& p, const Conv2dConfig& cfg);

// y = conv2d.h's function of p, on ctx.stream: the op's one entry point, which runs its default candidate
// (conv2d_candidates.cuh: the best-ranked that can run p; the wgmma kernel's first tile on an H100 with sm_90a
// kernels). ctx.workspace must hold what that candidate needs. Throws rtvd::Error naming the unmet
// requirement for invalid params (sizes, h_out/w_out, GroupNorm groups, null pointers).
void conv2d(const Conv2dParams& p, const CudaContext& ctx);

// Whether the mma.sync implicit GEMM (or the direct kernel) can run p with cfg, the workspace aside; if not
// and why is given, *why names the unmet requirement. Assumes valid params.
bool conv2d_config_can_implement(const Conv2dParams& p, const Conv2dConfig& cfg, std::string* why = nullptr);

// Runs one given config (tests, benchmarks). Throws rtvd::Error when it can't handle p: Igemm kernels
// without conv2d_fast_path_ok, a tile that doesn't fit shared memory, too small a workspace for split-K.
void conv2d_with_config(const Conv2dParams& p, const Conv2dConfig& cfg, const CudaContext& ctx);

}  // namespace rtvd
