#include "pipeline/models/model.h"

#include <filesystem>

#include "pipeline/model_files/config_reader.h"
#include "pipeline/model_files/diffusers_folder.h"
#include "pipeline/model_files/diffusers_unet_config.h"
#include "pipeline/model_files/embedded_model.h"
#include "kernels/common/error.h"
#include "pipeline/models/random_weights.h"

namespace rtvd {

namespace {

// The U-Net of a diffusers folder. Its config does not say the weights' dtype: that of conv_in.weight
// (diffusers saves every tensor of a model in one dtype; the WeightStore checks the others against it).
Model load_diffusers_model(const std::string& dir) {
  const DiffusersFolder f = open_diffusers_folder(dir);
  SafeTensorsFile file = SafeTensorsFile::open(f.unet_weights);
  const TensorView* conv_in = file.find("conv_in.weight");
  if (!conv_in) fail(f.unet_weights, ": no tensor 'conv_in.weight' (not a UNet2DConditionModel checkpoint)");
  if (conv_in->dtype != DType::F16 && conv_in->dtype != DType::F32)
    fail(f.unet_weights, ": tensor 'conv_in.weight' is ", dtype_name(conv_in->dtype), ", expected F16 or F32");
  Model m;
  m.source = dir;
  m.config = parse_diffusers_unet_config(read_config_file(f.unet_config), f.unet_config, conv_in->dtype);
  m.config.name = std::filesystem::canonical(dir).filename().string();
  m.weights = std::make_unique<WeightStore>(std::move(file));
  m.text_encoder_dir = f.text_encoder_dir;
  m.tokenizer_dir = f.tokenizer_dir;
  return m;
}

}  // namespace

Model load_model(const std::string& dir) {
  if (dir.empty()) return load_embedded_model();
  if (!std::filesystem::is_directory(dir))
    fail("--model ", dir, ": not a directory (expected config.json and weights.safetensors in it, or a diffusers "
         "folder with model_index.json)");
  if (is_diffusers_folder(dir)) return load_diffusers_model(dir);
  // unet/ of a diffusers folder has a config.json too, in diffusers' format: say what to pass instead.
  if (!std::filesystem::exists(dir + "/weights.safetensors") && is_diffusers_folder(dir + "/.."))
    fail("--model ", dir, ": a component of the diffusers folder ", std::filesystem::canonical(dir + "/..").string(),
         ", which is what --model takes");
  Model m;
  m.source = dir;
  m.config = load_model_config(dir + "/config.json");
  m.weights = std::make_unique<WeightStore>(SafeTensorsFile::open(dir + "/weights.safetensors"));
  return m;
}

Model load_embedded_model() {
  const EmbeddedModel e = embedded_model();
  Model m;
  m.source = "embedded default model";
  m.config = parse_model_config(std::string(e.config), "embedded default model config.json");
  m.weights = std::make_unique<WeightStore>(
      SafeTensorsFile::from_memory(e.weights.data(), e.weights.size(), "embedded default model weights.safetensors"));
  return m;
}

Model random_model(const ModelConfig& cfg, uint64_t seed, const std::string& source) {
  Model m;
  m.source = source;
  m.config = cfg;
  m.weights = std::make_unique<WeightStore>(random_checkpoint(cfg, seed));
  return m;
}

}  // namespace rtvd
