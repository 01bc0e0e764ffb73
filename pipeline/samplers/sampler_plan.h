// Every sampler rtvd runs, reduced to numbers: each step is linear in the sample x, the U-Net's output and
// (LCM, Euler ancestral) fresh noise, so the frame runs each step as one elementwise op with the coefficients
// of a SamplerPlan, made once per settings change. Here the samplers of DDPM-trained models (SD 1.x, SD 2.x,
// SD-Turbo, SDXL-Turbo, LCM) as diffusers computes them: Euler (s_churn 0), Euler ancestral, LCM and DDIM
// (eta 0); rectified flow's Euler (rtvd's own models) is flow_sampler.h. The schedule is computed in double
// precision and rounded to fp32 once, at the end; the frame keeps x in fp32.
#pragma once
#include <vector>

#include "pipeline/samplers/scheduler_config.h"

namespace rtvd {

struct SamplerStep {
  double timestep;    // what the U-Net is given, in units of its timestep_scale: diffusers' t (Euler "linspace":
                      // fractional, as its fp32 t), or a flow time times timestep_scale
  float input_scale;  // U-Net input = input_scale * x (Euler: 1/sqrt(sigma^2 + 1); LCM and DDIM: 1)
  // x_next = x_coef * x + out_coef * out + noise_coef * noise_i, where out is the (guided) U-Net output and
  // noise_i fresh standard normal noise, drawn for this step; noise_coef is 0 for all but LCM's non-last steps
  // and Euler ancestral's (its sigma_up, 0 at the last step).
  float x_coef, out_coef, noise_coef;
};

// Which guidance scales run classifier-free guidance (the U-Net's batch [conditional | unconditional]) rather
// than the conditional image alone: diffusers' Stable Diffusion pipelines guide only above 1 (0 and 1 run the
// conditional half alone, the real-time case of SD-Turbo and LCM); rtvd's flow models at every value but 1
// (below 1 the image leans towards the unconditional one).
enum class GuidanceRule { AboveOne, AllButOne };

struct SamplerPlan {
  std::vector<SamplerStep> steps;  // the steps that run, in order: img2img's already truncated by strength
  // x_start = start_latent_coef * image_latent + start_noise_coef * noise. txt2img: 0 and diffusers'
  // init_noise_sigma (Euler, Euler ancestral: the largest sigma, with "leading" sqrt(sigma^2 + 1); LCM, DDIM:
  // 1); img2img: the scheduler's add_noise at the first step that runs (both Eulers: 1 and its sigma; LCM, DDIM:
  // sqrt(alphas_cumprod[t]) and sqrt(1 - alphas_cumprod[t])).
  float start_latent_coef = 0.0f, start_noise_coef = 1.0f;
  GuidanceRule guidance = GuidanceRule::AboveOne;  // the pipeline family the sampler follows

  // Images per U-Net pass at this guidance scale: 2 (conditional and unconditional) with guidance, 1 without.
  int batch(float guidance_scale) const;
};

// The steps of kind from cfg as diffusers' StableDiffusionPipeline (txt2img) and StableDiffusionImg2ImgPipeline
// run them: the scheduler's class made by from_config(cfg), with the pipelines' steps_offset 1 and no clipping.
// steps: the --steps count, the schedule's length before truncation, in [1, num_train_timesteps] (LCM: at most
// original_inference_steps). strength in (0, 1]: 1 is txt2img; below 1 is img2img, whose schedule
// get_timesteps truncates to its last int(steps * strength) steps, strength taken as the decimal it was
// written as (so that 10 steps at 0.7 run 7, as Python's 10 * 0.7 does, not 6 as the float nearest 0.7
// would give). Errors, one line each: a config value with which the sampler's class would compute something
// rtvd does not (Karras sigmas for Euler, thresholding for LCM and DDIM, ...), naming the config's label and
// key; steps out of range, or a strength that leaves no step, naming --steps and --strength.
SamplerPlan make_sampler_plan(const SchedulerConfig& cfg, SamplerKind kind, int steps, float strength);

}  // namespace rtvd
