// A diffusers pipeline folder, as Stable Diffusion checkpoints are downloaded: model_index.json, which lists
// the components, and one folder per component (unet/, vae/, text_encoder/, tokenizer/, scheduler/; SDXL's
// also text_encoder_2/ and tokenizer_2/).
#pragma once
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "pipeline/model_files/tensor_set.h"

namespace rtvd {

struct DiffusersFolder {
  std::string root;              // the folder
  std::string unet_config;       // unet/config.json
  std::string unet_weights;      // unet/diffusion_pytorch_model.safetensors, or its shards' index (component_weights)
  std::string text_encoder_dir;  // text_encoder/, tokenizer/, vae/: "" when model_index.json lists none
  std::string tokenizer_dir;
  bool sdxl = false;                  // a StableDiffusionXL(Img2Img)Pipeline: these two are set as well
  std::string text_encoder_2_dir;     // text_encoder_2/ (CLIPTextModelWithProjection)
  std::string tokenizer_2_dir;        // tokenizer_2/
  bool force_zeros_for_empty_prompt = true;  // SDXL: no negative prompt conditions on zeros (model_index.json)
  std::string vae_dir;
  std::string scheduler_config;  // scheduler/scheduler_config.json, "" when none is listed
  std::map<std::string, std::string, std::less<>> classes;  // component -> the class model_index.json lists
};

// A component folder's weights, in the order diffusers looks for them, then the same for diffusers' fp16 variant:
// the index of shards (stem.safetensors.index.json, sharded_weights.h), else one file (stem.safetensors); then
// stem.safetensors.index.fp16.json, stem.fp16.safetensors. A pickle (pickle_stem.bin: diffusers'
// diffusion_pytorch_model.bin, transformers' pytorch_model.bin, or their shards' .bin.index.json) is refused
// unread, naming it; none at all is an Error naming the folder and `what` ("U-Net", "text encoder").
std::string component_weights(const std::string& dir, const std::string& stem, const std::string& pickle_stem,
                              const std::string& what);
// The tensors of what component_weights found: the file's, or every shard's.
TensorSet open_component_weights(const std::string& path);

bool is_diffusers_folder(const std::string& dir);  // dir has a model_index.json

// Error naming model_index.json and config_file unless the class model_index.json lists for component is
// config_class, the _class_name of the component's config_file. diffusers builds the listed class from that
// config (a scheduler's converted, a model's other keys dropped), rtvd the config's class: which was meant is
// unclear.
void check_listed_class(const DiffusersFolder& f, std::string_view component, const std::string& config_file,
                        std::string_view config_class);

// Checks dir/model_index.json (a Stable Diffusion or SDXL pipeline with a UNet2DConditionModel) and finds the
// files of the components it lists; Error naming the file and key, or the missing folder or file. An SDXL
// pipeline must list both text encoders and both tokenizers (a refiner, which has only the second and
// conditions on an aesthetic score, is refused by name).
DiffusersFolder open_diffusers_folder(const std::string& dir);

}  // namespace rtvd
