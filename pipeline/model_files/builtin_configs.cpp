// The SD-class U-Net configs, compiled into the binary so that `--config sd21` works from anywhere; the
// files in assets/ stay the one source (embed_file.h).
#include <filesystem>
#include <string_view>

#include "pipeline/model_files/embed_file.h"
#include "base/error.h"
#include "pipeline/model_files/model_config.h"

RTVD_EMBED_FILE(config_sd21, RTVD_ASSETS_DIR "/sd21/config.json");
RTVD_EMBED_FILE(config_sd15, RTVD_ASSETS_DIR "/sd15/config.json");

namespace rtvd {

namespace {

struct BuiltinConfig {
  const char* name;
  std::string_view json;
};

const std::vector<BuiltinConfig>& builtin_configs() {
  static const std::vector<BuiltinConfig> configs = {
      {"sd21", RTVD_EMBEDDED(config_sd21)},
      {"sd15", RTVD_EMBEDDED(config_sd15)},
  };
  return configs;
}

std::string names_list() {
  std::string names;
  for (const BuiltinConfig& c : builtin_configs()) names += cat(names.empty() ? "" : ", ", c.name);
  return names;
}

}  // namespace

std::vector<std::string> builtin_config_names() {
  std::vector<std::string> names;
  for (const BuiltinConfig& c : builtin_configs()) names.push_back(c.name);
  return names;
}

ModelConfig builtin_model_config(const std::string& name) {
  for (const BuiltinConfig& c : builtin_configs())
    if (name == c.name) return parse_model_config(std::string(c.json), cat("built-in config ", name));
  fail("no built-in config '", name, "' (built in: ", names_list(), ")");
}

ModelConfig find_model_config(const std::string& spec) {
  for (const BuiltinConfig& c : builtin_configs())
    if (spec == c.name) return builtin_model_config(spec);
  if (std::filesystem::is_directory(spec)) return load_model_config(spec + "/config.json");
  if (std::filesystem::is_regular_file(spec)) return load_model_config(spec);
  fail("config '", spec, "': neither a built-in config (", names_list(), "), a directory with config.json nor a file");
}

}  // namespace rtvd
