#include "kernels/cast/rgb8_to_float.h"

namespace rtvd {

void rgb8_to_float_cpu(const Rgb8ToFloatParams& p) {
  for (int64_t i = 0; i < p.count; ++i) p.y[i] = float(p.x[i]) / 127.5f - 1.0f;
}

}  // namespace rtvd
