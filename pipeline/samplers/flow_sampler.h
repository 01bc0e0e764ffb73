// Rectified flow's Euler sampler (rtvd's own pixel-space models) as a SamplerPlan like the DDPM samplers'
// (sampler_plan.h): the U-Net predicts the velocity v = noise - image along x_t = (1 - t) image + t noise, and
// each step x' = x - (t_i - t_{i+1}) v is linear in x and v.
#pragma once
#include <vector>

#include "pipeline/samplers/sampler_plan.h"

namespace rtvd {

// Flow times of a k-step schedule from t = start down to 0: t_0 = start > t_1 > ... > t_k = 0.
std::vector<float> flow_schedule(int steps, float start);

// The steps from t = strength (1: txt2img) down to 0, each given to the U-Net as t_i * timestep_scale (its time
// embedding's scale: the config's timestep_scale); input_scale 1, x_coef 1, out_coef -(t_i - t_{i+1}), no
// noise. The start: noise alone for txt2img; (1 - s) image + s noise at t = s = strength for img2img, the
// image being the latent of an identity autoencoder. Classifier-free guidance at every scale but 1.
SamplerPlan flow_sampler_plan(int steps, float strength, float timestep_scale);

}  // namespace rtvd
