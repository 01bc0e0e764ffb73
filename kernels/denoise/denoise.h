// The sampler's per-step ops: classifier-free guidance and one sampler step, the temporal blend with the
// previous frame and the conversion to RGBA8 for display. Every sampler rtvd runs takes linear steps:
// rectified flow's Euler step (x - dt v) and the DDPM samplers' (Euler, LCM, DDIM: pipeline/samplers/).
// The CUDA backend fuses the last step with blend and conversion into one pass (denoise_blend), which also
// blends and converts a decoded image (no x); the CPU runs them one after another.
#pragma once
#include "kernels/common/activation.h"

namespace rtvd {

// With v = v_u + guidance (v_c - v_u) (v = v_c for batch 1):
//   x <- x_coef x + out_coef v + noise_coef noise      (v null: no v term; noise null: no noise term)
// and the next model input gets input_scale x in each of its `copies` images. x and noise are fp32; v and
// model_in are activations. Rounded in that order, one operation at a time (no fused multiply-add), so
// rectified flow's x_coef 1, out_coef -dt gives x - dt v exactly.
struct GuidanceStepParams {
  const void* v = nullptr;       // (batch, count): conditional image first, unconditional second; or null
  float* x = nullptr;            // (count): x, updated in place unless x_out is set
  float* x_out = nullptr;        // (count) or null: where x' goes instead (a stream batch moves each frame's x
                                 // to its next step's slot); may not overlap x unless it is x
  const float* noise = nullptr;  // (count) or null
  void* model_in = nullptr;      // (copies, count) or null on the last step
  int64_t count = 0;
  int batch = 2;                 // images of v: 1 or 2
  int copies = 2;                // images of model_in: 1 or 2
  float guidance = 1.0f;
  float x_coef = 1.0f, out_coef = 0.0f, noise_coef = 0.0f;
  float input_scale = 1.0f;
};

// [-1, 1] -> [0, 255], clamped, rounded to nearest; channels 3 -> RGB + opaque alpha, 1 -> grey, 4 -> the
// first three as RGB: a latent shown as it is, for latent models without their autoencoder.
struct ToRgba8Params {
  const float* x = nullptr;  // (h, w, c)
  uint8_t* rgba = nullptr;   // (h, w, 4)
  int h = 0, w = 0, c = 0;
};

void guidance_step_cpu(const GuidanceStepParams& p);
void to_rgba8_cpu(const ToRgba8Params& p);

// The last op of a frame, in one pass: x' = x_coef x + out_coef v (v guided as in guidance_step; x null: x'
// = out_coef v, a decoded image to show, and nothing is written back to x), then the temporal blend of x'
// into prev (prev <- blend * prev + (1 - blend) x', or x' when first: prev is then not read), then to_rgba8
// of prev. With rgba null the conversion is skipped. x and prev are updated in place.
// nonfinite (when not null) is set to 1 when a value of the new prev is NaN or Inf, else to 0: a NaN or Inf
// that was read (in v, x, or prev unless first) or made (a step that overflows float) reaches prev, and the
// RGBA8 conversion would show it as black (NaN clamps to 0). The frame loop reads it with the frame.
struct DenoiseBlendParams {
  const void* v = nullptr;   // (batch, h * w * c): conditional image first, unconditional second
  float* x = nullptr;        // (h, w, c) or null
  float* prev = nullptr;     // (h, w, c)
  uint8_t* rgba = nullptr;   // (h, w, 4) or null; needs c = 1, 3 or 4 (as to_rgba8)
  int32_t* nonfinite = nullptr;  // one int or null
  int h = 0, w = 0, c = 0;
  int batch = 2;
  int64_t v_half = 0;        // elements from a conditional value of v to its unconditional one; 0: h * w * c
                             // (a stream batch's v holds all its frames' conditional images first)
  float guidance = 1.0f;
  float x_coef = 1.0f, out_coef = 0.0f;
  float blend = 0.0f;
  bool first = false;
};

void denoise_blend_cpu(const DenoiseBlendParams& p);

}  // namespace rtvd
