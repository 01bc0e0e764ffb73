// conv2d: NHWC convolution with a fused epilogue and an optional fused GroupNorm+SiLU prologue.
//   y = act(conv(pre(x), w) * scale[n,c] + bias[n,c]) + residual
//   or, with act_after_residual, y = act(conv(pre(x), w) * scale[n,c] + bias[n,c] + residual)
//   pre(x) = silu((x - mean[n,g]) * rstd[n,g] * gn_gamma[c] + gn_beta[c]) when gn_stats is set, else x.
// Zero padding applies to pre(x), as in PyTorch where the conv pads its (normalised) input: pad zeros before
// the first row and column, and after the last as many as h_out and w_out reach (conv2d_out_size).
#pragma once
#include "kernels/common/activation.h"

namespace rtvd {

struct Conv2dParams {
  const void* x = nullptr;         // (n, h, w, c_in) activations
  const void* weight = nullptr;    // (c_out, kh, kw, c_in) OHWI
  void* y = nullptr;               // (n, h_out, w_out, c_out)
  const void* residual = nullptr;  // (n, h_out, w_out, c_out) or null; added after the activation...
  bool act_after_residual = false;  // ...or before it (TAESD's blocks: relu(conv(x) + x))
  const float* scale = nullptr;    // null = 1; element (n, c) at n * scale_batch_stride + c
  const float* bias = nullptr;     // null = 0; element (n, c) at n * bias_batch_stride + c
  int scale_batch_stride = 0;      // 0: one row for the whole batch; c_out: one row per image (FiLM)
  int bias_batch_stride = 0;
  // (c_out) the one-row bias again in the activation type (fp16 on the GPU), or null: what cuDNN's fused
  // epilogue reads, where it would otherwise convert `bias` into its workspace on every call (a launch per conv).
  const void* bias_act = nullptr;
  const float* gn_stats = nullptr;  // (n, gn_groups, 2) mean, rstd; null = no prologue
  const float* gn_gamma = nullptr;  // (c_in)
  const float* gn_beta = nullptr;   // (c_in)
  int gn_groups = 0;
  int n = 0, h = 0, w = 0, c_in = 0, c_out = 0;
  int kh = 1, kw = 1, stride = 1, pad = 0;
  int h_out = 0, w_out = 0;  // conv2d_out_size(h, kh, stride, pad, pad_end) with pad_end = pad or pad + 1
  Activation act = Activation::None;  // None, Silu or Relu
  void* workspace = nullptr;  // CPU: im2col scratch of conv2d_cpu_workspace_bytes()
  size_t workspace_bytes = 0;
};

// Output size with pad zeros before the input and pad_end after it. PyTorch's Conv2d pads both sides alike;
// diffusers' Downsample2D pads (0, 1, 0, 1) and then convolves with stride 2 and no padding: pad 0, pad_end 1,
// so that a 512-pixel side gives 256 outputs where pad_end 0 would give 255.
inline int conv2d_out_size(int in, int k, int stride, int pad, int pad_end) {
  return (in + pad + pad_end - k) / stride + 1;
}
inline int conv2d_out_size(int in, int k, int stride, int pad) { return conv2d_out_size(in, k, stride, pad, pad); }
// Whether out is an output size conv2d takes: pad_end is pad (symmetric) or pad + 1 (one more row or column
// of zeros after the input, as Downsample2D).
inline bool conv2d_out_size_ok(int in, int k, int stride, int pad, int out) {
  return out > 0 && (out == conv2d_out_size(in, k, stride, pad) || out == conv2d_out_size(in, k, stride, pad, pad + 1));
}
// Whether p pads both sides alike, as cuDNN's descriptors do.
inline bool conv2d_symmetric(const Conv2dParams& p) {
  return p.h_out == conv2d_out_size(p.h, p.kh, p.stride, p.pad) &&
         p.w_out == conv2d_out_size(p.w, p.kw, p.stride, p.pad);
}

size_t conv2d_cpu_workspace_bytes(const Conv2dParams& p);
void conv2d_cpu(const Conv2dParams& p);

}  // namespace rtvd
