// conv2d through cuDNN 9's legacy convolution API, the baseline the custom kernel is measured against:
// cudnnConvolutionForward (NHWC fp16, fp32 compute, tensor-op math) and two small kernels of ours for what
// it can't fuse: the GroupNorm+SiLU prologue as a pre-pass into ctx.workspace, and the per-image
// scale/bias, SiLU and residual as an in-place epilogue on y. Same params and function as conv2d().
// Only built when CMake finds cuDNN (RTVD_HAS_CUDNN).
#pragma once
#include <cudnn.h>

#include <cstddef>

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

// Descriptors for p's sizes and the fastest algorithm by cuDNN's heuristics
// (cudnnGetConvolutionForwardAlgorithm_v7, tensor-op math) whose workspace fits max_workspace_bytes.
// Pointers in p are ignored. Throws rtvd::Error for invalid params or when cuDNN has no algorithm.
Conv2dCudnnPlan make_conv2d_cudnn_plan(const Conv2dParams& p, cudnnHandle_t handle,
                                       size_t max_workspace_bytes = size_t(32) << 20);

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
