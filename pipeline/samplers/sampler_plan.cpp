// Euler, Euler ancestral, LCM and DDIM as per-step coefficients, from diffusers' EulerDiscreteScheduler,
// EulerAncestralDiscreteScheduler, LCMScheduler and DDIMScheduler (set_timesteps, scale_model_input, step,
// add_noise, init_noise_sigma) and the img2img
// pipeline's get_timesteps. Notation: x the sample, out the U-Net's output, a = alphas_cumprod[t] of the
// step's timestep, a' that of the timestep stepped to, sigma = sqrt((1 - a) / a).
#include "pipeline/samplers/sampler_plan.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "base/error.h"
#include "pipeline/samplers/noise_schedule.h"

namespace rtvd {

namespace {

// The __init__ defaults that differ between the classes, used where the config lacks the key.
struct ClassDefaults {
  const char* class_name;
  double beta_start, beta_end;
  BetaSchedule beta_schedule;
  TimestepSpacing spacing;
};

const ClassDefaults& class_defaults(SamplerKind kind) {
  static const ClassDefaults euler{"EulerDiscreteScheduler", 0.0001, 0.02, BetaSchedule::Linear,
                                   TimestepSpacing::Linspace};
  static const ClassDefaults euler_a{"EulerAncestralDiscreteScheduler", 0.0001, 0.02, BetaSchedule::Linear,
                                     TimestepSpacing::Linspace};
  static const ClassDefaults lcm{"LCMScheduler", 0.00085, 0.012, BetaSchedule::ScaledLinear, TimestepSpacing::Leading};
  static const ClassDefaults ddim{"DDIMScheduler", 0.0001, 0.02, BetaSchedule::Linear, TimestepSpacing::Leading};
  switch (kind) {
    case SamplerKind::Euler: return euler;
    case SamplerKind::EulerAncestral: return euler_a;
    case SamplerKind::Lcm: return lcm;
    case SamplerKind::Ddim: break;
  }
  return ddim;
}

// StableDiffusionPipeline and StableDiffusionImg2ImgPipeline set every scheduler's steps_offset to 1 and its
// clip_sample to false, whatever its config says (scheduler_config.h); the latter leaves nothing to compute.
constexpr int kStepsOffset = 1;

// The config as the sampler's class reads it (diffusers' from_config), with the training schedule.
struct Schedule {
  const SchedulerConfig& cfg;
  int train_steps;  // num_train_timesteps
  TimestepSpacing spacing;
  std::vector<double> alphas_cumprod;  // [t], t in [0, train_steps)
};

void refuse(const SchedulerConfig& cfg, SamplerKind kind, const char* key, const char* what, const char* expected,
            const std::string& got) {
  fail(cfg.label, ": key '", key, "': ", class_defaults(kind).class_name, " would ", what, ", which rtvd's ",
       sampler_name(kind), " sampler does not: expected ", expected, ", got ", got);
}

// Keys that make the sampler's class compute something rtvd does not. EulerAncestralDiscreteScheduler's
// __init__ takes none of them, so from_config drops them all.
void check_variants(const SchedulerConfig& cfg, SamplerKind kind) {
  if (kind == SamplerKind::EulerAncestral) return;
  if (kind == SamplerKind::Euler) {
    if (cfg.use_karras_sigmas) refuse(cfg, kind, "use_karras_sigmas", "use Karras sigmas", "false", "true");
    if (cfg.use_exponential_sigmas)
      refuse(cfg, kind, "use_exponential_sigmas", "use exponential sigmas", "false", "true");
    if (cfg.use_beta_sigmas) refuse(cfg, kind, "use_beta_sigmas", "use beta-distributed sigmas", "false", "true");
    if (cfg.interpolation_type != "linear")
      refuse(cfg, kind, "interpolation_type", "interpolate sigmas log-linearly", "\"linear\"",
             cat("\"", cfg.interpolation_type, "\""));
    if (cfg.final_sigmas_type != "zero")
      refuse(cfg, kind, "final_sigmas_type", "end on a sigma other than 0", "\"zero\"",
             cat("\"", cfg.final_sigmas_type, "\""));
    if (cfg.timestep_type != "discrete")
      refuse(cfg, kind, "timestep_type", "use continuous timesteps", "\"discrete\"",
             cat("\"", cfg.timestep_type, "\""));
    return;
  }
  if (cfg.thresholding) refuse(cfg, kind, "thresholding", "threshold the predicted x0 dynamically", "false", "true");
}

// The double that the shortest decimal of f denotes: strength as it was written (0.7f -> 0.7, not 0.69999999).
double as_written(float f) {
  char text[32];
  const char* end = std::to_chars(text, text + sizeof text, f).ptr;
  double d = 0;
  std::from_chars(text, end, d);
  return d;
}

// The index of the first step img2img runs: diffusers' get_timesteps keeps the last
// min(int(steps * strength), steps) of the schedule. 0 for txt2img (strength 1).
int first_step(int steps, float strength) {
  if (!(strength > 0 && strength <= 1)) fail("--strength ", strength, ": expected a number in (0, 1]");
  const double s = as_written(strength);
  const int kept = std::min(int(steps * s), steps);
  if (kept == 0)
    fail("--strength ", s, " with --steps ", steps, ": img2img runs the last int(steps * strength) = 0 steps of the ",
         "schedule, so none is left: raise --strength or --steps");
  return steps - kept;
}

// EulerDiscreteScheduler's and DDIMScheduler's set_timesteps, descending. "leading": multiples of
// train_steps / steps (integer division) plus steps_offset, which the SD pipelines set to 1 (kStepsOffset);
// "trailing": train_steps - 1 down in steps of train_steps / steps, rounded; "linspace": steps values from
// train_steps - 1 down to 0, which Euler keeps fractional (as fp32) and DDIM rounds.
std::vector<double> spaced_timesteps(const Schedule& s, int steps, bool round_linspace) {
  const int n = s.train_steps;
  std::vector<double> t;
  switch (s.spacing) {
    case TimestepSpacing::Linspace:
      for (double v : numpy_linspace(0, n - 1, steps, true)) t.push_back(round_linspace ? numpy_round(v) : float(v));
      std::reverse(t.begin(), t.end());
      break;
    case TimestepSpacing::Leading:
      for (int i = steps - 1; i >= 0; --i) t.push_back(double(i) * (n / steps) + kStepsOffset);
      break;
    case TimestepSpacing::Trailing:
      for (double v : numpy_arange_down(n, double(n) / steps)) t.push_back(numpy_round(v) - 1);
      if (int(t.size()) != steps)
        fail(s.cfg.label, ": key 'timestep_spacing': \"trailing\" at --steps ", steps, " gives diffusers' schedule ",
             t.size(), " timesteps (numpy's arange of ", n, " / ", steps,
             "), the last one -1: choose another step count");
      break;
  }
  // "leading" at num_train_timesteps steps ends one past the last training timestep, where diffusers' DDIM
  // would index past alphas_cumprod.
  if (t.front() > n - 1)
    fail("--steps ", steps, ": \"leading\" timesteps reach ", t.front(), ", past num_train_timesteps - 1 = ", n - 1,
         " (", s.cfg.label, ")");
  return t;
}

// EulerDiscreteScheduler: sigmas interpolated at the timesteps, then 0.
//   epsilon: x0 = x - sigma out, so x + (sigma' - sigma)(x - x0) / sigma = x + (sigma' - sigma) out;
//   v:       x0 = x / (sigma^2 + 1) - out sigma / sqrt(sigma^2 + 1), and (x - x0) / sigma =
//            x sigma / (sigma^2 + 1) + out / sqrt(sigma^2 + 1), times dt = sigma' - sigma.
// The U-Net sees x / sqrt(sigma^2 + 1); txt2img starts from init_noise_sigma * noise, img2img's add_noise is
// latent + sigma noise at the first step that runs.
// EulerAncestralDiscreteScheduler has the same sigmas, input scale and start, and splits the step to sigma'
// into a deterministic part and fresh noise of the same total variance sigma'^2:
//   sigma_up = sqrt(sigma'^2 (sigma^2 - sigma'^2) / sigma^2),  sigma_down = sqrt(sigma'^2 - sigma_up^2),
// Euler's step to sigma_down (dt = sigma_down - sigma), then + sigma_up noise. At sigma' = 0 (the last step)
// both are 0: Euler's last step.
SamplerPlan euler_plan(const Schedule& s, int steps, int first, bool txt2img, bool ancestral) {
  const std::vector<double> t = spaced_timesteps(s, steps, false);
  std::vector<double> train_sigmas;
  for (double a : s.alphas_cumprod) train_sigmas.push_back(std::sqrt((1 - a) / a));
  std::vector<double> sigma;
  for (double ti : t) sigma.push_back(numpy_interp(ti, train_sigmas));
  sigma.push_back(0.0);  // final_sigmas_type "zero"
  const double max_sigma = *std::max_element(sigma.begin(), sigma.end());
  const double init_noise_sigma =
      s.spacing == TimestepSpacing::Leading ? std::sqrt(max_sigma * max_sigma + 1) : max_sigma;

  SamplerPlan plan;
  plan.start_latent_coef = txt2img ? 0.0f : 1.0f;
  plan.start_noise_coef = float(txt2img ? init_noise_sigma : sigma[first]);
  for (int i = first; i < steps; ++i) {
    const double sg = sigma[i], to = sigma[i + 1];
    const double up = ancestral ? std::sqrt(to * to * (sg * sg - to * to) / (sg * sg)) : 0.0;
    const double down = ancestral ? std::sqrt(to * to - up * up) : to;
    const double dt = down - sg, norm = std::sqrt(sg * sg + 1);
    SamplerStep step{t[i], float(1 / norm), 1.0f, float(dt), float(up)};
    if (s.cfg.prediction == PredictionType::VPrediction) {
      step.x_coef = float(1 + dt * sg / (norm * norm));
      step.out_coef = float(dt / norm);
    }
    plan.steps.push_back(step);
  }
  return plan;
}

// DDIMScheduler, eta 0, from t to t' = t - train_steps / steps (integer division; below t' = 0, a' is 1 or
// alphas_cumprod[0], by set_alpha_to_one): x' = sqrt(a') x0 + sqrt(1 - a') eps, where
//   epsilon: x0 = (x - sqrt(1 - a) out) / sqrt(a), eps = out;
//   v:       x0 = sqrt(a) x - sqrt(1 - a) out,     eps = sqrt(a) out + sqrt(1 - a) x.
SamplerPlan ddim_plan(const Schedule& s, int steps, int first) {
  const std::vector<double> t = spaced_timesteps(s, steps, true);
  const double final_alpha = s.cfg.set_alpha_to_one ? 1.0 : s.alphas_cumprod[0];
  SamplerPlan plan;
  for (int i = first; i < steps; ++i) {
    const int prev = int(t[i]) - s.train_steps / steps;
    const double a = s.alphas_cumprod[int(t[i])], a_prev = prev >= 0 ? s.alphas_cumprod[prev] : final_alpha;
    const double ra = std::sqrt(a), rb = std::sqrt(1 - a), ra_prev = std::sqrt(a_prev), rb_prev = std::sqrt(1 - a_prev);
    SamplerStep step{t[i], 1.0f, 0, 0, 0.0f};
    if (s.cfg.prediction == PredictionType::Epsilon) {
      step.x_coef = float(ra_prev / ra);
      step.out_coef = float(rb_prev - ra_prev * rb / ra);
    } else {
      step.x_coef = float(ra_prev * ra + rb_prev * rb);
      step.out_coef = float(rb_prev * ra - ra_prev * rb);
    }
    plan.steps.push_back(step);
  }
  return plan;
}

// LCMScheduler: steps of the original_inference_steps timesteps (k - 1, 2k - 1, ..., k = train_steps /
// original_inference_steps), picked at floor(i * original / steps) from the top; timestep_spacing and
// steps_offset play no part. The consistency function's boundary condition, with c = t * timestep_scaling:
// c_skip = 0.25 / (c^2 + 0.25), c_out = c / sqrt(c^2 + 0.25), denoised = c_out x0 + c_skip x, where
//   epsilon: x0 = (x - sqrt(1 - a) out) / sqrt(a);  v: x0 = sqrt(a) x - sqrt(1 - a) out.
// Every step but the schedule's last goes on to x' = sqrt(a') denoised + sqrt(1 - a') noise, a' that of the
// next timestep (never below 0, so set_alpha_to_one plays no part); the last returns denoised.
SamplerPlan lcm_plan(const Schedule& s, int steps, int first) {
  const int original = s.cfg.original_inference_steps;
  if (original > s.train_steps)
    fail(s.cfg.label, ": key 'original_inference_steps': expected at most num_train_timesteps = ", s.train_steps,
         ", got ", original);
  if (steps > original)
    fail("--steps ", steps, ": the lcm sampler takes at most original_inference_steps = ", original, " steps (",
         s.cfg.label, ")");
  const int k = s.train_steps / original;
  std::vector<int> t;
  for (double index : numpy_linspace(0, original, steps, false)) t.push_back((original - int(index)) * k - 1);

  SamplerPlan plan;
  for (int i = first; i < steps; ++i) {
    const bool last = i == steps - 1;
    const double a = s.alphas_cumprod[t[i]], a_next = s.alphas_cumprod[t[last ? i : i + 1]];
    const double ra = std::sqrt(a), rb = std::sqrt(1 - a);
    const double c = t[i] * s.cfg.timestep_scaling;
    const double c_skip = 0.25 / (c * c + 0.25), c_out = c / std::sqrt(c * c + 0.25);
    // denoised = dx x + dout out
    const bool eps = s.cfg.prediction == PredictionType::Epsilon;
    const double dx = eps ? c_out / ra + c_skip : c_out * ra + c_skip;
    const double dout = eps ? -c_out * rb / ra : -c_out * rb;
    const double keep = last ? 1.0 : std::sqrt(a_next);
    plan.steps.push_back(
        {double(t[i]), 1.0f, float(keep * dx), float(keep * dout), float(last ? 0.0 : std::sqrt(1 - a_next))});
  }
  return plan;
}

}  // namespace

int SamplerPlan::batch(float g) const { return (guidance == GuidanceRule::AboveOne ? g > 1.0f : g != 1.0f) ? 2 : 1; }

SamplerPlan make_sampler_plan(const SchedulerConfig& cfg, SamplerKind kind, int steps, float strength) {
  check_variants(cfg, kind);
  const ClassDefaults& d = class_defaults(kind);
  const int n = cfg.num_train_timesteps;
  if (steps < 1 || steps > n)
    fail("--steps ", steps, ": expected 1 to num_train_timesteps = ", n, " (", cfg.label, ")");
  const int first = first_step(steps, strength);
  const bool txt2img = strength == 1.0f;
  const Schedule s{cfg, n, cfg.timestep_spacing.value_or(d.spacing),
                   alphas_cumprod(cfg.beta_schedule.value_or(d.beta_schedule), cfg.beta_start.value_or(d.beta_start),
                                  cfg.beta_end.value_or(d.beta_end), n)};

  SamplerPlan plan;
  if (kind == SamplerKind::Euler || kind == SamplerKind::EulerAncestral) {
    plan = euler_plan(s, steps, first, txt2img, kind == SamplerKind::EulerAncestral);
  } else {
    plan = kind == SamplerKind::Lcm ? lcm_plan(s, steps, first) : ddim_plan(s, steps, first);
    // DDPM's add_noise at the first timestep that runs; txt2img starts from noise (init_noise_sigma 1).
    const double a = s.alphas_cumprod[int(plan.steps.front().timestep)];
    plan.start_latent_coef = txt2img ? 0.0f : float(std::sqrt(a));
    plan.start_noise_coef = txt2img ? 1.0f : float(std::sqrt(1 - a));
  }
  // Betas near 1 make alphas_cumprod underflow to 0, and sigma or 1 / sqrt(a) infinite.
  for (const SamplerStep& p : plan.steps)
    if (!std::isfinite(p.input_scale) || !std::isfinite(p.x_coef) || !std::isfinite(p.out_coef) ||
        !std::isfinite(p.noise_coef) || !std::isfinite(plan.start_noise_coef))
      fail(cfg.label, ": the ", sampler_name(kind), " sampler's step at t = ", p.timestep,
           " has a coefficient beyond fp32 (alphas_cumprod underflows: check beta_start and beta_end)");
  return plan;
}

}  // namespace rtvd
