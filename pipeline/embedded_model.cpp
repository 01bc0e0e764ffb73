#include "embedded_model.h"

// .incbin places the files' bytes in .rodata at assembly time; CMake rebuilds this file when they change.
// The weights are aligned so the safetensors reader sees them like an mmap'd file.
asm(".section .rodata\n"
    ".balign 64\n"
    "rtvd_embedded_config_begin:\n"
    ".incbin \"" RTVD_DEFAULT_MODEL_DIR "/config.json\"\n"
    "rtvd_embedded_config_end:\n"
    ".balign 64\n"
    "rtvd_embedded_weights_begin:\n"
    ".incbin \"" RTVD_DEFAULT_MODEL_DIR "/weights.safetensors\"\n"
    "rtvd_embedded_weights_end:\n"
    ".previous\n");

extern "C" const unsigned char rtvd_embedded_config_begin[], rtvd_embedded_config_end[];
extern "C" const unsigned char rtvd_embedded_weights_begin[], rtvd_embedded_weights_end[];

namespace rtvd {

EmbeddedModel embedded_model() {
  return {std::string_view(reinterpret_cast<const char*>(rtvd_embedded_config_begin),
                           rtvd_embedded_config_end - rtvd_embedded_config_begin),
          {rtvd_embedded_weights_begin, size_t(rtvd_embedded_weights_end - rtvd_embedded_weights_begin)}};
}

}  // namespace rtvd
