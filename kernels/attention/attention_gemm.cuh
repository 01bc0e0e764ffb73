// attention as two cuBLASLt GEMMs around a softmax pass, for head dims the flash kernels can't hold (the SD
// VAE's mid-block attention: one head of 512 over 4096 tokens at 512², where the simple fallback takes ~57 ms
// and cuDNN's SDPA 0.37). Per image and chunk of query rows (attention_gemm_chunks.h), batched over heads:
//   S = scale q kᵀ   (heads, rows, kv_len) fp32, in ctx.workspace
//   P = softmax(S)   row by row, fp16, beside S
//   o = P v
// S and P go through memory, which a flash kernel never writes (6 bytes per score); in exchange both products
// run at cuBLASLt's rate at any head dim. The chunks keep S and P within 256 MiB at any sequence length (the
// VAE at 1024²: 16,384 tokens in 7 chunks), looped on the stream: no allocation, no sync. Not causal.
// cuBLASLt's descriptors and algorithms are made once per shape and kept in ctx.plans.
#pragma once
#include <cstddef>
#include <string>

#include "kernels/attention/attention.h"
#include "kernels/common/cuda_context.cuh"

namespace rtvd {

// Whether the GEMM path runs p: not causal, head_dim and the q/k/v/o strides multiples of 8, the pointers
// 16-byte aligned (cuBLASLt's fp16 tensor-core layouts), S and P of one query row (every head) within the
// chunk budget, a cuBLASLt handle and plan cache in ctx, and algorithms for both products. If not and why is
// given, *why names the unmet requirement.
bool attention_gemm_can_implement(const AttentionParams& p, const CudaContext& ctx, std::string* why = nullptr);

// Bytes of ctx.workspace it uses: S and P of one chunk (chunks and images run one after another) and cuBLASLt's
// scratch; attention_gemm_chunks(p).workspace_bytes, which plain C++ can ask.
size_t attention_gemm_workspace_bytes(const AttentionParams& p);

// o = attention.h's function of p on ctx.stream. Throws rtvd::Error where attention_gemm_can_implement() is
// false or ctx.workspace is smaller than attention_gemm_workspace_bytes(). Never allocates or synchronises
// once the shape's plan is made (at its first can_implement or run).
void attention_gemm(const AttentionParams& p, const CudaContext& ctx);

}  // namespace rtvd
