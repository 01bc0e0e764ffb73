// config.json -> ModelConfig. Every key is known, typed and range-checked, and the keys are checked against
// each other, so that a typo or an inconsistent architecture fails here with the key's name rather than
// later as a puzzling missing tensor or a wrong shape.
#include "pipeline/model_files/model_config.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string_view>

#include "kernels/common/error.h"
#include "pipeline/model_files/json_text.h"

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

std::string known_keys_list() {
  std::string s;
  for (std::string_view k : kKnownKeys) s += cat(s.empty() ? "" : ", ", k);
  return s;
}

// A JSON value for an error message: its type and a short one-line excerpt.
std::string describe(const json& v) { return cat(v.type_name(), " ", json_excerpt(v)); }

// Reads the keys of one config object; every failure is "<label>: key 'k': expected ..., got ...".
class ConfigReader {
 public:
  ConfigReader(const json& root, const std::string& label) : root_(root), label_(label) {}

  [[noreturn]] void fail_key(std::string_view key, std::string_view expected, std::string_view got) const {
    fail(label_, ": key '", key, "': expected ", expected, ", got ", got);
  }

  void reject_unknown_keys() const {
    for (const auto& [key, value] : root_.items()) {
      bool known = false;
      for (std::string_view k : kKnownKeys) known = known || key == k;
      if (!known)
        fail_key(json_escaped(key), cat("one of the known keys (", known_keys_list(), ")"), "an unknown key");
    }
  }

  bool has(const char* key) const { return root_.contains(key); }
  const std::string& label() const { return label_; }

  const json& required(const char* key, std::string_view expected) const {
    if (!has(key)) fail_key(key, expected, "nothing (the key is required)");
    return root_[key];
  }

  std::string string(const char* key) const {
    const json& v = required(key, "a string");
    if (!v.is_string()) fail_key(key, "a string", describe(v));
    return v.get<std::string>();
  }

  // One of the given spellings, returned as its index.
  size_t choice(const char* key, std::initializer_list<std::string_view> options) const {
    std::string expected;
    for (std::string_view o : options) expected += cat(expected.empty() ? "" : " or ", "\"", o, "\"");
    const json& v = required(key, expected);
    size_t i = 0;
    for (std::string_view o : options) {
      if (v.is_string() && v.get_ref<const std::string&>() == o) return i;
      ++i;
    }
    fail_key(key, expected, describe(v));
  }

  int integer(const char* key, int min, int max) const {
    return as_integer(key, required(key, "an integer"), min, max);
  }
  void optional_integer(const char* key, int min, int max, int& out) const {
    if (has(key)) out = as_integer(key, root_[key], min, max);
  }

  void optional_number(const char* key, bool positive, float& out) const {
    if (!has(key)) return;
    const json& v = root_[key];
    if (!v.is_number()) fail_key(key, "a number", describe(v));
    const double d = v.get<double>();
    if (!(std::fabs(d) <= FLT_MAX)) fail_key(key, "a number within float range", describe(v));
    if (positive && !(d > 0)) fail_key(key, "a positive number", describe(v));
    out = float(d);
  }

  void optional_bool(const char* key, bool& out) const {
    if (!has(key)) return;
    const json& v = root_[key];
    if (!v.is_boolean()) fail_key(key, "true or false", describe(v));
    out = v.get<bool>();
  }

  std::vector<int> integer_array(const char* key, size_t max_entries, int min, int max) const {
    const std::string expected = cat("an array of 1 to ", max_entries, " integers");
    const json& v = required(key, expected);
    if (!v.is_array() || v.empty() || v.size() > max_entries) fail_key(key, expected, describe(v));
    std::vector<int> out;
    for (const json& e : v) out.push_back(as_integer(key, e, min, max));
    return out;
  }

  std::vector<bool> bool_array(const char* key) const {
    const json& v = required(key, "an array of true/false");
    if (!v.is_array()) fail_key(key, "an array of true/false", describe(v));
    std::vector<bool> out;
    for (const json& e : v) {
      if (!e.is_boolean()) fail_key(key, "an array of true/false", describe(v));
      out.push_back(e.get<bool>());
    }
    return out;
  }

  void optional_string_array(const char* key, std::vector<std::string>& out) const {
    if (!has(key)) return;
    const json& v = root_[key];
    if (!v.is_array()) fail_key(key, "an array of strings", describe(v));
    out.clear();
    for (const json& e : v) {
      if (!e.is_string()) fail_key(key, "an array of strings", describe(v));
      out.push_back(e.get<std::string>());
    }
  }

 private:
  const json& root_;
  const std::string& label_;

  // min is 1 for sizes, 0 where 0 means "none"; max is the key's bound from model_config.h.
  int as_integer(const char* key, const json& v, int min, int max) const {
    if (!v.is_number_integer()) fail_key(key, "an integer", describe(v));
    // Compared in the type nlohmann holds: a value past int64_t is unsigned.
    const bool in_range = v.is_number_unsigned()
                              ? v.get<uint64_t>() >= uint64_t(std::max(min, 0)) && v.get<uint64_t>() <= uint64_t(max)
                              : v.get<int64_t>() >= min && v.get<int64_t>() <= max;
    if (!in_range) fail_key(key, cat("an integer in [", min, ", ", max, "]"), describe(v));
    return v.get<int>();
  }
};

// Whether level i runs transformer blocks (the mid block sits at the last level).
bool has_attention(const ModelConfig& c, int level) {
  return c.attention_levels[level] || (c.mid_attention && level == c.levels() - 1);
}

// The checks that relate keys to each other; each error names the key that has to change.
void check_consistency(const ModelConfig& c, const ConfigReader& r) {
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

  // Every block is in the graph once per step: the graph's size and the time to plan it follow this count.
  const int resnets = c.levels() * (2 * c.layers_per_block + 1) + 2;
  int attention_sites = c.mid_attention ? 1 : 0;
  for (int i = 0; i < c.levels(); ++i)
    if (c.attention_levels[i]) attention_sites += 2 * c.layers_per_block + 1;  // down and up ResNets
  const int transformer_blocks = attention_sites * c.transformer_layers_per_block;
  if (resnets + transformer_blocks > kMaxBlocks)
    fail(r.label(), ": the U-Net has ", resnets, " ResNets and ", transformer_blocks,
         " transformer blocks, expected at most ", kMaxBlocks,
         " in all (fewer levels, layers_per_block or transformer_layers_per_block)");
}

}  // namespace

ModelConfig parse_model_config(const std::string& json_text, const std::string& label) {
  if (json_text.size() > kMaxConfigBytes)
    fail(label, ": ", json_text.size(), " bytes, expected a config of at most ", kMaxConfigBytes, " bytes");
  DuplicateKeyFinder duplicates;
  const json root = parse_json(json_text, label, &duplicates);
  if (!root.is_object()) fail(label, ": expected a JSON object at the top level, got ", describe(root));
  if (duplicates.found) fail(label, ": key '", json_escaped(duplicates.duplicate), "' appears twice");

  const ConfigReader r(root, label);
  r.reject_unknown_keys();

  ModelConfig c;
  c.name = r.string("name");
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

  r.optional_integer("transformer_layers_per_block", 1, kMaxTransformerLayers, c.transformer_layers_per_block);
  r.optional_integer("cross_attention_dim", 0, kMaxChannels, c.cross_attention_dim);
  r.optional_integer("context_length", 0, kMaxContextLength, c.context_length);
  r.optional_bool("use_linear_projection", c.use_linear_projection);
  r.optional_integer("num_class_embeds", 0, kMaxClassEmbeds, c.num_class_embeds);
  r.optional_string_array("class_names", c.class_names);
  r.optional_bool("flip_sin_to_cos", c.flip_sin_to_cos);
  r.optional_number("freq_shift", false, c.freq_shift);
  r.optional_number("timestep_scale", true, c.timestep_scale);

  check_consistency(c, r);
  return c;
}

ModelConfig load_model_config(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) fail(path, ": cannot open: ", std::strerror(errno));
  std::string text;
  char buffer[1 << 16];
  size_t n;
  // One byte past the limit is enough for parse_model_config to refuse the file, however large it is.
  while (text.size() <= kMaxConfigBytes && (n = std::fread(buffer, 1, sizeof buffer, f)) > 0) text.append(buffer, n);
  const bool read_failed = std::ferror(f) != 0;
  const int read_errno = errno;
  std::fclose(f);
  if (read_failed) fail(path, ": cannot read: ", std::strerror(read_errno));
  return parse_model_config(text, path);
}

}  // namespace rtvd
