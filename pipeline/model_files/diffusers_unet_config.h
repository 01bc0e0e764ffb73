// diffusers' unet/config.json (a UNet2DConditionModel's config) -> ModelConfig, so that a Stable Diffusion
// checkpoint as diffusers saves it loads without a hand-written config.json (docs/model-format.md).
#pragma once
#include <span>
#include <string>
#include <string_view>

#include "pipeline/model_files/model_config.h"

namespace rtvd {

// json_text: the config; label names it in errors and becomes the config's name; dtype: the weights' dtype
// (F16 or F32), which the config does not record. Every key is known: the ones rtvd maps are typed and
// range-checked, a missing one takes diffusers' default; a key that selects an architecture rtvd does not
// build is accepted only at diffusers' default. Errors are one line naming label and the key.
ModelConfig parse_diffusers_unet_config(const std::string& json_text, const std::string& label, DType dtype);

class ConfigReader;

// The keys UNet2DConditionModel shares with ControlNetModel (a copy of the U-Net's conv_in, time embedding,
// down blocks and mid block), read into c as above; _class_name must be class_name, and every key of r one of
// these or of own_keys (the caller's, which it reads itself). Leaves sample_size and out_channels alone and
// does not call check_model_config.
void read_diffusers_encoder_config(const ConfigReader& r, std::string_view class_name,
                                   std::span<const std::string_view> own_keys, ModelConfig& c);

}  // namespace rtvd
