// conv2d: NHWC convolution with a fused epilogue and an optional fused GroupNorm+SiLU prologue.
//   y = act(conv(pre(x), w) * scale[n,c] + bias[n,c]) + residual
//   pre(x) = silu((x - mean[n,g]) * rstd[n,g] * gn_gamma[c] + gn_beta[c]) when gn_stats is set, else x.
// Zero padding applies to pre(x), as in PyTorch where the conv pads its (normalised) input.
#pragma once
#include "kernels/common/activation.h"

namespace rtvd {

struct Conv2dParams {
  const void* x = nullptr;         // (n, h, w, c_in) activations
  const void* weight = nullptr;    // (c_out, kh, kw, c_in) OHWI
  void* y = nullptr;               // (n, h_out, w_out, c_out)
  const void* residual = nullptr;  // (n, h_out, w_out, c_out) or null; added after the activation
  const float* scale = nullptr;    // null = 1; element (n, c) at n * scale_batch_stride + c
  const float* bias = nullptr;     // null = 0; element (n, c) at n * bias_batch_stride + c
  int scale_batch_stride = 0;      // 0: one row for the whole batch; c_out: one row per image (FiLM)
  int bias_batch_stride = 0;
  const float* gn_stats = nullptr;  // (n, gn_groups, 2) mean, rstd; null = no prologue
  const float* gn_gamma = nullptr;  // (c_in)
  const float* gn_beta = nullptr;   // (c_in)
  int gn_groups = 0;
  int n = 0, h = 0, w = 0, c_in = 0, c_out = 0;
  int kh = 1, kw = 1, stride = 1, pad = 0;
  int h_out = 0, w_out = 0;  // (h + 2 pad - kh) / stride + 1
  Activation act = Activation::None;
  void* workspace = nullptr;  // CPU: im2col scratch of conv2d_cpu_workspace_bytes()
  size_t workspace_bytes = 0;
};

inline int conv2d_out_size(int in, int k, int stride, int pad) { return (in + 2 * pad - k) / stride + 1; }

size_t conv2d_cpu_workspace_bytes(const Conv2dParams& p);
void conv2d_cpu(const Conv2dParams& p);

}  // namespace rtvd
