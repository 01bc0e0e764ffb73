// similarity's case table (similarity_cases.h). Compiled into the CPU kernels library: plain data, no kernels.
#include "kernels/similarity/similarity_cases.h"

namespace rtvd {

const std::vector<SimilarityCase>& similarity_cases() {
  static const std::vector<SimilarityCase> cases = {
      {.name = "image_512x512x3", .count = 512 * 512 * 3, .production = true},
      {.name = "default_64x64x3", .count = 64 * 64 * 3, .production = true},
      {.name = "short_last_chunk", .count = 10007, .chunks = 7, .hostile = "count % chunks != 0"},
      {.name = "empty_last_chunk", .count = 9, .chunks = 4, .hostile = "ceil(9 / 4) = 3: the fourth chunk is empty"},
      {.name = "value_per_chunk", .count = 300, .chunks = 300, .hostile = "one value per block"},
      {.name = "one_chunk", .count = 100000, .chunks = 1, .hostile = "a single block over everything"},
      {.name = "misaligned_y", .count = 4099, .chunks = 5, .y_misalign_bytes = 2, .hostile = "y only 2-byte aligned"},
  };
  return cases;
}

SimilarityParams similarity_params(const SimilarityCase& c, const float* x, const void* y, float* sums) {
  SimilarityParams p;
  p.x = x, p.y = y, p.sums = sums, p.count = c.count, p.chunks = c.chunks;
  return p;
}

}  // namespace rtvd
