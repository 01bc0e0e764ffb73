// SDXL diffusers folders written by the tests, with random weights: the text side (two CLIP text encoders as
// transformers writes them, CLIP's tokenizer padded as SDXL's two are) and a whole pipeline that renders.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "pipeline/model_files/clip_text_config.h"

namespace rtvd::test {

// A text encoder folder as transformers writes one (config.json, model.safetensors), random fp32 weights.
void write_text_encoder(const std::string& dir, const ClipTextConfig& c, const char* act, uint64_t seed);
// A tokenizer folder as published checkpoints ship one: CLIP's vocabulary (tests/data/tiny_sd/tokenizer's
// vocab.json and merges.txt), padded with `pad`.
void write_clip_tokenizer(const std::string& dir, const char* pad);
// The text side of an SDXL folder: text_encoder/ (first, quick_gelu), text_encoder_2/ (second, gelu, its
// projection_dim the pooled width), tokenizer/ (padded with <|endoftext|>), tokenizer_2/ (padded with "!").
void write_sdxl_text_side(const std::string& dir, const ClipTextConfig& first, const ClipTextConfig& second);
// model_index.json as stabilityai/stable-diffusion-xl-base-1.0 publishes it.
nlohmann::json sdxl_model_index();

// A whole SDXL pipeline that rtvd renders, random weights, at `dir`: the U-Net of tests/data/tiny_sdxl's config
// (16/24/32 channels, text_time, addition_time_embed_dim 8) with a context of 32 = encoders of widths 16 and 16
// and a pooled projection of 32 (80 = 32 + 6 x 8); tests/data/tiny_sd's 2-level VAE with SDXL's scaling factor
// 0.13025; SDXL-Turbo's scheduler (Euler ancestral, trailing spacing).
void write_random_sdxl_folder(const std::string& dir);

// tests/data/tiny_sdxl_pipeline, tools/reference/export_tiny_sdxl_pipeline.py's output (model/, pipelines.json,
// pipelines.safetensors); ADD_FAILURE()s naming the missing file and how to make it, and returns "", when the
// export has not been run into it.
std::string tiny_sdxl_pipeline_dir();
// tests/data/tiny_taesdxl, tools/reference/export_tiny_taesdxl.py's output (taesdxl/, pipelines.json,
// pipelines.safetensors: the tiny SDXL pipeline's cases with a tiny TAESDXL as its vae); "" and a failure as above.
std::string tiny_taesdxl_dir();

// tests/data/tiny_sdxl_single_file, tools/reference/export_tiny_sdxl_single_file.py's output (the single file
// packed as tiny_sdxl.manifest.json and tiny_sdxl_extras.safetensors, the LoRA files, lora_cases.json and
// lora_cases.safetensors); as tiny_sdxl_pipeline_dir when it is missing.
std::string tiny_sdxl_single_file_dir();

}  // namespace rtvd::test
