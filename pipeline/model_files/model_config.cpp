// config.json -> ModelConfig. Every key is known, typed and range-checked, and the keys are checked against
// each other, so that a typo or an inconsistent architecture fails here with the key's name rather than
// later as a puzzling missing tensor or a wrong shape.
#include "pipeline/model_files/model_config.h"

#include <array>
#include <string_view>

#include "base/error.h"
#include "base/quoted_text.h"
#include "pipeline/model_files/config_reader.h"

namespace rtvd {

namespace {

using nlohmann::json;

constexpr std::array<std::string_view, 23> kKnownKeys = {
    "name",
    "dtype",
    "sample_size",
    "in_channels",
    "out_channels",
    "block_out_channels",
    "layers_per_block",
    "norm",
    "norm_num_groups",
    "norm_eps",
    "attention_levels",
    "mid_attention",
    "attention_head_dim",
    "num_attention_heads",
    "transformer_layers_per_block",
    "cross_attention_dim",
    "context_length",
    "use_linear_projection",
    "num_class_embeds",
    "class_names",
    "flip_sin_to_cos",
    "freq_shift",
    "timestep_scale",
};

// Whether level i runs transformer blocks (the mid block sits at the last level).
bool has_attention(const ModelConfig& c, int level) {
  return c.attention_levels[level] || (c.mid_attention && level == c.levels() - 1);
}

}  // namespace

void check_model_config(const ModelConfig& c, const ConfigReader& r) {
  if (c.attention_levels.size() != c.block_out_channels.size())
    r.fail_key("attention_levels",
               cat(c.block_out_channels.size(), " entries (one per block_out_channels level)"),
               cat(c.attention_levels.size()));
  if (c.sample_size % c.size_multiple() != 0)
    r.fail_key("sample_size", cat("a multiple of ", c.size_multiple(), " (one halving per downsampler)"),
               cat(c.sample_size));

  for (int i = 0; i < c.levels(); ++i) {
    const int channels = c.block_out_channels[i];
    const std::string level = cat("block_out_channels[", i, "] = ", channels);
    // GroupNorm runs in every group ResNet and at the input of every transformer.
    if ((c.norm == NormKind::Group || has_attention(c, i)) && channels % c.norm_num_groups != 0)
      r.fail_key("norm_num_groups", cat("a divisor of ", level), cat(c.norm_num_groups));
    if (!has_attention(c, i)) continue;
    if (c.attention_head_dim > 0 && channels % c.attention_head_dim != 0)
      r.fail_key("attention_head_dim", cat("a divisor of ", level, " (an attention level)"),
                 cat(c.attention_head_dim));
    if (c.num_attention_heads > 0 && channels % c.num_attention_heads != 0)
      r.fail_key("num_attention_heads", cat("a divisor of ", level, " (an attention level)"),
                 cat(c.num_attention_heads));
  }

  if (c.cross_attention_dim > 0 && c.context_length == 0)
    r.fail_key("context_length", cat("a positive integer with cross_attention_dim ", c.cross_attention_dim),
               "0 or nothing");
  if (!c.class_names.empty() && int(c.class_names.size()) != c.num_class_embeds - 1)
    r.fail_key("class_names",
               c.num_class_embeds > 0
                   ? cat(c.num_class_embeds - 1, " names (num_class_embeds - 1)")
                   : std::string("no names without num_class_embeds"),
               cat(c.class_names.size(), " names"));

  if (c.text_time() && c.text_embeds_dim() < 1)
    r.fail_key("projection_class_embeddings_input_dim",
               cat("more than 6 x addition_time_embed_dim = ", ModelConfig::kTimeIds * c.addition_time_embed_dim,
                   " (the pooled text embedding's width, then the 6 time ids' embeddings)"),
               cat(c.projection_class_embeddings_input_dim));

  // Every block is in the graph once per step: the graph's size and the time to plan it follow this count.
  const int resnets = c.levels() * (2 * c.layers_per_block + 1) + 2;
  int transformer_blocks = c.mid_attention ? c.transformer_depth(c.levels() - 1) : 0;
  for (int i = 0; i < c.levels(); ++i)
    if (c.attention_levels[i])
      transformer_blocks += (2 * c.layers_per_block + 1) * c.transformer_depth(i);  // after down and up ResNets
  if (resnets + transformer_blocks > kMaxBlocks)
    fail(r.label(), ": the U-Net has ", resnets, " ResNets and ", transformer_blocks,
         " transformer blocks, expected at most ", kMaxBlocks,
         " in all (fewer levels, layers_per_block or transformer_layers_per_block)");
}

std::string class_names_text(const ModelConfig& c) {
  std::string out;
  for (size_t i = 0; i < c.class_names.size(); ++i) {
    if (out.size() >= kExcerptBytes) return cat(out, ", ... (", c.class_names.size(), " names)");
    out += cat(i ? ", " : "", printable(c.class_names[i]));
  }
  return out;
}

ModelConfig parse_model_config(const std::string& json_text, const std::string& label) {
  const json root = parse_config_object(json_text, label);
  const ConfigReader r(root, label);
  r.reject_unknown_keys(kKnownKeys);

  ModelConfig c;
  c.name = printable(r.string("name"));
  c.dtype = r.choice("dtype", {"float16", "float32"}) == 0 ? DType::F16 : DType::F32;
  c.sample_size = r.integer("sample_size", 1, kMaxFrameSide);
  c.in_channels = r.integer("in_channels", 1, kMaxImageChannels);
  c.out_channels = r.integer("out_channels", 1, kMaxImageChannels);
  c.block_out_channels = r.integer_array("block_out_channels", kMaxLevels, 1, kMaxChannels);
  c.layers_per_block = r.integer("layers_per_block", 1, kMaxLayersPerBlock);
  c.norm = r.choice("norm", {"batch", "group"}) == 0 ? NormKind::Batch : NormKind::Group;
  c.norm_num_groups = r.integer("norm_num_groups", 1, kMaxChannels);
  r.optional_number("norm_eps", true, c.norm_eps);
  c.attention_levels = r.bool_array("attention_levels");
  r.optional_bool("mid_attention", c.mid_attention);

  const bool by_dim = r.has("attention_head_dim"), by_heads = r.has("num_attention_heads");
  if (by_dim == by_heads)
    r.fail_key(by_dim ? "num_attention_heads" : "attention_head_dim",
               "exactly one of attention_head_dim and num_attention_heads", by_dim ? "both" : "neither");
  if (by_dim) c.attention_head_dim = r.integer("attention_head_dim", 1, kMaxChannels);
  if (by_heads) c.num_attention_heads = r.integer("num_attention_heads", 1, kMaxChannels);

  int transformer_layers = 1;  // the same at every level in this format
  r.optional_integer("transformer_layers_per_block", 1, kMaxTransformerLayers, transformer_layers);
  c.transformer_layers_per_block.assign(c.block_out_channels.size(), transformer_layers);
  r.optional_integer("cross_attention_dim", 0, kMaxChannels, c.cross_attention_dim);
  r.optional_integer("context_length", 0, kMaxContextLength, c.context_length);
  r.optional_bool("use_linear_projection", c.use_linear_projection);
  r.optional_integer("num_class_embeds", 0, kMaxClassEmbeds, c.num_class_embeds);
  r.optional_string_array("class_names", c.class_names);
  r.optional_bool("flip_sin_to_cos", c.flip_sin_to_cos);
  r.optional_number("freq_shift", false, c.freq_shift);
  r.optional_number("timestep_scale", true, c.timestep_scale);

  check_model_config(c, r);
  return c;
}

ModelConfig load_model_config(const std::string& path) { return parse_model_config(read_config_file(path), path); }

}  // namespace rtvd
