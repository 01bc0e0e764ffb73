// denoise_blend on the CPU: the step, the temporal blend and the RGBA8 conversion it fuses on the GPU, in the
// same order of operations (no fused multiply-adds), one pass for the first two, which also looks for a
// value that is not finite.
#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "kernels/common/cpu_threading.h"
#include "kernels/denoise/denoise.h"

namespace rtvd {

void denoise_blend_cpu(const DenoiseBlendParams& p) {
  if (p.batch != 1 && p.batch != 2) fail("denoise_blend_cpu: batch ", p.batch, ", expected 1 or 2");
  const int64_t count = int64_t(p.h) * p.w * p.c;
  const auto* v = static_cast<const float*>(p.v);
  const int64_t half = p.v_half ? p.v_half : count;
  // On the first frame prev holds nothing yet (possibly NaN), so it is not even multiplied by zero.
  const float keep = p.blend, take = 1.0f - p.blend;
  bool nonfinite = false;
#pragma omp parallel for schedule(dynamic, cpu::chunk_for(1)) if (count >= cpu::kParallelElements) \
    reduction(|| : nonfinite)
  for (int64_t i = 0; i < count; ++i) {
    const float guided = p.batch == 2 ? v[half + i] + p.guidance * (v[i] - v[half + i]) : v[i];
    const float step = p.out_coef * guided;
    const float x = p.x ? p.x_coef * p.x[i] + step : step;
    if (p.x) p.x[i] = x;
    p.prev[i] = p.first ? x : keep * p.prev[i] + take * x;
    nonfinite = nonfinite || !std::isfinite(p.prev[i]);
  }
  if (p.nonfinite) *p.nonfinite = nonfinite ? 1 : 0;
  if (!p.rgba) return;
  ToRgba8Params convert;
  convert.x = p.prev;
  convert.rgba = p.rgba;
  convert.h = p.h;
  convert.w = p.w;
  convert.c = p.c;
  to_rgba8_cpu(convert);
}

}  // namespace rtvd
