// linear: cuBLASLt for aligned shapes, a tiled fallback kernel for the rest (see linear.cuh).
//
// Row-major through column-major cuBLASLt: y (m, n) row-major is D = y^T (n x m) column-major with
// ld n, and D = w x^T where w (n, k) row-major is the column-major (k x n) matrix A used transposed
// (ld k) and x (m, k) row-major is the column-major (k x m) matrix B (ld k). The bias then runs along
// D's rows, as CUBLASLT_EPILOGUE_BIAS wants.
#include <cuda_fp16.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>
#include <nvtx3/nvtx3.hpp>

#include "kernels/linear/linear.cuh"
#include "kernels/common/alignment.h"
#include "kernels/common/cublaslt_preference.cuh"
#include "kernels/common/device_math.cuh"
#include "kernels/common/launch.cuh"

namespace rtvd {
namespace {

// ---- device code ---------------------------------------------------------------------------------

// The epilogue's activation. SiLU and quick GELU on the fast exp and division (about 2 ulp, far below the
// fp16 output's resolution); GELU exact, on erfc (activation.h), since cuBLASLt's GELU epilogue is the tanh
// approximation.
__device__ __forceinline__ float activate(float x, Activation act) {
  switch (act) {
    case Activation::Silu: return fast_silu(x);
    case Activation::Gelu: return gelu(x);
    case Activation::QuickGelu: return __fdividef(x, 1.0f + __expf(-1.702f * x));
    case Activation::Relu: return fmaxf(x, 0.0f);
    case Activation::Tanh: return tanhf(x);
    default: return x;
  }
}

// Fallback GEMM tile: 64 x 64 outputs per block of 256 threads, 4 x 4 per thread, k in steps of 16.
struct FallbackTile {
  static constexpr int kM = 64, kN = 64, kK = 16, kThreads = 256, kPerThread = 4;
  static_assert((kM / kPerThread) * (kN / kPerThread) == kThreads, "one thread per 4 x 4 outputs");
  static_assert(kM * kK == 4 * kThreads && kN * kK == 4 * kThreads, "each thread loads 4 elements of each tile");
};

// y = act(x w^T + bias) + residual for any shape and alignment; scalar loads, fp32 FMA. residual and y
// may alias (each output element is read and written by the same thread).
__global__ void __launch_bounds__(FallbackTile::kThreads)
    fallback_gemm_kernel(const __half* __restrict__ x, const __half* __restrict__ w, const float* __restrict__ bias,
                         const __half* residual, __half* y, int m, int n, int k, Activation act) {
  start_after_prior_kernels();
  using T = FallbackTile;
  // (k, rows) so the inner loop reads along rows; + 1 spreads the column-wise stores over the banks.
  __shared__ float xs[T::kK][T::kM + 1];
  __shared__ float ws[T::kK][T::kN + 1];
  const int tx = threadIdx.x % (T::kN / T::kPerThread), ty = threadIdx.x / (T::kN / T::kPerThread);
  const int row0 = blockIdx.y * T::kM, col0 = blockIdx.x * T::kN;
  float acc[T::kPerThread][T::kPerThread] = {};
  for (int k0 = 0; k0 < k; k0 += T::kK) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int kk = threadIdx.x % T::kK, r = threadIdx.x / T::kK + i * (T::kThreads / T::kK), gk = k0 + kk;
      xs[kk][r] = row0 + r < m && gk < k ? __half2float(x[int64_t(row0 + r) * k + gk]) : 0.0f;
      ws[kk][r] = col0 + r < n && gk < k ? __half2float(w[int64_t(col0 + r) * k + gk]) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < T::kK; ++kk) {
      float a[T::kPerThread], b[T::kPerThread];
#pragma unroll
      for (int i = 0; i < T::kPerThread; ++i) {
        a[i] = xs[kk][ty * T::kPerThread + i];
        b[i] = ws[kk][tx * T::kPerThread + i];
      }
#pragma unroll
      for (int i = 0; i < T::kPerThread; ++i)
#pragma unroll
        for (int j = 0; j < T::kPerThread; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < T::kPerThread; ++i) {
    const int r = row0 + ty * T::kPerThread + i;
#pragma unroll
    for (int j = 0; j < T::kPerThread; ++j) {
      const int c = col0 + tx * T::kPerThread + j;
      if (r >= m || c >= n) continue;
      float v = acc[i][j] + (bias ? bias[c] : 0.0f);
      v = activate(v, act);
      const int64_t e = int64_t(r) * n + c;
      if (residual) v += __half2float(residual[e]);
      y[e] = __float2half_rn(v);
    }
  }
}

// After a cuBLASLt GEMM that already added the bias: y = act(y) + residual, 8 elements per thread
// (the cuBLASLt path guarantees n % 8 == 0 and 16-byte alignment).
__global__ void __launch_bounds__(256)
    activation_residual_kernel(__half* __restrict__ y, const __half* __restrict__ residual, int64_t vectors,
                               Activation act) {
  start_after_prior_kernels();
  const int64_t i = int64_t(blockIdx.x) * 256 + threadIdx.x;
  if (i >= vectors) return;
  uint4 raw = reinterpret_cast<const uint4*>(y)[i];
  uint4 res = residual ? reinterpret_cast<const uint4*>(residual)[i] : make_uint4(0, 0, 0, 0);
  auto* h = reinterpret_cast<__half2*>(&raw);
  const auto* r = reinterpret_cast<const __half2*>(&res);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float2 v = __half22float2(h[k]), add = __half22float2(r[k]);
    h[k] = __floats2half2_rn(activate(v.x, act) + add.x, activate(v.y, act) + add.y);
  }
  reinterpret_cast<uint4*>(y)[i] = raw;
}

// fp32 bias -> fp16, for a cuBLASLt that accepts the bias only in the output type.
__global__ void __launch_bounds__(256)
    bias_to_half_kernel(const float* __restrict__ bias, __half* __restrict__ out, int n) {
  start_after_prior_kernels();
  const int i = blockIdx.x * 256 + threadIdx.x;
  if (i < n) out[i] = __float2half_rn(bias[i]);
}

// ---- cuBLASLt plans --------------------------------------------------------------------------------

constexpr int kPlanCapacity = 128;
constexpr int kAlgoCandidates = 8;  // cuBLASLt's best-ranked algorithms, offered by linear_algorithms()
constexpr uint32_t kHasBias = 1, kHasResidual = 2, kActivation = 4;  // any activation: the same GEMM
constexpr size_t kStagingAlign = 256;

struct PlanKey {
  int m = 0, n = 0, k = 0;
  uint32_t flags = 0;
  size_t workspace_bytes = 0;
  int sm_version = 0;
  bool operator==(const PlanKey&) const = default;
};

enum class BiasPath : uint8_t {
  None,      // no bias
  Float,     // fp32 bias straight into the epilogue
  Staged16,  // fp16 copy at the start of the workspace
};

// Everything cublasLtMatmul needs besides the pointers. The descriptors are cuBLASLt's semi-opaque
// structs initialised in place: no allocation, nothing to destroy.
struct Plan {
  PlanKey key;
  bool found = false;  // false: cuBLASLt has no algorithm, use the fallback kernel
  BiasPath bias = BiasPath::None;
  bool residual_in_gemm = false;  // C = residual, beta = 1
  size_t staging_bytes = 0;       // workspace bytes in front of cuBLASLt's part
  cublasLtMatmulDescOpaque_t desc{};
  cublasLtMatrixLayoutOpaque_t a{}, b{}, d{};  // d serves as C's layout too
  cublasLtMatmulAlgo_t algo{};
  std::array<cublasLtMatmulAlgo_t, kAlgoCandidates> candidates{};  // cuBLASLt's ranking; algo = the first
  int candidate_count = 0;
  // The last algorithm a caller named, and whether it runs here (checked once, not on every call).
  std::string named;
  cublasLtMatmulAlgo_t named_algo{};
  bool named_runs = false;
  uint64_t last_used = 0;  // the cache's use count at its last lookup
};

// A model's GEMM shapes fit many times over (SD 2.1's U-Net, VAE and text encoder at two batch sizes: under
// 60); a process that loads model after model (the tests, the GUI changing size and guidance) reuses the
// least recently used plan. Plans are read only under the mutex, and cuBLASLt reads a descriptor only while
// it enqueues (a captured CUDA graph holds its kernels, not the plan), so a plan may be replaced between calls.
struct CublasltPlans {
  std::mutex mutex;
  std::array<Plan, kPlanCapacity> plans;
  int size = 0;
  uint64_t uses = 0;
};

CublasltPlans& plan_cache() {
  static CublasltPlans cache;
  return cache;
}

// The heuristic reads the bias pointer only for its alignment: promise exactly 16 bytes, which the
// launcher checks on every call.
const void* const kAlignmentProbe = reinterpret_cast<const void*>(uintptr_t{16});

// Tries one bias path; true when cuBLASLt returned an algorithm.
bool try_configure(Plan& plan, const CudaContext& ctx, BiasPath bias) {
  const PlanKey& key = plan.key;
  plan.bias = bias;
  plan.staging_bytes =
      bias == BiasPath::Staged16 ? (size_t(key.n) * 2 + kStagingAlign - 1) / kStagingAlign * kStagingAlign : 0;
  if (plan.staging_bytes > key.workspace_bytes) return false;
  RTVD_CUBLAS_CHECK(cublasLtMatmulDescInit(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
  RTVD_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(&plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof(transa)));
  RTVD_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(&plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof(transb)));
  if (bias != BiasPath::None) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    const int32_t type = bias == BiasPath::Float ? CUDA_R_32F : CUDA_R_16F;
    cublasLtMatmulDesc_t desc = &plan.desc;
    RTVD_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    RTVD_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type, sizeof(type)));
    RTVD_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &kAlignmentProbe,
                                                     sizeof(kAlignmentProbe)));
  }
  RTVD_CUBLAS_CHECK(cublasLtMatrixLayoutInit(&plan.a, CUDA_R_16F, key.k, key.n, key.k));  // w: (k x n), ld k
  RTVD_CUBLAS_CHECK(cublasLtMatrixLayoutInit(&plan.b, CUDA_R_16F, key.k, key.m, key.k));  // x: (k x m), ld k
  RTVD_CUBLAS_CHECK(cublasLtMatrixLayoutInit(&plan.d, CUDA_R_16F, key.n, key.m, key.n));  // y: (n x m), ld n

  cublasLtMatmulPreferenceOpaque_t pref{};
  init_cublaslt_preference(pref, key.workspace_bytes - plan.staging_bytes);

  std::array<cublasLtMatmulHeuristicResult_t, kAlgoCandidates> results{};
  int returned = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(ctx.cublaslt, &plan.desc, &plan.a, &plan.b, &plan.d,
                                                               &plan.d, &pref, kAlgoCandidates, results.data(), &returned);
  if (status != CUBLAS_STATUS_SUCCESS) return false;
  plan.candidate_count = 0;
  for (int i = 0; i < returned; ++i)
    if (results[i].state == CUBLAS_STATUS_SUCCESS) plan.candidates[plan.candidate_count++] = results[i].algo;
  if (plan.candidate_count == 0) return false;
  plan.algo = plan.candidates[0];
  return true;
}

// Fills a table slot in place: the descriptors are never copied once initialised.
void make_plan(Plan& plan, const PlanKey& key, const CudaContext& ctx) {
  plan = Plan{};
  plan.key = key;
  plan.residual_in_gemm = (key.flags & kHasResidual) && !(key.flags & kActivation);
  if (key.flags & kHasBias)
    plan.found = try_configure(plan, ctx, BiasPath::Float) || try_configure(plan, ctx, BiasPath::Staged16);
  else
    plan.found = try_configure(plan, ctx, BiasPath::None);
}

// The plan for `key`, built on first use. The caller holds the cache's mutex.
Plan& find_plan(CublasltPlans& cache, const PlanKey& key, const CudaContext& ctx) {
  const uint64_t use = ++cache.uses;
  for (int i = 0; i < cache.size; ++i)
    if (cache.plans[i].key == key) {
      cache.plans[i].last_used = use;
      return cache.plans[i];
    }
  Plan* slot = &cache.plans[0];
  if (cache.size < kPlanCapacity) {
    slot = &cache.plans[cache.size++];
  } else {
    for (Plan& p : cache.plans)
      if (p.last_used < slot->last_used) slot = &p;
  }
  make_plan(*slot, key, ctx);
  slot->last_used = use;
  return *slot;
}

// An algorithm as text and back: its opaque bytes in hex.
std::string algo_name(const cublasLtMatmulAlgo_t& algo) {
  static const char* digits = "0123456789abcdef";
  const auto* bytes = reinterpret_cast<const uint8_t*>(&algo);
  std::string s = "cuBLASLt ";
  for (size_t i = 0; i < sizeof algo; ++i) s += digits[bytes[i] >> 4], s += digits[bytes[i] & 15];
  return s;
}

bool parse_algo(const std::string& name, cublasLtMatmulAlgo_t& algo) {
  const std::string prefix = "cuBLASLt ";
  if (name.size() != prefix.size() + 2 * sizeof algo || name.compare(0, prefix.size(), prefix) != 0) return false;
  auto* bytes = reinterpret_cast<uint8_t*>(&algo);
  for (size_t i = 0; i < sizeof algo; ++i) {
    unsigned v = 0;
    if (std::sscanf(name.c_str() + prefix.size() + 2 * i, "%2x", &v) != 1) return false;
    bytes[i] = uint8_t(v);
  }
  return true;
}

// The algorithm a call runs: the named one when it is valid for this plan and fits its workspace, else
// cuBLASLt's first choice. The check runs once per name.
const cublasLtMatmulAlgo_t& algo_for(Plan& plan, const std::string& name, const CudaContext& ctx) {
  if (name.empty()) return plan.algo;
  if (name != plan.named) {
    plan.named = name;
    cublasLtMatmulHeuristicResult_t check{};
    plan.named_runs = parse_algo(name, plan.named_algo) &&
                      cublasLtMatmulAlgoCheck(ctx.cublaslt, &plan.desc, &plan.a, &plan.b, &plan.d, &plan.d,
                                              &plan.named_algo, &check) == CUBLAS_STATUS_SUCCESS &&
                      check.workspaceSize + plan.staging_bytes <= plan.key.workspace_bytes;
  }
  return plan.named_runs ? plan.named_algo : plan.algo;
}

// The GEMM alone (bias already staged): y = w x^T (+ bias) (+ residual) with `algo`.
cublasStatus_t enqueue(Plan& plan, const cublasLtMatmulAlgo_t& algo, const LinearParams& p, const CudaContext& ctx) {
  const float alpha = 1.0f, beta = plan.residual_in_gemm ? 1.0f : 0.0f;
  const void* c = plan.residual_in_gemm ? p.residual : p.y;
  return cublasLtMatmul(ctx.cublaslt, &plan.desc, &alpha, p.w, &plan.a, p.x, &plan.b, &beta, c, &plan.d, p.y, &plan.d,
                        &algo, static_cast<char*>(ctx.workspace) + plan.staging_bytes,
                        plan.key.workspace_bytes - plan.staging_bytes, ctx.stream);
}

// Runs the GEMM through `plan`; false if the plan has no algorithm. The mutex stays held through the
// enqueue because the cached descriptor carries this call's bias pointer.
bool run_cublaslt(const LinearParams& p, const CudaContext& ctx, const PlanKey& key, const std::string& algorithm) {
  CublasltPlans& cache = plan_cache();
  std::lock_guard lock(cache.mutex);
  Plan& plan = find_plan(cache, key, ctx);
  if (!plan.found) return false;
  auto* workspace = static_cast<char*>(ctx.workspace);
  if (plan.bias != BiasPath::None) {
    const void* bias = p.bias;
    if (plan.bias == BiasPath::Staged16 && p.bias_act && aligned16(p.bias_act)) {
      bias = p.bias_act;
    } else if (plan.bias == BiasPath::Staged16) {
      auto* staged = reinterpret_cast<__half*>(workspace);
      launch_kernel("linear (bias to fp16)", bias_to_half_kernel, (p.n + 255) / 256, 256, 0, ctx.stream, p.bias, staged,
                    p.n);
      bias = staged;
    }
    RTVD_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(&plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
  RTVD_CUBLAS_CHECK(enqueue(plan, algo_for(plan, algorithm, ctx), p, ctx));
  return true;
}

// Whether p goes through cuBLASLt, and its plan key when it does.
bool cublaslt_key(const LinearParams& p, const CudaContext& ctx, PlanKey& key) {
  // A few rows (the time embedding's, one per image) are a matrix-vector product: one fused launch of our
  // kernel instead of cuBLASLt, its bias staging and an activation pass.
  constexpr int kFewRows = 8;
  const bool lt_shape = ctx.cublaslt && p.m > kFewRows && p.k > 0 && p.k % 8 == 0 && p.n % 8 == 0 && aligned16(p.x) &&
                        aligned16(p.w) && aligned16(p.y) && aligned16(p.residual) && aligned16(p.bias);
  if (!lt_shape) return false;
  key.m = p.m, key.n = p.n, key.k = p.k;
  key.flags = (p.bias ? kHasBias : 0) | (p.residual ? kHasResidual : 0) | (p.act != Activation::None ? kActivation : 0);
  key.workspace_bytes = ctx.workspace ? ctx.workspace_bytes : 0;
  key.sm_version = ctx.sm_version;
  return true;
}

}  // namespace

std::vector<std::string> linear_algorithms(const LinearParams& p, const CudaContext& ctx) {
  PlanKey key;
  if (p.m <= 0 || p.n <= 0 || !cublaslt_key(p, ctx, key)) return {};
  CublasltPlans& cache = plan_cache();
  std::lock_guard lock(cache.mutex);
  const Plan& plan = find_plan(cache, key, ctx);
  std::vector<std::string> names;
  for (int i = 0; plan.found && i < plan.candidate_count; ++i) names.push_back(algo_name(plan.candidates[i]));
  return names;
}

namespace {

// Checks p; false when there is nothing to compute (m or n zero).
bool check_params(const LinearParams& p) {
  if (p.m < 0 || p.n < 0 || p.k < 0) fail("linear: negative shape m ", p.m, " n ", p.n, " k ", p.k);
  if (p.m == 0 || p.n == 0) return false;
  if (!p.y || (p.k > 0 && (!p.x || !p.w))) fail("linear: x, w and y must be set");
  if (p.act != Activation::None && p.residual == p.y) fail("linear: y aliases the residual under an activation");
  return true;
}

}  // namespace

bool linear_cublaslt_can_implement(const LinearParams& p, const CudaContext& ctx, std::string* why) {
  PlanKey key;
  const char* unmet = nullptr;
  if (p.m <= 0 || p.n <= 0) unmet = "an empty GEMM";
  else if (!cublaslt_key(p, ctx, key))
    unmet = "needs more than 8 rows, k and n multiples of 8 and 16-byte aligned operands";
  else if (linear_algorithms(p, ctx).empty()) unmet = "cuBLASLt offers no algorithm";
  if (unmet && why) *why = unmet;
  return unmet == nullptr;
}

void linear_cublaslt(const LinearParams& p, const CudaContext& ctx, const std::string& algorithm) {
  nvtx3::scoped_range range{"linear"};
  if (!check_params(p)) return;
  PlanKey key;
  if (!cublaslt_key(p, ctx, key) || !run_cublaslt(p, ctx, key, algorithm))
    fail("linear: cuBLASLt can't run ", p.m, "x", p.k, " -> ", p.n, " (linear_cublaslt_can_implement)");
  if (p.act != Activation::None) {
    const int64_t vectors = int64_t(p.m) * p.n / 8;
    launch_kernel("linear (activation epilogue)", activation_residual_kernel, unsigned((vectors + 255) / 256), 256, 0,
                  ctx.stream, static_cast<__half*>(p.y), static_cast<const __half*>(p.residual), vectors, p.act);
  }
}

void linear_fallback(const LinearParams& p, const CudaContext& ctx) {
  nvtx3::scoped_range range{"linear fallback"};
  if (!check_params(p)) return;
  using T = FallbackTile;
  const dim3 grid((p.n + T::kN - 1) / T::kN, (p.m + T::kM - 1) / T::kM);
  if (grid.y > 65535) fail("linear: m ", p.m, " exceeds the fallback kernel's grid");
  launch_kernel("linear (fallback GEMM)", fallback_gemm_kernel, grid, T::kThreads, 0, ctx.stream,
                static_cast<const __half*>(p.x), static_cast<const __half*>(p.w), p.bias,
                static_cast<const __half*>(p.residual), static_cast<__half*>(p.y), p.m, p.n, p.k, p.act);
}

}  // namespace rtvd
