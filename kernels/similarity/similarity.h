// similarity: how far a source image moved from another, the similarity filter's measure
// (pipeline/similarity_filter.h): x and y cut into `chunks` equal runs of values, each chunk's sums
//   sums[c] = { sum x^2, sum y^2, sum (x - y)^2 }   over x[i], y[i], i in chunk c
// Chunk c holds [c * size, min(count, (c + 1) * size)), size = ceil(count / chunks): of an NHWC image, a band
// of rows. The caller combines the chunks (similarity_filter.cpp).
#pragma once
#include <cstdint>

namespace rtvd {

struct SimilarityParams {
  const float* x = nullptr;  // (count) fp32: the source as the host wrote it
  const void* y = nullptr;   // (count) activations: the copy it is compared with
  float* sums = nullptr;     // (chunks, 3) fp32
  int64_t count = 0;
  int chunks = 1;            // 1 to count
};

// Values per chunk: ceil(count / chunks).
inline int64_t similarity_chunk_size(const SimilarityParams& p) { return (p.count + p.chunks - 1) / p.chunks; }

void similarity_cpu(const SimilarityParams& p);

}  // namespace rtvd
