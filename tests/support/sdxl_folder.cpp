#include "support/sdxl_folder.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "pipeline/model_files/config_reader.h"
#include "pipeline/model_files/diffusers_unet_config.h"
#include "pipeline/model_files/safetensors.h"
#include "pipeline/models/clip_text.h"
#include "pipeline/models/random_weights.h"
#include "pipeline/models/unet.h"
#include "support/test_util.h"

namespace rtvd::test {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

void write_json(const std::string& path, const json& j) { std::ofstream(path) << j.dump(2); }

// Every tensor of specs, random (random_weights.h), into one safetensors file.
void write_random_tensors(const std::string& path, const std::vector<TensorSpec>& specs, uint64_t seed) {
  std::vector<TensorToWrite> tensors;
  for (const TensorSpec& s : specs) {
    TensorToWrite t{s.name, s.dtype, s.shape, {}};
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    t.bytes.resize(size_t(n) * (s.dtype == DType::F16 ? 2 : 4));
    random_parameter(seed, s, t.bytes.data());
    tensors.push_back(std::move(t));
  }
  write_safetensors(path, tensors);
}

}  // namespace

void write_text_encoder(const std::string& dir, const ClipTextConfig& c, const char* act, uint64_t seed) {
  fs::create_directories(dir);
  const json config = {{"architectures", {c.projection_dim ? "CLIPTextModelWithProjection" : "CLIPTextModel"}},
                       {"model_type", "clip_text_model"}, {"vocab_size", c.vocab_size},
                       {"hidden_size", c.hidden_size}, {"intermediate_size", c.intermediate_size},
                       {"num_hidden_layers", c.num_hidden_layers}, {"num_attention_heads", c.num_attention_heads},
                       {"max_position_embeddings", 77}, {"hidden_act", act}, {"layer_norm_eps", 1e-5},
                       {"projection_dim", c.projection_dim ? c.projection_dim : 8}, {"bos_token_id", 0},
                       {"eos_token_id", 2}, {"pad_token_id", 1}};
  write_json(dir + "/config.json", config);
  write_random_tensors(dir + "/model.safetensors", clip_text_parameters(c, "text_model.", DType::F32), seed);
}

void write_clip_tokenizer(const std::string& dir, const char* pad) {
  fs::create_directories(dir);
  for (const char* file : {"vocab.json", "merges.txt"})
    fs::copy_file(test_data(std::string("tiny_sd/tokenizer/") + file), dir + "/" + file);
  const json special = {{"bos_token", "<|startoftext|>"}, {"eos_token", "<|endoftext|>"}, {"pad_token", pad},
                        {"unk_token", "<|endoftext|>"}};
  write_json(dir + "/special_tokens_map.json", special);
  json config = special;
  config["model_max_length"] = 77;
  config["tokenizer_class"] = "CLIPTokenizer";
  write_json(dir + "/tokenizer_config.json", config);
}

void write_sdxl_text_side(const std::string& dir, const ClipTextConfig& first, const ClipTextConfig& second) {
  write_text_encoder(dir + "/text_encoder", first, "quick_gelu", 11);
  write_text_encoder(dir + "/text_encoder_2", second, "gelu", 12);
  write_clip_tokenizer(dir + "/tokenizer", "<|endoftext|>");
  write_clip_tokenizer(dir + "/tokenizer_2", "!");
}

json sdxl_model_index() {
  return {{"_class_name", "StableDiffusionXLPipeline"}, {"_diffusers_version", "0.19.0.dev0"},
          {"force_zeros_for_empty_prompt", true}, {"add_watermarker", nullptr},
          {"scheduler", {"diffusers", "EulerDiscreteScheduler"}}, {"text_encoder", {"transformers", "CLIPTextModel"}},
          {"text_encoder_2", {"transformers", "CLIPTextModelWithProjection"}},
          {"tokenizer", {"transformers", "CLIPTokenizer"}}, {"tokenizer_2", {"transformers", "CLIPTokenizer"}},
          {"unet", {"diffusers", "UNet2DConditionModel"}}, {"vae", {"diffusers", "AutoencoderKL"}}};
}

void write_random_sdxl_folder(const std::string& dir) {
  write_sdxl_text_side(dir, {49408, 16, 32, 2, 2, 77, ClipTextConfig::HiddenAct::QuickGelu, 1e-5f},
                       {49408, 16, 32, 2, 2, 77, ClipTextConfig::HiddenAct::Gelu, 1e-5f, 32});
  fs::create_directories(dir + "/unet");
  json unet = parse_config_object(read_config_file(test_data("tiny_sdxl/unet/config.json")), "tiny_sdxl unet");
  unet["cross_attention_dim"] = 32;
  write_json(dir + "/unet/config.json", unet);
  const ModelConfig cfg = parse_diffusers_unet_config(unet.dump(), "unet/config.json", DType::F32);
  write_random_tensors(dir + "/unet/diffusion_pytorch_model.safetensors", unet_parameters(cfg), 13);
  fs::create_directories(dir + "/vae");
  json vae = parse_config_object(read_config_file(test_data("tiny_sd/vae/config.json")), "tiny_sd vae");
  vae["scaling_factor"] = 0.13025;
  write_json(dir + "/vae/config.json", vae);
  fs::copy_file(test_data("tiny_sd/vae/diffusion_pytorch_model.safetensors"),
                dir + "/vae/diffusion_pytorch_model.safetensors");
  fs::create_directories(dir + "/scheduler");
  write_json(dir + "/scheduler/scheduler_config.json",
             {{"_class_name", "EulerAncestralDiscreteScheduler"}, {"beta_start", 0.00085}, {"beta_end", 0.012},
              {"beta_schedule", "scaled_linear"}, {"num_train_timesteps", 1000}, {"prediction_type", "epsilon"},
              {"timestep_spacing", "trailing"}, {"steps_offset", 1}});
  json index = sdxl_model_index();
  index["scheduler"] = {"diffusers", "EulerAncestralDiscreteScheduler"};
  write_json(dir + "/model_index.json", index);
}

std::string tiny_sdxl_pipeline_dir() {
  return exported_dir("tiny_sdxl_pipeline", {"pipelines.json", "pipelines.safetensors", "model/model_index.json"},
                      "export_tiny_sdxl_pipeline.py");
}

std::string tiny_taesdxl_dir() {
  return exported_dir("tiny_taesdxl", {"pipelines.json", "pipelines.safetensors", "taesdxl/config.json"},
                      "export_tiny_taesdxl.py");
}

std::string tiny_sdxl_single_file_dir() {
  return exported_dir("tiny_sdxl_single_file",
                      {"tiny_sdxl.manifest.json", "tiny_sdxl_extras.safetensors", "lora_peft.safetensors",
                       "lora_kohya.safetensors", "lora_cases.json", "lora_cases.safetensors"},
                      "export_tiny_sdxl_single_file.py");
}

}  // namespace rtvd::test
