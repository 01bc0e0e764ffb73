// How the GEMM path (attention_gemm.cuh) splits each image's queries into chunks of rows, so that the scores
// of one chunk (S in fp32 and P in fp16, every head) fit a fixed budget at any sequence length: the SD VAE's
// mid-block attention at 1024² has 16,384 tokens, 1.5 GiB of scores for the whole image. Plain C++, so that
// the memory check (pipeline/frame_memory.cpp) sizes the workspace before anything is allocated.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/attention/attention.h"
#include "kernels/common/alignment.h"

namespace rtvd {

inline constexpr size_t kAttentionGemmScoreBudget = size_t(256) << 20;  // S and P of one chunk at most
inline constexpr size_t kAttentionGemmCublasScratch = size_t(8) << 20;  // cuBLASLt's scratch, after S and P

struct AttentionGemmChunks {
  int64_t kv_pitch = 0;  // elements between rows of S and P: kv_len rounded up to 8 (16-byte rows for cuBLASLt)
  int64_t rows = 0;      // query rows per chunk; 0 where one row of every head exceeds the budget
  int64_t count = 0;     // chunks per image; the last holds tail_rows()
  int64_t tail_rows(int q_len) const { return q_len - (count - 1) * rows; }
  size_t probs_offset = 0;    // of P in the workspace (S starts at 0)
  size_t scratch_offset = 0;  // of cuBLASLt's scratch
  size_t workspace_bytes = 0;
};

// As few chunks as the budget allows, of even size (the last is no sliver that would leave the GPU idle); a
// sequence whose scores fit whole is one chunk.
inline AttentionGemmChunks attention_gemm_chunks(const AttentionParams& p) {
  AttentionGemmChunks c;
  if (p.heads <= 0 || p.q_len <= 0 || p.kv_len <= 0) return c;
  c.kv_pitch = (int64_t(p.kv_len) + 7) / 8 * 8;
  const int64_t row_bytes = int64_t(p.heads) * c.kv_pitch * int64_t(sizeof(float) + sizeof(uint16_t));
  const int64_t most = int64_t(kAttentionGemmScoreBudget) / row_bytes;
  if (most == 0) return c;
  c.count = (p.q_len + most - 1) / most;
  c.rows = (p.q_len + c.count - 1) / c.count;
  const size_t scores = size_t(p.heads) * size_t(c.rows) * size_t(c.kv_pitch);
  c.probs_offset = align_up(scores * sizeof(float));
  c.scratch_offset = c.probs_offset + align_up(scores * sizeof(uint16_t));
  c.workspace_bytes = c.scratch_offset + kAttentionGemmCublasScratch;
  return c;
}

}  // namespace rtvd
