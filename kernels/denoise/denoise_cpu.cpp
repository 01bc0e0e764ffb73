// The sampler's per-step ops on the CPU: guidance + a linear sampler step, and the RGBA8 conversion.
#include "kernels/denoise/denoise.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "kernels/common/cpu_threading.h"

namespace rtvd {

void guidance_step_cpu(const GuidanceStepParams& p) {
  const auto* v = static_cast<const float*>(p.v);
  auto* model_in = static_cast<float*>(p.model_in);
  const int64_t count = p.count;
  float* x_out = p.x_out ? p.x_out : p.x;
  if (p.batch != 1 && p.batch != 2) fail("guidance_step_cpu: batch ", p.batch, ", expected 1 or 2");
  if (model_in && p.copies != 1 && p.copies != 2) fail("guidance_step_cpu: copies ", p.copies, ", expected 1 or 2");
#pragma omp parallel for schedule(dynamic, cpu::chunk_for(1)) if (count >= cpu::kParallelElements)
  for (int64_t i = 0; i < count; ++i) {
    float x = p.x_coef * p.x[i];
    if (v) x += p.out_coef * (p.batch == 2 ? v[count + i] + p.guidance * (v[i] - v[count + i]) : v[i]);
    if (p.noise) x += p.noise_coef * p.noise[i];
    x_out[i] = x;
    if (model_in)
      for (int b = 0; b < p.copies; ++b) model_in[b * count + i] = p.input_scale * x;
  }
}

void to_rgba8_cpu(const ToRgba8Params& p) {
  if (p.c != 1 && p.c != 3 && p.c != 4)
    fail("to_rgba8_cpu: ", p.c, " channels, expected 1, 3 or 4");
  const int64_t pixels = int64_t(p.h) * p.w;
  // Round half to even (lrint), as torch.round and CUDA's __float2int_rn do.
  const auto to_byte = [](float v) {
    return uint8_t(std::lrint(std::clamp((v + 1.0f) * 127.5f, 0.0f, 255.0f)));
  };
#pragma omp parallel for schedule(dynamic, cpu::chunk_for(p.c)) if (pixels >= cpu::kParallelElements)
  for (int64_t px = 0; px < pixels; ++px) {
    const float* in = p.x + px * p.c;
    uint8_t* out = p.rgba + 4 * px;
    for (int ch = 0; ch < 3; ++ch) out[ch] = to_byte(in[p.c == 1 ? 0 : ch]);
    out[3] = 255;
  }
}

}  // namespace rtvd
