// diffusers' vae/config.json -> AutoencoderConfig. A missing key means diffusers' default (its
// register_to_config arguments); keys that choose a variant rtvd does not build must hold that default.
#include "pipeline/model_files/autoencoder_config.h"

#include <array>
#include <span>
#include <string_view>

#include "base/error.h"
#include "pipeline/model_files/config_reader.h"
#include "pipeline/model_files/model_config.h"

namespace rtvd {

namespace {

using nlohmann::json;

// A key that selects a variant rtvd does not build: accepted only at diffusers' default (the value, as JSON),
// which is also what a missing key means; what names the variant in the error.
struct FixedKey {
  const char* key;
  const char* value;
  const char* what;
};

constexpr std::array<std::string_view, 4> kMetadataKeys = {"_class_name", "_diffusers_version", "_name_or_path",
                                                           "_use_default_values"};

constexpr std::array<std::string_view, 13> kKlKeys = {
    "block_out_channels", "layers_per_block", "latent_channels", "norm_num_groups", "down_block_types",
    "up_block_types", "scaling_factor", "shift_factor", "force_upcast", "use_quant_conv", "use_post_quant_conv",
    "mid_block_add_attention", "sample_size"};
constexpr FixedKey kKlFixedKeys[] = {
    {"in_channels", "3", "an image of other than 3 channels"},
    {"out_channels", "3", "an image of other than 3 channels"},
    {"act_fn", R"("silu")", "another activation"},
    {"latents_mean", "null", "per-channel latent statistics (latents_mean), which rtvd's pipelines do not apply"},
    {"latents_std", "null", "per-channel latent statistics (latents_std), which rtvd's pipelines do not apply"},
};

constexpr std::array<std::string_view, 11> kTinyKeys = {
    "encoder_block_out_channels", "decoder_block_out_channels", "num_encoder_blocks", "num_decoder_blocks",
    "block_out_channels", "latent_channels", "latent_magnitude", "latent_shift", "force_upcast", "scaling_factor",
    "shift_factor"};
constexpr FixedKey kTinyFixedKeys[] = {
    {"in_channels", "3", "an image of other than 3 channels"},
    {"out_channels", "3", "an image of other than 3 channels"},
    {"act_fn", R"("relu")", "another activation"},
    {"upsample_fn", R"("nearest")", "another upsampling"},
    {"upsampling_scaling_factor", "2", "another upsampling factor"},
};

// Unknown keys are rejected, fixed keys must hold their default.
void check_keys(const ConfigReader& r, const json& root, std::span<const std::string_view> mapped,
                std::span<const FixedKey> fixed) {
  std::vector<std::string_view> known(mapped.begin(), mapped.end());
  for (const FixedKey& f : fixed) known.push_back(f.key);
  r.reject_unknown_keys(known, kMetadataKeys);
  for (const FixedKey& f : fixed) {
    if (!r.has(f.key)) continue;
    if (root[f.key] != json::parse(f.value))
      fail(r.label(), ": key '", f.key, "': ", f.what, " is not supported by rtvd: expected ", f.value, ", got ",
           describe_json(root[f.key]));
  }
}

// scaling_factor and shift_factor over the class's defaults.
void read_scaling(const ConfigReader& r, LatentSpace& l) {
  r.optional_number("scaling_factor", true, l.scaling_factor);
  if (!r.is_null("shift_factor")) r.optional_number("shift_factor", false, l.shift_factor);
}

// The image side (or [height, width]) diffusers' tiled decoding cuts at: rtvd never tiles, so only its
// type and range are checked.
void check_sample_size(const ConfigReader& r) {
  if (!r.has("sample_size")) return;
  const json& v = r.required("sample_size", "");
  if (v.is_array()) {
    if (v.empty() || v.size() > 2) r.fail_key("sample_size", "an integer or [height, width]", describe_json(v));
    for (const json& e : v) r.as_integer("sample_size", e, 1, kMaxFrameSide);
  } else {
    r.as_integer("sample_size", v, 1, kMaxFrameSide);
  }
}

// A list of block types of one kind per level (diffusers' Encoder and Decoder build nothing else for a VAE).
void check_block_types(const ConfigReader& r, const char* key, const char* type, int levels) {
  const std::vector<std::string> types = r.has(key) ? r.string_array(key, kMaxLevels) : std::vector<std::string>{type};
  bool ok = int(types.size()) == levels;
  for (const std::string& t : types) ok = ok && t == type;
  if (!ok)
    r.fail_key(key, cat(levels, " times \"", type, "\" (one per block_out_channels level)"),
               describe_json(r.has(key) ? r.required(key, "") : json(types)));
}

AutoencoderKLConfig parse_kl(const ConfigReader& r, const json& root) {
  check_keys(r, root, kKlKeys, kKlFixedKeys);
  AutoencoderKLConfig c;
  if (r.has("block_out_channels"))
    c.block_out_channels = r.integer_array("block_out_channels", kMaxLevels, 1, kMaxChannels);
  r.optional_integer("layers_per_block", 1, kMaxLayersPerBlock, c.layers_per_block);
  r.optional_integer("latent_channels", 1, kMaxImageChannels, c.latent.channels);
  r.optional_integer("norm_num_groups", 1, kMaxChannels, c.norm_num_groups);
  for (int ch : c.block_out_channels)
    if (ch % c.norm_num_groups != 0)
      r.fail_key("norm_num_groups", cat("a divisor of every block_out_channels entry (", ch, ")"),
                 cat(c.norm_num_groups));
  check_block_types(r, "down_block_types", "DownEncoderBlock2D", c.levels());
  check_block_types(r, "up_block_types", "UpDecoderBlock2D", c.levels());
  r.optional_bool("mid_block_add_attention", c.mid_block_attention);
  r.optional_bool("use_quant_conv", c.use_quant_conv);
  r.optional_bool("use_post_quant_conv", c.use_post_quant_conv);
  r.optional_bool("force_upcast", c.force_upcast);
  read_scaling(r, c.latent);
  check_sample_size(r);
  c.latent.pixels_per_latent = 1 << (c.levels() - 1);  // a stride-2 Downsample2D after every level but the last
  return c;
}

// A per-level list of TAESD's, or diffusers' default.
std::vector<int> tiny_list(const ConfigReader& r, const char* key, std::vector<int> fallback, int min, int max) {
  return r.has(key) ? r.integer_array(key, kMaxLevels, min, max) : fallback;
}

AutoencoderTinyConfig parse_tiny(const ConfigReader& r, const json& root) {
  check_keys(r, root, kTinyKeys, kTinyFixedKeys);
  AutoencoderTinyConfig c;
  c.encoder_block_out_channels =
      tiny_list(r, "encoder_block_out_channels", c.encoder_block_out_channels, 1, kMaxChannels);
  c.decoder_block_out_channels =
      tiny_list(r, "decoder_block_out_channels", c.decoder_block_out_channels, 1, kMaxChannels);
  c.num_encoder_blocks = tiny_list(r, "num_encoder_blocks", c.num_encoder_blocks, 0, kMaxTinyBlocks);
  c.num_decoder_blocks = tiny_list(r, "num_decoder_blocks", c.num_decoder_blocks, 0, kMaxTinyBlocks);
  // As diffusers' constructor checks.
  if (c.num_encoder_blocks.size() != c.encoder_block_out_channels.size())
    r.fail_key("num_encoder_blocks", cat(c.encoder_block_out_channels.size(), " entries, as encoder_block_out_channels"),
               describe_json(json(c.num_encoder_blocks)));
  if (c.num_decoder_blocks.size() != c.decoder_block_out_channels.size())
    r.fail_key("num_decoder_blocks", cat(c.decoder_block_out_channels.size(), " entries, as decoder_block_out_channels"),
               describe_json(json(c.num_decoder_blocks)));
  // The encoder's stride-2 convs and the decoder's upsampling convs map a level's width to itself, so a
  // model whose widths change runs in no framework; rtvd's pixels per latent needs both paths equally deep.
  const auto same_width = [&](const char* key, const std::vector<int>& v) {
    for (int ch : v)
      if (ch != v[0]) r.fail_key(key, "the same width at every level (TAESD's convs keep it)", describe_json(json(v)));
  };
  same_width("encoder_block_out_channels", c.encoder_block_out_channels);
  same_width("decoder_block_out_channels", c.decoder_block_out_channels);
  if (c.decoder_block_out_channels.size() != c.encoder_block_out_channels.size())
    r.fail_key("decoder_block_out_channels", cat(c.encoder_block_out_channels.size(), " levels, as the encoder"),
               describe_json(json(c.decoder_block_out_channels)));
  // diffusers records the decoder's widths under block_out_channels too.
  if (r.has("block_out_channels") && root["block_out_channels"] != json(c.decoder_block_out_channels))
    r.fail_key("block_out_channels", cat(json(c.decoder_block_out_channels).dump(), " (decoder_block_out_channels)"),
               describe_json(root["block_out_channels"]));
  r.optional_integer("latent_channels", 1, kMaxImageChannels, c.latent.channels);
  r.optional_number("latent_magnitude", true, c.latent_magnitude);
  r.optional_number("latent_shift", false, c.latent_shift);
  // diffusers' AutoencoderTiny registers force_upcast false whatever the config says: checked for its type.
  bool ignored = false;
  r.optional_bool("force_upcast", ignored);
  read_scaling(r, c.latent);
  c.latent.pixels_per_latent = 1 << (c.levels() - 1);  // a stride-2 conv at the start of every level but the first
  return c;
}

}  // namespace

const LatentSpace& AutoencoderConfig::latent() const {
  return std::visit([](const auto& m) -> const LatentSpace& { return m.latent; }, model);
}

bool AutoencoderConfig::force_upcast() const {
  return std::visit([](const auto& m) { return m.force_upcast; }, model);
}

AutoencoderConfig parse_autoencoder_config(const std::string& json_text, const std::string& label) {
  const json root = parse_config_object(json_text, label);
  const ConfigReader r(root, label);
  if (r.choice("_class_name", {"AutoencoderKL", "AutoencoderTiny"}) == 0) return {parse_kl(r, root)};
  return {parse_tiny(r, root)};
}

AutoencoderConfig load_autoencoder_config(const std::string& path) {
  return parse_autoencoder_config(read_config_file(path), path);
}

}  // namespace rtvd
