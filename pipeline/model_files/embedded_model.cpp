#include "pipeline/model_files/embedded_model.h"

#include "pipeline/model_files/embed_file.h"

RTVD_EMBED_FILE(default_config, RTVD_DEFAULT_MODEL_DIR "/config.json");
RTVD_EMBED_FILE(default_weights, RTVD_DEFAULT_MODEL_DIR "/weights.safetensors");

namespace rtvd {

EmbeddedModel embedded_model() {
  const std::string_view weights = RTVD_EMBEDDED(default_weights);
  return {RTVD_EMBEDDED(default_config),
          {reinterpret_cast<const unsigned char*>(weights.data()), weights.size()}};
}

}  // namespace rtvd
