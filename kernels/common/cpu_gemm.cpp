// One thread's tile of a GEMM: seed with the residual, single-threaded sgemm, then the epilogue on the
// tile while it is still in cache.
#include "kernels/common/cpu_gemm.h"

#include <cblas.h>

#include <cstring>

#include "kernels/common/cpu_threading.h"
#include "kernels/common/cpu_vector_math.h"
#include "kernels/common/error.h"

namespace rtvd::cpu {
namespace {

// Column splits fall on 16 floats (64 bytes): threads never share a cache line of y.
constexpr int64_t kColumnAlign = 16;

// scale, bias, activation and the residual the GEMM did not accumulate, on y[rows, cols] of the tile.
// One short loop per step rather than one loop with branches inside: each vectorises and the row stays
// in L1 between them.
void finish_tile(const GemmEpilogue& e, float* y, Range rows, Range cols) {
  const float* residual = e.residual_in_gemm() ? nullptr : e.residual;
  const bool silu = e.act == Activation::Silu;
  if (!e.scale && !e.bias && !silu && !residual) return;
  for (int64_t r = rows.begin; r < rows.end; ++r) {
    float* yr = y + r * e.cols;
    const int64_t image = r / e.rows_per_image;
    if (e.scale) {
      const float* s = e.scale + image * e.scale_stride;
      for (int64_t c = cols.begin; c < cols.end; ++c) yr[c] *= s[c];
    }
    if (e.bias) {
      const float* b = e.bias + image * e.bias_stride;
      for (int64_t c = cols.begin; c < cols.end; ++c) yr[c] += b[c];
    }
    if (silu) {
#pragma omp simd
      for (int64_t c = cols.begin; c < cols.end; ++c) yr[c] = silu_fast(yr[c]);
    }
    if (residual) {
      const float* res = residual + r * e.cols;
      for (int64_t c = cols.begin; c < cols.end; ++c) yr[c] += res[c];
    }
  }
}

}  // namespace

void GemmEpilogue::check_output(const float* y) const {
  if (residual == y && !residual_in_gemm())
    fail("GEMM epilogue: the output aliases the residual under a scale or activation");
}

void gemm_share(const GemmEpilogue& e, const float* a, int64_t lda, const float* w, int64_t k, float* y,
                int64_t row0, int64_t rows) {
  Range mine_rows{row0, row0 + rows}, mine_cols{0, e.cols};
  if (rows >= e.cols) {
    const Range share = thread_share(rows);
    mine_rows = {row0 + share.begin, row0 + share.end};
  } else {
    mine_cols = thread_share(e.cols, kColumnAlign);
  }
  if (mine_rows.size() == 0 || mine_cols.size() == 0) return;

  float beta = 0.0f;
  if (e.residual_in_gemm()) {
    beta = 1.0f;
    if (e.residual != y)
      for (int64_t r = mine_rows.begin; r < mine_rows.end; ++r)
        std::memcpy(y + r * e.cols + mine_cols.begin, e.residual + r * e.cols + mine_cols.begin,
                    sizeof(float) * mine_cols.size());
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(mine_rows.size()), int(mine_cols.size()), int(k),
              1.0f, a + (mine_rows.begin - row0) * lda, int(lda), w + mine_cols.begin * k, int(k), beta,
              y + mine_rows.begin * e.cols + mine_cols.begin, int(e.cols));
  finish_tile(e, y, mine_rows, mine_cols);
}

}  // namespace rtvd::cpu
