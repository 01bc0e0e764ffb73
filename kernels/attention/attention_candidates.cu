// attention's candidates and its one entry point, attention(): see attention_candidates.cuh.
#include "kernels/attention/attention_candidates.cuh"

#include <memory>

#include "kernels/attention/attention.cuh"
#include "kernels/attention/attention_gemm.cuh"
#include "kernels/attention/attention_sm90.cuh"
#include "kernels/common/plan_cache.h"
#if RTVD_HAS_CUDNN
#include "kernels/attention/attention_cudnn.cuh"
#endif

namespace rtvd {
namespace {

// Below this many keys the mma.sync kernel is as fast or faster (a single K/V tile leaves the wgmma kernel's
// pipeline nothing to overlap; H100: 77 keys 0.015 against 0.020 ms).
constexpr int kSm90MinKeys = 256;
constexpr int kSm90Rows = 192;  // the wgmma kernel's query rows per block, but in its smaller-block candidates

template <int Rows>
void run_sm90(const AttentionParams& p, const CudaContext& ctx) {
  attention_sm90(p, ctx, Rows);
}

AttentionCandidate make(const char* name, Provider provider,
                        bool (*can)(const AttentionParams&, const CudaContext&, std::string*),
                        void (*run)(const AttentionParams&, const CudaContext&)) {
  AttentionCandidate c;
  c.name = name;
  c.provider = provider;
  c.can_implement = can;
  c.workspace_bytes = [](const AttentionParams&, const CudaContext&) { return size_t(0); };
  c.run = run;
  return c;
}

#if RTVD_HAS_CUDNN
// cuDNN's plan for p's sizes, strides and scale, made at the first ask and kept in ctx.plans; null where
// cuDNN has no engine for it (remembered too).
const AttentionCudnnPlan* cudnn_plan(const AttentionParams& p, const CudaContext& ctx) {
  if (!ctx.cudnn || !ctx.plans) return nullptr;
  const std::string key = cat(attention_shape_key(p), " scale ", p.scale);
  return ctx.plans->get<AttentionCudnnPlan>(key, [&]() -> std::unique_ptr<AttentionCudnnPlan> {
    try {
      return std::make_unique<AttentionCudnnPlan>(make_attention_cudnn_plan(p, ctx.cudnn));
    } catch (const Error&) {
      return nullptr;  // no engine, or a shape cuDNN rejects: the candidate says so in can_implement
    }
  });
}

AttentionCandidate cudnn_candidate() {
  AttentionCandidate c;
  c.name = "cuDNN SDPA";
  c.provider = Provider::Cudnn;
  c.can_implement = [](const AttentionParams& q, const CudaContext& ctx, std::string* why) {
    if (q.causal) {  // asked first: no plan is made (and remembered) for what it refuses anyway
      if (why) *why = kAttentionCudnnNoCausal;
      return false;
    }
    if (cudnn_plan(q, ctx)) return true;
    if (why) *why = !ctx.cudnn || !ctx.plans ? "no cuDNN handle and plan cache in the context" : "cuDNN has no engine for it";
    return false;
  };
  c.workspace_bytes = [](const AttentionParams& q, const CudaContext& ctx) {
    const AttentionCudnnPlan* plan = cudnn_plan(q, ctx);
    return plan ? plan->workspace_bytes : 0;
  };
  c.run = [](const AttentionParams& q, const CudaContext& ctx) {
    const AttentionCudnnPlan* plan = cudnn_plan(q, ctx);
    if (!plan) fail("attention: cuDNN has no engine for ", attention_shape_key(q));
    attention_cudnn(q, *plan, ctx);
  };
  // Measured faster than ours only at long key sequences (rtvd bench kernels, H100); over 77 context tokens
  // or 64 keys ours wins, and a plan costs 50-800 ms to make, so those layers keep ours untimed.
  c.worth_timing = [](const AttentionParams& q, const CudaContext&) { return q.kv_len >= kSm90MinKeys; };
  return c;
}
#endif

}  // namespace

std::string attention_shape_key(const AttentionParams& p) {
  return cat("attention ", p.batch, "x", p.heads, "x", p.head_dim, " q", p.q_len, " kv", p.kv_len, " strides ", p.q_stride, "/",
             p.k_stride, "/", p.v_stride, "/", p.o_stride, p.causal ? " causal" : "");
}

std::vector<AttentionCandidate> attention_candidates(const AttentionParams& p, const CudaContext&) {
  AttentionCandidate wgmma = make("custom flash wgmma", Provider::Rtvd, attention_sm90_can_implement, run_sm90<kSm90Rows>);
  // The same kernel with 128 or 64 query rows per block: where 192-row blocks leave SMs idle (batch 1 at 32x32 and
  // 16x16: 60 and 40 blocks on 132 SMs), smaller ones spread the same work over more SMs.
  AttentionCandidate wgmma128 = make("custom flash wgmma 128 rows", Provider::Rtvd, attention_sm90_can_implement, run_sm90<128>);
  AttentionCandidate wgmma64 = make("custom flash wgmma 64 rows", Provider::Rtvd, attention_sm90_can_implement, run_sm90<64>);
  AttentionCandidate mma = make(
      "custom flash", Provider::Rtvd, [](const AttentionParams& q, const CudaContext&, std::string* why) { return attention_can_implement(q, why); },
      attention_mma);
  // Each flash kernel is timed only where it may win: the wgmma one from 256 keys, the mma.sync one below
  // (or wherever the wgmma one can't run).
  wgmma.worth_timing = [](const AttentionParams& q, const CudaContext&) { return q.kv_len >= kSm90MinKeys; };
  // The smaller blocks only where 192-row ones are less than a wave.
  wgmma128.worth_timing = wgmma64.worth_timing = [](const AttentionParams& q, const CudaContext& ctx) {
    return q.kv_len >= kSm90MinKeys && int64_t(q.q_len + kSm90Rows - 1) / kSm90Rows * q.heads * q.batch < ctx.sm_count;
  };
  mma.worth_timing = [](const AttentionParams& q, const CudaContext& ctx) {
    return q.kv_len < kSm90MinKeys || !attention_sm90_can_implement(q, ctx);
  };
  // The GEMM path where neither flash kernel holds the head dim (the VAE's 512): there it is timed, and it is
  // the default before the fallback, which takes ~150x as long at the VAE's 4096 tokens.
  AttentionCandidate gemm = make("cuBLASLt GEMM softmax GEMM", Provider::Cublaslt, attention_gemm_can_implement,
                                 attention_gemm);
  gemm.workspace_bytes = [](const AttentionParams& q, const CudaContext&) { return attention_gemm_workspace_bytes(q); };
  gemm.worth_timing = [](const AttentionParams& q, const CudaContext&) { return !attention_can_implement(q); };
  std::vector<AttentionCandidate> out;
  if (p.kv_len >= kSm90MinKeys) out = {wgmma, wgmma128, wgmma64, mma, gemm};
  else out = {mma, wgmma, wgmma128, wgmma64, gemm};
  out.push_back(make(
      "custom fallback", Provider::Rtvd,
      [](const AttentionParams& q, const CudaContext&, std::string* why) { return attention_fallback_can_implement(q, why); },
      attention_fallback));
  out.back().fallback = true;
#if RTVD_HAS_CUDNN
  out.push_back(cudnn_candidate());
#endif
  return out;
}

void attention(const AttentionParams& p, const CudaContext& ctx) {
  const std::vector<AttentionCandidate> all = attention_candidates(p, ctx);
  default_candidate(all, p, ctx, KernelFamily::Custom, "attention").run(p, ctx);
}

}  // namespace rtvd
