// The sampler ops' case tables (denoise_cases.h). Compiled into the CPU kernels library: plain data, no
// kernels.
#include "kernels/denoise/denoise_cases.h"

namespace rtvd {

const std::vector<GuidanceStepCase>& guidance_step_cases() {
  static const std::vector<GuidanceStepCase> cases = {
      {.name = "default_64x64x3", .count = 64 * 64 * 3, .production = true},
      {.name = "sd_latent_4x64x64", .count = 4 * 64 * 64, .production = true},
      {.name = "last_step", .count = 4096, .model_in = false, .hostile = "no model input"},
      {.name = "batch1", .count = 1001, .batch = 1, .hostile = "batch 1: no guidance"},
      {.name = "batch1_last_step", .count = 1001, .batch = 1, .model_in = false, .hostile = "batch 1, no model input"},
      {.name = "ragged_1001", .count = 1001, .hostile = "count % 4 != 0"},
      {.name = "ragged_1001_last_step", .count = 1001, .model_in = false, .hostile = "count % 4 != 0"},
      {.name = "ragged_1003", .count = 1003, .hostile = "count % 4 != 0"},
      {.name = "sd_latent_batch1", .count = 4 * 64 * 64, .batch = 1, .production = true},
      {.name = "sd_latent_lcm_noise", .count = 4 * 64 * 64, .batch = 1, .noise = true, .production = true},
      {.name = "sd_latent_to_decoder", .count = 4 * 64 * 64, .copies = 1, .production = true},
      {.name = "sd_latent_img2img_start", .count = 4 * 64 * 64, .batch = 1, .copies = 2, .production = true},
      {.name = "txt2img_start", .count = 1001, .batch = 1, .copies = 2, .v = false,
       .hostile = "no model output: the sample from noise alone"},
      {.name = "noise_ragged", .count = 1003, .noise = true, .hostile = "noise, count % 8 != 0"},
      {.name = "noise_no_v_one_copy", .count = 4096, .batch = 1, .copies = 1, .v = false, .noise = true,
       .hostile = "noise without a model output, one copy"},
  };
  return cases;
}

const std::vector<DenoiseBlendCase>& denoise_blend_cases() {
  static const std::vector<DenoiseBlendCase> cases = {
      {.name = "default_64x64", .h = 64, .w = 64, .production = true},  // two whole block tiles
      {.name = "frame_512", .h = 512, .w = 512, .production = true},
      {.name = "frame_1024", .h = 1024, .w = 1024, .production = true},
      {.name = "frame_2048", .h = 2048, .w = 2048, .production = true},
      {.name = "sd_latent_64x64", .h = 64, .w = 64, .c = 4, .rgba = false, .production = true},
      {.name = "tiles_and_tail_80", .h = 80, .w = 80, .hostile = "three tiles and 256 pixels after them"},
      {.name = "grey_first_batch1", .h = 17, .w = 9, .c = 1, .batch = 1, .first = true,
       .hostile = "grey, batch 1, the first frame (prev unread)"},
      {.name = "grey_tile_and_tail", .h = 96, .w = 70, .c = 1, .batch = 1, .first = true,
       .hostile = "grey: a tile and a tail"},
      {.name = "latent_32x32", .h = 32, .w = 32, .c = 4, .rgba = false, .hostile = "latent: no RGBA8"},
      {.name = "latent_tile_and_tail", .h = 48, .w = 48, .c = 4, .rgba = false, .hostile = "latent: a tile and a tail"},
      {.name = "latent_shown_64x64", .h = 64, .w = 64, .c = 4, .hostile = "a latent to RGBA8: its first 3 channels"},
      {.name = "latent_shown_tail", .h = 33, .w = 7, .c = 4, .first = true, .hostile = "a latent to RGBA8, per pixel"},
      {.name = "count_not_4", .h = 33, .w = 7, .hostile = "count % 4 != 0: the per-pixel path"},
      {.name = "first_8x8", .h = 8, .w = 8, .first = true, .hostile = "the first frame"},
      {.name = "decoded_512", .h = 512, .w = 512, .batch = 1, .x = false, .production = true},
      {.name = "decoded_first", .h = 64, .w = 64, .batch = 1, .first = true, .x = false,
       .hostile = "a decoded image, the first frame"},
      {.name = "decoded_tail", .h = 33, .w = 7, .batch = 1, .x = false, .hostile = "a decoded image, per pixel"},
  };
  return cases;
}

GuidanceStepParams guidance_step_params(const GuidanceStepCase& c, const void* v, float* x, const float* noise,
                                        void* model_in, const StepScalars& s) {
  GuidanceStepParams p;
  p.v = c.v ? v : nullptr, p.x = x, p.noise = c.noise ? noise : nullptr, p.model_in = c.model_in ? model_in : nullptr;
  p.count = c.count, p.batch = c.batch, p.copies = c.copies > 0 ? c.copies : c.batch;
  p.guidance = s.guidance, p.x_coef = s.x_coef, p.out_coef = s.out_coef, p.noise_coef = s.noise_coef;
  p.input_scale = s.input_scale;
  return p;
}

DenoiseBlendParams denoise_blend_params(const DenoiseBlendCase& c, const void* v, float* x, float* prev,
                                        uint8_t* rgba, int32_t* nonfinite, const StepScalars& s, float blend) {
  DenoiseBlendParams p;
  p.v = v, p.x = c.x ? x : nullptr, p.prev = prev, p.rgba = c.rgba ? rgba : nullptr, p.nonfinite = nonfinite;
  p.h = c.h, p.w = c.w, p.c = c.c, p.batch = c.batch;
  p.guidance = s.guidance, p.x_coef = s.x_coef, p.out_coef = s.out_coef, p.blend = blend, p.first = c.first;
  return p;
}

}  // namespace rtvd
