// attention as cuBLASLt GEMM, softmax, cuBLASLt GEMM: see attention_gemm.cuh.
//
// cuBLASLt is column-major; attention.h's row-major (tokens, stride) matrices are its transposes. Per chunk of
// n query rows starting at row r0 (attention_gemm_chunks.h):
//   S = scale q kᵀ is, per head, column-major Sᵀ (kv_len x n, ld kv_pitch) = op_T(k) (kv_len x d) * q (d x n),
//     with k and the chunk's q read in place as column-major (d x tokens) matrices of ld k_stride and q_stride;
//   o = P v is column-major oᵀ (d x n, ld o_stride) = v (d x kv_len, ld v_stride) * Pᵀ (kv_len x n).
// Heads are cuBLASLt's batch: the next head's q, k, v and o start head_dim elements on, its S and P a whole
// chunk on. Chunks and images run one after another through the same S and P; every chunk but the last has
// the same n, so a plan holds the products for two row counts.
#include "kernels/attention/attention_gemm.cuh"

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <memory>

#include "kernels/attention/attention_candidates.cuh"
#include "kernels/attention/attention_gemm_chunks.h"
#include "kernels/common/alignment.h"
#include "kernels/common/cublaslt_preference.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/nvtx_range.h"
#include "kernels/common/plan_cache.h"

namespace rtvd {
namespace {

constexpr int kSoftmaxThreads = 256;

// One matmul: descriptors in place (never copied once initialised) and cuBLASLt's first-ranked algorithm.
struct Matmul {
  cublasLtMatmulDescOpaque_t desc{};
  cublasLtMatrixLayoutOpaque_t a{}, b{}, d{};
  cublasLtMatmulAlgo_t algo{};
};

// The two products of a chunk of one row count.
struct ChunkProducts {
  Matmul scores, output;
};

// Every chunk but the last, and the last (unset where it has as many rows as the others).
struct AttentionGemmPlan {
  ChunkProducts full, tail;
};

void set_batch(cublasLtMatrixLayoutOpaque_t& layout, int count, int64_t stride) {
  RTVD_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(&layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
  RTVD_CUBLAS_CHECK(
      cublasLtMatrixLayoutSetAttribute(&layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
}

// Fills m's descriptors: D = op(A) B with fp32 accumulation, A transposed or not, every operand 16-byte
// aligned. False where cuBLASLt has no algorithm.
bool init_matmul(Matmul& m, cublasOperation_t transa, const CudaContext& ctx) {
  RTVD_CUBLAS_CHECK(cublasLtMatmulDescInit(&m.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t transb = CUBLAS_OP_N;
  RTVD_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(&m.desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof(transa)));
  RTVD_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(&m.desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof(transb)));
  cublasLtMatmulPreferenceOpaque_t pref{};
  init_cublaslt_preference(pref, kAttentionGemmCublasScratch);
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(ctx.cublaslt, &m.desc, &m.a, &m.b, &m.d, &m.d, &pref, 1, &result, &returned);
  if (status != CUBLAS_STATUS_SUCCESS || returned == 0 || result.state != CUBLAS_STATUS_SUCCESS) return false;
  m.algo = result.algo;
  return true;
}

// The products of a chunk of `rows` queries; false where cuBLASLt has no algorithm.
bool init_products(ChunkProducts& c, const AttentionParams& p, int64_t kv_pitch, int64_t rows, const CudaContext& ctx) {
  const int64_t kv = p.kv_len, d = p.head_dim;
  Matmul& s = c.scores;  // Sᵀ (kv x rows) = op_T(k as d x kv) * q as (d x rows), fp32 out
  RTVD_CUBLAS_CHECK(cublasLtMatrixLayoutInit(&s.a, CUDA_R_16F, d, kv, p.k_stride));
  RTVD_CUBLAS_CHECK(cublasLtMatrixLayoutInit(&s.b, CUDA_R_16F, d, rows, p.q_stride));
  RTVD_CUBLAS_CHECK(cublasLtMatrixLayoutInit(&s.d, CUDA_R_32F, kv, rows, kv_pitch));
  set_batch(s.a, p.heads, d);
  set_batch(s.b, p.heads, d);
  set_batch(s.d, p.heads, kv_pitch * rows);
  Matmul& o = c.output;  // oᵀ (d x rows) = v as (d x kv) * Pᵀ (kv x rows), fp16 out
  RTVD_CUBLAS_CHECK(cublasLtMatrixLayoutInit(&o.a, CUDA_R_16F, d, kv, p.v_stride));
  RTVD_CUBLAS_CHECK(cublasLtMatrixLayoutInit(&o.b, CUDA_R_16F, kv, rows, kv_pitch));
  RTVD_CUBLAS_CHECK(cublasLtMatrixLayoutInit(&o.d, CUDA_R_16F, d, rows, p.o_stride));
  set_batch(o.a, p.heads, d);
  set_batch(o.b, p.heads, kv_pitch * rows);
  set_batch(o.d, p.heads, d);
  return init_matmul(s, CUBLAS_OP_T, ctx) && init_matmul(o, CUBLAS_OP_N, ctx);
}

std::unique_ptr<AttentionGemmPlan> make_plan(const AttentionParams& p, const CudaContext& ctx) {
  const AttentionGemmChunks chunks = attention_gemm_chunks(p);
  auto plan = std::make_unique<AttentionGemmPlan>();
  if (!init_products(plan->full, p, chunks.kv_pitch, chunks.rows, ctx)) return nullptr;
  const int64_t tail = chunks.tail_rows(p.q_len);
  if (tail != chunks.rows && !init_products(plan->tail, p, chunks.kv_pitch, tail, ctx)) return nullptr;
  return plan;
}

// The plan for p's sizes and strides, made at the first ask and kept in ctx.plans; null where cuBLASLt has
// no algorithm (remembered too).
AttentionGemmPlan* plan_for(const AttentionParams& p, const CudaContext& ctx) {
  return ctx.plans->get<AttentionGemmPlan>(cat("gemm ", attention_shape_key(p)), [&] { return make_plan(p, ctx); });
}

// P = softmax(S) over each row of kv_len scores (rows kv_pitch apart): one block per row, the row's max and
// sum in one pass (online: each thread rescales its sum when its max grows), then P in a second (S's row is
// still in L2).
__global__ void softmax_kernel(const float* __restrict__ s, __half* __restrict__ p, int kv_len, int kv_pitch) {
  start_after_prior_kernels();
  const int64_t row = blockIdx.x;
  const float* in = s + row * kv_pitch;
  __half* out = p + row * kv_pitch;
  float m = -FLT_MAX, sum = 0.0f;
  for (int j = threadIdx.x; j < kv_len; j += kSoftmaxThreads) {
    const float x = in[j];
    if (x > m) sum *= __expf(m - x), m = x;
    sum += __expf(x - m);
  }
  // The block's (max, sum): per warp by shuffles, then across the warps through shared memory.
  for (int offset = 16; offset > 0; offset /= 2) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, offset), s2 = __shfl_xor_sync(0xffffffffu, sum, offset);
    const float top = fmaxf(m, m2);
    sum = sum * __expf(m - top) + s2 * __expf(m2 - top);
    m = top;
  }
  __shared__ float warp_max[kSoftmaxThreads / 32], warp_sum[kSoftmaxThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_max[warp] = m, warp_sum[warp] = sum;
  __syncthreads();
  float top = -FLT_MAX, total = 0.0f;
  for (int w = 0; w < kSoftmaxThreads / 32; ++w) top = fmaxf(top, warp_max[w]);
  for (int w = 0; w < kSoftmaxThreads / 32; ++w) total += warp_sum[w] * __expf(warp_max[w] - top);
  const float inv = 1.0f / total;
  for (int j = threadIdx.x; j < kv_len; j += kSoftmaxThreads) out[j] = __float2half(__expf(in[j] - top) * inv);
}

}  // namespace

size_t attention_gemm_workspace_bytes(const AttentionParams& p) { return attention_gemm_chunks(p).workspace_bytes; }

bool attention_gemm_can_implement(const AttentionParams& p, const CudaContext& ctx, std::string* why) {
  const int c = p.heads * p.head_dim;
  const char* unmet = nullptr;
  if (!p.q || !p.k || !p.v || !p.o) unmet = "q, k, v and o must be set";
  else if (p.batch <= 0 || p.heads <= 0 || p.head_dim <= 0 || p.q_len <= 0 || p.kv_len <= 0)
    unmet = "batch, heads, head_dim, q_len, kv_len must be positive";
  else if (p.q_stride < c || p.k_stride < c || p.v_stride < c || p.o_stride < c)
    unmet = "strides must be at least heads * head_dim";
  else if (!(p.scale > 0.0f) || !std::isfinite(p.scale)) unmet = "scale must be positive and finite";
  else if (p.causal) unmet = "no causal mask in the GEMM path";
  else if (!ctx.cublaslt || !ctx.plans) unmet = "no cuBLASLt handle and plan cache in the context";
  else if (p.head_dim % 8 || p.q_stride % 8 || p.k_stride % 8 || p.v_stride % 8 || p.o_stride % 8)
    unmet = "head_dim and the strides must be multiples of 8";
  else if (!aligned16(p.q) || !aligned16(p.k) || !aligned16(p.v) || !aligned16(p.o))
    unmet = "q, k, v and o must be 16-byte aligned";
  else if (p.heads > 65535) unmet = "heads must be at most 65535";
  else if (attention_gemm_chunks(p).rows == 0) unmet = "the scores of one query over every head must fit 256 MiB";
  else if (!plan_for(p, ctx)) unmet = "cuBLASLt has no algorithm for its products";
  if (unmet && why) *why = unmet;
  return unmet == nullptr;
}

void attention_gemm(const AttentionParams& p, const CudaContext& ctx) {
  std::string why;
  if (!attention_gemm_can_implement(p, ctx, &why)) fail("attention_gemm: ", why, " (", attention_shape_key(p), ")");
  if (ctx.workspace_bytes < attention_gemm_workspace_bytes(p))
    fail("attention_gemm: needs ", attention_gemm_workspace_bytes(p), " bytes of ctx.workspace, has ", ctx.workspace_bytes);
  const NvtxRange range("attention_gemm");
  AttentionGemmPlan& plan = *plan_for(p, ctx);  // cuBLASLt takes its descriptors non-const
  const AttentionGemmChunks chunks = attention_gemm_chunks(p);
  auto* base = static_cast<uint8_t*>(ctx.workspace);
  auto* s = reinterpret_cast<float*>(base);
  auto* probs = reinterpret_cast<__half*>(base + chunks.probs_offset);
  void* scratch = base + chunks.scratch_offset;
  const float scale = p.scale, one = 1.0f, zero = 0.0f;
  for (int b = 0; b < p.batch; ++b) {
    const auto* k = static_cast<const __half*>(p.k) + int64_t(b) * p.kv_len * p.k_stride;
    const auto* v = static_cast<const __half*>(p.v) + int64_t(b) * p.kv_len * p.v_stride;
    for (int64_t chunk = 0; chunk < chunks.count; ++chunk) {
      const int64_t r0 = int64_t(b) * p.q_len + chunk * chunks.rows;  // the chunk's first token of q and o
      const bool last = chunk + 1 == chunks.count;
      const int64_t rows = last ? chunks.tail_rows(p.q_len) : chunks.rows;
      ChunkProducts& c = rows == chunks.rows ? plan.full : plan.tail;
      const auto* q = static_cast<const __half*>(p.q) + r0 * p.q_stride;
      auto* o = static_cast<__half*>(p.o) + r0 * p.o_stride;
      Matmul& sm = c.scores;
      RTVD_CUBLAS_CHECK(cublasLtMatmul(ctx.cublaslt, &sm.desc, &scale, k, &sm.a, q, &sm.b, &zero, s, &sm.d, s, &sm.d,
                                       &sm.algo, scratch, kAttentionGemmCublasScratch, ctx.stream));
      launch_kernel("attention_gemm softmax", softmax_kernel, unsigned(p.heads * rows), kSoftmaxThreads, 0, ctx.stream,
                    s, probs, p.kv_len, int(chunks.kv_pitch));
      Matmul& om = c.output;
      RTVD_CUBLAS_CHECK(cublasLtMatmul(ctx.cublaslt, &om.desc, &one, v, &om.a, probs, &om.b, &zero, o, &om.d, o, &om.d,
                                       &om.algo, scratch, kAttentionGemmCublasScratch, ctx.stream));
    }
  }
}

}  // namespace rtvd
