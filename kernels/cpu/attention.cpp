// attention on the CPU: per (image, head) and block of queries, S = scale q k^T (sgemm into the
// workspace), a numerically stable softmax over each row of S, then o = S v (sgemm straight into o).
// Queries are taken in blocks so that the score scratch stays bounded (and cache-sized) for long
// sequences: a 4096-token self-attention would otherwise need 64 MiB of scores per head.
#include "kernels/attention.h"

#include <cblas.h>

#include <algorithm>

#include "kernels/cpu/vector_math.h"
#include "kernels/error.h"

namespace rtvd {
namespace {

constexpr int64_t kScoreFloats = int64_t(1) << 20;  // 4 MiB of scores per block
constexpr int64_t kParallelElements = 1 << 15;

int64_t block_rows(const AttentionParams& p) {
  return std::clamp<int64_t>(kScoreFloats / std::max(p.kv_len, 1), 1, std::max(p.q_len, 1));
}

// Each row of s (rows, cols) becomes softmax(row): exp(s - max) / sum.
void softmax_rows(float* s, int64_t rows, int cols) {
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    float* row = s + r * cols;
    float max = row[0];
    for (int j = 1; j < cols; ++j) max = std::max(max, row[j]);
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < cols; ++j) {
      row[j] = cpu::exp_fast(row[j] - max);
      sum += row[j];
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (int j = 0; j < cols; ++j) row[j] *= inv;
  }
}

}  // namespace

size_t attention_cpu_workspace_bytes(const AttentionParams& p) {
  return sizeof(float) * size_t(block_rows(p)) * size_t(p.kv_len);
}

void attention_cpu(const AttentionParams& p) {
  const size_t needed = attention_cpu_workspace_bytes(p);
  if (p.workspace_bytes < needed)
    fail("attention_cpu: workspace of ", p.workspace_bytes, " bytes, needs ", needed);
  const auto* q = static_cast<const float*>(p.q);
  const auto* k = static_cast<const float*>(p.k);
  const auto* v = static_cast<const float*>(p.v);
  auto* o = static_cast<float*>(p.o);
  auto* scores = static_cast<float*>(p.workspace);  // (rows, kv_len)
  const int64_t block = block_rows(p);
  for (int b = 0; b < p.batch; ++b) {
    for (int h = 0; h < p.heads; ++h) {
      const int64_t col = int64_t(h) * p.head_dim;
      const float* kh = k + int64_t(b) * p.kv_len * p.k_stride + col;  // (kv_len, head_dim), ld k_stride
      const float* vh = v + int64_t(b) * p.kv_len * p.v_stride + col;  // (kv_len, head_dim), ld v_stride
      for (int64_t t0 = 0; t0 < p.q_len; t0 += block) {
        const int rows = int(std::min(block, p.q_len - t0));
        const int64_t token = int64_t(b) * p.q_len + t0;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, p.kv_len, p.head_dim, p.scale,
                    q + token * p.q_stride + col, p.q_stride, kh, p.k_stride, 0.0f, scores, p.kv_len);
        softmax_rows(scores, rows, p.kv_len);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, p.head_dim, p.kv_len, 1.0f, scores,
                    p.kv_len, vh, p.v_stride, 0.0f, o + token * p.o_stride + col, p.o_stride);
      }
    }
  }
}

}  // namespace rtvd
