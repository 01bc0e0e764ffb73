// attention on the CPU: per (image, head) and block of queries, S = scale q k^T (sgemm into the
// workspace), a numerically stable softmax over each row of S, then o = S v (sgemm straight into o).
// The OpenMP threads take pieces of each block's queries as they come free. Causal: a piece computes scores
// only up to its last query's key, and each row's softmax covers its own keys, zeros after them.
// Queries are taken in blocks so that the score scratch stays bounded for long sequences: a 4096-token
// self-attention would otherwise need 64 MiB of scores per head.
#include "kernels/attention/attention.h"

#include <algorithm>

#include "base/error.h"
#include "kernels/common/cpu_cancel.h"
#include "kernels/common/cpu_threading.h"
#include "kernels/common/cpu_vector_math.h"

namespace rtvd {
namespace {

constexpr int64_t kScoreFloats = int64_t(1) << 20;  // 4 MiB of scores per block...
constexpr int64_t kParallelMacs = int64_t(1) << 18;
// Queries per piece of work: the pieces depend on the shapes alone, never on the thread count, so every
// --threads gives the same bits; 32 rows of S are ~0.1-2 ms of work at the U-Net's lengths (256-16384).
constexpr int64_t kPieceRows = 32;
// ...but at least 8 pieces per block (16 MiB of scores at 16384 tokens), since a block ends at a
// barrier: a thread slowed by another process then takes fewer of them rather than holding the rest.
constexpr int64_t kMinBlockRows = 8 * kPieceRows;

// Queries per block: as many as fit kScoreFloats (or kMinBlockRows), spread evenly over the blocks.
int64_t block_rows(const AttentionParams& p) {
  const int64_t q_len = std::max(p.q_len, 1);
  const int64_t most = std::max(kScoreFloats / std::max(p.kv_len, 1), kMinBlockRows);
  const int64_t blocks = (q_len + most - 1) / most;
  return (q_len + blocks - 1) / blocks;
}

// Largest of row[0, cols). A float max does not vectorise under the default -ftrapping-math, and one
// running maximum is a chain of dependent compares: 16 independent ones run ~5x faster.
float row_max(const float* row, int cols) {
  constexpr int kLanes = 16;
  float lane[kLanes];
  std::fill_n(lane, kLanes, row[0]);
  int j = 0;
  for (; j + kLanes <= cols; j += kLanes)
    for (int u = 0; u < kLanes; ++u) lane[u] = std::max(lane[u], row[j + u]);
  float max = *std::max_element(lane, lane + kLanes);
  for (; j < cols; ++j) max = std::max(max, row[j]);
  return max;
}

// Row r of s (rows, cols; leading dimension ld) becomes the softmax of its first keys(r) = min(cols, keys0 + r)
// scores, exp(s - max) / sum, and zeros after them. keys0: cols when no key is masked; under the causal mask,
// row 0's query index + 1. Zeros rather than -inf scores: exp_fast clamps its argument, so exp(-inf) is not 0.
void softmax_rows(float* s, int64_t rows, int cols, int64_t ld, int64_t keys0) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = s + r * ld;
    const int keys = int(std::min<int64_t>(cols, keys0 + r));
    const float max = row_max(row, keys);
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < keys; ++j) {
      row[j] = cpu::exp_fast(row[j] - max);
      sum += row[j];
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (int j = 0; j < keys; ++j) row[j] *= inv;
    std::fill(row + keys, row + cols, 0.0f);
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
  if (!attention_causal_ok(p)) fail("attention_cpu: ", kAttentionCausalUnmet, " (q_len ", p.q_len, ", kv_len ", p.kv_len, ")");
  cpu::use_single_threaded_blas();
  const auto* q = static_cast<const float*>(p.q);
  const auto* k = static_cast<const float*>(p.k);
  const auto* v = static_cast<const float*>(p.v);
  auto* o = static_cast<float*>(p.o);
  auto* scores = static_cast<float*>(p.workspace);  // (block, kv_len)
  const int64_t block = block_rows(p);
  const int64_t macs = 2 * int64_t(p.batch) * p.heads * p.q_len * p.kv_len * p.head_dim;
  const int64_t blocks_per_head = (p.q_len + block - 1) / block;
  const int64_t blocks = int64_t(p.batch) * p.heads * blocks_per_head;
  cpu::LoopStop stop;
#pragma omp parallel if (macs >= kParallelMacs)
  for (int64_t i = 0; i < blocks; ++i) {
    // Also the barrier that keeps a thread from writing rows of S for this block while another still
    // reads them for the last one.
    if (stop(i)) break;
    const int b = int(i / (int64_t(p.heads) * blocks_per_head)), h = int(i / blocks_per_head % p.heads);
    const int64_t t0 = i % blocks_per_head * block;
    const int64_t col = int64_t(h) * p.head_dim;
    const float* kh = k + int64_t(b) * p.kv_len * p.k_stride + col;  // (kv_len, head_dim), ld k_stride
    const float* vh = v + int64_t(b) * p.kv_len * p.v_stride + col;  // (kv_len, head_dim), ld v_stride
    const int64_t block_len = std::min(block, p.q_len - t0);
    // Pieces of the block's queries, handed out as threads come free: each piece owns its rows of S from
    // end to end. No barrier after: the next block's stop() is one.
#pragma omp for schedule(dynamic, 1) nowait
    for (int64_t r = 0; r < block_len; r += kPieceRows) {
      const int rows = int(std::min(kPieceRows, block_len - r));
      const int64_t first = t0 + r;  // the piece's first query, within the image
      const int64_t token = int64_t(b) * p.q_len + first;
      // Keys the piece needs: all, or under the causal mask those up to its last query.
      const int keys = p.causal ? int(std::min<int64_t>(p.kv_len, first + rows)) : p.kv_len;
      float* s = scores + r * p.kv_len;  // (rows, keys), ld kv_len
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, p.head_dim, p.scale,
                  q + token * p.q_stride + col, p.q_stride, kh, p.k_stride, 0.0f, s, p.kv_len);
      softmax_rows(s, rows, keys, p.kv_len, p.causal ? first + 1 : keys);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, p.head_dim, keys, 1.0f, s, p.kv_len, vh,
                  p.v_stride, 0.0f, o + token * p.o_stride + col, p.o_stride);
    }
  }
}

}  // namespace rtvd
