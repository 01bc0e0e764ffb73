#include "kernels/cast/cast.h"

#include <algorithm>

namespace rtvd {

void cast_cpu(const CastParams& p) {
  float* y = static_cast<float*>(p.y);
  for (int b = 0; b < p.copies; ++b) std::copy(p.x, p.x + p.count, y + b * p.count);
}

}  // namespace rtvd
