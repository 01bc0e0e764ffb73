// similarity on the CPU: each chunk's sums accumulated in double, in index order (deterministic, and exact
// enough that the GPU's fp32 sums are compared with it).
#include "kernels/similarity/similarity.h"

#include <algorithm>

namespace rtvd {

void similarity_cpu(const SimilarityParams& p) {
  const auto* y = static_cast<const float*>(p.y);
  const int64_t size = similarity_chunk_size(p);
  for (int c = 0; c < p.chunks; ++c) {
    double xx = 0, yy = 0, dd = 0;
    for (int64_t i = c * size; i < std::min(p.count, (c + 1) * size); ++i) {
      const double a = p.x[i], b = y[i];
      xx += a * a;
      yy += b * b;
      dd += (a - b) * (a - b);
    }
    p.sums[3 * c] = float(xx);
    p.sums[3 * c + 1] = float(yy);
    p.sums[3 * c + 2] = float(dd);
  }
}

}  // namespace rtvd
