#include "pipeline/models/model.h"

#include <filesystem>

#include "pipeline/model_files/embedded_model.h"
#include "kernels/common/error.h"
#include "pipeline/models/random_weights.h"

namespace rtvd {

Model load_model(const std::string& dir) {
  if (dir.empty()) return load_embedded_model();
  if (!std::filesystem::is_directory(dir)) fail("--model ", dir, ": not a directory (expected config.json and weights.safetensors in it)");
  Model m;
  m.source = dir;
  m.config = load_model_config(dir + "/config.json");
  m.weights = std::make_unique<WeightStore>(SafeTensorsFile::open(dir + "/weights.safetensors"), m.config.dtype);
  return m;
}

Model load_embedded_model() {
  const EmbeddedModel e = embedded_model();
  Model m;
  m.source = "embedded default model";
  m.config = parse_model_config(std::string(e.config), "embedded default model config.json");
  m.weights = std::make_unique<WeightStore>(
      SafeTensorsFile::from_memory(e.weights.data(), e.weights.size(), "embedded default model weights.safetensors"),
      m.config.dtype);
  return m;
}

Model random_model(const ModelConfig& cfg, uint64_t seed, const std::string& source) {
  Model m;
  m.source = source;
  m.config = cfg;
  m.weights = std::make_unique<WeightStore>(random_checkpoint(cfg, seed), cfg.dtype);
  return m;
}

}  // namespace rtvd
