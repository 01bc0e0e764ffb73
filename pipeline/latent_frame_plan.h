// One frame of a latent (SD-class) model as a graph, for a DDPM sampler's linear steps (pipeline/samplers/):
//   latent x = start_noise_coef * noise (+ start_latent_coef * encode(image) for img2img)   [noise: the host's walk]
//   k steps: out = U-Net(input_scale_i x, t_i) over the batch [cond | uncond]; x <- x_coef x + out_coef guided(out)
//            (+ noise_coef noise_i, LCM); the last step writes the decoder's input
//   image = decode(x); prev = blend(image, prev); rgba = to_rgba8(prev)   (one op after the decoder)
// Each step's time embedding, FiLM and the cross-attention K/V depend only on the settings and the prompt:
// setup ops, run once per plan or prompt.
#pragma once
#include "pipeline/frame_plan.h"
#include "pipeline/model_files/autoencoder_config.h"
#include "pipeline/samplers/sampler_plan.h"

namespace rtvd {

// What a latent frame needs besides the settings: the U-Net's and the autoencoder's configs (their weights
// share one store: their names do not collide) and the sampler's steps for these settings.
struct LatentModel {
  const ModelConfig& unet;
  const AutoencoderConfig& autoencoder;
  const SamplerPlan& sampler;
};

// A lower bound of what a latent frame takes, from the configs and the store alone, before anything is
// built: every weight of the store in the activation type, the U-Net's activations at the latent size (as
// frame_memory), and the autoencoder's at the image size: the decoder's widest activations, three alive at
// once (a ResNet's input, its hidden state and its output), and the frame's image, blend and RGBA8 buffers.
FrameMemory latent_frame_memory(const ModelConfig& unet, const AutoencoderConfig& autoencoder, const WeightStore& weights,
                                int width, int height, int batch, int steps, int act_bytes);

// width x height: the image, a multiple of the autoencoder's scale factor times the U-Net's size multiple.
FramePlan build_latent_frame_plan(const LatentModel& m, WeightStore& weights, const FrameSettings& s, bool img2img,
                                  int width, int height, int act_bytes);

}  // namespace rtvd
