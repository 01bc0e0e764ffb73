// linear: y = act(x w^T + bias) + residual, the PyTorch nn.Linear weight layout.
#pragma once
#include "kernels/common/activation.h"

namespace rtvd {

struct LinearParams {
  const void* x = nullptr;         // (m, k)
  const void* w = nullptr;         // (n, k) row-major
  const float* bias = nullptr;     // (n) or null
  // (n) the same bias in the activation type (fp16 on the GPU), or null: what a cuBLASLt that takes its bias only
  // in fp16 reads, where it would otherwise convert `bias` into its workspace on every call (a launch per linear).
  const void* bias_act = nullptr;
  const void* residual = nullptr;  // (m, n) or null; added after the activation
  void* y = nullptr;               // (m, n)
  int m = 0, n = 0, k = 0;
  Activation act = Activation::None;  // any of activation.h's, applied before the residual
};

void linear_cpu(const LinearParams& p);

}  // namespace rtvd
