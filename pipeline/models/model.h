// A model = its config and its weights: from a directory (config.json + weights.safetensors) or the
// default model embedded in the binary.
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
};

Model load_model(const std::string& dir);  // empty dir = the embedded default
Model load_embedded_model();
// cfg's architecture with the weights of random_checkpoint(cfg, seed) (random_weights.h).
Model random_model(const ModelConfig& cfg, uint64_t seed, const std::string& source);

}  // namespace rtvd
