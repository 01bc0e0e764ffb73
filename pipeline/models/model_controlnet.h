// The ControlNets a latent model runs with (--controlnet): each a diffusers ControlNetModel folder or a single
// file in the original layout, checked to fit the model's U-Net, its weights beside the U-Net's in the model's
// store under controlnet_weight_prefix().
#pragma once
#include <string>

#include "pipeline/model_files/diffusers_controlnet_config.h"
#include "pipeline/model_files/model_config.h"
#include "pipeline/model_files/tensor_set.h"

namespace rtvd {

struct ModelControlNet {
  std::string source;       // the folder or file
  std::string format;       // "diffusers folder", "single file, SD 1.x", ...
  ControlNetConfig config;
};

// "controlnet.0.", "controlnet.1.", ...: net `index`'s tensors in the model's store and its ops' layer names.
std::string controlnet_weight_prefix(size_t index);

struct ControlNetCheckpoint {
  ModelControlNet net;
  TensorSet weights;  // diffusers' ControlNetModel names, without the prefix
};

// Opens path (a folder or a single .safetensors file) and checks that its encoder is the U-Net's (cfg, named by
// unet_source) and that it reads a control image at the image's size (pixels_per_latent: the autoencoder's
// factor). Errors are one line naming --controlnet and path: a net for another architecture names the field
// that disagrees and both values.
ControlNetCheckpoint open_model_controlnet(const std::string& path, const ModelConfig& cfg,
                                          const std::string& unet_source, int pixels_per_latent);

}  // namespace rtvd
