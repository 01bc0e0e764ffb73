// similarity's cases: the one table that the correctness tests (tests/ops/similarity_test.cpp) run.
// Production shapes (the similarity filter's: a 512x512 RGB source and the default model's 64x64, in
// similarity_filter.h's kChunks chunks) and hostile ones (a short last chunk, an empty last chunk, a value
// per chunk, one chunk, a misaligned y). Plain C++.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/similarity/similarity.h"

namespace rtvd {

struct SimilarityCase {
  std::string name;  // unique, [A-Za-z0-9_]
  int64_t count = 0;
  int chunks = 128;
  int y_misalign_bytes = 0;  // y starts this many bytes past a 16-byte boundary (the caller offsets it)
  bool production = false;
  std::string hostile = "";  // "" for none
};

const std::vector<SimilarityCase>& similarity_cases();

// The case's params over the caller's buffers: x (count) fp32, y (count) activations, sums (chunks, 3).
SimilarityParams similarity_params(const SimilarityCase& c, const float* x, const void* y, float* sums);

}  // namespace rtvd
