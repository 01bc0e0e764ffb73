// attention's candidates (kernels/common/candidate.cuh), best-ranked first for the shape: from 256 keys the
// wgmma/TMA flash kernel (sm_90a, head dim 64), then the mma.sync flash kernel (below 256 keys it comes
// first: it was measured faster there), cuDNN's fused SDPA, and the simple fallback kernel for what the flash
// kernels can't load. attention() (attention.cuh) runs the first that can. All of rtvd's kernels apply the
// causal mask; cuDNN's candidate refuses causal params (attention_cudnn.cuh).
#pragma once
#include <string>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/common/candidate.cuh"

namespace rtvd {

using AttentionCandidate = Candidate<AttentionParams>;

// Names: "custom flash wgmma", "custom flash", "custom fallback", "cuDNN SDPA" (the tuning cache keeps them). cuDNN's plan is
// made at its first can_implement/run for a shape, in ctx.plans (null plans or cudnn handle: cuDNN can't).
std::vector<AttentionCandidate> attention_candidates(const AttentionParams& p, const CudaContext& ctx);

// The shape of an attention layer that decides which candidate is fastest (pointers ignored; causal included).
std::string attention_shape_key(const AttentionParams& p);

}  // namespace rtvd
