// diffusers' unet/config.json (a UNet2DConditionModel's config) -> ModelConfig, so that a Stable Diffusion
// checkpoint as diffusers saves it loads without a hand-written config.json (docs/model-format.md).
#pragma once
#include <string>

#include "pipeline/model_files/model_config.h"

namespace rtvd {

// json_text: the config; label names it in errors and becomes the config's name; dtype: the weights' dtype
// (F16 or F32), which the config does not record. Every key is known: the ones rtvd maps are typed and
// range-checked, a missing one takes diffusers' default; a key that selects an architecture rtvd does not
// build is accepted only at diffusers' default. Errors are one line naming label and the key.
ModelConfig parse_diffusers_unet_config(const std::string& json_text, const std::string& label, DType dtype);

}  // namespace rtvd
