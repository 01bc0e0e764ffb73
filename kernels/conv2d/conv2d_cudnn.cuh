// conv2d through cuDNN 9's legacy convolution API, the baseline the custom kernel is measured against, in
// two forms (NHWC fp16, fp32 compute, tensor-op math; the GroupNorm+SiLU prologue as our pre-pass into
// ctx.workspace in both):
//   separate: cudnnConvolutionForward, then our in-place epilogue pass on y (any of conv2d.h's epilogues);
//   fused: cudnnConvolutionBiasActivationForward, y = act(conv + z + bias) in cuDNN's own epilogue, where
//     conv2d.h's epilogue is of that form (conv2d_cudnn_fuses): the autoencoders' convs, whose separate pass
//     reads and writes 32 MB activations again at 512².
// Same params and function as conv2d(). Only built when CMake finds cuDNN (RTVD_HAS_CUDNN).
#pragma once
#include <cudnn.h>

#include <cstddef>
#include <string>

#include "kernels/conv2d/conv2d.h"
#include "kernels/common/cuda_context.cuh"
#include "kernels/group_norm/group_norm.h"

namespace rtvd {

// cuDNN descriptors and the chosen algorithm for one layer shape: made once (at load), used every frame,
// since creating descriptors and asking for an algorithm per frame costs host time. Owns the descriptors;
// the handle is borrowed and must outlive the plan. Move-only.
struct Conv2dCudnnPlan {
  cudnnHandle_t handle = nullptr;
  cudnnTensorDescriptor_t x_desc = nullptr, y_desc = nullptr;
  cudnnFilterDescriptor_t w_desc = nullptr;
  cudnnConvolutionDescriptor_t conv_desc = nullptr;
  cudnnTensorDescriptor_t bias_desc = nullptr;          // fused: (1, c_out, 1, 1) fp16
  cudnnActivationDescriptor_t act_desc = nullptr;       // fused: ReLU or identity
  bool fused = false;                                   // cudnnConvolutionBiasActivationForward
  size_t bias_offset = 0;  // fused: where the fp16 copy of p.bias goes in ctx.workspace, after the rest
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  size_t algo_workspace_bytes = 0;
  size_t workspace_bytes = 0;  // of ctx.workspace conv2d_cudnn needs: the algorithm's, plus conv2d_prepass()'s
  Conv2dParams shape;          // the params it was made for; conv2d_cudnn checks calls against their sizes

  Conv2dCudnnPlan() = default;
  Conv2dCudnnPlan(Conv2dCudnnPlan&& o) noexcept;
  Conv2dCudnnPlan& operator=(Conv2dCudnnPlan&& o) noexcept;
  Conv2dCudnnPlan(const Conv2dCudnnPlan&) = delete;
  Conv2dCudnnPlan& operator=(const Conv2dCudnnPlan&) = delete;
  ~Conv2dCudnnPlan();
};

// Whether cuDNN's fused form computes p's epilogue: act(conv + residual + bias) with one bias row for the
// whole batch, no scale, ReLU or no activation (the residual before it). If not and why is given, *why
// names the part it can't.
bool conv2d_cudnn_fuses(const Conv2dParams& p, std::string* why = nullptr);

// Descriptors for p's sizes and the fastest algorithm by cuDNN's heuristics
// (cudnnGetConvolutionForwardAlgorithm_v7, tensor-op math) whose workspace fits max_workspace_bytes; fused:
// for the fused form (IMPLICIT_PRECOMP_GEMM without an activation, the only algorithm cuDNN fuses identity
// with). Pointers in p are ignored. Throws rtvd::Error for invalid params, when cuDNN has no algorithm, or
// (fused) when conv2d_cudnn_fuses(p) is false.
Conv2dCudnnPlan make_conv2d_cudnn_plan(const Conv2dParams& p, cudnnHandle_t handle,
                                       size_t max_workspace_bytes = size_t(32) << 20, bool fused = false);

// y = conv2d.h's function of p on ctx.stream (sets the plan's handle to that stream). p must have the
// plan's sizes and prologue on/off; residual must not alias y (the epilogue runs in place on y);
// ctx.workspace must hold plan.workspace_bytes. Never allocates or synchronises.
//
// norm (with the GroupNorm prologue only): the statistics-only GroupNorm whose output p.gn_stats is
// (x = p.x, stats = p.gn_stats, same groups). Instead of reading p.gn_stats, the conv then computes and
// writes them itself, in the same launch that writes pre(x) (group_norm with y), so the caller can skip
// that op: one launch and one read of x fewer.
void conv2d_cudnn(const Conv2dParams& p, const Conv2dCudnnPlan& plan, const CudaContext& ctx,
                  const GroupNormParams* norm = nullptr);

}  // namespace rtvd
