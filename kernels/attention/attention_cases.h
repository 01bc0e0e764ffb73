// attention's cases: the one table that the correctness tests (tests/ops/attention_test.cpp) and the kernel
// benchmark both run. Production shapes (SD 2.1's self-attention at 4096 and 1024 tokens and its
// cross-attention over 77 context tokens; SD 1.5's head dims 40/80/160; the default model's; the CLIP text
// encoders' causal self-attention over 77 tokens; the SD VAE's one head of 512 at 512² and 1024²) and hostile
// ones (odd lengths, a single key or query, every head dim the kernels switch on, head dims the flash kernels
// can't load, padded output rows, peaked softmax rows, scores that overflow exp without the max shift, the
// causal mask across tile edges, scores past one chunk of the GEMM path). Plain C++.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "kernels/attention/attention.h"

namespace rtvd {

// Layouts, C = heads * head_dim:
//   fused_qkv (self-attention): q, k and v read in place from one (batch * q_len, 3C) projection [q | k | v];
//   else (cross-attention):     q from (batch * q_len, C) and k, v from one (batch * kv_len, 2C) [k | v].
struct AttentionCase {
  std::string name;  // unique, [A-Za-z0-9_]
  int batch = 2, heads = 1, head_dim = 64, q_len = 0, kv_len = 0;
  bool fused_qkv = false;     // self-attention (q_len == kv_len)
  bool causal = false;        // query i attends to keys j <= i (q_len == kv_len)
  int o_pad = 0;              // output row stride C + o_pad: columns past C belong to someone else
  float input_stddev = 1.0f;  // of N(0, stddev) q, k, v; above 1 the softmax rows are nearly one-hot
  // > 0: q and k are integers in [-r, r] (and 1/sqrt(head_dim) a power of two), so that scores of a few
  // hundred are exact in fp32: large enough to overflow exp without the max shift.
  int integer_qk = 0;
  bool production = false;
  std::string hostile = "";  // "" for none

  int channels() const { return heads * head_dim; }
  // The causal mask leaves about half of the scores to compute (as the model graph counts them).
  double flops() const { return 4.0 * batch * heads * double(q_len) * kv_len * head_dim * (causal ? 0.5 : 1.0); }
};

const std::vector<AttentionCase>& attention_cases();

// Element counts of a case's buffers: the q source ((batch q_len, 3C) fused, else (batch q_len, C)), the
// kv source (0 fused, else (batch kv_len, 2C)) and the output (batch q_len, C + o_pad).
struct AttentionSizes {
  size_t q_source, kv_source, o;
};
AttentionSizes attention_sizes(const AttentionCase& c);

// The case's params reading q, k, v in place from q_source and kv_source (ignored when fused), of the
// caller's element type, writing o; scale 1/sqrt(head_dim); no workspace. element_bytes: of that type,
// for the offsets of k and v.
AttentionParams attention_params(const AttentionCase& c, const void* q_source, const void* kv_source, void* o,
                                 size_t element_bytes);

}  // namespace rtvd
