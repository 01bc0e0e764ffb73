// Single-file Stable Diffusion checkpoints: one .safetensors in the original (LDM, SGM) layout holding the U-Net
// (model.diffusion_model.*), the VAE (first_stage_model.*) and the text encoder(s): cond_stage_model.transformer.*,
// OpenAI CLIP for SD 1.x; cond_stage_model.model.*, OpenCLIP for SD 2.x; for SDXL both
// conditioner.embedders.0.transformer.* (CLIP ViT-L) and conditioner.embedders.1.model.* (OpenCLIP bigG), as
// SD 1.x, SD 2.x, SD-Turbo, SDXL and SDXL-Turbo are published. Each component comes out as a TensorSet under
// diffusers' (transformers') names, views into the one mapped file (but for SDXL's text_projection, transposed
// in memory), and as the config.json text that diffusers (transformers) would write for it, so that the same
// parsers check a single file's architecture as a diffusers folder's. Every tensor of the file belongs to a
// component or is one the original code saved beside the model (the DDPM schedule, the EMA copy); any other is
// an error naming it, an SDXL refiner (conditioner.embedders.0.model.*) and a ControlNet are refused by name.
#pragma once
#include <string>

#include "pipeline/model_files/tensor_set.h"

namespace rtvd {

struct SingleFileComponent {
  std::string config_json;   // diffusers' unet/ or vae/config.json, transformers' text_encoder/config.json
  std::string config_label;  // names that config in errors: the file it came from, or what it was inferred from
  TensorSet tensors;
};

struct SingleFileCheckpoint {
  SingleFileComponent unet, vae;
  SingleFileComponent text_encoder;    // named as transformers' CLIPTextModel without "text_model."
  SingleFileComponent text_encoder_2;  // SDXL's OpenCLIP bigG as CLIPTextModelWithProjection; no tensors for SD
  std::string text_encoder_layout;     // "openai-clip" (SD 1.x), "openclip" (SD 2.x) or "sdxl" (both)
  // "epsilon" or "v_prediction" as the file's metadata says, "" when it does not; prediction_source names the
  // metadata key (or marker tensor) that said it.
  std::string prediction_type, prediction_source;
  std::string architecture;  // "SD 1.x", "SD 2.x", "SDXL", or "configs of FOLDER" when configs were given
};

// Whether --model names one file rather than a folder; open_single_file then reads it or says why it cannot.
bool is_single_file_checkpoint(const std::string& path);

// Reads the file's header and maps it (no tensor data is read but SDXL's text_projection; check_finite is the
// WeightStore's). The architecture is inferred from the shapes: SD 1.x (context 768, 8 heads), SD 2.x (context
// 1024, heads of 64) or SDXL (context 2048, heads of 64, the added embedding); the image size is
// modelspec.resolution's, else 512, 768 for SD 2.x with v-prediction (768-v), 1024 for SDXL.
// config_folder: a diffusers folder whose unet/, vae/, text_encoder/ (and text_encoder_2/) config.json
// describe the file instead
// (as diffusers' from_single_file(config=...)), for architectures that shapes do not settle. Errors name the
// file and the tensor: a pickle, a missing component, a tensor of no component, a shape of no known
// architecture, a truncated file.
SingleFileCheckpoint open_single_file(const std::string& path, const std::string& config_folder = "");
// The same for a file already open (one in memory: SafeTensorsFile::from_memory or build).
SingleFileCheckpoint read_single_file(SafeTensorsFile file, const std::string& config_folder = "");

}  // namespace rtvd
