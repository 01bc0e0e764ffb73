// Flash attention on Hopper (sm_90a): wgmma and TMA, head dim 64. attention() runs it where it applies.
#pragma once
#include <string>

#include "kernels/attention/attention.h"
#include "kernels/common/cuda_context.cuh"

namespace rtvd {

// Whether this build has the sm_90a kernel (RTVD_CUDA_ARCHITECTURES lists 90a) and it handles p on a GPU of
// ctx.sm_version; if not and why is given, *why names the unmet requirement. Needs, beyond what
// attention_can_implement() checks: an sm_90 GPU and head_dim 64.
bool attention_sm90_can_implement(const AttentionParams& p, const CudaContext& ctx, std::string* why = nullptr);

// o = softmax(q k^T * scale) v on ctx.stream, query_rows (192, 128 or 64: three, two or one consumer warpgroups)
// per block. Throws rtvd::Error where attention_sm90_can_implement() is false or query_rows is none of those.
void attention_sm90(const AttentionParams& p, const CudaContext& ctx, int query_rows);

}  // namespace rtvd
