// cast's case table (cast_cases.h). Compiled into the CPU kernels library: plain data, no kernels.
#include "kernels/cast/cast_cases.h"

namespace rtvd {

const std::vector<CastCase>& cast_cases() {
  static const std::vector<CastCase> cases = {
      {.name = "default_64x64x3", .count = 64 * 64 * 3, .production = true},
      {.name = "sd_latent_4x64x64", .count = 4 * 64 * 64, .production = true},
      {.name = "one_copy", .count = 4096, .copies = 1, .hostile = "batch 1"},
      {.name = "ragged_1001", .count = 1001, .hostile = "count % 8 != 0: each copy starts unaligned"},
      {.name = "one", .count = 1, .copies = 3, .hostile = "a single element, three copies"},
      {.name = "misaligned_y", .count = 4096, .y_misalign_bytes = 2, .hostile = "y only 2-byte aligned"},
  };
  return cases;
}

CastParams cast_params(const CastCase& c, const float* x, void* y) {
  CastParams p;
  p.x = x, p.y = y, p.count = c.count, p.copies = c.copies;
  return p;
}

}  // namespace rtvd
