// A model = its config and its weights: from a directory (config.json + weights.safetensors), a diffusers
// Stable Diffusion folder (model_index.json, unet/ and the other components), or the default model embedded
// in the binary.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "pipeline/model_files/model_config.h"
#include "pipeline/model_files/weights.h"

namespace rtvd {

struct Model {
  std::string source;  // the directory, or "embedded default model"
  ModelConfig config;
  std::unique_ptr<WeightStore> weights;
  // A diffusers folder's text encoder and tokenizer folders (text_encoder/, tokenizer/); empty when the model
  // has none. The engine turns prompts into the U-Net's context with them (prompt_encoder.h).
  std::string text_encoder_dir, tokenizer_dir;
};

Model load_model(const std::string& dir);  // either layout; empty dir = the embedded default
Model load_embedded_model();
// cfg's architecture with the weights of random_checkpoint(cfg, seed) (random_weights.h).
Model random_model(const ModelConfig& cfg, uint64_t seed, const std::string& source);

}  // namespace rtvd
