// The sampler's per-step ops: classifier-free guidance + rectified-flow Euler step, the temporal blend
// with the previous frame and the conversion to RGBA8 for display. The CUDA backend fuses the last
// step with blend and conversion into one pass (denoise_blend); the CPU runs them one after another.
#pragma once
#include "kernels/common/activation.h"

namespace rtvd {

// v = v_u + guidance (v_c - v_u) (v = v_c for batch 1); x <- x - dt v; the next model input gets x
// in each of its `batch` images. x is the fp32 sample; v and model_in are activations.
struct GuidanceStepParams {
  const void* v = nullptr;     // (batch, count): conditional image first, unconditional second
  float* x = nullptr;          // (count), updated in place
  void* model_in = nullptr;    // (batch, count) or null on the last step
  int64_t count = 0;
  int batch = 2;
  float guidance = 1.0f;
  float dt = 0.0f;
};

// out = blend * prev + (1 - blend) * x; prev <- out. On the first frame (first) out = prev = x.
struct TemporalBlendParams {
  const float* x = nullptr;
  float* prev = nullptr;
  float* out = nullptr;
  int64_t count = 0;
  float blend = 0.0f;
  bool first = false;
};

// [-1, 1] -> [0, 255], clamped, rounded to nearest; channels 3 -> RGB + opaque alpha, 1 -> grey, 4 -> the
// first three as RGB: a latent shown as it is, for latent models without their autoencoder.
struct ToRgba8Params {
  const float* x = nullptr;  // (h, w, c)
  uint8_t* rgba = nullptr;   // (h, w, 4)
  int h = 0, w = 0, c = 0;
};

void guidance_step_cpu(const GuidanceStepParams& p);
void temporal_blend_cpu(const TemporalBlendParams& p);
void to_rgba8_cpu(const ToRgba8Params& p);

// The last step of a frame in one pass: guidance_step (no model input), temporal_blend of the new x into
// prev (prev <- blend * prev + (1 - blend) x, or x when first), then to_rgba8 of prev. With rgba null the
// conversion is skipped (latent models decode prev first). x and prev are updated in place.
struct DenoiseBlendParams {
  const void* v = nullptr;   // (batch, h * w * c): conditional image first, unconditional second
  float* x = nullptr;        // (h, w, c)
  float* prev = nullptr;     // (h, w, c)
  uint8_t* rgba = nullptr;   // (h, w, 4) or null; needs c = 1, 3 or 4 (as to_rgba8)
  int h = 0, w = 0, c = 0;
  int batch = 2;
  float guidance = 1.0f;
  float dt = 0.0f;
  float blend = 0.0f;
  bool first = false;
};

// Composes guidance_step_cpu, temporal_blend_cpu and to_rgba8_cpu.
void denoise_blend_cpu(const DenoiseBlendParams& p);

}  // namespace rtvd
