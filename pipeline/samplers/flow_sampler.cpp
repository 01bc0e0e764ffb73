#include "pipeline/samplers/flow_sampler.h"

namespace rtvd {

// Rectified-flow times from start down to 0, shifted towards high noise (t = s u / (1 + (s - 1) u) for
// uniform u, as SD3 does): a frame's shapes are decided at high noise, and a uniform grid spends one of 4
// steps there. At 4 steps on the default model, against a 64-step reference over 24 seeds, s = 4 cut the
// mean error from 17.1 to 8.9 (of 255) and the seeds that turn to mush from 8 to 2; s = 6 paled the colours.
std::vector<float> flow_schedule(int steps, float start) {
  constexpr double kShift = 4.0;
  std::vector<float> t(steps + 1);
  for (int i = 0; i <= steps; ++i) {
    const double u = double(steps - i) / steps;
    t[i] = float(start * kShift * u / (1 + (kShift - 1) * u));
  }
  return t;
}

SamplerPlan flow_sampler_plan(int steps, float strength, float timestep_scale) {
  const std::vector<float> t = flow_schedule(steps, strength);
  SamplerPlan plan;
  plan.guidance = GuidanceRule::AllButOne;
  plan.start_latent_coef = 1.0f - strength;
  plan.start_noise_coef = strength;
  for (int i = 0; i < steps; ++i) {
    // double(t) * timestep_scale is exact (24 significant bits each), so the U-Net's t = timestep /
    // timestep_scale is t_i itself.
    const float dt = t[i] - t[i + 1];
    plan.steps.push_back({double(t[i]) * timestep_scale, 1.0f, 1.0f, -dt, 0.0f});
  }
  return plan;
}

}  // namespace rtvd
