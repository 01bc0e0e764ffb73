// attention's candidates (kernels/common/candidate.cuh), best-ranked first for the shape: from 256 keys the
// wgmma/TMA flash kernel (sm_90a, head dim 64), then the mma.sync flash kernel (below 256 keys it comes
// first: it was measured faster there), two cuBLASLt GEMMs around a softmax for head dims beyond the flash
// kernels' (attention_gemm.cuh), the simple fallback kernel for what none of those can load, and cuDNN's fused
// SDPA. attention() (attention.cuh) runs the first that can. rtvd's kernels apply the causal mask; the GEMM
// path and cuDNN's candidate refuse causal params (attention_cudnn.cuh).
#pragma once
#include <string>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/common/candidate.cuh"

namespace rtvd {

using AttentionCandidate = Candidate<AttentionParams>;

// Names: "custom flash wgmma", "custom flash", "cuBLASLt GEMM softmax GEMM", "custom fallback", "cuDNN SDPA" (the
// tuning cache keeps them). cuDNN's and cuBLASLt's plans are made at their first can_implement/run for a shape, in
// ctx.plans (null plans or handle: they can't).
std::vector<AttentionCandidate> attention_candidates(const AttentionParams& p, const CudaContext& ctx);

// The shape of an attention layer that decides which candidate is fastest (pointers ignored; causal included).
std::string attention_shape_key(const AttentionParams& p);

}  // namespace rtvd
