// group_norm: statistics per (image, group) over (h*w, channels of the group); optional affine + SiLU.
// With y == null only the statistics are written (the prologue pre-pass of a fused conv).
#pragma once
#include "kernels/common/activation.h"

namespace rtvd {

struct GroupNormParams {
  const void* x = nullptr;       // (n, hw, c)
  void* y = nullptr;             // (n, hw, c) or null: statistics only; may be x
  float* stats = nullptr;        // (n, groups, 2): mean, rstd = 1/sqrt(var + eps), biased variance
  const float* gamma = nullptr;  // (c)
  const float* beta = nullptr;   // (c)
  int n = 0, hw = 0, c = 0, groups = 0;
  float eps = 1e-5f;
  Activation act = Activation::None;
};

void group_norm_cpu(const GroupNormParams& p);

}  // namespace rtvd
