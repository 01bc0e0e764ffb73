// attention through cuDNN's fused scaled-dot-product attention (the backend graph API's SDPA_FWD
// operation, cuDNN >= 9.13), the library alternative to attention.cuh's flash kernel: same params, same
// result up to rounding. Reads attention.h's strided layout in place, as (batch, heads, tokens, head_dim)
// tensors with the token stride given. Only built when CMake finds cuDNN (RTVD_HAS_CUDNN).
// No causal mask: the SDPA_FWD node has no such attribute (9.14 adds block-sparse masks of whole tiles, 9.21
// score-modifier subgraphs); cuDNN's frontend applies its causal mask in a graph of separate operations
// instead, which this file does not build. Causal params are refused.
#pragma once
#include <cudnn.h>

#include <cstddef>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/common/cuda_context.cuh"

namespace rtvd {

// The finalised execution plan for one attention shape: made once (at load, ~ms of host time), run
// every frame. Owns its descriptors; the handle is borrowed and must outlive the plan. Move-only.
struct AttentionCudnnPlan {
  cudnnHandle_t handle = nullptr;
  cudnnBackendDescriptor_t plan = nullptr;
  std::vector<cudnnBackendDescriptor_t> owned;  // tensors, operation, graph, config: kept alive with the plan
  size_t workspace_bytes = 0;                   // of ctx.workspace the plan needs
  AttentionParams shape;  // the params it was made for; attention_cudnn checks calls against their sizes

  AttentionCudnnPlan() = default;
  AttentionCudnnPlan(AttentionCudnnPlan&& o) noexcept;
  AttentionCudnnPlan& operator=(AttentionCudnnPlan&& o) noexcept;
  AttentionCudnnPlan(const AttentionCudnnPlan&) = delete;
  AttentionCudnnPlan& operator=(const AttentionCudnnPlan&) = delete;
  ~AttentionCudnnPlan();
};

// Why causal params are refused, for the candidate's can_implement.
inline constexpr const char* kAttentionCudnnNoCausal = "no causal mask in cuDNN's SDPA_FWD operation";

// The plan for p's sizes, strides and scale (pointers ignored), from the first engine cuDNN's heuristics
// rank that can run it. Throws rtvd::Error naming the shape when the params are invalid or causal, or no
// engine can (cuDNN needs head_dim a multiple of 8 up to 256 and strides a multiple of 8).
AttentionCudnnPlan make_attention_cudnn_plan(const AttentionParams& p, cudnnHandle_t handle);

// o = softmax(q k^T * scale) v on ctx.stream (sets the plan's handle to that stream). p must have the
// plan's sizes, strides and scale, 16-byte aligned pointers, and ctx.workspace must hold
// plan.workspace_bytes. Never allocates or synchronises; may be captured into a CUDA graph.
void attention_cudnn(const AttentionParams& p, const AttentionCudnnPlan& plan, const CudaContext& ctx);

}  // namespace rtvd
