#include "pipeline/model_files/clip_text_config.h"

#include <array>
#include <string_view>

#include "base/error.h"
#include "pipeline/model_files/config_reader.h"

namespace rtvd {

namespace {

constexpr std::array<std::string_view, 8> kUsedKeys = {
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "max_position_embeddings", "hidden_act", "layer_norm_eps"};
// Keys transformers writes that do not change the hidden states: the model's identity (checked below),
// inference-time switches, training settings, the projection width (read for CLIPTextModelWithProjection
// only) and the special-token ids (the tokenizer's files decide those).
constexpr std::array<std::string_view, 18> kOtherKeys = {
    "architectures", "model_type", "_name_or_path", "transformers_version", "torch_dtype", "dtype",
    "attention_dropout", "dropout", "initializer_factor", "initializer_range", "projection_dim",
    "bos_token_id", "eos_token_id", "pad_token_id", "output_hidden_states", "use_return_dict",
    "_attn_implementation_autoset", "tie_word_embeddings"};

// transformers' CLIPTextConfig default, for a config that leaves the key out.
constexpr int kDefaultProjectionDim = 512;

}  // namespace

ClipTextConfig parse_clip_text_config(const std::string& json_text, const std::string& label) {
  const nlohmann::json root = parse_config_object(json_text, label);
  const ConfigReader r(root, label);
  r.reject_unknown_keys(kUsedKeys, kOtherKeys);
  if (r.has("model_type")) r.choice("model_type", {"clip_text_model"});
  bool with_projection = false;
  if (r.has("architectures")) {
    const auto names = r.string_array("architectures", 4);
    if (names.size() != 1 || (names[0] != "CLIPTextModel" && names[0] != "CLIPTextModelWithProjection"))
      r.fail_key("architectures", "[\"CLIPTextModel\"] or [\"CLIPTextModelWithProjection\"]",
                 describe_json(root["architectures"]));
    with_projection = names[0] == "CLIPTextModelWithProjection";
  }
  ClipTextConfig c;
  c.vocab_size = r.integer("vocab_size", 1, kMaxVocabulary);
  c.hidden_size = r.integer("hidden_size", 1, kMaxTextWidth);
  c.intermediate_size = r.integer("intermediate_size", 1, 4 * kMaxTextWidth);
  c.num_hidden_layers = r.integer("num_hidden_layers", 1, kMaxTextLayers);
  c.num_attention_heads = r.integer("num_attention_heads", 1, kMaxTextWidth);
  c.max_position_embeddings = r.integer("max_position_embeddings", 1, kMaxTextPositions);
  c.hidden_act = r.choice("hidden_act", {"quick_gelu", "gelu"}) == 0 ? ClipTextConfig::HiddenAct::QuickGelu
                                                                  : ClipTextConfig::HiddenAct::Gelu;
  r.optional_number("layer_norm_eps", true, c.layer_norm_eps);
  if (with_projection) {
    c.projection_dim = kDefaultProjectionDim;
    r.optional_integer("projection_dim", 1, kMaxTextWidth, c.projection_dim);
  }
  if (c.hidden_size % c.num_attention_heads != 0)
    r.fail_key("num_attention_heads", cat("a divisor of hidden_size ", c.hidden_size), cat(c.num_attention_heads));
  return c;
}

ClipTextConfig load_clip_text_config(const std::string& path) {
  return parse_clip_text_config(read_config_file(path), path);
}

}  // namespace rtvd
