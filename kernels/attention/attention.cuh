// attention on the GPU: flash attention (fp16 in/out, fp32 softmax and accumulation), attention.h's layout.
#pragma once
#include <string>

#include "kernels/attention/attention.h"
#include "kernels/common/cuda_context.cuh"

namespace rtvd {

// Whether the mma.sync flash kernel handles p; if not and why is given, *why names the unmet requirement.
// Needs: head_dim a multiple of 8 up to 160; q, k, v 16-byte aligned with strides a multiple of 8;
// o 4-byte aligned with an even stride; scale positive and finite; all sizes positive; q_len == kv_len when
// causal.
bool attention_can_implement(const AttentionParams& p, std::string* why = nullptr);

// o = softmax(q k^T * scale) v (causal if p.causal) on ctx.stream: the op's one entry point, which runs its default candidate
// (attention_candidates.cuh: from 256 keys the wgmma kernel on an H100, else the mma.sync flash kernel, else
// the fallback). Throws rtvd::Error when nothing can.
void attention(const AttentionParams& p, const CudaContext& ctx);

// The mma.sync flash kernel. Its block shape follows the grid size and ctx.sm_count (0: the large-grid
// shape); results do not depend on it beyond rounding. Throws where attention_can_implement() is false.
void attention_mma(const AttentionParams& p, const CudaContext& ctx);

// The simple kernel for what the flash kernels can't load: any head_dim and stride, kv_len up to 12288, causal
// or not. Slow.
bool attention_fallback_can_implement(const AttentionParams& p, std::string* why = nullptr);
void attention_fallback(const AttentionParams& p, const CudaContext& ctx);

}  // namespace rtvd
