// SDXL's prompt embeddings, as diffusers' StableDiffusionXLPipeline.encode_prompt makes them from one prompt:
// the prompt through both tokenizers and text encoders (CLIP ViT-L, a CLIPTextModel; OpenCLIP ViT-bigG, a
// CLIPTextModelWithProjection), each encoder's hidden state before its last layer as it is (no final
// LayerNorm) side by side as the U-Net's context, and the second encoder's pooled projection. Each encoder
// runs on a backend of its own and caches by prompt (PromptEncoder).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/backends/backend.h"
#include "pipeline/model_files/diffusers_folder.h"
#include "pipeline/models/clip_text.h"
#include "pipeline/prompt_encoder.h"

namespace rtvd {

struct SdxlTextEncoders {
  TextEncoderCheckpoint text_encoder, text_encoder_2;
  // "" for CLIP's published vocabulary padded as SDXL's tokenizers are: <|endoftext|> (the first), "!" (the second).
  std::string tokenizer_dir, tokenizer_2_dir;
  // No negative prompt conditions on zeros (model_index.json's key; diffusers' default).
  bool force_zeros_for_empty_prompt = true;
};

// The text encoders and tokenizers of an SDXL diffusers folder (open_diffusers_folder has checked that it
// lists all four); a missing or bad file is an Error naming it.
SdxlTextEncoders load_sdxl_text_encoders(const DiffusersFolder& folder);

struct SdxlPromptEmbedding {
  std::vector<float> context;  // (tokens(), width()): prompt_embeds, the first encoder's features, then the second's
  std::vector<float> pooled;   // (pooled_width()): pooled_prompt_embeds
};

class SdxlPromptEncoder {
 public:
  using BackendFactory = std::function<std::unique_ptr<Backend>()>;
  // clip_skip as diffusers': each encoder's hidden state clip_skip layers before its penultimate one.
  SdxlPromptEncoder(SdxlTextEncoders encoders, const BackendFactory& make_backend, int clip_skip = 0);

  int tokens() const { return first_.tokens(); }                        // 77
  int width() const { return first_.width() + second_.width(); }       // SDXL: 768 + 1280 = 2048
  int pooled_width() const { return second_.pooled_width(); }          // SDXL: 1280

  // The prompt's embedding. A prompt over the token limit is cut; `notice` then says how many tokens were
  // dropped (one line naming `flag`), else it is left empty.
  SdxlPromptEmbedding embed(const std::string& prompt, const std::string& flag, std::string* notice);
  // The negative prompt's: none (empty) is zeros for both when force_zeros_for_empty_prompt (diffusers'
  // negative_prompt None; rtvd has no other spelling of "no negative prompt"), else embed(prompt).
  SdxlPromptEmbedding embed_negative(const std::string& prompt, const std::string& flag, std::string* notice);

 private:
  PromptEncoder first_, second_;
  bool force_zeros_;
};

}  // namespace rtvd
