#include "pipeline/samplers/noise_walk.h"

#include <cmath>

#include "kernels/common/rng.h"

namespace rtvd {

void noise_walk(uint64_t seed, int64_t frame, int period, float* out, size_t count) {
  const int64_t key = frame / period;
  const double u = double(frame % period) / period;
  const double eased = u * u * (3.0 - 2.0 * u);  // smoothstep: no jump in speed at the keys
  const float c = static_cast<float>(std::cos(eased * M_PI / 2)), s = static_cast<float>(std::sin(eased * M_PI / 2));
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < count; ++i)
    out[i] = c * gaussian_noise(seed, key, i) + s * gaussian_noise(seed, key + 1, i);
}

}  // namespace rtvd
