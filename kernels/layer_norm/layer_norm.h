// layer_norm: y = (x - mean) / sqrt(var + eps) * gamma + beta over the last dimension.
#pragma once
#include "kernels/common/activation.h"

namespace rtvd {

struct LayerNormParams {
  const void* x = nullptr;  // (rows, c)
  void* y = nullptr;        // (rows, c)
  const float* gamma = nullptr;
  const float* beta = nullptr;
  int rows = 0, c = 0;
  float eps = 1e-5f;
};

void layer_norm_cpu(const LayerNormParams& p);

}  // namespace rtvd
