// denoise_blend on the CPU: the three sampler ops it fuses on the GPU, run one after another.
#include "kernels/denoise/denoise.h"

namespace rtvd {

void denoise_blend_cpu(const DenoiseBlendParams& p) {
  const int64_t count = int64_t(p.h) * p.w * p.c;
  GuidanceStepParams step;
  step.v = p.v;
  step.x = p.x;
  step.count = count;
  step.batch = p.batch;
  step.guidance = p.guidance;
  step.dt = p.dt;
  guidance_step_cpu(step);

  TemporalBlendParams blend;
  blend.x = p.x;
  blend.prev = p.prev;
  blend.out = p.prev;
  blend.count = count;
  blend.blend = p.blend;
  blend.first = p.first;
  temporal_blend_cpu(blend);

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
