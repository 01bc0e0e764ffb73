// diffusers' UNet2DConditionModel config -> ModelConfig. rtvd's U-Net is diffusers' (unet.cpp builds it under
// diffusers' tensor names), so the mapping is a renaming, apart from three things diffusers leaves implicit:
// the legacy head naming (attention_head_dim is a head count), a missing key meaning diffusers' default, and
// the many keys that select variants rtvd does not build, which must hold their default.
#include "pipeline/model_files/diffusers_unet_config.h"

#include <array>
#include <climits>
#include <span>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "pipeline/model_files/config_reader.h"

namespace rtvd {

namespace {

using nlohmann::json;

// Keys that both UNet2DConditionModel and ControlNetModel (a copy of the U-Net's encoder) have, read into
// ModelConfig by read_diffusers_encoder_config.
constexpr std::array<std::string_view, 16> kEncoderKeys = {
    "in_channels",         "flip_sin_to_cos",      "freq_shift",
    "block_out_channels",  "layers_per_block",     "down_block_types",
    "norm_num_groups",     "norm_eps",             "cross_attention_dim",
    "attention_head_dim",  "num_attention_heads",  "use_linear_projection",
    "transformer_layers_per_block",                "addition_embed_type",
    "addition_time_embed_dim",                     "projection_class_embeddings_input_dim",
};
// The U-Net's own, read by parse_diffusers_unet_config.
constexpr std::array<std::string_view, 3> kUNetKeys = {"sample_size", "out_channels", "up_block_types"};

// Keys that select a variant of the architecture rtvd does not build: accepted only at diffusers' default,
// which is also what a missing key means. value is the default as JSON; what names the variant in the error.
struct FixedKey {
  const char* key;
  const char* value;
  const char* what;
};
// Both models' (the encoder's).
constexpr FixedKey kEncoderFixedKeys[] = {
    // diffusers' "UNetMidBlock2D" in a UNet2DConditionModel is one ResNet alone (num_layers=0), and null no
    // mid block at all; rtvd's mid block without attention keeps both ResNets, so neither maps onto it.
    {"mid_block_type", R"("UNetMidBlock2DCrossAttn")", "a mid block other than ResNet, transformer, ResNet"},
    {"act_fn", R"("silu")", "another activation"},
    {"only_cross_attention", "false", "transformer blocks without self-attention"},
    {"downsample_padding", "1", "another downsampler padding"},
    {"mid_block_scale_factor", "1", "a scaled mid block"},
    {"encoder_hid_dim", "null", "a projection of the context"},
    {"encoder_hid_dim_type", "null", "a projection of the context"},
    {"num_class_embeds", "null", "class labels"},
    {"class_embed_type", "null", "a class embedding"},
    {"resnet_time_scale_shift", R"("default")", "scale-shift time conditioning"},
};
// The U-Net's own.
constexpr FixedKey kUNetFixedKeys[] = {
    {"center_input_sample", "false", "centering the input sample"},
    {"dual_cross_attention", "false", "dual cross-attention"},
    {"reverse_transformer_layers_per_block", "null", "other transformer depths on the up path"},
    {"cross_attention_norm", "null", "a norm of the context"},
    {"attention_type", R"("default")", "gated (GLIGEN) attention"},
    {"class_embeddings_concat", "false", "class embeddings concatenated to the time embedding"},
    {"time_embedding_type", R"("positional")", "another time embedding"},
    {"time_embedding_dim", "null", "a time embedding width other than 4 x block_out_channels[0]"},
    {"time_embedding_act_fn", "null", "an activation after the time embedding"},
    {"timestep_post_act", "null", "a second activation in the time embedding"},
    {"time_cond_proj_dim", "null", "a guidance embedding (LCM)"},
    {"resnet_skip_time_act", "false", "ResNets without the time activation"},
    {"resnet_out_scale_factor", "1.0", "scaled ResNet outputs"},
    {"conv_in_kernel", "3", "another conv_in kernel"},
    {"conv_out_kernel", "3", "another conv_out kernel"},
};

// The sizes of SDXL's added embedding (addition_embed_type "text_time"), which without it select variants
// rtvd does not build (a class embedding's projection, another added embedding).
constexpr FixedKey kTextTimeKeys[] = {
    {"projection_class_embeddings_input_dim", "null", "a class embedding"},
    {"addition_time_embed_dim", "null", "an added time embedding"},
};

// Keys that change nothing rtvd computes, checked for type only (read_diffusers_encoder_config and below), and
// metadata.
constexpr std::array<std::string_view, 2> kEncoderIgnoredKeys = {"upcast_attention", "addition_embed_type_num_heads"};
constexpr std::array<std::string_view, 2> kUNetIgnoredKeys = {"dropout", "mid_block_only_cross_attention"};
constexpr std::array<std::string_view, 4> kMetadataKeys = {"_class_name", "_diffusers_version", "_name_or_path",
                                                           "_use_default_values"};

const std::vector<std::string> kDefaultDownBlocks = {"CrossAttnDownBlock2D", "CrossAttnDownBlock2D",
                                                     "CrossAttnDownBlock2D", "DownBlock2D"};
const std::vector<std::string> kDefaultUpBlocks = {"UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D",
                                                   "CrossAttnUpBlock2D"};

// A key that must hold diffusers' default (a missing key does).
void check_fixed(const ConfigReader& r, const FixedKey& f) {
  if (!r.has(f.key)) return;
  const json& v = r.required(f.key, "");
  if (v != json::parse(f.value))
    fail(r.label(), ": key '", f.key, "': ", f.what, " is not supported by rtvd: expected ", f.value, ", got ",
         describe_json(v));
}

// diffusers' get_aug_embed for "text_time" (SDXL): add_time_proj embeds each time id at
// addition_time_embed_dim; add_embedding maps [text_embeds | those] from projection_class_embeddings_input_dim
// to the time embedding. The other added embeddings (Kandinsky's, IP-Adapter's) are not built.
void read_added_embedding(const ConfigReader& r, ModelConfig& c) {
  if (r.is_null("addition_embed_type")) {
    for (const FixedKey& f : kTextTimeKeys) check_fixed(r, f);
    return;
  }
  const json& type = r.required("addition_embed_type", "");
  if (type != "text_time")
    fail(r.label(), ": key 'addition_embed_type': an added embedding other than SDXL's is not supported by rtvd: "
         "expected null or \"text_time\", got ", describe_json(type));
  c.addition_time_embed_dim = r.integer("addition_time_embed_dim", 1, kMaxChannels);
  c.projection_class_embeddings_input_dim = r.integer("projection_class_embeddings_input_dim", 1, kMaxChannels);
}

// key's value, or fallback (diffusers' default) when the config has none: for describing either in errors.
json value_or(const ConfigReader& r, const char* key, json fallback) {
  return r.has(key) ? r.required(key, "") : fallback;
}

// diffusers takes an int (the same at every level) or a list with one per level: the values per level.
std::vector<int> per_level(const ConfigReader& r, const char* key, int levels, int fallback, int min, int max) {
  if (!r.has(key)) return std::vector<int>(levels, fallback);
  const json& v = r.required(key, "");
  if (!v.is_array()) return std::vector<int>(levels, r.as_integer(key, v, min, max));
  if (int(v.size()) != levels)
    r.fail_key(key, cat("an integer or ", levels, " integers (one per block_out_channels level)"), describe_json(v));
  std::vector<int> out;
  for (const json& e : v) out.push_back(r.as_integer(key, e, min, max));
  return out;
}

// A per-level key that rtvd sets once for the whole U-Net.
int same_at_every_level(const ConfigReader& r, const char* key, int levels, int fallback, int min, int max) {
  const std::vector<int> v = per_level(r, key, levels, fallback, min, max);
  for (int x : v)
    if (x != v[0])
      r.fail_key(key, "the same value at every level (rtvd builds one for the whole U-Net)",
                 describe_json(r.required(key, "")));
  return v[0];
}

// down_block_types: per level, transformers after the ResNets or not.
std::vector<bool> attention_levels(const ConfigReader& r, int levels) {
  const std::vector<std::string> down =
      r.has("down_block_types") ? r.string_array("down_block_types", kMaxLevels) : kDefaultDownBlocks;
  if (int(down.size()) != levels)
    r.fail_key("down_block_types", cat(levels, " entries (one per block_out_channels level)"),
               describe_json(value_or(r, "down_block_types", kDefaultDownBlocks)));
  std::vector<bool> attention;
  for (const std::string& type : down) {
    if (type != "CrossAttnDownBlock2D" && type != "DownBlock2D")
      r.fail_key("down_block_types", R"("CrossAttnDownBlock2D" or "DownBlock2D" at every level)",
                 describe_json(json(type)));
    attention.push_back(type == "CrossAttnDownBlock2D");
  }
  return attention;
}

// up_block_types: down_block_types mirrored, as rtvd's up path has attention exactly where its down path does.
void check_up_blocks(const ConfigReader& r, const std::vector<bool>& attention) {
  std::vector<std::string> mirror;
  for (int i = int(attention.size()) - 1; i >= 0; --i) mirror.push_back(attention[i] ? "CrossAttnUpBlock2D" : "UpBlock2D");
  const json up = value_or(r, "up_block_types", kDefaultUpBlocks);
  if (up != json(mirror))
    r.fail_key("up_block_types", cat(json(mirror).dump(), " (down_block_types mirrored)"), describe_json(up));
}

// Heads, in diffusers' legacy naming: without num_attention_heads, attention_head_dim holds the number of
// heads (diffusers issue 2011), 8 when missing. Either is one count for every level or one per level; the
// transformers of level i split its channels C_i into heads_i heads, the mid block's those of the last level.
// rtvd has one head count or one head dim for the whole U-Net: whichever is the same at every attention
// site (SD 1.5: 8 heads everywhere; SD 2.1: 5/10/20 heads of C_i = 320/640/1280, head dim 64 everywhere).
void read_heads(const ConfigReader& r, ModelConfig& c) {
  const bool by_heads = !r.is_null("num_attention_heads");
  const char* key = by_heads ? "num_attention_heads" : "attention_head_dim";
  const std::vector<int> heads = per_level(r, key, c.levels(), 8, 1, kMaxChannels);
  // Beside num_attention_heads, attention_head_dim sizes only blocks rtvd does not build (AttnDownBlock2D).
  if (by_heads && !r.is_null("attention_head_dim")) per_level(r, "attention_head_dim", c.levels(), 0, 1, kMaxChannels);

  std::vector<int> site_heads, site_dims;
  for (int i = 0; i < c.levels(); ++i) {
    if (!c.attention_levels[i] && i != c.levels() - 1) continue;  // the mid block attends at the last level
    const int channels = c.block_out_channels[i];
    if (channels % heads[i] != 0)
      r.fail_key(key, cat("a divisor of block_out_channels[", i, "] = ", channels, " (heads of an attention level)"),
                 cat(heads[i]));
    site_heads.push_back(heads[i]);
    site_dims.push_back(channels / heads[i]);
  }
  const auto all_same = [](const std::vector<int>& v) {
    for (int x : v)
      if (x != v[0]) return false;
    return true;
  };
  if (all_same(site_heads))
    c.num_attention_heads = site_heads[0];
  else if (all_same(site_dims))
    c.attention_head_dim = site_dims[0];
  else
    r.fail_key(key,
               "head counts that are the same at every attention level or give the same head dim there (rtvd "
               "has one or the other for the whole U-Net)",
               describe_json(r.required(key, "")));
}

}  // namespace

void read_diffusers_encoder_config(const ConfigReader& r, std::string_view class_name,
                                   std::span<const std::string_view> own_keys, ModelConfig& c) {
  r.choice("_class_name", {class_name});
  std::vector<std::string_view> known(kEncoderKeys.begin(), kEncoderKeys.end());
  for (const FixedKey& f : kEncoderFixedKeys) known.push_back(f.key);
  known.insert(known.end(), kEncoderIgnoredKeys.begin(), kEncoderIgnoredKeys.end());
  known.insert(known.end(), own_keys.begin(), own_keys.end());
  r.reject_unknown_keys(known, kMetadataKeys);
  for (const FixedKey& f : kEncoderFixedKeys) check_fixed(r, f);
  // diffusers computes attention scores and softmax in fp32 with upcast_attention (SD 2.1 at 768 overflows
  // fp16 without): rtvd's attention does both in fp32 on every backend, so any value runs the same (SDXL's
  // configs have null, which diffusers takes as false).
  bool ignored_bool = false;
  if (!r.is_null("upcast_attention")) r.optional_bool("upcast_attention", ignored_bool);
  // Read only by variants refused here (addition_embed_type "text").
  int ignored_int = 0;
  r.optional_integer("addition_embed_type_num_heads", 0, INT_MAX, ignored_int);

  c.norm = NormKind::Group;  // diffusers' ResnetBlock2D: GroupNorm, SiLU, conv
  // The keys start at diffusers' defaults, which differ from ModelConfig's.
  c.in_channels = 4;
  r.optional_integer("in_channels", 1, kMaxImageChannels, c.in_channels);
  c.block_out_channels = {320, 640, 1280, 1280};
  if (r.has("block_out_channels"))
    c.block_out_channels = r.integer_array("block_out_channels", kMaxLevels, 1, kMaxChannels);
  c.layers_per_block = same_at_every_level(r, "layers_per_block", c.levels(), 2, 1, kMaxLayersPerBlock);
  c.norm_num_groups = 32;
  r.optional_integer("norm_num_groups", 1, kMaxChannels, c.norm_num_groups);
  c.norm_eps = 1e-5f;
  r.optional_number("norm_eps", true, c.norm_eps);
  c.attention_levels = attention_levels(r, c.levels());
  c.mid_attention = true;  // mid_block_type "UNetMidBlock2DCrossAttn", checked above
  read_heads(r, c);
  // Level i's depth, its down and up blocks' alike (diffusers reverses the list for the up blocks, which run
  // the levels in reverse), the mid block's the last level's. Nested lists (asymmetric depths) need
  // reverse_transformer_layers_per_block, which the U-Net refuses.
  c.transformer_layers_per_block = per_level(r, "transformer_layers_per_block", c.levels(), 1, 1, kMaxTransformerLayers);
  c.cross_attention_dim = 1280;
  r.optional_integer("cross_attention_dim", 1, kMaxChannels, c.cross_attention_dim);
  c.context_length = 77;  // CLIP's 77 tokens: the context diffusers' Stable Diffusion pipelines give the U-Net
  c.use_linear_projection = false;
  r.optional_bool("use_linear_projection", c.use_linear_projection);
  c.num_class_embeds = 0;  // num_class_embeds null, checked above
  c.flip_sin_to_cos = true;
  r.optional_bool("flip_sin_to_cos", c.flip_sin_to_cos);
  c.freq_shift = 0.0f;
  r.optional_number("freq_shift", false, c.freq_shift);
  c.timestep_scale = 1000.0f;  // diffusers' schedulers run t in [0, 1000)
  read_added_embedding(r, c);
}

ModelConfig parse_diffusers_unet_config(const std::string& json_text, const std::string& label, DType dtype) {
  const json root = parse_config_object(json_text, label);
  const ConfigReader r(root, label);
  std::vector<std::string_view> own(kUNetKeys.begin(), kUNetKeys.end());
  for (const FixedKey& f : kUNetFixedKeys) own.push_back(f.key);
  own.insert(own.end(), kUNetIgnoredKeys.begin(), kUNetIgnoredKeys.end());
  ModelConfig c;
  c.name = label;
  c.dtype = dtype;
  read_diffusers_encoder_config(r, "UNet2DConditionModel", own, c);
  for (const FixedKey& f : kUNetFixedKeys) check_fixed(r, f);
  // Training only, or read only by a variant refused above (the UNetMidBlock2DSimpleCrossAttn mid block).
  float ignored_number = 0;
  r.optional_number("dropout", false, ignored_number);
  bool ignored_bool = false;
  if (!r.is_null("mid_block_only_cross_attention")) r.optional_bool("mid_block_only_cross_attention", ignored_bool);
  // diffusers' default is null: rtvd needs the size to render at.
  c.sample_size = r.integer("sample_size", 1, kMaxFrameSide);
  c.out_channels = 4;
  r.optional_integer("out_channels", 1, kMaxImageChannels, c.out_channels);
  check_up_blocks(r, c.attention_levels);
  check_model_config(c, r);
  return c;
}

}  // namespace rtvd
