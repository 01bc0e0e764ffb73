// A GEMM shared out to a parallel region's threads in pieces, each a single-threaded sgemm seeded with
// the residual and followed by the epilogue while the piece is still in cache.
#include "kernels/common/cpu_gemm.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "kernels/common/cpu_cancel.h"
#include "kernels/common/cpu_threading.h"
#include "kernels/common/cpu_vector_math.h"

namespace rtvd::cpu {
namespace {

// Pieces depend on the GEMM's shape alone, never on the thread count, so that every --threads computes
// every output element by the same sgemm call: the frames are the same bits on any machine load.
// A piece is about kPieceMacs multiply-adds (~0.5 ms on one core): enough pieces per op that a thread
// slowed by another process takes fewer of them rather than holding the others back...
constexpr int64_t kPieceMacs = int64_t(1) << 23;
// ...but at least this many rows, as each sgemm call packs its w tile again: at 2^22 and 128 rows a frame
// of the default model ran 10% slower on one thread than with one call per thread; at these, as fast
// (docs/perf-notes.md). Column splits fall on 16 floats (64 bytes), so that pieces never share a cache
// line of y.
constexpr int64_t kMinPieceRows = 256;
constexpr int64_t kColumnAlign = 16;

// How y (rows, cols) is cut: along the rows, or along the columns when there are fewer rows than
// columns (then every piece needs all of a, but a row split would leave tiny sgemms).
struct Pieces {
  bool by_rows = true;
  int64_t size = 0, count = 0;  // rows or columns per piece; pieces

  Pieces(int64_t rows, int64_t cols, int64_t k) {
    by_rows = rows >= cols;
    const int64_t total = by_rows ? rows : cols, other = by_rows ? cols : rows;
    if (total == 0 || other == 0) return;
    int64_t most = std::max<int64_t>(kPieceMacs / std::max<int64_t>(other * k, 1), 1);
    most = by_rows ? std::max(most, kMinPieceRows) : std::max(most / kColumnAlign * kColumnAlign, kColumnAlign);
    count = (total + most - 1) / most;
    size = (total + count - 1) / count;  // even pieces: the last is not a sliver
    if (!by_rows) size = (size + kColumnAlign - 1) / kColumnAlign * kColumnAlign;
    count = (total + size - 1) / size;
  }
};

// y[r, cols] += the residual's row r.
void add_residual(const float* residual, int64_t r, int64_t stride, float* yr, Range cols) {
  const float* res = residual + r * stride;
  for (int64_t c = cols.begin; c < cols.end; ++c) yr[c] += res[c];
}

// scale, bias, activation and the residual the GEMM did not accumulate, on y[rows, cols] of the tile.
// One short loop per step rather than one loop with branches inside: each vectorises and the row stays
// in L1 between them.
void finish_tile(const GemmEpilogue& e, float* y, Range rows, Range cols) {
  const float* residual = e.residual_in_gemm() ? nullptr : e.residual;
  if (!e.scale && !e.bias && e.act == Activation::None && !residual) return;
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
    if (residual && e.act_after_residual) add_residual(residual, r, e.cols, yr, cols);
    if (e.act == Activation::Silu) {
#pragma omp simd
      for (int64_t c = cols.begin; c < cols.end; ++c) yr[c] = silu_fast(yr[c]);
    } else if (e.act == Activation::QuickGelu) {
#pragma omp simd
      for (int64_t c = cols.begin; c < cols.end; ++c) yr[c] = quick_gelu_fast(yr[c]);
    } else if (e.act == Activation::Relu) {
#pragma omp simd
      for (int64_t c = cols.begin; c < cols.end; ++c) yr[c] = std::max(yr[c], 0.0f);
    } else if (e.act != Activation::None) {
      // GELU's erfc and tanh are scalar libm calls: fine for the CLIP MLPs (77-154 rows), which are all that
      // use them in a GEMM.
      for (int64_t c = cols.begin; c < cols.end; ++c) yr[c] = apply_activation(yr[c], e.act);
    }
    if (residual && !e.act_after_residual) add_residual(residual, r, e.cols, yr, cols);
  }
}

}  // namespace

void GemmEpilogue::check_output(const float* y) const {
  if (residual == y && !residual_in_gemm())
    fail("GEMM epilogue: the output aliases the residual under a scale or activation");
}

void gemm_team(const GemmEpilogue& e, const float* a, int64_t lda, const float* w, int64_t k, float* y,
               int64_t row0, int64_t rows) {
  const Pieces pieces(rows, e.cols, k);
  const bool in_gemm = e.residual_in_gemm();
  // Dynamic: a thread that another process slows down takes fewer pieces. No barrier at the end: the
  // callers' next barrier (or their region's end) follows.
#pragma omp for schedule(dynamic, 1) nowait
  for (int64_t i = 0; i < pieces.count; ++i) {
    if (cancelled()) continue;
    Range r{row0, row0 + rows}, c{0, e.cols};  // piece i: rows r, columns c of y
    if (pieces.by_rows) r = {row0 + i * pieces.size, std::min(row0 + (i + 1) * pieces.size, row0 + rows)};
    else c = {i * pieces.size, std::min((i + 1) * pieces.size, e.cols)};
    if (in_gemm && e.residual != y)
      for (int64_t row = r.begin; row < r.end; ++row)
        std::memcpy(y + row * e.cols + c.begin, e.residual + row * e.cols + c.begin, sizeof(float) * c.size());
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(r.size()), int(c.size()), int(k), 1.0f,
                a + (r.begin - row0) * lda, int(lda), w + c.begin * k, int(k), in_gemm ? 1.0f : 0.0f,
                y + r.begin * e.cols + c.begin, int(e.cols));
    finish_tile(e, y, r, c);
  }
}

}  // namespace rtvd::cpu
