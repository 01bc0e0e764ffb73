// attention as cuBLASLt GEMM, softmax, cuBLASLt GEMM: see attention_gemm.cuh.
//
// cuBLASLt is column-major; attention.h's row-major (tokens, stride) matrices are its transposes:
//   S = scale q kᵀ is, per head, column-major Sᵀ (kv_len x q_len, ld kv_len) = op_T(k) (kv_len x d) * q (d x q_len),
//     with k and q read in place as column-major (d x tokens) matrices of ld k_stride and q_stride;
//   o = P v is column-major oᵀ (d x q_len, ld o_stride) = v (d x kv_len, ld v_stride) * Pᵀ (kv_len x q_len).
// Heads are cuBLASLt's batch: the next head's q, k, v and o start head_dim elements on, its S and P a whole
// matrix on. Images run one after another through the same S and P.
#include "kernels/attention/attention_gemm.cuh"

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <memory>

#include "kernels/attention/attention_candidates.cuh"
#include "kernels/common/alignment.h"
#include "kernels/common/cublaslt_preference.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/nvtx_range.h"
#include "kernels/common/plan_cache.h"

namespace rtvd {
namespace {

constexpr size_t kCublasWorkspace = size_t(8) << 20;  // cuBLASLt's scratch, after S and P
constexpr size_t kMaxScoreBytes = size_t(1) << 30;    // S and P of one image at most
constexpr int kSoftmaxThreads = 256;

size_t scores(const AttentionParams& p) { return size_t(p.heads) * p.q_len * p.kv_len; }
size_t p_offset(const AttentionParams& p) { return align_up(scores(p) * sizeof(float)); }
size_t cublas_offset(const AttentionParams& p) { return p_offset(p) + align_up(scores(p) * sizeof(__half)); }

// One matmul: descriptors in place (never copied once initialised) and cuBLASLt's first-ranked algorithm.
struct Matmul {
  cublasLtMatmulDescOpaque_t desc{};
  cublasLtMatrixLayoutOpaque_t a{}, b{}, d{};
  cublasLtMatmulAlgo_t algo{};
};

struct AttentionGemmPlan {
  Matmul scores, output;
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
  init_cublaslt_preference(pref, kCublasWorkspace);
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(ctx.cublaslt, &m.desc, &m.a, &m.b, &m.d, &m.d, &pref, 1, &result, &returned);
  if (status != CUBLAS_STATUS_SUCCESS || returned == 0 || result.state != CUBLAS_STATUS_SUCCESS) return false;
  m.algo = result.algo;
  return true;
}

std::unique_ptr<AttentionGemmPlan> make_plan(const AttentionParams& p, const CudaContext& ctx) {
  auto plan = std::make_unique<AttentionGemmPlan>();
  const int64_t q = p.q_len, kv = p.kv_len, d = p.head_dim;
  Matmul& s = plan->scores;  // Sᵀ (kv x q) = op_T(k as d x kv) * q as (d x q), fp32 out
  RTVD_CUBLAS_CHECK(cublasLtMatrixLayoutInit(&s.a, CUDA_R_16F, d, kv, p.k_stride));
  RTVD_CUBLAS_CHECK(cublasLtMatrixLayoutInit(&s.b, CUDA_R_16F, d, q, p.q_stride));
  RTVD_CUBLAS_CHECK(cublasLtMatrixLayoutInit(&s.d, CUDA_R_32F, kv, q, kv));
  set_batch(s.a, p.heads, d);
  set_batch(s.b, p.heads, d);
  set_batch(s.d, p.heads, kv * q);
  Matmul& o = plan->output;  // oᵀ (d x q) = v as (d x kv) * Pᵀ (kv x q), fp16 out
  RTVD_CUBLAS_CHECK(cublasLtMatrixLayoutInit(&o.a, CUDA_R_16F, d, kv, p.v_stride));
  RTVD_CUBLAS_CHECK(cublasLtMatrixLayoutInit(&o.b, CUDA_R_16F, kv, q, kv));
  RTVD_CUBLAS_CHECK(cublasLtMatrixLayoutInit(&o.d, CUDA_R_16F, d, q, p.o_stride));
  set_batch(o.a, p.heads, d);
  set_batch(o.b, p.heads, kv * q);
  set_batch(o.d, p.heads, d);
  if (!init_matmul(s, CUBLAS_OP_T, ctx) || !init_matmul(o, CUBLAS_OP_N, ctx)) return nullptr;
  return plan;
}

// The plan for p's sizes and strides, made at the first ask and kept in ctx.plans; null where cuBLASLt has
// no algorithm (remembered too).
AttentionGemmPlan* plan_for(const AttentionParams& p, const CudaContext& ctx) {
  return ctx.plans->get<AttentionGemmPlan>(cat("gemm ", attention_shape_key(p)), [&] { return make_plan(p, ctx); });
}

// P = softmax(S) over each row of kv_len scores: one block per row, the row's max and sum in one pass
// (online: each thread rescales its sum when its max grows), then P in a second (S's row is still in L2).
__global__ void softmax_kernel(const float* __restrict__ s, __half* __restrict__ p, int kv_len) {
  start_after_prior_kernels();
  const int64_t row = blockIdx.x;
  const float* in = s + row * kv_len;
  __half* out = p + row * kv_len;
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

size_t attention_gemm_workspace_bytes(const AttentionParams& p) { return cublas_offset(p) + kCublasWorkspace; }

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
  else if (p.head_dim % 8 || p.kv_len % 8 || p.q_stride % 8 || p.k_stride % 8 || p.v_stride % 8 || p.o_stride % 8)
    unmet = "head_dim, kv_len and the strides must be multiples of 8";
  else if (!aligned16(p.q) || !aligned16(p.k) || !aligned16(p.v) || !aligned16(p.o))
    unmet = "q, k, v and o must be 16-byte aligned";
  else if (p.heads > 65535 || cublas_offset(p) > kMaxScoreBytes) unmet = "the scores of one image must fit 1 GiB";
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
  auto* base = static_cast<uint8_t*>(ctx.workspace);
  auto* s = reinterpret_cast<float*>(base);
  auto* probs = reinterpret_cast<__half*>(base + p_offset(p));
  void* scratch = base + cublas_offset(p);
  const float scale = p.scale, one = 1.0f, zero = 0.0f;
  for (int b = 0; b < p.batch; ++b) {
    const auto* q = static_cast<const __half*>(p.q) + int64_t(b) * p.q_len * p.q_stride;
    const auto* k = static_cast<const __half*>(p.k) + int64_t(b) * p.kv_len * p.k_stride;
    const auto* v = static_cast<const __half*>(p.v) + int64_t(b) * p.kv_len * p.v_stride;
    auto* o = static_cast<__half*>(p.o) + int64_t(b) * p.q_len * p.o_stride;
    Matmul& sm = plan.scores;
    RTVD_CUBLAS_CHECK(cublasLtMatmul(ctx.cublaslt, &sm.desc, &scale, k, &sm.a, q, &sm.b, &zero, s, &sm.d, s, &sm.d,
                                     &sm.algo, scratch, kCublasWorkspace, ctx.stream));
    launch_kernel("attention_gemm softmax", softmax_kernel, unsigned(int64_t(p.heads) * p.q_len), kSoftmaxThreads, 0,
                  ctx.stream, s, probs, p.kv_len);
    Matmul& om = plan.output;
    RTVD_CUBLAS_CHECK(cublasLtMatmul(ctx.cublaslt, &om.desc, &one, v, &om.a, probs, &om.b, &zero, o, &om.d, o, &om.d,
                                     &om.algo, scratch, kCublasWorkspace, ctx.stream));
  }
}

}  // namespace rtvd
