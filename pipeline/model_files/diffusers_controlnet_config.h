// diffusers' ControlNetModel folder (config.json with _class_name "ControlNetModel", weights
// diffusion_pytorch_model.safetensors or its fp16 variant): a copy of the U-Net's encoder (conv_in, time
// embedding, down blocks, mid block) that reads a control image as well, and gives the U-Net one residual per
// skip and one for its mid block.
#pragma once
#include <string>
#include <vector>

#include "pipeline/model_files/model_config.h"
#include "pipeline/model_files/tensor_set.h"

namespace rtvd {

struct ControlNetConfig {
  // The copied encoder, read as the U-Net's config (its name: the config file). ControlNetModel has no
  // sample_size, out_channels or up blocks: sample_size is the smallest size the levels allow, the up path's
  // fields are unused.
  ModelConfig encoder;
  int conditioning_channels = 3;  // of the control image, RGB
  // controlnet_cond_embedding's channels: conv_in, then per further entry a conv and a stride-2 conv, so the
  // control image is image_factor() times the latents' size (SD: 8, the VAE's factor).
  std::vector<int> conditioning_embedding_out_channels;
  // Residuals averaged over the image (shuffle ControlNets), and guess mode's scales not applied: diffusers'
  // ControlNetModel.forward. Read and kept; ControlNetBuilder refuses it.
  bool global_pool_conditions = false;

  int image_factor() const { return 1 << (int(conditioning_embedding_out_channels.size()) - 1); }
};

// json_text: config.json; label names it in errors; dtype: the weights'. Every key is checked as the U-Net's
// (diffusers_unet_config.h); controlnet_conditioning_channel_order must be "rgb". Errors are one line naming
// label and the key.
ControlNetConfig parse_diffusers_controlnet_config(const std::string& json_text, const std::string& label,
                                                   DType dtype);

struct ControlNetFolder {
  ControlNetConfig config;
  TensorSet weights;
};
// dir/config.json and dir's weights (diffusers_folder.h's component_weights: one file, shards, or their fp16
// variant; pickles refused). Errors name the folder or file.
ControlNetFolder open_controlnet_folder(const std::string& dir);

}  // namespace rtvd
