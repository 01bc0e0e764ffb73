// attention: softmax(q k^T * scale) v per (batch, head); self- or cross-attention, optionally causal.
// Token t of image b, head h, dim d of q lives at q[(b * q_len + t) * q_stride + h * head_dim + d];
// k and v likewise with kv_len and their strides, so a fused QKV projection is read in place.
#pragma once
#include "kernels/common/activation.h"

namespace rtvd {

struct AttentionParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;  // (batch, q_len, heads * head_dim), row stride o_stride
  int batch = 0, heads = 0, head_dim = 0, q_len = 0, kv_len = 0;
  int q_stride = 0, k_stride = 0, v_stride = 0, o_stride = 0;  // elements between consecutive tokens
  float scale = 1.0f;
  // Query i attends to keys j <= i alone (the CLIP text encoder's mask). Self-attention only: every
  // implementation rejects it unless q_len == kv_len (attention_causal_ok).
  bool causal = false;
  void* workspace = nullptr;  // CPU: score scratch of attention_cpu_workspace_bytes()
  size_t workspace_bytes = 0;
};

// Whether p's causal flag can be honoured; kAttentionCausalUnmet says why not.
inline bool attention_causal_ok(const AttentionParams& p) { return !p.causal || p.q_len == p.kv_len; }
inline constexpr const char* kAttentionCausalUnmet = "causal attention needs q_len == kv_len (self-attention)";

size_t attention_cpu_workspace_bytes(const AttentionParams& p);
void attention_cpu(const AttentionParams& p);

}  // namespace rtvd
