// The GEMM of the CPU conv2d and linear with their shared epilogue, shared out to OpenMP's threads:
//   y = act(a w^T * scale[image, c] + bias[image, c]) + residual,   a (rows, k), w (cols, k) row-major,
//   or with act_after_residual  y = act(a w^T * scale[image, c] + bias[image, c] + residual).
// A residual that enters linearly (no scale, and no activation between it and the GEMM) is accumulated by
// the GEMM itself (beta = 1), which also lets y alias it: the in-place skip connection. Otherwise y must not
// alias the residual.
#pragma once
#include <cstdint>

#include "kernels/common/activation.h"

namespace rtvd::cpu {

struct GemmEpilogue {
  const float* scale = nullptr;  // null = 1; the row of image i starts at scale + i * scale_stride
  const float* bias = nullptr;   // null = 0; likewise with bias_stride
  int64_t scale_stride = 0, bias_stride = 0;
  Activation act = Activation::None;
  const float* residual = nullptr;  // (rows, cols) or null, indexed like y
  bool act_after_residual = false;  // the activation takes the sum with the residual (TAESD's blocks)
  int64_t rows_per_image = 1;       // GEMM rows that belong to one image (for the strides above)
  int64_t cols = 0;                 // GEMM columns = output channels = row stride of y

  bool residual_in_gemm() const { return residual && !scale && (act == Activation::None || act_after_residual); }
  // Throws Error when y aliases a residual the GEMM cannot accumulate. Call before the parallel region:
  // an exception must not leave one.
  void check_output(const float* y) const;
};

// y[row0 : row0 + rows, :] = epilogue(a w^T), with a pointing at GEMM row row0 (leading dimension lda)
// and w (cols, k), computed by all the threads of the enclosing parallel region, each of which must call
// it (or by the caller alone outside one): it is a worksharing loop over pieces of y, without a barrier
// at its end. Once cpu::cancelled() (cpu_cancel.h) the remaining pieces are skipped, y left incomplete.
void gemm_team(const GemmEpilogue& e, const float* a, int64_t lda, const float* w, int64_t k, float* y,
               int64_t row0, int64_t rows);

}  // namespace rtvd::cpu
