// attention's case table (attention_cases.h). Compiled into the CPU kernels library: plain data, no kernels.
#include "kernels/attention/attention_cases.h"

#include <cmath>
#include <cstdint>

namespace rtvd {

namespace {

std::vector<AttentionCase> make_cases() {
  return {
      // ---- production (batch 2): SD 2.1's heads of dim 64 at 64x64 and 32x32 and its
      // cross-attention over 77 context tokens, SD 1.5's head dims 40/80/160, the default model's 16x16 level.
      {.name = "sd21_64x64", .heads = 5, .q_len = 4096, .kv_len = 4096, .fused_qkv = true, .production = true},
      {.name = "sd21_32x32", .heads = 10, .q_len = 1024, .kv_len = 1024, .fused_qkv = true, .production = true},
      {.name = "sd21_cross_64x64", .heads = 5, .q_len = 4096, .kv_len = 77, .production = true},
      {.name = "sd15_64x64_d40", .heads = 8, .head_dim = 40, .q_len = 4096, .kv_len = 4096, .fused_qkv = true,
       .production = true},
      {.name = "sd15_32x32_d80", .heads = 8, .head_dim = 80, .q_len = 1024, .kv_len = 1024, .fused_qkv = true,
       .production = true},
      {.name = "sd15_d160_16x16", .heads = 8, .head_dim = 160, .q_len = 256, .kv_len = 256, .fused_qkv = true,
       .production = true},
      {.name = "default_16x16", .heads = 3, .head_dim = 32, .q_len = 256, .kv_len = 256, .fused_qkv = true,
       .production = true},
      // The CLIP text encoders at batch 2: OpenAI's ViT-L/14 (SD 1.5, 12 heads of 64) and OpenCLIP's ViT-H/14
      // (SD 2.1, 16 heads of 64), causal self-attention over 77 tokens read from the fused QKV projection.
      {.name = "clip_l_text", .heads = 12, .q_len = 77, .kv_len = 77, .fused_qkv = true, .causal = true,
       .production = true},
      {.name = "clip_h_text", .heads = 16, .q_len = 77, .kv_len = 77, .fused_qkv = true, .causal = true,
       .production = true},
      // The SD VAE's mid-block attention at 512x512, batch 1: one head of dim 512 over the 64x64 latent.
      {.name = "sd_vae_mid_64x64_d512", .batch = 1, .heads = 1, .head_dim = 512, .q_len = 4096, .kv_len = 4096,
       .fused_qkv = true, .production = true},
      // The same at 1024x1024 (SD's VAE and SDXL's): 16,384 tokens, scores the GEMM path takes in chunks.
      {.name = "sd_vae_mid_128x128_d512", .batch = 1, .heads = 1, .head_dim = 512, .q_len = 16384, .kv_len = 16384,
       .fused_qkv = true, .production = true},

      // ---- the production shapes scaled down
      {.name = "sd21_64x64_scaled", .heads = 5, .q_len = 512, .kv_len = 512, .fused_qkv = true},
      {.name = "sd15_d40_scaled", .heads = 8, .head_dim = 40, .q_len = 320, .kv_len = 320, .fused_qkv = true},
      {.name = "sd15_d80_odd", .batch = 1, .heads = 8, .head_dim = 80, .q_len = 257, .kv_len = 257,
       .fused_qkv = true, .hostile = "257 tokens: one past a tile"},
      {.name = "sd21_cross_scaled", .heads = 5, .q_len = 512, .kv_len = 77},
      {.name = "sd15_cross_d40", .heads = 8, .head_dim = 40, .q_len = 256, .kv_len = 77},

      // ---- self-attention: odd sizes and every instance of the head-dim switch
      {.name = "q67_d64_pad", .batch = 1, .heads = 3, .q_len = 67, .kv_len = 67, .fused_qkv = true, .o_pad = 8,
       .hostile = "67 tokens, padded output rows"},
      {.name = "single_token", .batch = 1, .q_len = 1, .kv_len = 1, .fused_qkv = true, .hostile = "one token"},
      {.name = "d8_len37", .batch = 1, .heads = 2, .head_dim = 8, .q_len = 37, .kv_len = 37, .fused_qkv = true,
       .hostile = "head dim 8, 37 tokens"},
      {.name = "d24_len129", .heads = 5, .head_dim = 24, .q_len = 129, .kv_len = 129, .fused_qkv = true,
       .hostile = "head dim 24, 129 tokens"},
      {.name = "d56_len100", .batch = 1, .heads = 2, .head_dim = 56, .q_len = 100, .kv_len = 100, .fused_qkv = true,
       .hostile = "head dim 56"},
      {.name = "d96_len129", .batch = 1, .heads = 2, .head_dim = 96, .q_len = 129, .kv_len = 129, .fused_qkv = true,
       .hostile = "head dim 96, 129 tokens"},
      {.name = "d120_len77", .batch = 1, .heads = 1, .head_dim = 120, .q_len = 77, .kv_len = 77, .fused_qkv = true,
       .hostile = "head dim 120"},
      {.name = "d128_len200", .batch = 1, .heads = 1, .head_dim = 128, .q_len = 200, .kv_len = 200,
       .fused_qkv = true, .hostile = "head dim 128"},
      {.name = "d136_len67_pad", .batch = 1, .heads = 2, .head_dim = 136, .q_len = 67, .kv_len = 67,
       .fused_qkv = true, .o_pad = 8, .hostile = "head dim 136, padded output rows"},
      {.name = "d512_len150", .batch = 1, .heads = 1, .head_dim = 512, .q_len = 150, .kv_len = 150,
       .fused_qkv = true, .hostile = "head dim 512 (the SD VAE's mid block)"},
      {.name = "d512_q16421_kv16389_pad", .heads = 1, .head_dim = 512, .q_len = 16421, .kv_len = 16389, .o_pad = 8,
       .hostile = "head dim 512 past one chunk of scores: two images, a last chunk of other length, keys not a "
                  "multiple of 8, padded output rows"},
      {.name = "heads8_len6000_chunks", .batch = 1, .heads = 8, .q_len = 6000, .kv_len = 6000, .fused_qkv = true,
       .hostile = "8 heads past one chunk of scores of the GEMM path"},
      {.name = "fused_d64_len45", .heads = 2, .q_len = 45, .kv_len = 45, .fused_qkv = true, .hostile = "45 tokens"},
      {.name = "self_d64_len37", .heads = 2, .q_len = 37, .kv_len = 37,
       .hostile = "self-attention in the cross layout, 37 tokens"},

      // ---- cross-attention: 77 context tokens, odd key counts, a single key, a single query
      {.name = "cross_d40_q50", .heads = 3, .head_dim = 40, .q_len = 50, .kv_len = 77, .hostile = "50 queries"},
      {.name = "cross_d80_q129", .batch = 1, .heads = 2, .head_dim = 80, .q_len = 129, .kv_len = 77,
       .hostile = "129 queries"},
      {.name = "cross_d160_q9", .heads = 1, .head_dim = 160, .q_len = 9, .kv_len = 77, .hostile = "9 queries"},
      {.name = "cross_d80_kv37_pad", .batch = 1, .heads = 2, .head_dim = 80, .q_len = 67, .kv_len = 37, .o_pad = 8,
       .hostile = "37 keys, padded output rows"},
      {.name = "cross_d160_kv129", .heads = 3, .head_dim = 160, .q_len = 130, .kv_len = 129,
       .hostile = "129 keys: one past a tile"},
      {.name = "cross_d48_kv33", .batch = 1, .heads = 5, .head_dim = 48, .q_len = 129, .kv_len = 33,
       .hostile = "33 keys"},
      {.name = "cross_d32_q1", .batch = 1, .heads = 1, .head_dim = 32, .q_len = 1, .kv_len = 300,
       .hostile = "a single query"},
      {.name = "cross_kv1", .heads = 4, .q_len = 200, .kv_len = 1, .hostile = "a single key: softmax of one score"},
      {.name = "two_score_blocks", .batch = 1, .heads = 1, .head_dim = 16, .q_len = 500, .kv_len = 2500,
       .hostile = "more queries than one CPU score block holds"},

      // ---- peaked softmax (the running max moves by large steps between key tiles) and scores beyond 88
      // (exp overflows without the max shift)
      {.name = "peaked_d64", .batch = 1, .heads = 2, .q_len = 300, .kv_len = 300, .fused_qkv = true,
       .input_stddev = 4.0f, .hostile = "nearly one-hot softmax rows"},
      {.name = "peaked_d40", .batch = 1, .heads = 3, .head_dim = 40, .q_len = 200, .kv_len = 200, .fused_qkv = true,
       .input_stddev = 4.0f, .hostile = "nearly one-hot softmax rows"},
      {.name = "peaked_cross_d160", .batch = 1, .heads = 2, .head_dim = 160, .q_len = 67, .kv_len = 129,
       .input_stddev = 3.0f, .hostile = "nearly one-hot softmax rows"},
      {.name = "integer_scores", .heads = 2, .q_len = 20, .kv_len = 33, .integer_qk = 12,
       .hostile = "scores beyond 88: exp overflows without the max shift"},

      // ---- causal self-attention: one prompt, a few tokens, tile multiples and their edges (the mma.sync
      // kernel's key tiles are 32 or 64, its query blocks 64 or 128; the wgmma kernel's 128 keys and 192
      // queries), peaked rows, the cross layout, padded output rows, the fallback kernel
      {.name = "clip_l_text_b1", .batch = 1, .heads = 12, .q_len = 77, .kv_len = 77, .fused_qkv = true,
       .causal = true, .hostile = "causal, one prompt"},
      {.name = "clip_h_text_b1", .batch = 1, .heads = 16, .q_len = 77, .kv_len = 77, .fused_qkv = true,
       .causal = true, .hostile = "causal, one prompt"},
      {.name = "causal_len5", .heads = 2, .q_len = 5, .kv_len = 5, .fused_qkv = true, .causal = true,
       .hostile = "causal, 5 tokens"},
      {.name = "causal_len1", .batch = 1, .heads = 2, .q_len = 1, .kv_len = 1, .fused_qkv = true, .causal = true,
       .hostile = "causal, one token"},
      {.name = "causal_len128", .heads = 2, .q_len = 128, .kv_len = 128, .fused_qkv = true, .causal = true,
       .hostile = "causal, 128 tokens: a multiple of every tile"},
      {.name = "causal_len385", .batch = 1, .heads = 2, .q_len = 385, .kv_len = 385, .fused_qkv = true,
       .causal = true, .hostile = "causal, 385 tokens: several query blocks, key tiles skipped, one past a tile"},
      {.name = "causal_peaked_len300", .batch = 1, .heads = 2, .q_len = 300, .kv_len = 300, .fused_qkv = true,
       .causal = true, .input_stddev = 4.0f, .hostile = "causal, nearly one-hot softmax rows"},
      {.name = "causal_d80_len129", .batch = 1, .heads = 2, .head_dim = 80, .q_len = 129, .kv_len = 129,
       .fused_qkv = true, .causal = true, .o_pad = 8, .hostile = "causal, head dim 80 (16-row warps), padded rows"},
      {.name = "causal_d32_len200", .batch = 1, .heads = 3, .head_dim = 32, .q_len = 200, .kv_len = 200,
       .fused_qkv = true, .causal = true, .hostile = "causal, head dim 32 (64-key tiles)"},
      {.name = "causal_cross_layout_len37", .heads = 2, .q_len = 37, .kv_len = 37, .causal = true,
       .hostile = "causal self-attention in the cross layout"},
      {.name = "causal_two_score_blocks", .batch = 1, .heads = 1, .head_dim = 16, .q_len = 1100, .kv_len = 1100,
       .fused_qkv = true, .causal = true, .hostile = "causal, more queries than one CPU score block holds"},
      {.name = "causal_fallback_d12", .batch = 1, .heads = 3, .head_dim = 12, .q_len = 45, .kv_len = 45,
       .fused_qkv = true, .causal = true, .hostile = "causal, head dim 12: the fallback kernel"},

      // ---- head dims the flash kernels can't load (the tiny test models): the fallback kernel
      {.name = "fallback_d4", .heads = 2, .head_dim = 4, .q_len = 64, .kv_len = 64, .fused_qkv = true,
       .hostile = "head dim 4"},
      {.name = "fallback_cross_d12", .batch = 1, .heads = 3, .head_dim = 12, .q_len = 33, .kv_len = 7,
       .hostile = "head dim 12"},
      {.name = "one_key_d5", .batch = 1, .heads = 3, .head_dim = 5, .q_len = 3, .kv_len = 1,
       .hostile = "head dim 5, odd strides, one key"},
  };
}

}  // namespace

const std::vector<AttentionCase>& attention_cases() {
  static const std::vector<AttentionCase> cases = make_cases();
  return cases;
}

AttentionSizes attention_sizes(const AttentionCase& c) {
  const size_t C = size_t(c.channels());
  return {size_t(c.batch) * c.q_len * C * (c.fused_qkv ? 3 : 1), c.fused_qkv ? 0 : size_t(c.batch) * c.kv_len * 2 * C,
          size_t(c.batch) * c.q_len * (C + c.o_pad)};
}

AttentionParams attention_params(const AttentionCase& c, const void* q_source, const void* kv_source, void* o,
                                 size_t element_bytes) {
  const int C = c.channels();
  const auto at = [element_bytes](const void* base, int elements) {
    return static_cast<const uint8_t*>(base) + size_t(elements) * element_bytes;
  };
  AttentionParams p;
  p.batch = c.batch, p.heads = c.heads, p.head_dim = c.head_dim, p.q_len = c.q_len, p.kv_len = c.kv_len;
  p.q_stride = c.fused_qkv ? 3 * C : C;
  p.k_stride = p.v_stride = c.fused_qkv ? 3 * C : 2 * C;
  p.o_stride = C + c.o_pad;
  p.scale = 1.0f / std::sqrt(float(c.head_dim));
  p.causal = c.causal;
  p.q = q_source;
  p.k = c.fused_qkv ? at(q_source, C) : kv_source;
  p.v = c.fused_qkv ? at(q_source, 2 * C) : at(kv_source, C);
  p.o = o;
  return p;
}

}  // namespace rtvd
