// diffusers' scheduler/scheduler_config.json: which DDPM noise schedule a Stable Diffusion checkpoint was
// trained with, how its timesteps are spaced and what its U-Net predicts. Read and checked key by key here;
// make_sampler_plan (sampler_plan.h) turns it into per-step coefficients for one of rtvd's four samplers.
//
// A config names one scheduler class, but any sampler may run from it, as diffusers' `XScheduler.from_config`
// does: the keys the sampler's class takes come from the file, the ones the file lacks take *that class's*
// default (they differ: EulerDiscreteScheduler spaces timesteps by "linspace" by default, DDIMScheduler by
// "leading"), and the rest are ignored. So the keys whose default depends on the class are kept unset here
// when the file has none.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace rtvd {

enum class SamplerKind {
  Euler,           // diffusers' EulerDiscreteScheduler, s_churn 0 (deterministic): SD-Turbo at 1-4 steps
  EulerAncestral,  // EulerAncestralDiscreteScheduler: Euler's step to sigma_down, then fresh noise times sigma_up
                   // (SDXL-Turbo at 1-4 steps); at a step to sigma 0 (every schedule's last) it is Euler's step
  Lcm,             // LCMScheduler: LCM-distilled models and LCM-LoRA; fresh noise after every step but the last
  Ddim,            // DDIMScheduler, eta 0 (deterministic)
};
// What the U-Net predicts: "epsilon" (SD 1.x, SD 2.x base, SD-Turbo) or "v_prediction" (SD 2.x 768-v).
enum class PredictionType { Epsilon, VPrediction };
// How inference timesteps are spread over the training ones: "Common Diffusion Noise Schedules and Sample Steps
// are Flawed" (arXiv 2305.08891), table 2.
enum class TimestepSpacing { Leading, Trailing, Linspace };
enum class BetaSchedule { Linear, ScaledLinear };  // betas linear, or their square roots linear (SD's)

const char* sampler_name(SamplerKind k);                // "euler" | "euler_a" | "lcm" | "ddim"
std::vector<std::string> sampler_names();               // the values --sampler takes, in that order
SamplerKind sampler_named(const std::string& name);     // throws rtvd::Error naming --sampler for any other
const char* prediction_type_name(PredictionType p);     // as the config spells it: "epsilon" | "v_prediction"
std::vector<std::string> prediction_type_names();       // the values --prediction-type takes, in that order
PredictionType prediction_type_named(const std::string& name);  // throws rtvd::Error for any other
const char* timestep_spacing_name(TimestepSpacing s);  // "leading" | "trailing" | "linspace"
std::vector<std::string> timestep_spacing_names();      // the values --timestep-spacing takes, in that order
TimestepSpacing timestep_spacing_named(const std::string& name);  // throws rtvd::Error for any other

// One scheduler_config.json. A missing key takes diffusers' default; for the keys whose default differs
// between EulerDiscreteScheduler (and EulerAncestralDiscreteScheduler), LCMScheduler and DDIMScheduler
// (std::optional here), the default of the
// sampler that runs, when make_sampler_plan knows which.
struct SchedulerConfig {
  std::string label;       // the file (or what stands for it): named in every error about the config
  bool assumed = false;    // default_scheduler_config(): the checkpoint brings none
  std::string class_name;  // _class_name, e.g. "EulerDiscreteScheduler", "PNDMScheduler" (SD 1.5 ships PNDM)

  // The training noise schedule: num_train_timesteps betas from beta_start to beta_end
  // (Euler and DDIM: 0.0001 to 0.02, linear; LCM: 0.00085 to 0.012, scaled_linear).
  int num_train_timesteps = 1000;
  std::optional<double> beta_start, beta_end;
  std::optional<BetaSchedule> beta_schedule;

  PredictionType prediction = PredictionType::Epsilon;  // prediction_type
  std::optional<TimestepSpacing> timestep_spacing;      // Euler (both): linspace, DDIM: leading; LCM ignores it
  bool set_alpha_to_one = true;  // DDIM's last step goes to alphas_cumprod 1 (true) or alphas_cumprod[0] (SD's)
  // LCM: its timesteps are picked from original_inference_steps evenly spaced ones; its boundary
  // condition scales t by timestep_scaling.
  int original_inference_steps = 50;
  double timestep_scaling = 10.0;

  // Not kept: steps_offset and clip_sample, whose values change nothing in Stable Diffusion's pipelines.
  // diffusers' StableDiffusionPipeline and StableDiffusionImg2ImgPipeline set any scheduler's steps_offset to 1
  // (added to "leading" timesteps) and clip_sample to false (DDIM's and LCM's clamp of the predicted x0), with a
  // warning that the config is outdated; rtvd's samplers run as those pipelines do.

  // Variants rtvd does not compute, refused by make_sampler_plan for a sampler whose class reads them
  // (EulerAncestralDiscreteScheduler reads none of them):
  bool thresholding = false;  // DDIM, LCM: dynamic thresholding of the predicted x0
  // Euler's sigmas: Karras, exponential or beta-distributed; interpolated log-linearly; a last sigma other
  // than zero; "continuous" timesteps (0.25 log sigma) for v-prediction.
  bool use_karras_sigmas = false, use_exponential_sigmas = false, use_beta_sigmas = false;
  std::string interpolation_type = "linear", final_sigmas_type = "zero", timestep_type = "discrete";

  // The sampler the class implies: EulerDiscrete, EulerAncestralDiscrete, LCM and DDIM their own. Of the other
  // classes SD checkpoints ship, the ones that step in sigma (LMS, Heun, KDPM2, KDPM2Ancestral) give Euler,
  // their first-order member; the ones that
  // step in alphas_cumprod (PNDM, DDPM, DPMSolverMultistep/Singlestep, DEIS, UniPC) give DDIM, whose
  // update PNDM's PLMS steps reuse and which is the first-order DPM-Solver++, DEIS and UniPC.
  SamplerKind native_sampler() const;
  // What runs: --sampler's choice when given, else native_sampler().
  SamplerKind sampler_for(std::optional<SamplerKind> asked) const { return asked.value_or(native_sampler()); }
};

// json_text: a scheduler_config.json; label names it in errors. Every key must be one that a scheduler class
// rtvd accepts takes (DDIM, DDPM, PNDM, LMS, Euler, EulerAncestral, Heun, KDPM2, KDPM2Ancestral,
// DPMSolverMultistep, DPMSolverSinglestep, DEIS, UniPC, LCM); keys listed in _use_default_values count as
// missing, as diffusers' from_config drops them. Refused here, since every sampler reads them:
// trained_betas other than null, rescale_betas_zero_snr true, beta_schedule other than "linear" or
// "scaled_linear", prediction_type other than "epsilon" or "v_prediction". Keys only other classes read
// (solver_order, skip_prk_steps, ...) are accepted unread. Errors are one line naming label and the key.
SchedulerConfig parse_scheduler_config(const std::string& json_text, const std::string& label);
SchedulerConfig load_scheduler_config(const std::string& path);  // the file at path, labelled by it

// SD's schedule (scaled_linear 0.00085 to 0.012, 1000 steps, "leading", DDIM's last step to alphas_cumprod[0])
// with the given prediction type, as diffusers' single-file loader sets it up: for single-file checkpoints,
// which carry no scheduler config. Its class is PNDMScheduler (SD 1.x's), so its native sampler is DDIM.
SchedulerConfig default_scheduler_config(PredictionType prediction);

}  // namespace rtvd
