// The architecture of a CLIP text encoder, from transformers' text_encoder/config.json (CLIPTextModel):
// SD 1.x's OpenAI CLIP ViT-L/14 (12 layers, width 768, quick_gelu) and SD 2.x's OpenCLIP ViT-H/14 as
// diffusers stores it (23 layers, width 1024, gelu); SDXL's text_encoder_2/ is a CLIPTextModelWithProjection
// (OpenCLIP ViT-bigG: 32 layers, width 1280, gelu, projection_dim 1280). Every key is known and range-checked.
#pragma once
#include <string>

namespace rtvd {

// Bounds, each well beyond the published encoders (SDXL's bigG: 32 layers of 1280, 20 heads).
constexpr int kMaxTextWidth = 8192;
constexpr int kMaxTextLayers = 64;
constexpr int kMaxVocabulary = 1 << 20;
constexpr int kMaxTextPositions = 4096;

struct ClipTextConfig {
  int vocab_size = 49408;
  int hidden_size = 768;
  int intermediate_size = 3072;
  int num_hidden_layers = 12;
  int num_attention_heads = 12;
  int max_position_embeddings = 77;
  enum class HiddenAct { QuickGelu, Gelu };     // "quick_gelu" (OpenAI CLIP) or "gelu" (OpenCLIP)
  HiddenAct hidden_act = HiddenAct::QuickGelu;  // the MLP's activation (models/ maps it onto the op's)
  float layer_norm_eps = 1e-5f;
  // CLIPTextModelWithProjection's text_projection width (config key projection_dim); 0 for a CLIPTextModel,
  // whose config carries the key too but whose checkpoint has no projection.
  int projection_dim = 0;
  int head_dim() const { return hidden_size / num_attention_heads; }
};

// label names the source in errors.
ClipTextConfig parse_clip_text_config(const std::string& json_text, const std::string& label);
ClipTextConfig load_clip_text_config(const std::string& path);

}  // namespace rtvd
