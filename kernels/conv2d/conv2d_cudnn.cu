// conv2d through cuDNN (see conv2d_cudnn.cuh). cudnnConvolutionBiasActivationForward can't serve all of
// conv2d.h's epilogues (bias per image, SiLU, residual after the activation): the separate form runs the conv
// plain and one in-place pass applies the epilogue, with the per-element math shared with conv2d.cu
// (conv2d_traits.cuh), the conv output rounded to fp16 before it as in PyTorch. The fused form rounds once, at
// the end, and adds an fp16 copy of the bias (cuDNN takes the bias in y's type).
#include "kernels/conv2d/conv2d_cudnn.cuh"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/cast/cast.cuh"
#include "kernels/common/alignment.h"
#include "kernels/conv2d/conv2d_prepass.cuh"
#include "kernels/conv2d/conv2d_traits.cuh"
#include "kernels/common/cudnn_error.h"
#include "kernels/common/nvtx_range.h"
#include "kernels/common/launch.cuh"

namespace rtvd {
namespace {

using namespace conv2d_detail;

// ---- kernels ----

// y = conv2d.h's epilogue of y, in place, 8 channels of one output pixel per thread.
__global__ void epilogue_kernel(const __grid_constant__ Conv2dParams p, bool vec) {
  start_after_prior_kernels();
  const auto* y = static_cast<const __half*>(p.y);
  const int hw_out = p.h_out * p.w_out, chunks_n = (p.c_out + 7) / 8;
  const int64_t chunks = int64_t(p.n) * hw_out * chunks_n;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < chunks; idx += int64_t(gridDim.x) * blockDim.x) {
    const int m = int(idx / chunks_n), c = int(idx % chunks_n) * 8, count = std::min(8, p.c_out - c);
    const int64_t offset = int64_t(m) * p.c_out + c;
    float acc[8] = {};
    if (vec) {
      const uint4 raw = *reinterpret_cast<const uint4*>(y + offset);
      const auto* h2 = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 v = __half22float2(h2[j]);
        acc[2 * j] = v.x, acc[2 * j + 1] = v.y;
      }
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j)
        if (j < count) acc[j] = __half2float(y[offset + j]);
    }
    store_outputs8(p, hw_out, m, c, count, acc, vec);
  }
}

// ---- launchers ----

int grid_for(int64_t chunks, const CudaContext& ctx) {
  return int(std::clamp<int64_t>((chunks + 255) / 256, 1, int64_t(32) * std::max(ctx.sm_count, 1)));
}

// Statuses are ignored: this runs in destructors, which must not throw (as with cudaFree).
void destroy_descriptors(Conv2dCudnnPlan& plan) {
  if (plan.act_desc) cudnnDestroyActivationDescriptor(plan.act_desc);
  if (plan.bias_desc) cudnnDestroyTensorDescriptor(plan.bias_desc);
  if (plan.conv_desc) cudnnDestroyConvolutionDescriptor(plan.conv_desc);
  if (plan.w_desc) cudnnDestroyFilterDescriptor(plan.w_desc);
  if (plan.y_desc) cudnnDestroyTensorDescriptor(plan.y_desc);
  if (plan.x_desc) cudnnDestroyTensorDescriptor(plan.x_desc);
  plan.conv_desc = nullptr, plan.w_desc = nullptr, plan.y_desc = nullptr, plan.x_desc = nullptr;
  plan.bias_desc = nullptr, plan.act_desc = nullptr;
}

bool same_shape(const Conv2dParams& a, const Conv2dParams& b) {
  return a.n == b.n && a.h == b.h && a.w == b.w && a.c_in == b.c_in && a.c_out == b.c_out && a.kh == b.kh &&
         a.kw == b.kw && a.stride == b.stride && a.pad == b.pad && a.h_out == b.h_out && a.w_out == b.w_out &&
         (a.gn_stats != nullptr) == (b.gn_stats != nullptr);
}

}  // namespace

Conv2dCudnnPlan::Conv2dCudnnPlan(Conv2dCudnnPlan&& o) noexcept { *this = std::move(o); }

Conv2dCudnnPlan& Conv2dCudnnPlan::operator=(Conv2dCudnnPlan&& o) noexcept {
  if (this != &o) {
    destroy_descriptors(*this);
    handle = std::exchange(o.handle, nullptr);
    x_desc = std::exchange(o.x_desc, nullptr);
    y_desc = std::exchange(o.y_desc, nullptr);
    w_desc = std::exchange(o.w_desc, nullptr);
    conv_desc = std::exchange(o.conv_desc, nullptr);
    bias_desc = std::exchange(o.bias_desc, nullptr);
    act_desc = std::exchange(o.act_desc, nullptr);
    fused = o.fused;
    bias_offset = o.bias_offset;
    algo = o.algo;
    algo_workspace_bytes = o.algo_workspace_bytes;
    workspace_bytes = o.workspace_bytes;
    shape = o.shape;
  }
  return *this;
}

Conv2dCudnnPlan::~Conv2dCudnnPlan() { destroy_descriptors(*this); }

bool conv2d_cudnn_fuses(const Conv2dParams& p, std::string* why) {
  const char* unmet = p.scale ? "a scale"
                      : p.bias && p.bias_batch_stride ? "a bias row per image"
                      : p.act != Activation::None && p.act != Activation::Relu ? "an activation other than ReLU"
                      : p.residual && p.act != Activation::None && !p.act_after_residual
                          ? "the residual after the activation"
                          : nullptr;
  if (unmet && why) *why = cat("cuDNN's fused epilogue is act(conv + z + bias): it has no ", unmet);
  return unmet == nullptr;
}

Conv2dCudnnPlan make_conv2d_cudnn_plan(const Conv2dParams& p, cudnnHandle_t handle, size_t max_workspace_bytes,
                                       bool fused) {
  check_params(p, "conv2d_cudnn");
  if (!handle) fail("conv2d_cudnn: the cuDNN handle must be set");
  if (!conv2d_symmetric(p))
    fail("conv2d_cudnn: cuDNN pads both sides alike: h_out and w_out must be (h + 2 pad - kh) / stride + 1");
  std::string why;
  if (fused && !conv2d_cudnn_fuses(p, &why)) fail("conv2d_cudnn: ", why);
  Conv2dCudnnPlan plan;
  plan.handle = handle;
  plan.shape = p;
  plan.fused = fused;
  RTVD_CUDNN_CHECK(cudnnCreateTensorDescriptor(&plan.x_desc));
  RTVD_CUDNN_CHECK(cudnnCreateTensorDescriptor(&plan.y_desc));
  RTVD_CUDNN_CHECK(cudnnCreateFilterDescriptor(&plan.w_desc));
  RTVD_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&plan.conv_desc));
  RTVD_CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan.x_desc, CUDNN_TENSOR_NHWC, CUDNN_DATA_HALF, p.n, p.c_in, p.h, p.w));
  RTVD_CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan.y_desc, CUDNN_TENSOR_NHWC, CUDNN_DATA_HALF, p.n, p.c_out, p.h_out, p.w_out));
  // NHWC filter format = KRSC = OHWI.
  RTVD_CUDNN_CHECK(cudnnSetFilter4dDescriptor(plan.w_desc, CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC, p.c_out, p.c_in, p.kh, p.kw));
  RTVD_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(plan.conv_desc, p.pad, p.pad, p.stride, p.stride, 1, 1,
                                                   CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  RTVD_CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv_desc, CUDNN_TENSOR_OP_MATH));

  int max_count = 0, count = 0;
  RTVD_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max_count));
  std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(std::max(max_count, 1));
  RTVD_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle, plan.x_desc, plan.w_desc, plan.conv_desc, plan.y_desc,
                                                          int(perf.size()), &count, perf.data()));
  // The fused form without an activation takes IMPLICIT_PRECOMP_GEMM alone.
  const bool precomp_only = fused && p.act == Activation::None;
  const auto chosen = std::find_if(perf.begin(), perf.begin() + count, [&](const cudnnConvolutionFwdAlgoPerf_t& r) {
    return r.status == CUDNN_STATUS_SUCCESS && r.memory <= max_workspace_bytes &&
           (!precomp_only || r.algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM);
  });
  if (chosen == perf.begin() + count)
    fail("conv2d_cudnn: cuDNN has no algorithm for ", p.n, "x", p.h, "x", p.w, "x", p.c_in, " -> ", p.c_out,
         " (", p.kh, "x", p.kw, " stride ", p.stride, ") within ", max_workspace_bytes, " bytes of workspace");
  plan.algo = chosen->algo;
  RTVD_CUDNN_CHECK(cudnnSetConvolutionMathType(plan.conv_desc, chosen->mathType));
  RTVD_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(handle, plan.x_desc, plan.w_desc, plan.conv_desc, plan.y_desc,
                                                           plan.algo, &plan.algo_workspace_bytes));
  // With the prologue, pre(x) follows the algorithm's scratch, which a fused norm's partial statistics
  // share (the conv runs after the norm).
  plan.workspace_bytes = p.gn_stats ? conv2d_prepass_workspace_bytes(p, plan.algo_workspace_bytes)
                                    : plan.algo_workspace_bytes;
  if (fused) {
    RTVD_CUDNN_CHECK(cudnnCreateTensorDescriptor(&plan.bias_desc));
    RTVD_CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan.bias_desc, CUDNN_TENSOR_NHWC, CUDNN_DATA_HALF, 1, p.c_out, 1, 1));
    RTVD_CUDNN_CHECK(cudnnCreateActivationDescriptor(&plan.act_desc));
    RTVD_CUDNN_CHECK(cudnnSetActivationDescriptor(
        plan.act_desc, p.act == Activation::Relu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
        CUDNN_NOT_PROPAGATE_NAN, 0.0));
    plan.bias_offset = align_up(plan.workspace_bytes);
    plan.workspace_bytes = plan.bias_offset + align_up(size_t(p.c_out) * sizeof(__half));
  }
  return plan;
}

void conv2d_cudnn(const Conv2dParams& p, const Conv2dCudnnPlan& plan, const CudaContext& ctx, const GroupNormParams* norm) {
  check_params(p, "conv2d_cudnn");
  if (!plan.conv_desc) fail("conv2d_cudnn: the plan is empty");
  if (!same_shape(p, plan.shape)) fail("conv2d_cudnn: params differ from the plan's sizes or prologue");
  std::string why;
  if (plan.fused && !conv2d_cudnn_fuses(p, &why)) fail("conv2d_cudnn: ", why);
  if (plan.fused && p.act != plan.shape.act) fail("conv2d_cudnn: the fused plan was made for another activation");
  if (p.residual && p.residual == p.y) fail("conv2d_cudnn: residual must not alias y");
  if (ctx.workspace_bytes < plan.workspace_bytes)
    fail("conv2d_cudnn: needs ", plan.workspace_bytes, " bytes of ctx.workspace, has ", ctx.workspace_bytes);
  const NvtxRange range("conv2d_cudnn");
  auto* workspace = static_cast<uint8_t*>(ctx.workspace);
  RTVD_CUDNN_CHECK(cudnnSetStream(plan.handle, ctx.stream));

  const void* x = p.gn_stats ? conv2d_prepass(p, norm, plan.algo_workspace_bytes, ctx) : p.x;
  if (plan.fused) {
    // cuDNN reads the bias in fp16: the copy made with the weights, else one staged in the workspace now.
    void* staged = workspace + plan.bias_offset;
    const void* bias = staged;
    if (p.bias && p.bias_act && aligned16(p.bias_act)) bias = p.bias_act;
    else if (p.bias) cast({p.bias, staged, p.c_out, 1}, ctx);
    else RTVD_CUDA_CHECK(cudaMemsetAsync(staged, 0, size_t(p.c_out) * sizeof(__half), ctx.stream));
    // z is y's own buffer, ignored, without a residual (alpha2 = 0).
    const float alpha1 = 1.0f, alpha2 = p.residual ? 1.0f : 0.0f;
    RTVD_CUDNN_CHECK(cudnnConvolutionBiasActivationForward(
        plan.handle, &alpha1, plan.x_desc, x, plan.w_desc, p.weight, plan.conv_desc, plan.algo, workspace,
        plan.algo_workspace_bytes, &alpha2, plan.y_desc, p.residual ? p.residual : p.y, plan.bias_desc, bias,
        plan.act_desc, plan.y_desc, p.y));
    return;
  }
  const float alpha = 1.0f, beta = 0.0f;
  RTVD_CUDNN_CHECK(cudnnConvolutionForward(plan.handle, &alpha, plan.x_desc, x, plan.w_desc, p.weight, plan.conv_desc,
                                           plan.algo, workspace, plan.algo_workspace_bytes, &beta, plan.y_desc, p.y));
  if (p.scale || p.bias || p.act != Activation::None || p.residual) {
    const int64_t chunks = int64_t(p.n) * p.h_out * p.w_out * ((p.c_out + 7) / 8);
    const bool vec = p.c_out % 8 == 0 && aligned16(p.y) && aligned16(p.residual);
    launch_kernel("conv2d_cudnn epilogue", epilogue_kernel, grid_for(chunks, ctx), 256, 0, ctx.stream, p, vec);
  }
}

}  // namespace rtvd
