// Epilogue of the CPU GEMM ops: one pass over each output row while it is still in cache.
#include "kernels/cpu/gemm_epilogue.h"

#include <cstring>

#include "kernels/cpu/vector_math.h"
#include "kernels/error.h"

namespace rtvd::cpu {
namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelElements = 1 << 15;

}  // namespace

float prepare_gemm_output(const GemmEpilogue& e, float* y, int64_t row0, int64_t rows) {
  if (!e.residual) return 0.0f;
  if (!e.residual_in_gemm()) {
    if (e.residual == y) fail("GEMM epilogue: the output aliases the residual under a scale or activation");
    return 0.0f;
  }
  if (e.residual != y) {
    const int64_t cols = e.cols;
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelElements)
    for (int64_t r = row0; r < row0 + rows; ++r)
      std::memcpy(y + r * cols, e.residual + r * cols, sizeof(float) * cols);
  }
  return 1.0f;
}

void finish_gemm_output(const GemmEpilogue& e, float* y, int64_t row0, int64_t rows) {
  const float* residual = e.residual_in_gemm() ? nullptr : e.residual;
  const bool silu = e.act == Activation::Silu;
  if (!e.scale && !e.bias && !silu && !residual) return;
  const int64_t cols = e.cols;
  // One short loop per step rather than one loop with branches inside: each vectorises and the row
  // stays in L1 between them.
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelElements)
  for (int64_t r = row0; r < row0 + rows; ++r) {
    float* yr = y + r * cols;
    const int64_t image = r / e.rows_per_image;
    if (e.scale) {
      const float* s = e.scale + image * e.scale_stride;
      for (int64_t c = 0; c < cols; ++c) yr[c] *= s[c];
    }
    if (e.bias) {
      const float* b = e.bias + image * e.bias_stride;
      for (int64_t c = 0; c < cols; ++c) yr[c] += b[c];
    }
    if (silu) {
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) yr[c] = silu_fast(yr[c]);
    }
    if (residual) {
      const float* res = residual + r * cols;
      for (int64_t c = 0; c < cols; ++c) yr[c] += res[c];
    }
  }
}

}  // namespace rtvd::cpu
