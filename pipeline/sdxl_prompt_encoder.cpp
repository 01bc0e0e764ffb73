#include "pipeline/sdxl_prompt_encoder.h"

#include <utility>

#include "base/error.h"

namespace rtvd {

namespace {

// SDXL's encode_prompt takes hidden_states[-(clip_skip + 2)] of both encoders, without the final LayerNorm.
TextEncoderOutputs sdxl_outputs(int clip_skip, bool pooled) {
  return {.hidden = TextEncoderOutputs::Hidden::PenultimateRaw, .clip_skip = clip_skip, .pooled = pooled};
}

}  // namespace

SdxlTextEncoders load_sdxl_text_encoders(const DiffusersFolder& folder) {
  if (!folder.sdxl) fail(folder.root, "/model_index.json: not an SDXL pipeline (one text encoder)");
  return {load_text_encoder_folder(folder.text_encoder_dir), load_text_encoder_folder(folder.text_encoder_2_dir),
          folder.tokenizer_dir, folder.tokenizer_2_dir, folder.force_zeros_for_empty_prompt};
}

SdxlPromptEncoder::SdxlPromptEncoder(SdxlTextEncoders encoders, const BackendFactory& make_backend, int clip_skip)
    : first_(std::move(encoders.text_encoder), encoders.tokenizer_dir, "<|endoftext|>", make_backend(),
             sdxl_outputs(clip_skip, false)),
      second_(std::move(encoders.text_encoder_2), encoders.tokenizer_2_dir, "!", make_backend(),
              sdxl_outputs(clip_skip, true)),
      force_zeros_(encoders.force_zeros_for_empty_prompt) {}

SdxlPromptEmbedding SdxlPromptEncoder::embed(const std::string& prompt, const std::string& flag, std::string* notice) {
  std::string second_notice;
  const PromptEncoder::Embedding& a = first_.encode(prompt, flag, notice);
  const PromptEncoder::Embedding& b = second_.encode(prompt, flag, &second_notice);
  if (notice && notice->empty()) *notice = second_notice;
  // torch.concat(..., dim=-1): each token's row is the first encoder's features, then the second's.
  const size_t wa = size_t(first_.width()), wb = size_t(second_.width());
  SdxlPromptEmbedding e;
  e.context.reserve(size_t(tokens()) * (wa + wb));
  for (size_t t = 0; t < size_t(tokens()); ++t) {
    e.context.insert(e.context.end(), a.hidden.begin() + t * wa, a.hidden.begin() + (t + 1) * wa);
    e.context.insert(e.context.end(), b.hidden.begin() + t * wb, b.hidden.begin() + (t + 1) * wb);
  }
  e.pooled = b.pooled;
  return e;
}

SdxlPromptEmbedding SdxlPromptEncoder::embed_negative(const std::string& prompt, const std::string& flag,
                                                      std::string* notice) {
  if (!prompt.empty() || !force_zeros_) return embed(prompt, flag, notice);
  if (notice) notice->clear();
  return {std::vector<float>(size_t(tokens()) * width(), 0.0f), std::vector<float>(size_t(pooled_width()), 0.0f)};
}

}  // namespace rtvd
