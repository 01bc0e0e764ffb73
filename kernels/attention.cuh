// attention on the GPU: flash attention (fp16 in/out, fp32 softmax and accumulation), attention.h's layout.
#pragma once
#include <string>

#include "attention.h"
#include "cuda_context.cuh"

namespace rtvd {

// Whether the flash kernel handles p; if not and why is given, *why names the unmet requirement.
// Needs: head_dim a multiple of 8 up to 160; q, k, v 16-byte aligned with strides a multiple of 8;
// o 4-byte aligned with an even stride; scale positive and finite; all sizes positive.
bool attention_can_implement(const AttentionParams& p, std::string* why = nullptr);

// Which flash kernel attention() runs: the fastest one this GPU and shape allow (attention_sm90() on an H100
// for head dim 64 and at least 256 keys, else the mma.sync one), or the mma.sync one wherever it applies
// (tests, benchmarks).
enum class FlashKernel { fastest, mma_sync };

// o = softmax(q k^T * scale) v on ctx.stream: a flash kernel, or attention_fallback() for what neither can
// handle. Throws rtvd::Error when nothing can.
// The mma.sync kernel's block shape follows the grid size and ctx.sm_count (0: the large-grid shape);
// results do not depend on it beyond rounding.
void attention(const AttentionParams& p, const CudaContext& ctx, FlashKernel kernel = FlashKernel::fastest);

// Which kernel attention() runs for p: "flash wgmma", "flash" (mma.sync) or "fallback".
const char* attention_kernel_name(const AttentionParams& p, const CudaContext& ctx,
                                  FlashKernel kernel = FlashKernel::fastest);

// The simple kernel attention() falls back to: any head_dim and stride, kv_len up to 12288. Slow.
void attention_fallback(const AttentionParams& p, const CudaContext& ctx);

}  // namespace rtvd
