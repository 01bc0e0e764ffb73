// diffusers' inputs and outputs on the committed autoencoders (tools/reference/export_sd_references.py, in
// tests/data/tiny_sd_autoencoders.safetensors), and rtvd's outputs on the same inputs on a backend. NHWC.
#pragma once
#include <string>
#include <vector>

#include "pipeline/backends/backend.h"
#include "pipeline/model_files/autoencoder_config.h"
#include "pipeline/model_files/safetensors.h"

namespace rtvd::test {

// kind "vae": the tiny AutoencoderKL of tests/data/tiny_sd/vae; "taesd": the 16-channel AutoencoderTiny of
// tests/data/tiny_taesd.
struct AutoencoderReference {
  explicit AutoencoderReference(const std::string& kind);

  std::string dir;             // the diffusers folder: config.json, diffusion_pytorch_model.safetensors
  AutoencoderConfig config;    // its config.json
  int height = 0, width = 0;   // of the image; the latent is height / f x width / f
  std::vector<float> image;    // (1, H, W, 3) in [-1, 1]
  std::vector<float> mean;     // (1, h, w, Z) diffusers' encode of image: the Gaussian's mean, or TAESD's latents
  std::vector<float> latent;   // (1, h, w, Z) an autoencoder latent (unscaled)...
  std::vector<float> decoded;  // (1, H, W, 3) ...and diffusers' decode of it

  int latent_h() const { return height / config.latent().pixels_per_latent; }
  int latent_w() const { return width / config.latent().pixels_per_latent; }
  SafeTensorsFile weights() const;  // the folder's weights file
};

// As the sampler sees latents under a latent space: (z - shift_factor) * scaling_factor.
std::vector<float> scaled(const std::vector<float>& z, const LatentSpace& space);

// rtvd's encode of ref.image and decode of scaled(ref.latent) under `config` (ref.config, or a copy with other
// latent scaling), both in one graph on backend, with the weights of `weights`, run as `frames` frames (on the
// GPU the first tunes and runs eagerly, later ones replay a CUDA graph): the sampler's latent (1, h, w, Z) and
// the image (1, H, W, 3) after the last. Every tensor of weights must be used.
struct AutoencoderOutputs {
  std::vector<float> latent, image;
};
AutoencoderOutputs run_autoencoder(Backend& backend, const AutoencoderReference& ref, const AutoencoderConfig& config,
                                   SafeTensorsFile weights, int frames = 1);

}  // namespace rtvd::test
