// The sampler ops' cases (guidance_step; denoise_blend, the last step fused with the temporal blend and the
// RGBA8 conversion): the tables that the correctness tests (tests/ops/denoise_test.cpp) and the kernel
// benchmark both run. Production shapes (the default model's 64x64 RGB frame, SD's 4x64x64 latents with and
// without guidance, LCM's noise and the decoder's input, decoded frames of 512^2, frames of 512^2 to 2048^2)
// and hostile ones (batch 1, a count that is no multiple of 4, grey frames, the first frame with no history,
// block tiles with a tail, a sample started from noise alone). Plain C++.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/denoise/denoise.h"

namespace rtvd {

struct GuidanceStepCase {
  std::string name;  // unique, [A-Za-z0-9_]
  int64_t count = 0;
  int batch = 2;
  bool model_in = true;  // the next model input is written (not on the last step)
  int copies = 0;        // images of the model input; 0: batch
  bool v = true;         // a model output to add (not when a txt2img sample starts from noise alone)
  bool noise = false;    // fresh noise added (LCM's steps)
  bool production = false;
  std::string hostile = "";  // "" for none
};

struct DenoiseBlendCase {
  std::string name;
  int h = 0, w = 0, c = 3, batch = 2;
  bool first = false;  // the first frame: prev is not read
  bool rgba = true;    // the RGBA8 conversion (c 1, 3, or 4: a latent shown as it is)
  bool x = true;       // a sample to step; without, v is a decoded image shown as it is
  bool production = false;
  std::string hostile = "";
};

const std::vector<GuidanceStepCase>& guidance_step_cases();
const std::vector<DenoiseBlendCase>& denoise_blend_cases();

// A step's scalars: the guidance scale and the step's coefficients (guidance_step uses them all,
// denoise_blend the first three).
struct StepScalars {
  float guidance = 1.0f, x_coef = 1.0f, out_coef = 0.0f, noise_coef = 0.0f, input_scale = 1.0f;
};

// Each case's params over the caller's buffers (v (batch, count), x and noise (count) fp32, model_in
// (copies, count); v (batch, h w c), x and prev (h, w, c) fp32, rgba (h, w, 4), the non-finite flag (one
// int, as in every frame)), each ignored where the case has none, and the step's scalars.
GuidanceStepParams guidance_step_params(const GuidanceStepCase& c, const void* v, float* x, const float* noise,
                                        void* model_in, const StepScalars& s);
DenoiseBlendParams denoise_blend_params(const DenoiseBlendCase& c, const void* v, float* x, float* prev,
                                        uint8_t* rgba, int32_t* nonfinite, const StepScalars& s, float blend);

}  // namespace rtvd
