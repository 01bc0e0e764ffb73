// conv2d's cases: the one table that the correctness tests (tests/ops/conv2d_test.cpp) and the kernel
// benchmark both run. Production shapes (the SD U-Net's hot 3x3 convs at batch 2: 320 channels at 64x64, 640
// at 32x32, 1280 at 16x16; its two lowest levels at batch 1; the default model's convs) and hostile ones
// (c_in or c_out not a multiple of 8, odd sizes, stride 2, 1x1 and 5x5, misaligned x, y in place of the
// residual), and the autoencoders' (TAESD's ReLU after the residual, the VAE's Downsample2D with its extra row
// and column of padding after the input). Plain C++: the CPU build and the tests include it without the CUDA
// toolkit.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "kernels/conv2d/conv2d.h"

namespace rtvd {

// Where a scale or bias vector comes from: absent, one row for the whole batch (folded BatchNorm, conv
// bias) or one row per image (FiLM).
enum class ConvRows { None, Channel, Image };

struct Conv2dCase {
  std::string name;  // unique, [A-Za-z0-9_] (a test and a benchmark row are named after it)
  int n = 2, h = 0, w = 0, c_in = 0, c_out = 0;
  int k = 3, stride = 1, pad = 1;  // square kernel
  int pad_end = -1;                // zeros after the input: -1 = pad; pad + 1 for diffusers' Downsample2D
  bool residual = false;           // + residual after the activation...
  bool act_after_residual = false;  // ...or before it
  ConvRows scale = ConvRows::None, bias = ConvRows::None;
  Activation act = Activation::None;  // None, Silu or Relu
  int gn_groups = 0;          // > 0: the GroupNorm+SiLU prologue with that many groups
  int x_misalign_bytes = 0;   // x starts this many bytes past a 16-byte boundary (the caller offsets it)
  bool in_place = false;      // y is the residual's buffer (needs residual)
  bool production = false;    // a shape the shipped models run
  std::string hostile = "";   // what makes it hard, "" for none

  int end() const { return pad_end < 0 ? pad : pad_end; }
  int h_out() const { return conv2d_out_size(h, k, stride, pad, end()); }
  int w_out() const { return conv2d_out_size(w, k, stride, pad, end()); }
  double flops() const { return 2.0 * n * h_out() * w_out() * double(c_out) * k * k * c_in; }
};

const std::vector<Conv2dCase>& conv2d_cases();

// Element counts of a case's operands (0 for one it has not): x, weight, y (= residual), scale, bias,
// gn_stats (mean, rstd per image and group), gn_gamma and gn_beta.
struct Conv2dSizes {
  size_t x, weight, y, scale, bias, gn_stats, gn_gamma, gn_beta;
};
Conv2dSizes conv2d_sizes(const Conv2dCase& c);

// Pointers to a case's operands, in buffers the caller allocated (activations and weights of the caller's
// element type, the vectors fp32) and offset as the case says; those the case has not are ignored.
struct Conv2dOperands {
  const void* x = nullptr;
  const void* weight = nullptr;
  void* y = nullptr;
  const void* residual = nullptr;  // ignored in place: y holds the residual
  const float* scale = nullptr;
  const float* bias = nullptr;
  const float* gn_stats = nullptr;
  const float* gn_gamma = nullptr;
  const float* gn_beta = nullptr;
};
// The case's params over those operands (no workspace).
Conv2dParams conv2d_params(const Conv2dCase& c, const Conv2dOperands& o);

}  // namespace rtvd
