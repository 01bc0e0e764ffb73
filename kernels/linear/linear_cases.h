// linear's cases: the one table that the correctness tests (tests/ops/linear_test.cpp) and the kernel
// benchmark both run. Production shapes (the SD 2.1 U-Net's GEMMs at 64x64 at batch 2: the fused QKV
// projection, to_out and the feed-forward with their skip connections, GEGLU's 320 -> 2x1280 projection, the
// cross-attention keys and values of 2 x 77 context tokens, the time embedding's few rows; the same U-Net's
// GEMMs at batch 1, most of whose outputs fill less than a wave of tiles, at 4096 to 64 tokens; SDXL's at
// 1024x1024 (its 64x64 and 32x32 latents' levels); the CLIP text
// encoders' MLP up-projections with quick GELU and GELU) and hostile ones (n or k not a multiple of 8, a
// misaligned x, y in place of the residual, a handful of rows, each activation before a residual). Plain C++.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "kernels/linear/linear.h"

namespace rtvd {

enum class LinearResidual { None, Separate, InPlace };  // InPlace: y is the residual's buffer (h += proj(h))

struct LinearCase {
  std::string name;  // unique, [A-Za-z0-9_]
  int m = 0, n = 0, k = 0;
  bool bias = false;
  LinearResidual residual = LinearResidual::None;
  Activation act = Activation::None;
  int x_misalign_bytes = 0;  // x starts this many bytes past a 16-byte boundary (the caller offsets it)
  bool production = false;
  std::string hostile = "";  // "" for none

  double flops() const { return 2.0 * m * double(n) * k; }
};

const std::vector<LinearCase>& linear_cases();

// The case's params over the caller's buffers: x (m, k), w (n, k), bias (n) fp32, residual (m, n) (ignored
// in place: y holds it), y (m, n).
LinearParams linear_params(const LinearCase& c, const void* x, const void* w, const float* bias, const void* residual,
                           void* y);

}  // namespace rtvd
