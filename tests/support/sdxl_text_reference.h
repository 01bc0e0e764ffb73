// SDXL's text side scaled down (tests/data/tiny_sdxl: text_encoder/, tokenizer/, text_encoder_2/, tokenizer_2/,
// written by tools/reference/export_tiny_sdxl_text.py) and diffusers' StableDiffusionXLPipeline.encode_prompt
// outputs for it (text_reference.safetensors), case by case; and the check that rtvd's SdxlPromptEncoder on
// a backend matches them.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/backends/backend.h"

namespace rtvd::test {

struct SdxlTextCase {
  std::string name, prompt;
  std::optional<std::string> negative_prompt;  // none: diffusers' negative_prompt=None
  bool force_zeros_for_empty_prompt = true;
  std::vector<int32_t> ids, ids_2;  // (77) each tokenizer's ids for the prompt
  std::vector<float> prompt_embeds, pooled, negative_prompt_embeds, negative_pooled;
};

// The folder of the tiny SDXL text encoders; ADD_FAILURE()s naming the missing file and how to make it, and
// returns "", when the export has not been run into tests/data/tiny_sdxl.
std::string tiny_sdxl_text_dir();
std::vector<SdxlTextCase> read_sdxl_text_reference(const std::string& path);

// Every case's prompt and negative prompt through SdxlPromptEncoder (each encoder on a backend from
// make_backend) against diffusers: both tokenizers' ids exactly, prompt_embeds and pooled within max_rel_l2
// (zeros exactly). Returns the largest relative L2 error seen.
double check_sdxl_text_cases(const std::string& dir, const std::function<std::unique_ptr<Backend>()>& make_backend,
                             double max_rel_l2, const std::string& label);

}  // namespace rtvd::test
