// The epilogue shared by the CPU GEMM ops (conv2d, linear), applied to rows of the GEMM output y:
//   y = act(gemm * scale[image, c] + bias[image, c]) + residual
// A residual that enters linearly (no scale, no activation) is accumulated by the GEMM itself (beta = 1),
// which also lets y alias it: the in-place skip connection. Otherwise y must not alias the residual.
#pragma once
#include <cstdint>

#include "kernels/common.h"

namespace rtvd::cpu {

struct GemmEpilogue {
  const float* scale = nullptr;  // null = 1; the row of image i starts at scale + i * scale_stride
  const float* bias = nullptr;   // null = 0; likewise with bias_stride
  int64_t scale_stride = 0, bias_stride = 0;
  Activation act = Activation::None;
  const float* residual = nullptr;  // (rows, cols) or null, indexed like y
  int64_t rows_per_image = 1;       // GEMM rows that belong to one image (for the strides above)
  int64_t cols = 0;

  bool residual_in_gemm() const { return residual && !scale && act == Activation::None; }
};

// Before the GEMM that writes rows [row0, row0 + rows) of y: seeds them with the residual when the GEMM
// accumulates it. Returns the GEMM's beta (0 or 1); throws Error for an alias it cannot serve.
float prepare_gemm_output(const GemmEpilogue& e, float* y, int64_t row0, int64_t rows);

// After that GEMM: scale, bias, activation and the residual it did not accumulate.
void finish_gemm_output(const GemmEpilogue& e, float* y, int64_t row0, int64_t rows);

}  // namespace rtvd::cpu
